"""Gradients w.r.t. attention (checked against finite differences), statistics, objectives, ablations."""

import contextlib
import copy

import numpy as np
import pytest
import torch
from tiny_models import build_tiny_model

from bertology_utils.attention.alignment import align
from bertology_utils.core import architectures
from bertology_utils.core.errors import BertologyError, ModelNotAvailableError
from bertology_utils.core.models import load_model
from bertology_utils.data import Corpus, Sentence
from bertology_utils.interventions import ablations, gradients
from bertology_utils.interventions.ablations import ablate_tokens, ablation_curves, ablation_summary
from bertology_utils.interventions.editing import edit_attention, record_layer_outputs, replay_layers_below
from bertology_utils.interventions.gradients import _head_gradient, attention_gradients, batch_attention_gradients
from bertology_utils.interventions.objectives import (
    CLS,
    KINDS,
    OTHER,
    PUNCT,
    SEP,
    ClassifierObjective,
    MaskedEmbeddingObjective,
    MaskedLMObjective,
    has_mlm_head,
    token_batches,
    token_kinds,
)

SENTENCES = Corpus.from_texts(
    [
        "The old sailor reads the morning newspaper near the station.",
        "Where did you put the keys? I think they're on the kitchen table!",
        "Children learn languages quickly, because they listen carefully.",
        "Hello world!",
        "Scientists measured the temperature of the ocean every hour.",
        "Our team published an article about verbs, nouns and pronouns.",
    ],
    name="sentences",
)


@pytest.fixture(scope="module")
def mlm(tmp_path_factory):
    folder = build_tiny_model("bert", tmp_path_factory.mktemp("mlm") / "bert-mlm", with_mlm_head=True)
    return load_model(folder, head="masked-lm")


@pytest.fixture(scope="module")
def mlm64(mlm):
    """The tiny masked-LM model in float64, so finite differences are accurate."""
    twin = copy.deepcopy(mlm)
    twin.model.double()
    return twin


def test_token_kinds(tiny_model_dirs):
    for arch in ("bert", "roberta"):
        loaded = load_model(tiny_model_dirs[arch])
        pair = align(loaded.tokenizer, [(["Hello", ",", "world"], ["Bye", "!"])])[0]
        kinds = token_kinds(pair)
        tokens = loaded.tokenizer.convert_ids_to_tokens(pair.input_ids.tolist())
        assert kinds[0] == CLS and kinds[-1] == SEP, tokens
        assert (kinds == SEP).sum() == (2 if arch == "bert" else 3), tokens  # RoBERTa: </s></s> between texts
        words = [pair.words[w] for w in pair.token_to_word]
        assert all(k == PUNCT for k, w in zip(kinds, words) if w in {",", "!"})
        assert all(k == OTHER for k, w in zip(kinds, words) if w in {"Hello", "world", "Bye"})


def test_gradient_matches_finite_differences(mlm64):
    objective = MaskedLMObjective(mlm64, seed=3)
    batch = objective.prepare(token_batches(mlm64, SENTENCES[:3], batch_size=3)[0][0])
    probs, grads, output = batch_attention_gradients(objective, batch)
    assert grads.shape == probs.shape == (3, mlm64.num_layers, mlm64.num_heads) + (batch.input_ids.shape[1],) * 2
    real = batch.real
    # The largest entries and a few random real ones, in every layer.
    rng = np.random.default_rng(0)
    picks = []
    for layer in range(mlm64.num_layers):
        flat = grads[:, layer].abs().flatten().argmax()
        picks.append((layer,) + np.unravel_index(int(flat), grads[:, layer].shape))
        b = int(rng.integers(3))
        n = int(real[b].sum())
        picks.append((layer, b, int(rng.integers(mlm64.num_heads)), int(rng.integers(n)), int(rng.integers(n))))
    eps = 1e-5

    def loss_with(layer, b, h, i, j, delta):
        def bump(at_layer, p):
            if at_layer != layer:
                return None
            p = p.clone()
            p[b, h, i, j] += delta
            return p

        with edit_attention(mlm64, bump), torch.no_grad():
            return float(objective.forward(batch).losses.sum())

    for layer, b, h, i, j in picks:
        estimate = (loss_with(layer, b, h, i, j, eps) - loss_with(layer, b, h, i, j, -eps)) / (2 * eps)
        assert float(grads[b, layer, h, i, j]) == pytest.approx(estimate, rel=1e-4, abs=1e-9)


