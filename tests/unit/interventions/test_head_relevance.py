"""Integrated gradients over head gates, and gate x gradient (LRP-0) on them — on tiny classifiers."""

import numpy as np
import pytest
import torch

from bertology_utils.core.models import load_model
from bertology_utils.data import Corpus, Sentence
from bertology_utils.interventions.dev_sets import dev_set
from bertology_utils.interventions.editing import gate_heads
from bertology_utils.interventions.gated_logits import gate_shape, predict_with_gates
from bertology_utils.interventions.head_relevance import gate_times_gradient, head_attribution

WORDS = ["the", "movie", "was", "good", "bad", "and", "very", "story", "film", "acting"]
SMOOTH_ARCHS = ("bert", "roberta", "electra", "mpnet")  # GELU everywhere: the quadrature converges fast
#: Weight matrices are redrawn with this std: with the default 0.02 heads hardly move the logits
#: (|F(1) - F(0)| ~ 1e-4) and every path is nearly straight; at 0.2 it is of order 1 and curved.
STD = 0.2


def corpus(n: int = 8, seed: int = 0, scores=None) -> Corpus:
    rng = np.random.default_rng(seed)
    items = [Sentence(f"t{i}", tuple(rng.choice(WORDS, size=int(rng.integers(3, 9))))) for i in range(n)]
    labels = [int(x) for x in rng.integers(0, 2, size=n)] if scores is None else list(scores)
    return Corpus.from_items(items, "toy", labels)


def classifier(folder, num_labels: int = 2, dtype=torch.float32):
    torch.manual_seed(0)
    extra = {"problem_type": "regression"} if num_labels == 1 else {}
    loaded = load_model(folder, head="sequence-classification", num_labels=num_labels, device="cpu", **extra)
    with torch.no_grad():
        for p in loaded.model.parameters():
            if p.dim() == 2:
                p.normal_(0, STD)
    loaded.model.to(dtype)
    return loaded


def explained_logits(loaded, dev, gates=None, labels=None) -> tuple[np.ndarray, np.ndarray]:
    """(F, classes) per example in corpus order, by plain forward passes (gated with gate_heads when given)."""
    scores, classes = np.zeros(len(dev)), np.zeros(len(dev), dtype=np.int64)
    loaded.model.eval()
    for batch, rows in zip(dev.batches, dev.rows):
        with torch.no_grad():
            if gates is None:
                logits = loaded.model(**batch).logits.double()
            else:
                with gate_heads(loaded.model, gates):
                    logits = loaded.model(**batch).logits.double()
        index = logits.argmax(-1) if labels is None else torch.as_tensor(labels[rows])
        scores[rows] = logits.gather(1, index[:, None])[:, 0].numpy()
        classes[rows] = index.numpy()
    return scores, classes


@pytest.fixture(scope="module")
def data():
    return corpus()


@pytest.mark.parametrize("arch", (*SMOOTH_ARCHS, "distilbert"))
def test_attributions_add_up_to_the_difference_and_converge(tiny_model_dirs, data, arch):
    """Completeness: sum_h attribution = F(1) - F(0) per example, the gap shrinking as nodes are added.

    Smooth models: relative gap < 1e-3 at 32 nodes (in fact ~1e-6, float32). DistilBERT's ReLU
    (pre-classifier) makes the integrand jump: the gap shrinks like 1/steps, < 1e-3 at 256 nodes.
    """
    loaded = classifier(tiny_model_dirs[arch])
    dev = dev_set(loaded, data, "SST-2", batch_size=4)
    coarse, fine = (head_attribution(loaded, dev, steps=s) for s in (4, 32))
    assert fine.attributions.shape == (len(data), *gate_shape(loaded))
    assert np.abs(fine.score - fine.baseline_score).max() > 0.1  # heads matter: the test means something
    assert fine.completeness_gap.max() < coarse.completeness_gap.max()
    np.testing.assert_allclose(fine.score, coarse.score)
    if arch in SMOOTH_ARCHS:
        assert fine.relative_gap.max() < 1e-3
    else:
        assert fine.relative_gap.max() < 2e-2
        assert head_attribution(loaded, dev, steps=256).relative_gap.max() < 1e-3
    expected = np.abs(fine.attributions.sum((1, 2)) - (fine.score - fine.baseline_score))
    np.testing.assert_allclose(fine.completeness_gap, expected)
    np.testing.assert_allclose(fine.relative_gap, expected / np.maximum(1, np.abs(fine.score - fine.baseline_score)))


