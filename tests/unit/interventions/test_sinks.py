"""Notebook 10's measures and interventions: each checked against a plain recomputation, on every family it supports."""

import numpy as np
import pytest
import torch
from scipy.stats import kurtosis
from tiny_models import ALL_FAMILIES

from bertology_utils.core.models import load_model
from bertology_utils.data import Corpus
from bertology_utils.interventions.editing import capture_attention, edit_attention, gate_heads
from bertology_utils.interventions.mixing import unsupported_methods
from bertology_utils.interventions.mixing.base import trace
from bertology_utils.interventions.mixing.norm import head_vectors
from bertology_utils.interventions.objectives import CLS, KINDS, PUNCT, SEP, MaskedEmbeddingObjective, token_batches
from bertology_utils.interventions.sink_interventions import (
    clipped_softmax,
    control_heads,
    removable_heads,
    sink_heads,
    sink_interventions,
)
from bertology_utils.interventions.sinks import outlier_profile, peak_ratio, sink_statistics

TEXTS = [
    "The old sailor reads a heavy wooden box near the station.",
    "Hello, world!",
    "Where did you put the keys? I think they're on the kitchen table.",
    "Children learn languages quickly because they listen carefully.",
    "Rain.",
]
SUPPORTED = [f for f in ALL_FAMILIES if f != "albert"]  # ALBERT's layers share one module: no per-layer trace


@pytest.fixture(scope="module")
def models(family_model_dirs):
    return {family: load_model(folder) for family, folder in family_model_dirs.items()}


def test_outlier_profile_finds_a_planted_activation():
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(2, 5, 16, generator=generator)
    hidden[0, 3, 7] = 40.0
    real = torch.tensor([[True] * 5, [True, True, True, False, False]])
    hidden[1, 4, 2] = 1000.0  # padding: never counted
    profile = outlier_profile(hidden, real, multiple=10)
    for b in range(2):
        values = hidden[b, real[b]].abs()
        assert profile["ratio"][b] == pytest.approx(float(values.max() / values.flatten().median()), rel=1e-6)
        expected = kurtosis(hidden[b, real[b]].numpy(), axis=1, fisher=False).mean()
        assert profile["kurtosis"][b] == pytest.approx(expected, rel=1e-4)
    assert (int(profile["peak_token"][0]), int(profile["peak_dim"][0])) == (3, 7)
    assert profile["outliers"][0, 3, 7] and not profile["outliers"][1].any()
    assert int(profile["outliers"][0].sum()) == int((hidden[0].abs() > 10 * hidden[0].abs().median()).sum())
    assert torch.allclose(peak_ratio([hidden], real)[:, 0], profile["ratio"])


@torch.no_grad()
def _plain_statistics(loaded, texts):
    """Per sentence, head by head, token by token, from one sentence's trace at a time (no padding)."""
    out = []
    for text in texts:
        (batch,), _ = token_batches(loaded, Corpus.from_texts([text]), batch_size=1)
        traces = trace(loaded, batch.model_inputs())
        kinds = batch.kinds[0]
        sinks = (kinds == CLS) | (kinds == SEP) | (kinds == PUNCT)
        per_layer = []
        for layer, t in enumerate(traces):
            p = t.probs[0].double()
            f = head_vectors(loaded, layer, t.values)[0].double()
            norms = f.norm(dim=-1)
            rows = []
            for h in range(p.shape[0]):
                row_mass = [float(p[h, i, sinks].sum()) for i in range(p.shape[1])]
                sink_norm = float((p[h][:, sinks] * norms[h, sinks]).sum() / p[h][:, sinks].sum())
                update = np.mean([float((p[h, i, :, None] * f[h]).sum(0).norm()) for i in range(p.shape[1])])
                rows.append((np.mean(row_mass), sink_norm, update))
            per_layer.append(rows)
        out.append(np.asarray(per_layer))  # (L, H, 3)
    return np.stack(out)