def test_one_pass_equals_head_by_head(mlm):
    objective = MaskedLMObjective(mlm)
    batch = objective.prepare(token_batches(mlm, SENTENCES[:4], batch_size=4)[0][0])
    _, grads, _ = batch_attention_gradients(objective, batch)
    for layer, head in [(0, 1), (mlm.num_layers - 1, mlm.num_heads - 1)]:
        torch.testing.assert_close(
            _head_gradient(objective, batch, layer, head), grads[:, layer, head], rtol=1e-4, atol=1e-7
        )


def test_statistics_are_consistent(mlm):
    stats = attention_gradients(SENTENCES, MaskedLMObjective(mlm), batch_size=4, progress=False)
    shape = (mlm.num_layers, mlm.num_heads)
    assert all(stats.attention[k].shape == shape and stats.gradient[k].shape == shape for k in KINDS)
    np.testing.assert_allclose(sum(stats.attention[k] for k in KINDS), 1.0, rtol=1e-5)
    assert stats.n_items == len(SENTENCES) and stats.n_skipped == 0
    assert stats.weights_per_kind["sep"] == stats.n_tokens  # one [SEP] per sentence: one weight per row
    # The normalisation: weighted by how many weights each kind has, the normalised gradient averages 1.
    weights = np.array([stats.weights_per_kind[k] for k in KINDS], dtype=float)
    mean = sum(stats.normalised_gradient(k) * w for k, w in zip(KINDS, weights)) / weights.sum()
    assert float(mean.mean()) == pytest.approx(1.0, rel=1e-6)
    assert stats.gradient_norm.shape == (mlm.num_layers,) and np.all(stats.gradient_norm > 0)
    table = stats.layer_table()
    assert len(table) == len(KINDS) * mlm.num_layers
    assert len(stats.head_table()) == len(KINDS) * mlm.num_layers * mlm.num_heads
    per_head = stats.head_metrics("sep", "mlm")
    assert len(per_head) == 2 * len(KINDS) + 1 and all(v.shape == shape for v in per_head.values())
    np.testing.assert_array_equal(per_head["sep.head.mlm.attention_to_sep"], stats.attention["sep"])
    np.testing.assert_array_equal(per_head["sep.head.mlm.normalised_gradient_cls"], stats.normalised_gradient("cls"))
    assert np.all(per_head["sep.head.mlm.gradient_norm"] > 0)


def test_per_item_sums_add_up_to_the_statistics_and_resample(mlm):
    stats = attention_gradients(SENTENCES, MaskedLMObjective(mlm), batch_size=4, progress=False)
    items, layers = stats.per_item, mlm.num_layers
    assert items["gradient"].shape == (len(SENTENCES), layers, len(KINDS))
    assert items["weights"].shape == (len(SENTENCES), len(KINDS)) and items["norm"].shape == (len(SENTENCES), layers)
    assert not items["pair"].any()  # single sentences: one [SEP] each
    np.testing.assert_allclose(items["norm"].mean(0), stats.gradient_norm, rtol=1e-6)
    assert items["weights"].sum(0).tolist() == [stats.weights_per_kind[k] for k in KINDS]
    sums = items["gradient"].sum(0) / items["weights"].sum(0)  # per weight, summed over heads
    for i, kind in enumerate(KINDS):
        np.testing.assert_allclose(sums[:, i] / sums[:, KINDS.index("other")], stats.gradient_ratio(kind), rtol=1e-5)
    draws = stats.bootstrap(n_resamples=50, seed=1)
    assert draws.over == f"{len(SENTENCES)} sentences" and draws["gradient_norm"].shape == (50, layers)
    assert draws["gradient_ratio:sep"].shape == (50, layers) and np.isfinite(draws["gradient_ratio:sep"]).all()
    np.testing.assert_array_equal(draws["gradient_norm"], stats.bootstrap(n_resamples=50, seed=1)["gradient_norm"])
    # Every draw's norm lies between the smallest and the largest item's: it is a mean of items.
    assert (draws["gradient_norm"] >= items["norm"].min(0) - 1e-12).all()
    assert (draws["gradient_norm"] <= items["norm"].max(0) + 1e-12).all()
    few = attention_gradients(SENTENCES[:2], MaskedLMObjective(mlm), progress=False).bootstrap(n_resamples=10)
    assert np.isnan(few["gradient_norm"]).all()  # two items: no interval
    with pytest.raises(ValueError, match="per-item sums"):
        gradients.GradientStats(**{**vars(stats), "per_item": {}}).bootstrap()