@pytest.mark.parametrize("arch", ("bert", "mpnet"))
def test_quadrature_equals_a_fine_riemann_sum(tiny_model_dirs, arch):
    """One example, recomputed independently: midpoint sum of dF/dg along g = a * 1 (gate_heads, autograd)."""
    loaded = classifier(tiny_model_dirs[arch])
    dev = dev_set(loaded, corpus(1, seed=3), "SST-2")
    got = head_attribution(loaded, dev, steps=32).attributions[0]
    (batch,) = dev.batches
    _, (label,) = explained_logits(loaded, dev)
    points = 200
    total = torch.zeros(gate_shape(loaded), dtype=torch.float64)
    for a in (np.arange(points) + 0.5) / points:
        gates = torch.full(gate_shape(loaded), float(a), requires_grad=True)
        with gate_heads(loaded.model, gates):
            loaded.model(**batch).logits[0, label].backward()
        total += gates.grad.double()
    np.testing.assert_allclose(got, (total / points).numpy(), atol=2e-5 * max(1.0, np.abs(got).max()))


@pytest.mark.parametrize("arch", ("mpnet", "distilbert"))
def test_each_example_has_its_own_gates(tiny_model_dirs, data, arch):
    """A batch (nodes shared across passes, padding) gives what one example at a time gives."""
    loaded = classifier(tiny_model_dirs[arch])
    batched = head_attribution(loaded, dev_set(loaded, data, "SST-2", batch_size=4), steps=8, rows_per_pass=12)
    single = head_attribution(loaded, dev_set(loaded, data, "SST-2", batch_size=1), steps=8, rows_per_pass=1000)
    np.testing.assert_allclose(batched.attributions, single.attributions, atol=2e-5)
    np.testing.assert_allclose(batched.score, single.score, atol=2e-5)
    np.testing.assert_allclose(batched.baseline_score, single.baseline_score, atol=2e-5)
    assert not np.allclose(batched.attributions[0], batched.attributions[1])


@pytest.mark.parametrize("arch", ("distilbert", "mpnet"))
def test_adaptive_panels_reach_the_tolerance_and_the_integral(tiny_model_dirs, data, arch):
    """With ``tolerance``, each example's path is cut into panels until their estimated errors are within it.

    DistilBERT's ReLU kinks its path: a fixed rule converges like 1/nodes (its 512-node result is
    the reference here, itself within about 4e-4 of the integral); panels of 2 nodes reach the
    reference with a fifth of its nodes. The ends, F(1) and F(0), are the fixed rule's.
    """
    loaded = classifier(tiny_model_dirs[arch])
    dev = dev_set(loaded, data, "SST-2", batch_size=3)
    fixed = head_attribution(loaded, dev, steps=2)
    assert (fixed.panels == 1).all() and fixed.relative_gap.max() > 1e-3
    adaptive = head_attribution(loaded, dev, steps=2, tolerance=1e-4, rows_per_pass=7)
    assert adaptive.relative_gap.max() <= 1e-4 and 2 <= adaptive.panels.min() and adaptive.panels.max() <= 64
    assert adaptive.panels.mean() * 2 < 512 / 5
    reference = head_attribution(loaded, dev, steps=512, rows_per_pass=4096)
    scale = np.abs(reference.attributions).max()
    np.testing.assert_allclose(adaptive.attributions, reference.attributions, atol=1e-3 * scale)
    assert np.abs(fixed.attributions - reference.attributions).max() > 1e-2 * scale
    np.testing.assert_array_equal(adaptive.score, fixed.score)
    np.testing.assert_array_equal(adaptive.baseline_score, fixed.baseline_score)
    loose = head_attribution(loaded, dev, steps=2, tolerance=0.1)
    assert (loose.panels >= 2).all() and loose.panels.mean() < adaptive.panels.mean()  # one split at least
    capped = head_attribution(loaded, dev, steps=2, tolerance=1e-12, max_panels=3)
    assert (capped.panels == 3).all()


