"""Head gating, ablation sweeps, Michel importance, physical pruning, attention change — on tiny models."""

import dataclasses

import numpy as np
import pytest
import torch

from bertology_utils.core.models import load_model
from bertology_utils.data import Corpus, Sentence
from bertology_utils.interventions.dev_sets import dev_set
from bertology_utils.interventions.editing import gate_heads
from bertology_utils.interventions.finetuning_change import attention_change
from bertology_utils.interventions.gated_logits import gate_shape, predict_with_gates, scores_for_gates
from bertology_utils.interventions.head_removal import prune_heads, pruned_heads
from bertology_utils.interventions.pruning import (
    ablation_sweep,
    head_importance,
    importance_ablation_agreement,
    prunable_share,
    pruning_curve,
    random_pruning_curves,
)
from bertology_utils.interventions.scoring import glue_metric_draws
from bertology_utils.papers import kovaleva, michel
from bertology_utils.papers.claims import Verdict

WORDS = ["the", "movie", "was", "good", "bad", "and", "very", "story", "film", "acting"]
GATED_ARCHS = ("bert", "roberta", "distilbert", "electra", "mpnet")
PRUNABLE_ARCHS = ("bert", "roberta", "electra", "distilbert")


def corpus(n: int = 12, seed: int = 0) -> Corpus:
    rng = np.random.default_rng(seed)
    items = [Sentence(f"t{i}", tuple(rng.choice(WORDS, size=int(rng.integers(3, 9))))) for i in range(n)]
    return Corpus.from_items(items, "toy", [int(x) for x in rng.integers(0, 2, size=n)])


def classifier(folder):
    torch.manual_seed(0)
    return load_model(folder, head="sequence-classification", num_labels=2, device="cpu")


@pytest.fixture(scope="module")
def data():
    return corpus()


@pytest.mark.parametrize("arch", GATED_ARCHS)
def test_gates_of_one_change_nothing_and_zero_removes_the_head(tiny_model_dirs, data, arch):
    loaded = classifier(tiny_model_dirs[arch])
    dev = dev_set(loaded, data, "SST-2", batch_size=5)
    layers, heads = gate_shape(loaded)
    assert (layers, heads) == (loaded.num_layers, loaded.num_heads)
    plain = predict_with_gates(loaded, dev, torch.ones(1, layers, heads))[0]
    with torch.no_grad():
        reference = np.concatenate([loaded.model(**b).logits.numpy() for b in dev.batches])
    order = np.concatenate(dev.rows)
    np.testing.assert_allclose(plain[order], reference, atol=1e-6)
    # gate 0 on one head, vectorised over configurations, equals gate_heads one at a time
    stack = torch.ones(3, layers, heads)
    stack[1, 0, 0] = 0
    stack[2, layers - 1, heads - 1] = 0
    many = predict_with_gates(loaded, dev, stack, configs_per_pass=2)
    for k in range(3):
        with gate_heads(loaded.model, stack[k]), torch.no_grad():
            one = np.concatenate([loaded.model(**b).logits.numpy() for b in dev.batches])
        np.testing.assert_allclose(many[k][order], one, atol=1e-5)
    assert not np.allclose(many[1], many[0])


@pytest.mark.parametrize("arch", (*GATED_ARCHS, "albert"))
def test_configurations_sharing_their_lower_layers_match_one_at_a_time(family_model_dirs, data, arch):
    """Copies made at the first gated layer (hooks on the layers) give what gating the whole batch gives
    (ALBERT, whose layers run one module, gates the whole batch: a hook on it would fire at every depth)."""
    loaded = classifier(family_model_dirs[arch])
    dev = dev_set(loaded, data, "SST-2", batch_size=5)
    layers, heads = gate_shape(loaded)
    stack = [np.ones((layers, heads))] * 2  # two all-ones configurations: one plain pass, tiled
    for layer in range(layers):
        for head in (0, heads - 1):
            g = np.ones((layers, heads))
            g[layer, head] = 0
            stack.append(g)
        g = np.ones((layers, heads))
        g[layer] = 0.5  # a layer scaled, not only removed
        stack.append(g)
    stack.append((np.random.default_rng(0).random((layers, heads)) > 0.5).astype(float))
    stack = np.stack(stack)
    order = np.concatenate(dev.rows)
    expected = []
    for g in stack:
        with gate_heads(loaded.model, torch.as_tensor(g, dtype=torch.float32)), torch.no_grad():
            expected.append(np.concatenate([loaded.model(**b).logits.numpy() for b in dev.batches]))
    for per_pass in (None, 3):
        got = predict_with_gates(loaded, dev, stack, configs_per_pass=per_pass)
        np.testing.assert_allclose(got[:, order], np.stack(expected), atol=2e-5)