def test_statistics_do_not_depend_on_batching(mlm):
    one = attention_gradients(SENTENCES, MaskedLMObjective(mlm, seed=1), batch_size=1, progress=False)
    many = attention_gradients(SENTENCES, MaskedLMObjective(mlm, seed=1), batch_size=6, progress=False)
    for kind in KINDS:
        np.testing.assert_allclose(one.attention[kind], many.attention[kind], rtol=1e-4)
        np.testing.assert_allclose(one.gradient[kind], many.gradient[kind], rtol=1e-3)
    assert one.mean_loss == pytest.approx(many.mean_loss, rel=1e-4)


@pytest.mark.parametrize("arch", ["roberta", "distilbert", "electra", "mpnet"])
def test_every_architecture_with_the_embedding_objective(tiny_model_dirs, arch):
    loaded = load_model(tiny_model_dirs[arch])
    stats = attention_gradients(SENTENCES[:3], MaskedEmbeddingObjective(loaded), progress=False)
    assert stats.gradient["sep"].shape == (loaded.num_layers, loaded.num_heads)
    assert np.isfinite(stats.overall_gradient) and stats.overall_gradient > 0


def test_the_mlm_objective_refuses_a_random_head(tiny_model_dirs):
    headless = load_model(tiny_model_dirs["bert"], head="masked-lm")  # loads, with a fresh random head
    assert not has_mlm_head(headless)
    with pytest.raises(ModelNotAvailableError, match="no trained masked-LM head"):
        MaskedLMObjective(headless)
    with pytest.raises(ModelNotAvailableError, match="not a masked-LM model"):
        MaskedLMObjective(load_model(tiny_model_dirs["bert"]))


def test_a_config_naming_an_mlm_head_without_its_weights_is_a_random_head(tiny_model_dirs, mlm, tmp_path):
    """all-mpnet-base-v2's config says MPNetForMaskedLM, but its checkpoint has no lm_head: the head would be random."""
    import json
    import shutil

    folder = tmp_path / "claims-mlm"
    shutil.copytree(tiny_model_dirs["bert"], folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "architectures": ["BertForMaskedLM"]}))
    base, with_head = load_model(folder), load_model(folder, head="masked-lm")
    assert base.random_weights == () and any(w.startswith("cls.predictions") for w in with_head.random_weights)
    assert not has_mlm_head(base) and not has_mlm_head(with_head)
    with pytest.raises(ModelNotAvailableError, match="no trained masked-LM head"):
        MaskedLMObjective(with_head)
    # A checkpoint saved with its head passes both ways.
    assert mlm.random_weights == () and has_mlm_head(mlm) and has_mlm_head(load_model(mlm.source))


def test_masking_is_seeded_per_item(mlm):
    def masked(batch_size, seed):
        objective = MaskedLMObjective(mlm, seed=seed)
        out = {}
        for batch in token_batches(mlm, SENTENCES, batch_size=batch_size)[0]:
            batch = objective.prepare(batch)
            for b, item in enumerate(batch.items):
                out[item.index] = batch.extras["masked"][b, : item.n_tokens].tolist()
        return out

    assert masked(1, 0) == masked(4, 0)
    assert masked(4, 0) != masked(4, 1)
    assert all(any(row) for row in masked(4, 0).values())  # every item has a masked word


def test_classifier_objective(tiny_model_dirs):
    torch.manual_seed(0)
    classifier = load_model(tiny_model_dirs["electra"], head="sequence-classification", num_labels=2)
    labels = [i % 2 for i in range(len(SENTENCES))]
    objective = ClassifierObjective(classifier, labels, task="SST-2")
    stats = attention_gradients(SENTENCES, objective, progress=False)
    assert stats.mean_loss > 0 and "SST-2" in stats.objective
    with pytest.raises(ModelNotAvailableError):
        ClassifierObjective(load_model(tiny_model_dirs["electra"]), labels)


def test_ablation_curves(mlm):
    import pandas as pd

    objective = MaskedLMObjective(mlm)
    curves = ablation_curves(SENTENCES, objective, targets=("sep", "punct"), batch_size=4, progress=False)
    assert curves.attrs["null_change"] == 0.0
    assert len(curves) == mlm.num_layers * 2 * 2 * 2
    assert set(curves.intervention) == {"target", "control"}
    assert curves["mass"].between(0, 1).all()
    assert (curves.hidden_change > 0).all()
    assert curves.loc[curves.intervention == "control", "negative_share"].between(0, 1).all()
    summary = ablation_summary(curves)
    assert len(summary) == 4 and np.isfinite(summary.ratio).all()
    # Each item's change, kept per row: their mean is the row's, and the ratio's interval is over them.
    for name in ablations.ITEM_MEASURES:
        np.testing.assert_allclose([a.mean() for a in curves[f"{name}_items"]], curves[name], rtol=1e-12)
    assert (summary["items"] == len(SENTENCES)).all() and (summary.ratio_level == 0.95).all()
    assert (summary.ratio_low <= summary.ratio).all() and (summary.ratio <= summary.ratio_high).all()
    assert (summary.ratio_low < summary.ratio_high).all()
    again = ablation_summary(curves)
    pd.testing.assert_frame_equal(summary, again)  # seeded
    bare = ablation_summary(curves.drop(columns="hidden_change_items"))  # no items' values: no interval
    assert bare.ratio_low.isna().all() and bare.ratio_high.isna().all()
    np.testing.assert_array_equal(bare.ratio, summary.ratio)