@pytest.mark.parametrize("arch", ("bert", "roberta", "distilbert"))
def test_ends_are_the_plain_model_and_every_head_off(tiny_model_dirs, data, arch):
    loaded = classifier(tiny_model_dirs[arch])
    dev = dev_set(loaded, data, "SST-2", batch_size=3)
    result = head_attribution(loaded, dev, steps=2)
    plain, predicted = explained_logits(loaded, dev)
    np.testing.assert_allclose(result.score, plain, atol=1e-5)
    np.testing.assert_array_equal(result.labels, predicted)
    off = predict_with_gates(loaded, dev, np.zeros((1, *gate_shape(loaded))))[0]
    np.testing.assert_allclose(result.baseline_score, off[np.arange(len(dev)), predicted], atol=1e-5)
    gold = head_attribution(loaded, dev, steps=2, labels="gold")
    np.testing.assert_array_equal(gold.labels, dev.labels)
    gold_plain, _ = explained_logits(loaded, dev, labels=dev.labels)
    np.testing.assert_allclose(gold.score, gold_plain, atol=1e-5)
    np.testing.assert_allclose(gold.baseline_score, off[np.arange(len(dev)), dev.labels], atol=1e-5)


def test_regression_head(tiny_model_dirs):
    """STS-B: F is the single output; labels are zeros and gold scores are not read as classes."""
    loaded = classifier(tiny_model_dirs["electra"], num_labels=1)
    dev = dev_set(loaded, corpus(scores=np.linspace(0, 5, 8)), "STS-B", batch_size=4)
    result = head_attribution(loaded, dev, steps=32, labels="gold")
    assert result.task == "STS-B" and (result.labels == 0).all()
    plain, _ = explained_logits(loaded, dev)
    np.testing.assert_allclose(result.score, plain, atol=1e-5)
    assert result.relative_gap.max() < 1e-3
    assert gate_times_gradient(loaded, dev).attributions.shape == result.attributions.shape


def test_gate_times_gradient_is_the_gate_derivative_and_does_not_conserve(tiny_model_dirs, data):
    """g * dF/dg at g = 1 against central differences (float64), and its conservation gap vs IG's."""
    loaded = classifier(tiny_model_dirs["bert"], dtype=torch.float64)
    dev = dev_set(loaded, data, "SST-2", batch_size=4)
    result = gate_times_gradient(loaded, dev)
    layers, heads = gate_shape(loaded)
    _, classes = explained_logits(loaded, dev)
    np.testing.assert_array_equal(result.labels, classes)
    eps = 1e-4
    for l, h in ((0, 0), (layers - 1, heads - 1), (0, heads - 1)):
        up, down = torch.ones(layers, heads, dtype=torch.float64), torch.ones(layers, heads, dtype=torch.float64)
        up[l, h], down[l, h] = 1 + eps, 1 - eps
        f_up, _ = explained_logits(loaded, dev, up, classes)
        f_down, _ = explained_logits(loaded, dev, down, classes)
        np.testing.assert_allclose(result.attributions[:, l, h], (f_up - f_down) / (2 * eps), rtol=1e-5, atol=1e-8)
    total = result.attributions.sum((1, 2))
    np.testing.assert_allclose(result.completeness_gap, np.abs(total - (result.score - result.baseline_score)))
    ig = head_attribution(loaded, dev, steps=32)
    np.testing.assert_allclose(ig.score, result.score)
    np.testing.assert_allclose(ig.baseline_score, result.baseline_score)
    assert result.relative_gap.mean() > 1e-2  # LRP-0 / gradient x input misses F(1) - F(0) ...
    assert ig.relative_gap.max() < 1e-3 * result.relative_gap.mean()  # ... where integrated gradients do not