def test_gate_zero_equals_removing_the_heads_value_contribution(tiny_model_dirs, data):
    """Zeroing a head's value projection rows removes its context: same output as its gate at 0."""
    loaded = classifier(tiny_model_dirs["bert"])
    dev = dev_set(loaded, data, "SST-2")
    layers, heads = gate_shape(loaded)
    gates = torch.ones(layers, heads)
    gates[1, 2] = 0
    gated = predict_with_gates(loaded, dev, gates[None])[0]
    attn = loaded.model.bert.encoder.layer[1].attention.self
    size = attn.attention_head_size
    with torch.no_grad():
        attn.value.weight[2 * size : 3 * size] = 0
        attn.value.bias[2 * size : 3 * size] = 0
    removed = predict_with_gates(loaded, dev, torch.ones(1, layers, heads))[0]
    np.testing.assert_allclose(gated, removed, atol=1e-5)


@pytest.mark.parametrize("arch", PRUNABLE_ARCHS)
def test_physical_pruning_equals_gating(tiny_model_dirs, data, arch):
    loaded = classifier(tiny_model_dirs[arch])
    dev = dev_set(loaded, data, "SST-2", batch_size=4)
    layers, heads = gate_shape(loaded)
    mask = np.ones((layers, heads))
    mask[0, 0] = 0
    mask[layers - 1, heads - 1] = 0
    gated = predict_with_gates(loaded, dev, mask[None])[0]
    n_params = sum(p.numel() for p in loaded.model.parameters())
    assert prune_heads(loaded, mask) == {0: [0], layers - 1: [heads - 1]}
    assert sum(p.numel() for p in loaded.model.parameters()) < n_params
    with torch.no_grad():
        pruned = np.concatenate([loaded.model(**b).logits.numpy() for b in dev.batches])
    np.testing.assert_allclose(pruned, gated[np.concatenate(dev.rows)], atol=1e-5)
    # pruning again uses original head numbers
    if heads > 2:
        prune_heads(loaded, {0: [0, 1]})
        assert pruned_heads(loaded)[0] == [0, 1]
    with pytest.raises(ValueError):
        prune_heads(loaded, {0: list(range(heads))})


def test_importance_is_finite_normalised_and_matches_finite_differences(tiny_model_dirs, data):
    loaded = classifier(tiny_model_dirs["bert"])
    dev = dev_set(loaded, data, "SST-2", batch_size=6)
    layers, heads = gate_shape(loaded)
    imp = head_importance(loaded, dev)
    assert imp.shape == (layers, heads) and np.isfinite(imp).all() and (imp >= 0).all()
    np.testing.assert_allclose(np.linalg.norm(imp, axis=1), 1.0, atol=1e-9)
    # per-batch estimate vs central finite differences of the summed loss of each batch
    raw = head_importance(loaded, dev, normalise=False, per_example=False)
    assert all(p.grad is None for p in loaded.model.parameters())  # only the gates' gradient was taken
    loaded.model.eval()
    eps = 1e-3
    fd = np.zeros((layers, heads))
    for batch, rows in zip(dev.batches, dev.rows):
        y = torch.as_tensor(dev.labels[rows])
        for l in range(layers):
            for h in range(heads):
                vals = []
                for sign in (1, -1):
                    g = torch.ones(layers, heads, dtype=torch.float32)
                    g[l, h] += sign * eps
                    with gate_heads(loaded.model, g), torch.no_grad():
                        logits = loaded.model(**batch).logits.double()
                    vals.append(torch.nn.functional.cross_entropy(logits, y, reduction="sum").item())
                fd[l, h] += abs(vals[0] - vals[1]) / (2 * eps)
    fd /= len(dev.batches)
    np.testing.assert_allclose(raw, fd, rtol=2e-2, atol=1e-4)
    # masked heads get zero importance
    mask = np.ones((layers, heads))
    mask[0, 1] = 0
    assert head_importance(loaded, dev, mask=mask)[0, 1] == 0
    # a mask or gates with a graph (as trained gates have) or on a device are read on the host, as numpy's are
    graph = torch.as_tensor(mask, dtype=torch.float32).requires_grad_(True) * 1
    np.testing.assert_array_equal(head_importance(loaded, dev, mask=graph), head_importance(loaded, dev, mask=mask))
    np.testing.assert_array_equal(
        predict_with_gates(loaded, dev, graph[None]), predict_with_gates(loaded, dev, mask[None].astype(np.float32))
    )