def test_ablation_curves_are_stored_and_read_back(mlm, tiny_model_dirs, tmp_path, monkeypatch):
    import pandas as pd

    from bertology_utils.core import settings

    monkeypatch.setenv(settings.CACHE_DIR_ENV, str(tmp_path / "cache"))
    kwargs = {"targets": ("sep", "punct"), "modes": ("zero",), "batch_size": 4, "progress": False}
    fresh = ablation_curves(SENTENCES, MaskedLMObjective(mlm), **kwargs)
    calls = []
    original = ablations._ablations
    monkeypatch.setattr(ablations, "_ablations", lambda *a: calls.append(1) or original(*a))

    def run(objective=None, items=SENTENCES, **changes):
        return ablation_curves(items, objective or MaskedLMObjective(mlm), cache=True, **{**kwargs, **changes})

    stored, reused = run(), run()
    assert len(calls) == 1  # the second call read the first one's curves
    for curves in (stored, reused):
        pd.testing.assert_frame_equal(curves, fresh)
        assert curves.attrs == fresh.attrs
    run(seed=1)  # another control token
    run(MaskedLMObjective(mlm, seed=1))  # other masked words
    run(items=SENTENCES[:3])  # other items
    assert len(calls) == 4

    class Renamed(MaskedLMObjective):  # a subclass may compute another loss: never its parent's entry
        pass

    run(Renamed(mlm))
    assert len(calls) == 5

    class Unkeyed(MaskedLMObjective):
        def cache_key(self):
            return None

    run(Unkeyed(mlm))
    run(Unkeyed(mlm))  # nothing says what it depends on: computed each time
    assert len(calls) == 7
    classifier = load_model(tiny_model_dirs["electra"], head="sequence-classification", num_labels=2)
    labels = [i % 2 for i in range(len(SENTENCES))]
    keys = [ClassifierObjective(classifier, y, task="SST-2").cache_key() for y in (labels, labels[::-1])]
    assert keys[0] != keys[1]  # other labels, another loss


def test_ablating_an_absent_kind_changes_nothing(mlm):
    no_punct = Corpus.from_items([Sentence("a", ("one", "two", "three")), Sentence("b", ("four", "five"))], "plain")
    curves = ablation_curves(no_punct, MaskedLMObjective(mlm), targets=("punct",), modes=("zero",), progress=False)
    target = curves[curves.intervention == "target"]
    assert (target.mass == 0).all() and (target.hidden_change == 0).all() and (target.loss_change == 0).all()


@pytest.mark.parametrize("arch", ["bert", "roberta", "distilbert", "electra", "mpnet"])
def test_replayed_layers_give_the_full_pass_and_are_not_run(tiny_model_dirs, arch):
    loaded = load_model(tiny_model_dirs[arch])
    model = loaded.model
    batch = token_batches(loaded, SENTENCES[:3], batch_size=3)[0][0]
    inputs = batch.model_inputs()
    last = loaded.num_layers - 1
    targets = batch.kinds == KINDS.index("sep")
    with torch.no_grad():
        with record_layer_outputs(model) as below:
            model(**inputs)
        with ablate_tokens(model, targets, [last], "zero"):
            full = model(**inputs).last_hidden_state
        calls = []
        attention = architectures.self_attention_modules(model)
        handles = [module.register_forward_pre_hook(lambda m, a: calls.append(m)) for module in attention]
        try:
            with replay_layers_below(model, last, below), ablate_tokens(model, targets, [last], "zero"):
                replayed = model(**inputs).last_hidden_state
        finally:
            for handle in handles:
                handle.remove()
        assert torch.equal(full, replayed)
        assert calls == [attention[last]]  # the layers below returned their recorded outputs unrun
        assert "forward" not in vars(architectures.layers(model)[0])  # restored
    with pytest.raises(BertologyError, match="no recorded output"):
        with replay_layers_below(model, last, {}):
            pass