def test_relevance_is_normalised_per_layer(tiny_model_dirs, data):
    loaded = classifier(tiny_model_dirs["roberta"])
    result = head_attribution(loaded, dev_set(loaded, data, "SST-2"), steps=4)
    layers, heads = gate_shape(loaded)
    relevance = result.relevance()
    assert relevance.shape == result.mean.shape == result.mean_abs.shape == (layers, heads)
    np.testing.assert_allclose(relevance.sum(-1), 1.0)
    assert (relevance >= 0).all()
    np.testing.assert_allclose(result.relevance(normalise=False), np.abs(result.attributions).mean(0))
    np.testing.assert_allclose(result.mean, result.attributions.mean(0))
    assert (result.mean_abs >= np.abs(result.mean) - 1e-12).all()


def test_bad_arguments(tiny_model_dirs, data):
    loaded = classifier(tiny_model_dirs["electra"])
    dev = dev_set(loaded, data, "SST-2")
    with pytest.raises(ValueError, match="labels"):
        head_attribution(loaded, dev, labels="true")
    with pytest.raises(ValueError, match="steps"):
        head_attribution(loaded, dev, steps=0)
    with pytest.raises(ValueError, match="rows_per_pass"):
        gate_times_gradient(loaded, dev, rows_per_pass=0)
    with pytest.raises(ValueError, match="tolerance"):
        head_attribution(loaded, dev, tolerance=0)


def test_cached_scores_equal_fresh_ones(tiny_model_dirs, data, tmp_path, monkeypatch):
    from bertology_utils.core import settings

    monkeypatch.setenv(settings.CACHE_DIR_ENV, str(tmp_path / "cache"))
    loaded = classifier(tiny_model_dirs["bert"])
    dev = dev_set(loaded, data, "SST-2")
    fresh = head_attribution(loaded, dev, steps=4)
    stored = head_attribution(loaded, dev, steps=4, cache=True)
    reused = head_attribution(loaded, dev, steps=4, cache=True)

    def entries():
        return [p for p in (tmp_path / "cache" / "results").iterdir() if not p.name.startswith(".")]

    assert len(entries()) == 1
    for result in (stored, reused):
        for name in ("attributions", "score", "baseline_score", "labels"):
            np.testing.assert_array_equal(getattr(result, name), getattr(fresh, name))
    gold = head_attribution(loaded, dev, steps=4, labels="gold", cache=True)  # other settings: computed anew
    np.testing.assert_array_equal(gold.labels, data.labels)
    np.testing.assert_array_equal(
        gate_times_gradient(loaded, dev, cache=True).attributions, gate_times_gradient(loaded, dev).attributions
    )
    assert len(entries()) == 3
    adaptive = head_attribution(loaded, dev, steps=4, tolerance=1e-9, max_panels=3, cache=True)
    again = head_attribution(loaded, dev, steps=4, tolerance=1e-9, max_panels=3, cache=True)
    assert len(entries()) == 4 and (adaptive.panels == 3).all()
    np.testing.assert_array_equal(again.panels, adaptive.panels)
    np.testing.assert_array_equal(again.attributions, adaptive.attributions)


def test_attributions_are_float32_whatever_the_models_precision(tiny_model_dirs, data):
    """bfloat16 noise would defeat the completeness check: a bf16 classifier's heads and tokens are attributed
    exactly as in float32, while its scores (ends of the path aside) do run in bf16."""
    from bertology_utils.interventions.attribution import input_x_gradient, integrated_gradients
    from bertology_utils.interventions.objectives import token_batches

    loaded = classifier(tiny_model_dirs["bert"])
    dev = dev_set(loaded, data, "SST-2")
    tokens = token_batches(loaded, data)[0][0]

    def attributions():
        return (
            head_attribution(loaded, dev, steps=4).attributions,
            integrated_gradients(loaded, tokens, steps=4).attributions,
            input_x_gradient(loaded, tokens),
        )

    exact = attributions()
    loaded.precision = "bf16"
    for got, want in zip(attributions(), exact):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    ones = np.ones((1, *gate_shape(loaded)))
    scores = predict_with_gates(loaded, dev, ones)
    loaded.precision = "fp32"
    assert not np.array_equal(scores, predict_with_gates(loaded, dev, ones))