def test_ablation_sweep_shapes_and_consistency(tiny_model_dirs, data):
    loaded = classifier(tiny_model_dirs["roberta"])
    dev = dev_set(loaded, data, "SST-2")
    layers, heads = gate_shape(loaded)
    result = ablation_sweep(loaded, dev)
    assert result.head_deltas.shape == (layers, heads) and result.layer_deltas.shape == (layers,)
    g = np.ones((layers, heads))
    g[1, 0] = 0
    score = scores_for_gates(loaded, dev, g[None])[0]
    assert result.head_deltas[1, 0] == pytest.approx(score - result.base)
    s = result.summary()
    assert 0 <= s["share_heads_not_hurting"] <= 1 and 0 <= s["share_heads_lower_loss"] <= 1
    # the loss deltas are the classifier's own cross-entropy, gated head by head
    order = np.concatenate(dev.rows)
    targets = torch.as_tensor(dev.labels[order])

    def mean_loss(gates):
        with gate_heads(loaded.model, torch.as_tensor(gates, dtype=torch.float32)), torch.no_grad():
            logits = torch.cat([loaded.model(**b).logits for b in dev.batches])
        return torch.nn.functional.cross_entropy(logits, targets).item()

    assert result.base_loss == pytest.approx(mean_loss(np.ones((layers, heads))), rel=1e-5)
    assert result.head_loss_deltas[1, 0] == pytest.approx(mean_loss(g) - result.base_loss, abs=1e-5)
    g_layer = np.ones((layers, heads))
    g_layer[layers - 1] = 0
    assert result.layer_loss_deltas[layers - 1] == pytest.approx(mean_loss(g_layer) - result.base_loss, abs=1e-5)
    assert np.ptp(result.head_loss_deltas) > 0  # continuous: the heads are ranked, not tied
    # harm is the loss increase (or the metric drop): a ranking by harm agrees with itself
    assert importance_ablation_agreement(result.head_loss_deltas, result)[0] == pytest.approx(1.0)
    assert importance_ablation_agreement(-result.head_loss_deltas, result)[0] == pytest.approx(-1.0)
    np.testing.assert_array_equal(result.harm("metric"), -result.head_deltas)
    rho, p = importance_ablation_agreement(head_importance(loaded, dev, normalise=False), result)
    assert -1 <= rho <= 1 and 0 <= p <= 1
    with pytest.raises(ValueError):
        result.harm("accuracy")


def test_regression_loss_is_squared_error(tiny_model_dirs, data):
    """STS-B: one output, the loss is the mean squared error to the scores."""
    torch.manual_seed(0)
    loaded = load_model(
        tiny_model_dirs["electra"],
        head="sequence-classification",
        num_labels=1,
        problem_type="regression",
        device="cpu",
    )
    scores = np.linspace(0, 5, len(data)).tolist()
    sts = Corpus.from_items(list(data), "toy-sts", scores)
    dev = dev_set(loaded, sts, "STS-B", batch_size=5)
    result = ablation_sweep(loaded, dev, layers=False)
    with torch.no_grad():
        pred = np.concatenate([loaded.model(**b).logits[:, 0].numpy() for b in dev.batches])
    expected = np.mean((pred - np.asarray(scores, dtype=np.float32)[np.concatenate(dev.rows)]) ** 2)
    assert result.base_loss == pytest.approx(expected, rel=1e-5)
    assert np.isnan(result.layer_loss_deltas).all() and np.isfinite(result.head_loss_deltas).all()
    assert kovaleva.layer_ablation_improves(result).verdict is Verdict.NOT_TESTABLE  # no layers swept