def test_ablation_curves_equal_without_replay(mlm, monkeypatch):
    objective = MaskedLMObjective(mlm)
    kwargs = {"targets": ("sep", "cls"), "modes": ("zero",), "batch_size": 4, "progress": False}
    replayed = ablation_curves(SENTENCES, objective, **kwargs)
    monkeypatch.setattr(ablations, "replay_layers_below", lambda *_args: contextlib.nullcontext())
    full = ablation_curves(SENTENCES, objective, **kwargs)
    assert replayed.equals(full)


def test_ablation_curves_on_albert_run_every_pass_in_full(family_model_dirs):
    """ALBERT's layers run one module: no layer output is recorded or replayed, each ablation acts at its own depth."""
    albert = load_model(family_model_dirs["albert"])
    kwargs = {"targets": ("sep",), "modes": ("zero",), "batch_size": 4, "progress": False}
    curves = ablation_curves(SENTENCES, MaskedEmbeddingObjective(albert), **kwargs)
    assert curves.attrs["null_change"] == 0.0
    assert len(curves) == albert.num_layers * 2 and sorted(set(curves.layer)) == list(range(1, albert.num_layers + 1))
    target = curves[curves.intervention == "target"].set_index("layer")
    assert (target.hidden_change > 0).all() and target.hidden_change.nunique() == albert.num_layers


@pytest.mark.parametrize("head", ["masked-lm", "sequence-classification"])
def test_an_objective_reads_nothing_from_the_device(head, mlm, tiny_model_dirs):
    """On the meta device a read of a value fails: batching, masking, the forward pass and the losses need none."""
    if head == "masked-lm":
        loaded = copy.deepcopy(mlm)
        objective = MaskedLMObjective(loaded)
    else:
        loaded = load_model(tiny_model_dirs["bert"], head="sequence-classification", num_labels=2)
        objective = ClassifierObjective(loaded, [i % 2 for i in range(len(SENTENCES))])
    on_cpu = [objective.forward(objective.prepare(b)) for b in token_batches(loaded, SENTENCES, batch_size=3)[0]]
    loaded.model.to("meta")
    on_meta = [objective.forward(objective.prepare(b)) for b in token_batches(loaded, SENTENCES, batch_size=3)[0]]
    assert [out.losses.device.type for out in on_meta] == ["meta"] * len(on_cpu)
    assert [out.losses.shape for out in on_meta] == [out.losses.shape for out in on_cpu]


def test_masked_tokens_are_found_on_the_host(mlm):
    objective = MaskedLMObjective(mlm)
    for batch in token_batches(mlm, SENTENCES, batch_size=3)[0]:
        extras = objective.prepare(batch).extras
        assert torch.equal(extras["masked_at"], extras["masked"].nonzero().T)  # the device's order, row by row


def test_gradient_statistics_read_the_device_once_at_the_end(mlm):
    """Every batch's forward and backward pass and its sums run before the first read (on the meta device, shapes
    and no values, a read fails): a read per batch would wait for a GPU at every batch."""
    from device_reads import first_read

    loaded = copy.deepcopy(mlm)
    loaded.model.to("meta")
    passes = []
    forward = loaded.model.forward
    loaded.model.forward = lambda *a, **k: passes.append(1) or forward(*a, **k)
    frame = first_read(lambda: attention_gradients(SENTENCES, MaskedLMObjective(loaded), batch_size=2, progress=False))
    assert frame.filename.endswith("gradients.py") and "total.cpu()" in frame.line  # _Totals.read
    assert len(passes) == len(token_batches(mlm, SENTENCES, batch_size=2)[0])


def test_ablation_curves_read_the_device_once_their_passes_ran(mlm, monkeypatch):
    """Every ablated pass of every batch runs before the first read (on the meta device a read fails); only the
    control's random token, drawn on the host from each batch's token kinds, is read once a batch (left out here)."""
    from device_reads import first_read

    loaded = copy.deepcopy(mlm)
    loaded.model.to("meta")
    monkeypatch.setattr(ablations, "_random_tokens", lambda batch, seed: batch.input_ids[:, 1])
    passes = []
    forward = loaded.model.forward
    loaded.model.forward = lambda *a, **k: passes.append(1) or forward(*a, **k)
    objective = MaskedLMObjective(loaded)
    frame = first_read(lambda: ablation_curves(SENTENCES, objective, targets=("sep",), batch_size=4, progress=False))
    assert frame.name == "_ablations" and ".cpu()" in frame.line
    batches = len(token_batches(mlm, SENTENCES, batch_size=4)[0])
    assert len(passes) == batches * (2 + mlm.num_layers * len(ablations.REMOVAL_MODES) * 2)