@pytest.mark.parametrize("family", SUPPORTED)
def test_sink_statistics_equal_a_plain_recomputation_and_ignore_padding(models, family):
    loaded = models[family]
    stats = sink_statistics(loaded, Corpus.from_texts(TEXTS), batch_size=3)
    one = sink_statistics(loaded, Corpus.from_texts(TEXTS), batch_size=1)
    plain = _plain_statistics(loaded, TEXTS)
    assert stats.sink_mass.shape == (len(TEXTS), loaded.num_layers, loaded.num_heads)
    np.testing.assert_allclose(stats.sink_mass, plain[..., 0], atol=1e-5)
    np.testing.assert_allclose(stats.sink_norm, plain[..., 1], rtol=1e-4)
    np.testing.assert_allclose(stats.update, plain[..., 2], rtol=1e-4)
    for name in ("mass", "norm_share", "sink_norm", "other_norm", "update", "peak_mass", "ratio", "kurtosis"):
        np.testing.assert_allclose(getattr(stats, name), getattr(one, name), rtol=1e-4, atol=1e-6, err_msg=name)
    np.testing.assert_array_equal(stats.peak_dim, one.peak_dim)
    # every kind's share of the norm-weighted attention: with "other" they make the whole
    assert np.all(stats.norm_share.sum(1) <= 1 + 1e-6)
    assert stats.tokens_by_kind.sum() == sum(b.real.sum() for b in token_batches(loaded, Corpus.from_texts(TEXTS))[0])


def test_hidden_state_measures_read_the_models_own_hidden_states(models):
    loaded = models["bert"]  # post-LN: the model's hidden states are the embeddings and each layer's output
    stats = sink_statistics(loaded, Corpus.from_texts(TEXTS), batch_size=8)
    (batch,), _ = token_batches(loaded, Corpus.from_texts(TEXTS), batch_size=8)
    with torch.no_grad():
        states = loaded.model(**batch.model_inputs(), output_hidden_states=True).hidden_states
    order = np.argsort([item.index for item in batch.items])
    np.testing.assert_allclose(stats.ratio, peak_ratio(states, batch.real).numpy()[order], rtol=1e-5)
    codes = batch.kinds.gather(1, torch.stack([outlier_profile(h, batch.real)["peak_token"] for h in states], 1))
    np.testing.assert_array_equal(stats.peak_kind, codes.numpy()[order])
    assert set(np.unique(stats.peak_kind)) <= set(range(len(KINDS)))


def test_albert_is_refused_by_the_check_the_notebook_reads(models):
    assert "norm" in unsupported_methods(models["albert"], ["norm"])


def test_the_bootstrap_means_are_the_plain_means_under_unit_weights(models):
    stats = sink_statistics(models["roberta"], Corpus.from_texts(TEXTS), batch_size=8)
    means, drawn = stats.means(), stats.draws(n_resamples=50, seed=1)
    np.testing.assert_allclose(means["sink_mass"], stats.sink_mass.mean(0))
    np.testing.assert_allclose(means["log_ratio"], np.log(stats.ratio).mean(0))
    assert drawn["sink_mass"].shape == (50, *stats.sink_mass.shape[1:])
    assert np.all(drawn["peaks_on_sinks"] >= 0) and np.all(drawn["peaks_on_sinks"] <= 1)


def test_clipped_softmax_zeroes_small_weights_and_stretches_large_ones():
    probs = torch.tensor([[0.01, 0.04, 0.95]])
    edited = clipped_softmax(-0.03, 1.1)(0, probs)
    expected = ((1.1 + 0.03) * probs - 0.03).clamp(0, 1)
    assert torch.equal(edited, expected) and edited[0, 0] == 0 and edited[0, 2] == 1
    with pytest.raises(ValueError):
        clipped_softmax(0.0)
    with pytest.raises(ValueError):
        clipped_softmax(-0.1, 0.9)