def test_pruning_curves(tiny_model_dirs, data):
    loaded = classifier(tiny_model_dirs["bert"])
    dev = dev_set(loaded, data, "SST-2")
    curve = pruning_curve(loaded, dev, step=0.25)
    layers, heads = gate_shape(loaded)
    np.testing.assert_allclose(curve.fractions, [0, 0.25, 0.5, 0.75, 1.0])
    assert len(curve.order) == layers * heads and len(set(curve.order)) == layers * heads
    # an importance measured beforehand gives the same curve (it is the first measurement)
    again = pruning_curve(loaded, dev, step=0.25, importance=head_importance(loaded, dev))
    assert again.order == curve.order
    np.testing.assert_array_equal(again.scores, curve.scores)
    with pytest.raises(ValueError):
        pruning_curve(loaded, dev, importance=np.ones((layers + 1, heads)))
    randoms = random_pruning_curves(loaded, dev, seeds=(0, 1), step=0.25)
    assert len(randoms) == 2 and all(r.scores[0] == pytest.approx(curve.base) for r in randoms)
    claim = michel.heads_prunable(curve, randoms)
    assert claim.values["prunable"] == curve.prunable()
    # each curve keeps its steps' predictions: they give its scores, and the claim's interval resamples them
    for c in (curve, *randoms):
        assert c.predictions.shape == (len(c.fractions), len(dev)) and c.task == "SST-2"
        ones = glue_metric_draws("SST-2", c.metric, c.predictions, c.labels, np.ones((1, len(dev))))[:, 0]
        np.testing.assert_allclose(ones, c.scores)
    assert claim.interval is not None and f"{len(dev)} dev examples" in claim.interval.method
    assert claim.verdict is Verdict.NOT_TESTABLE or claim.interval.low <= curve.prunable() <= claim.interval.high
    # the curve's own steps, rebuilt from its order, give its scores; other counts prune a prefix of the order
    total = layers * heads
    steps = np.rint((1 - curve.fractions) * total).astype(int)
    for c in (curve, *randoms):
        np.testing.assert_array_equal(scores_for_gates(loaded, dev, c.masks_keeping(steps, (layers, heads))), c.scores)
    masks = randoms[0].masks_keeping([total, total - 1, 0], (layers, heads))
    assert masks.reshape(3, -1).sum(1).tolist() == [total, total - 1, 0]
    assert masks[1][randoms[0].order[0]] == 0
    with pytest.raises(ValueError):
        curve.masks_keeping([total + 1], (layers, heads))


def test_layer_claim(tiny_model_dirs, data):
    loaded = classifier(tiny_model_dirs["bert"])
    result = ablation_sweep(loaded, dev_set(loaded, data, "SST-2"))
    layer_claim = kovaleva.layer_ablation_improves(result)
    best = int(np.argmax(result.layer_deltas))
    assert f"layer {best + 1}" in layer_claim.ours
    assert layer_claim.verdict is (
        Verdict.NOT_TESTABLE if not result.layer_deltas.any() else Verdict.by_interval(layer_claim.interval)
    )
    # the sweep keeps every configuration's predictions: they give its deltas, and the intervals resample them
    layers, heads = gate_shape(loaded)
    assert result.predictions.shape == (1 + layers * heads + layers, len(result.labels))
    assert result.predictions.dtype == np.uint8 and result.predictions.nbytes == result.predictions.size
    scores = glue_metric_draws("SST-2", "score", result.predictions, result.labels, np.ones((1, len(result.labels))))
    np.testing.assert_allclose(scores[1 : 1 + layers * heads, 0] - scores[0, 0], result.head_deltas.ravel())
    np.testing.assert_allclose(scores[1 + layers * heads :, 0] - scores[0, 0], result.layer_deltas)
    assert layer_claim.interval.low <= layer_claim.values["best_layer_delta"] <= layer_claim.interval.high
    assert f"{len(result.labels)} dev examples" in layer_claim.interval.method
    # deltas made by hand, without the predictions: the point change decides
    better = dataclasses.replace(
        result, layer_deltas=np.r_[-0.1, 0.03, np.zeros(len(result.layer_deltas) - 2)], predictions=None
    )
    assert kovaleva.layer_ablation_improves(better).verdict is Verdict.HOLDS
    metrics = result.metrics("pruning.SST-2")
    assert metrics["pruning.SST-2.base_score"] == result.base and "pruning.SST-2.head_loss_deltas" in metrics
    assert {k.rsplit(".", 1)[-1] for k in metrics} >= set(result.summary()) - {"base"}