def test_control_heads_match_the_chosen_heads_layer_by_layer():
    chosen = np.array([[1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 0]], dtype=bool)
    pool = ~chosen
    sets = control_heads(chosen, pool, n_sets=5, seed=0)
    assert 1 <= len(sets) <= 5
    for mask in sets:
        assert mask.sum() == chosen.sum() and not (mask & ~pool).any()
        # layers 0 and 1 have room; layer 2's third head comes from another layer's pool
        assert mask[0].sum() == 2 and mask[1].sum() >= 1 and mask[2].sum() == 1
    assert len({m.tobytes() for m in sets}) == len(sets)
    again = control_heads(chosen, pool, seed=3)
    assert all(np.array_equal(a, b) for a, b in zip(again, control_heads(chosen, pool, seed=3)))
    assert control_heads(np.zeros_like(chosen), pool) == [] and control_heads(chosen, np.zeros_like(chosen)) == []


def test_removable_heads_keep_the_most_parking_when_sinks_outnumber_the_others(models):
    stats = sink_statistics(models["bert"], Corpus.from_texts(TEXTS))
    mass = stats.sink_mass.mean(0)
    heads = mass >= np.quantile(mass, 0.25)  # three quarters are "sinks"
    kept = removable_heads(stats, heads)
    assert kept.sum() == (~heads).sum() and not (kept & ~heads).any()
    assert mass[kept].min() >= mass[heads & ~kept].max()
    few = mass >= np.quantile(mass, 0.9)
    assert np.array_equal(removable_heads(stats, few), few)
    assert np.array_equal(sink_heads(stats, 0.0), np.ones_like(heads))


@pytest.mark.parametrize("family", ["bert", "roberta", "modernbert"])
def test_interventions_equal_the_same_passes_run_by_hand(models, family):
    loaded = models[family]
    stats = sink_statistics(loaded, Corpus.from_texts(TEXTS))
    heads = np.zeros((loaded.num_layers, loaded.num_heads), dtype=bool)
    heads[0, 0] = heads[-1, -1] = True
    controls = control_heads(heads, ~heads, n_sets=2, seed=0)
    objective = MaskedEmbeddingObjective(loaded, seed=0)
    result = sink_interventions(objective, Corpus.from_texts(TEXTS), heads, controls, gamma=-0.05, batch_size=8)
    assert list(result.losses) == ["none", "sink heads"] + [f"control {k + 1}" for k in range(len(controls))] + [
        "clipped softmax"
    ]
    (batch,), _ = token_batches(loaded, Corpus.from_texts(TEXTS), batch_size=8)
    batch = objective.prepare(batch)
    order = np.argsort([item.index for item in batch.items])
    with torch.no_grad():
        base = objective.forward(batch).losses.double().numpy()[order]
        with gate_heads(loaded.model, torch.as_tensor(~heads, dtype=torch.float32)):
            gated = objective.forward(batch).losses.double().numpy()[order]
        with edit_attention(loaded.model, clipped_softmax(-0.05)):
            clipped = objective.forward(batch).losses.double().numpy()[order]
    np.testing.assert_allclose(result.losses["none"], base, rtol=1e-5)
    np.testing.assert_allclose(result.loss_change("sink heads"), gated - base, atol=1e-5)
    np.testing.assert_allclose(result.loss_change("clipped softmax"), clipped - base, atol=1e-5)
    assert result.ratios["none"].shape == (len(TEXTS), loaded.num_layers)
    np.testing.assert_allclose(result.ratio_change("none"), 0)
    summary = result.summary()
    assert list(summary.index) == ["sink heads", "clipped softmax", "controls"]
    assert result.metrics()["sinks.n_control_sets"] == len(controls)
    assert stats.metrics()["sinks.head.sink_mass"].shape == heads.shape


def test_the_first_layer_runs_on_exactly_the_clipped_weights(models):
    loaded = models["bert"]
    (batch,), _ = token_batches(loaded, Corpus.from_texts(TEXTS[:2]), batch_size=2)
    with torch.no_grad():
        with capture_attention(loaded.model, retain_grad=False) as plain:
            loaded.model(**batch.model_inputs())
        with (
            edit_attention(loaded.model, clipped_softmax(-0.2)),
            capture_attention(loaded.model, retain_grad=False) as edited,
        ):
            loaded.model(**batch.model_inputs())
    torch.testing.assert_close(edited.probs[0], (1.2 * plain.probs[0] - 0.2).clamp(0, 1))
    assert (edited.probs[0] == 0).float().mean() > (plain.probs[0] == 0).float().mean()