def test_dev_set_token_budget_keeps_the_first_items(tiny_model_dirs, data):
    from bertology_utils.interventions.finetuning import encode

    loaded = classifier(tiny_model_dirs["bert"])
    lengths = np.array([len(e["input_ids"]) for e in encode(loaded.tokenizer, list(data), loaded.max_tokens)])
    for budget, n in [(lengths[:5].sum(), 5), (lengths[:5].sum() - 1, 4), (1, 1), (10**6, len(data))]:
        dev = dev_set(loaded, data, "SST-2", batch_size=3, token_budget=int(budget))
        assert len(dev) == n
        np.testing.assert_array_equal(dev.labels, data.labels[:n])
        assert sorted(np.concatenate(dev.rows).tolist()) == list(range(n))


def test_prunable_share():
    f = np.array([0, 0.1, 0.2, 0.3])
    assert prunable_share(f, [1.0, 0.95, 0.85, 0.9], 1.0) == 0.1
    assert prunable_share(f, [1.0, 0.95, 0.92, 0.91], 1.0) == 0.3
    assert prunable_share(f, [0.5, 0.1, 0.1, 0.1], 0.5) == 0.0


def test_attention_change(tiny_model_dirs, data):
    a = load_model(tiny_model_dirs["bert"], device="cpu")
    same = attention_change(a, a, data)
    layers, heads = gate_shape(a)
    assert same.shape == (layers, heads)
    np.testing.assert_allclose(same, 1.0, atol=1e-5)
    b = classifier(tiny_model_dirs["bert"])
    with torch.no_grad():
        b.model.bert.encoder.layer[layers - 1].attention.self.query.weight.mul_(5.0)
    changed = attention_change(a, b, data)
    assert changed[: layers - 1].min() > 0.9999 and changed[layers - 1].min() < 0.9999
    assert kovaleva.last_layers_change_most(changed).verdict in (
        Verdict.HOLDS,
        Verdict.PARTLY,
    )  # the last layer changed


def test_string_labels_score_like_glue(tiny_model_dirs, data):
    """RTE's labels are strings: the sweep scores them with GLUE's label map."""
    from bertology_utils.interventions.finetuning import evaluate

    rte = Corpus.from_items(list(data), "toy-rte", ["entailment" if y else "not_entailment" for y in data.labels])
    loaded = classifier(tiny_model_dirs["bert"])
    dev = dev_set(loaded, rte, "RTE", batch_size=5)
    layers, heads = gate_shape(loaded)
    score = scores_for_gates(loaded, dev, np.ones((1, layers, heads)))[0]
    assert score == pytest.approx(evaluate(loaded, rte, "RTE")["score"])
    assert head_importance(loaded, dev).shape == (layers, heads)


@pytest.mark.parametrize("arch", sorted(set(GATED_ARCHS) - set(PRUNABLE_ARCHS)))
def test_physical_pruning_refuses_other_layouts(tiny_model_dirs, arch):
    from bertology_utils.core.errors import ModelNotAvailableError

    loaded = classifier(tiny_model_dirs[arch])
    with pytest.raises(ModelNotAvailableError, match="only be gated"):
        prune_heads(loaded, {0: [0]})


def test_cached_sweeps_and_curves_equal_fresh_ones_and_follow_model_and_data(
    tiny_model_dirs, data, monkeypatch, tmp_path
):
    from bertology_utils.core import settings
    from bertology_utils.interventions import gated_logits, pruning

    monkeypatch.setenv(settings.CACHE_DIR_ENV, str(tmp_path / "cache"))

    loaded = classifier(tiny_model_dirs["bert"])
    dev = dev_set(loaded, data, "SST-2")

    def run(model, dev_set_, cache):
        return (
            ablation_sweep(model, dev_set_, cache=cache),
            pruning_curve(model, dev_set_, step=0.25, cache=cache),
            random_pruning_curves(model, dev_set_, seeds=(0,), step=0.25, cache=cache)[0],
        )

    fresh = run(loaded, dev, cache=False)
    calls = []
    for module, name in ((gated_logits, "_predict_with_gates"), (pruning, "_importance")):
        original = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, _f=original, _n=name, **k: calls.append(_n) or _f(*a, **k))
    stored = run(loaded, dev, cache=True)
    computed = len(calls)
    assert computed > 0
    reused = run(loaded, dev, cache=True)
    assert len(calls) == computed  # every logit and importance read back
    for result in (stored, reused):
        for field in ("head_deltas", "layer_deltas", "head_loss_deltas", "layer_loss_deltas"):
            np.testing.assert_array_equal(getattr(result[0], field), getattr(fresh[0], field))
        for got, want in zip(result[1:], fresh[1:]):
            np.testing.assert_array_equal(got.scores, want.scores)
            assert got.order == want.order
    other = classifier(tiny_model_dirs["bert"])
    with torch.no_grad():
        next(other.model.parameters()).add_(0.01)
    ablation_sweep(other, dev, cache=True)  # other weights: computed again
    assert len(calls) == computed + 1
    ablation_sweep(loaded, dev_set(loaded, data[:6], "SST-2"), cache=True)  # other data: computed again
    assert len(calls) == computed + 2
    loaded.precision = "bf16"  # other precision: computed again, and not equal to the float32 result
    fast = ablation_sweep(loaded, dev, cache=True)
    assert len(calls) == computed + 3
    exact = fresh[0].head_loss_deltas
    assert 0 < np.abs(fast.head_loss_deltas - exact).max() < 0.05 * max(np.abs(exact).max(), 1e-3)


def test_plot_pruning_curves_draws_importance_random_mean_and_range():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bertology_utils.interventions.pruning import PruningCurve, plot_pruning_curves

    fractions = np.array([0.0, 0.5, 1.0])
    curve = PruningCurve("importance", fractions, np.array([1.0, 0.95, 0.5]), 1.0)
    randoms = [PruningCurve("random", fractions, np.array(s), 1.0) for s in ([1.0, 0.6, 0.5], [1.0, 0.8, 0.5])]
    ax = plot_pruning_curves(curve, randoms, keep=0.9, task="SST-2")
    importance, random_mean, floor = ax.get_lines()
    np.testing.assert_allclose(importance.get_xdata(), [0, 50, 100])
    np.testing.assert_allclose(random_mean.get_ydata(), [1.0, 0.7, 0.5])
    assert floor.get_ydata()[0] == pytest.approx(0.9)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["by importance (prunable 50%)", "random, mean of 2 (prunable 0%)", "90% of the original"]
    assert ax.get_title() == "SST-2: pruning heads" and ax.get_ylabel() == "dev score (SST-2)"
    plt.close("all")


def test_michel_plot_importance_scatters_raw_importance_against_the_loss_change():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bertology_utils.interventions.pruning import normalise_per_layer

    raw = np.array([[1.0, 2.0], [3.0, 4.0]])
    loss = np.array([[0.1, 0.2], [0.3, 0.5]])
    fig = michel.plot_importance(normalise_per_layer(raw), raw, loss, (1.0, 0.0), task="SST-2")
    grid, scatter = fig.axes[0], fig.axes[1]
    assert grid.get_title() == "SST-2: importance (L2-normalised per layer)"
    np.testing.assert_allclose(np.reshape(grid.collections[0].get_array(), (2, 2)), normalise_per_layer(raw))
    points = scatter.collections[0]
    np.testing.assert_allclose(points.get_offsets(), np.column_stack([loss.ravel(), raw.ravel()]))
    np.testing.assert_array_equal(points.get_array(), [1, 1, 2, 2])  # coloured by layer, from 1
    assert scatter.get_title() == "Spearman ρ = 1.00 (p = 0)"
    plt.close("all")


def test_classifier_passes_read_the_device_once_at_the_end(tiny_model_dirs, data):
    """Gated passes, Michel importance and predictions keep each pass's result on the device: on a GPU a read per
    batch waits for it. On the meta device (shapes, no values) the first read is the last line's."""
    from device_reads import first_read, on_meta

    from bertology_utils.interventions.finetuning import predict

    loaded = classifier(tiny_model_dirs["bert"])
    dev = dev_set(loaded, data, "SST-2", batch_size=5)
    layers, heads = gate_shape(loaded)
    loaded.model.to("meta")
    dev = dataclasses.replace(dev, batches=on_meta(dev.batches))
    stack = torch.ones(3, layers, heads)
    stack[1:, 0, 0] = 0
    passes = []
    forward = loaded.model.forward
    loaded.model.forward = lambda *a, **k: passes.append(1) or forward(*a, **k)
    frame = first_read(lambda: predict_with_gates(loaded, dev, stack, configs_per_pass=1, cache=False))
    assert frame.name == "_predict_with_gates" and ".cpu()" in frame.line
    assert len(passes) == len(dev.batches) * 3  # every pass ran before the read
    frame = first_read(lambda: head_importance(loaded, dev, cache=False))
    assert frame.name == "_importance" and "total.cpu()" in frame.line
    frame = first_read(lambda: predict(loaded, data))
    assert frame.name == "predict" and "torch.cat(done).cpu()" in frame.line
