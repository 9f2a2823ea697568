"""Kovaleva et al.'s ablation claims and Michel et al.'s pruning claim, decided by bootstrap intervals over the dev
examples (AblationResult.draws, PruningCurve.draws)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from bertology_utils.core.uncertainty import bootstrap_weights
from bertology_utils.interventions.pruning import AblationResult, PruningCurve
from bertology_utils.interventions.scoring import glue_metric_draws, glue_metrics, label_ids
from bertology_utils.papers import kovaleva, michel
from bertology_utils.papers.claims import Verdict, on_classifier, over_seeds


def ablation(task: str, labels, base, heads, layers=None, metric: str = "score") -> AblationResult:
    """An AblationResult of per-example predictions: ``base`` (n,), ``heads`` (layers, heads, n), ``layers``
    (layers, n) or None (not swept); the deltas as ablation_sweep computes them, by glue_metrics."""
    heads = np.asarray(heads)
    n_layers, n_heads = heads.shape[:2]
    rows = [np.asarray(base), *heads.reshape(n_layers * n_heads, -1)] + ([] if layers is None else list(layers))
    predictions = np.stack(rows)
    scores = np.array([glue_metrics(task, p, labels)[metric] for p in predictions])
    head_d = scores[1 : 1 + n_layers * n_heads].reshape(n_layers, n_heads) - scores[0]
    layer_d = scores[1 + n_layers * n_heads :] - scores[0] if layers is not None else np.full(n_layers, np.nan)
    zeros = np.zeros((n_layers, n_heads))
    return AblationResult(
        task, metric, scores[0], head_d, layer_d, 0.5, zeros, np.zeros(n_layers), predictions, label_ids(task, labels)
    )


def flip(prediction, labels, index, right: bool = True):
    """``prediction`` with the examples at ``index`` made right (or wrong)."""
    out = np.array(prediction)
    out[index] = labels[index] if right else 1 - labels[index]
    return out


def sst2(n: int, correct: float = 0.7, seed: int = 0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n)
    base = np.where(rng.random(n) < correct, labels, 1 - labels)
    return labels, base


@pytest.mark.parametrize(
    "task, metric",
    [("SST-2", "score"), ("MRPC", "score"), ("MRPC", "f1"), ("CoLA", "score"), ("RTE", "accuracy"), ("STS-B", "score")],
)
def test_resampled_metric_is_glue_metrics_on_each_resample(task, metric):
    rng = np.random.default_rng(3)
    n = 30
    if task == "STS-B":
        labels = rng.uniform(0, 5, n).astype(np.float32)
        predictions = np.stack([labels + rng.normal(0, 1, n), np.round(labels), np.full(n, 2.0)]).astype(np.float32)
        raw = labels
    else:
        ids = rng.integers(0, 2, n)
        predictions = np.stack([np.where(rng.random(n) < 0.7, ids, 1 - ids), 1 - ids, np.ones(n, dtype=int)])
        raw = [["entailment", "not_entailment"][i] for i in ids] if task == "RTE" else ids
    weights = bootstrap_weights(n, 6, seed=1)
    draws = glue_metric_draws(task, metric, predictions, label_ids(task, raw), weights)
    assert draws.shape == (3, 6)
    ones = glue_metric_draws(task, metric, predictions, label_ids(task, raw), np.ones((1, n)))[:, 0]
    np.testing.assert_allclose(ones, [glue_metrics(task, p, raw)[metric] for p in predictions], equal_nan=True)
    for r, w in enumerate(weights):
        drawn = np.repeat(np.arange(n), w.astype(int))
        resampled = [raw[i] for i in drawn] if task == "RTE" else np.asarray(raw)[drawn]
        expected = [glue_metrics(task, p[drawn], resampled)[metric] for p in predictions]
        np.testing.assert_allclose(draws[:, r], expected, equal_nan=True, atol=1e-12)
    with pytest.raises(ValueError):
        glue_metric_draws(task, "bleu", predictions, label_ids(task, raw), weights)


def test_draws_resample_the_deltas_of_every_configuration():
    labels, base = sst2(60)
    heads = np.stack([base] * 6).reshape(2, 3, -1).copy()
    heads[1, 2] = flip(base, labels, np.arange(10), right=False)
    result = ablation("SST-2", labels, base, heads, layers=np.stack([base, flip(base, labels, np.arange(20))]))
    draws = result.draws(n_resamples=300, seed=4)
    assert draws["head_deltas"].shape == (300, 2, 3) and draws["layer_deltas"].shape == (300, 2)
    assert "60 dev examples" in draws.over
    assert (draws["head_deltas"][:, 0] == 0).all() and (draws["layer_deltas"][:, 0] == 0).all()  # same predictions
    assert (draws["head_deltas"][:, 1, 2] <= 0).all() and (draws["layer_deltas"][:, 1] >= 0).all()
    np.testing.assert_allclose(draws["layer_deltas"][:, 1].mean(), result.layer_deltas[1], atol=0.02)
    assert np.array_equal(result.draws(300, 4)["head_deltas"], draws["head_deltas"])  # seeded
    assert result.predictions is not None and result.predictions.shape == (1 + 6 + 2, 60)
    assert AblationResult(*dataclasses.astuple(result)[:8]).draws() is None  # no predictions kept
    unswept = ablation("SST-2", labels, base, heads)
    assert np.isnan(unswept.draws(50)["layer_deltas"]).all() and np.isfinite(unswept.draws(50)["head_deltas"]).all()
    wrong = dataclasses.replace(result, predictions=result.predictions[:, :-1])  # does not fit the labels
    assert np.isnan(wrong.draws(50)["head_deltas"]).all()


def test_a_layer_that_clearly_improves_holds():
    labels, base = sst2(200)
    wrong = np.nonzero(base != labels)[0]
    layers = np.stack([flip(base, labels, wrong[:2], right=False), flip(base, labels, wrong[:25])])
    layers[0][np.nonzero(base == labels)[0][:10]] = 1 - labels[np.nonzero(base == labels)[0][:10]]
    result = ablation("SST-2", labels, base, np.stack([base] * 4).reshape(2, 2, -1), layers)
    claim = kovaleva.layer_ablation_improves(result, task="SST-2")
    assert claim.verdict is Verdict.HOLDS and claim.values["best_layer"] == 2
    delta = claim.values["best_layer_delta"]
    assert delta == pytest.approx(25 / 200)
    assert 0 < claim.interval.low < delta < claim.interval.high
    assert "200 dev examples" in claim.interval.method and "interval" in claim.rule
    # through the notebook's path: one seed, then joined over seeds
    tested = on_classifier(claim, 0.7, 0.5)
    assert tested.verdict is Verdict.HOLDS and tested.interval == claim.interval
    joined = over_seeds([tested, tested])
    assert joined.verdict is Verdict.HOLDS and joined.interval.low == claim.interval.low
    # a layer that clearly hurts everywhere differs
    hurts = ablation("SST-2", labels, base, np.stack([base] * 4).reshape(2, 2, -1), layers[[0, 0]])
    worse = kovaleva.layer_ablation_improves(hurts)
    assert worse.verdict is Verdict.DIFFERS and worse.interval.high <= 0


def test_one_example_on_a_small_dev_set_is_inconclusive():
    labels, base = sst2(12, seed=2)
    wrong = np.nonzero(base != labels)[0]
    heads = np.stack([base] * 4).reshape(2, 2, -1).copy()
    heads[0, 1] = flip(base, labels, wrong[:1])  # one head gains one example
    layers = np.stack([base, flip(base, labels, wrong[:1])])  # so does one layer
    result = ablation("SST-2", labels, base, heads, layers)
    claim = kovaleva.layer_ablation_improves(result)
    assert result.layer_deltas[1] == pytest.approx(1 / 12)
    assert claim.verdict is Verdict.INCONCLUSIVE and claim.interval.low <= 0 < claim.interval.high
    assert claim.interval.low <= claim.values["best_layer_delta"] <= claim.interval.high
    # the point rule (a result without per-example predictions) would say holds
    bare = AblationResult(*dataclasses.astuple(result)[:8])
    assert kovaleva.layer_ablation_improves(bare).verdict is Verdict.HOLDS
    heads_claim = kovaleva.single_heads_dispensable(result)
    # every head but one changes nothing: the share clearly holds, the one improving head is inconclusive
    assert heads_claim.interval.low == heads_claim.interval.high == 1.0
    assert heads_claim.verdict is Verdict.INCONCLUSIVE and "L1H2 +0.083" in heads_claim.ours
    assert kovaleva.single_heads_dispensable(bare).verdict is Verdict.HOLDS


def test_single_heads_graded_by_two_intervals():
    labels, base = sst2(300, seed=5)
    right, wrong = np.nonzero(base == labels)[0], np.nonzero(base != labels)[0]
    n_layers, n_heads = 3, 4
    heads = np.stack([base] * (n_layers * n_heads)).reshape(n_layers, n_heads, -1).copy()
    heads[2, 3] = flip(base, labels, wrong[:30])  # one head clearly improves
    for k in range(3):  # three clearly hurt
        heads[0, k] = flip(base, labels, right[30 * k : 30 * k + 30], right=False)
    result = ablation("SST-2", labels, base, heads)
    claim = kovaleva.single_heads_dispensable(result, task="SST-2")
    assert claim.verdict is Verdict.HOLDS and claim.id == "single_heads_dispensable.SST-2"
    assert claim.values == {"share_not_hurting": 9 / 12, "share_improve": 1 / 12}
    assert claim.interval.low > 0.5 and claim.interval.low <= 9 / 12 <= claim.interval.high
    # no head improves: partly (the share holds, the best head's change is 0 on every resample)
    none_improve = heads.copy()
    none_improve[2, 3] = base
    partly = kovaleva.single_heads_dispensable(ablation("SST-2", labels, base, none_improve))
    assert partly.verdict is Verdict.PARTLY
    # most heads clearly hurt, one clearly improves: partly; none improves as well: differs
    most_hurt = heads.copy()
    for k in range(1, 11):
        most_hurt.reshape(-1, len(labels))[k] = flip(base, labels, right[20 * k : 20 * k + 20], right=False)
    assert kovaleva.single_heads_dispensable(ablation("SST-2", labels, base, most_hurt)).verdict is Verdict.PARTLY
    most_hurt[2, 3] = flip(base, labels, right[:20], right=False)
    differs = kovaleva.single_heads_dispensable(ablation("SST-2", labels, base, most_hurt))
    assert differs.verdict is Verdict.DIFFERS and differs.interval.high <= 0.5
    # nothing changes: not testable, as without intervals
    flat = kovaleva.single_heads_dispensable(ablation("SST-2", labels, base, np.stack([base] * 4).reshape(2, 2, -1)))
    assert flat.verdict is Verdict.NOT_TESTABLE


def test_too_few_examples_or_bad_input_give_no_interval():
    labels, base = np.array([1, 0]), np.array([0, 0])
    heads = np.stack([base, labels, base, base]).reshape(2, 2, -1)
    result = ablation("SST-2", labels, base, heads, layers=np.stack([labels, base]))
    for claim in (kovaleva.layer_ablation_improves(result), kovaleva.single_heads_dispensable(result)):
        assert claim.verdict is Verdict.NOT_TESTABLE and not claim.interval.finite
    labels, base = sst2(20)
    unknown = dataclasses.replace(
        ablation("SST-2", labels, base, np.stack([1 - base] * 4).reshape(2, 2, -1), np.stack([1 - base, base])),
        task="no such task",
    )
    assert kovaleva.layer_ablation_improves(unknown).verdict is Verdict.NOT_TESTABLE


@pytest.mark.parametrize("task", ["MRPC", "CoLA", "STS-B"])
def test_other_metrics_give_intervals(task):
    rng = np.random.default_rng(1)
    n = 120
    if task == "STS-B":
        labels = rng.uniform(0, 5, n).astype(np.float32)
        base = (labels + rng.normal(0, 1.5, n)).astype(np.float32)
        better = (labels + rng.normal(0, 0.3, n)).astype(np.float32)
    else:
        labels = rng.integers(0, 2, n)
        base = np.where(rng.random(n) < 0.65, labels, 1 - labels)
        better = np.where(rng.random(n) < 0.95, labels, 1 - labels)
    result = ablation(task, labels, base, np.stack([base] * 4).reshape(2, 2, -1), np.stack([base, better]))
    claim = kovaleva.layer_ablation_improves(result, task=task)
    assert claim.verdict is Verdict.HOLDS and claim.values["best_layer"] == 2
    assert claim.interval.low <= claim.values["best_layer_delta"] <= claim.interval.high


def curve(labels, steps, strategy: str = "importance", task: str = "SST-2") -> PruningCurve:
    """A PruningCurve from per-example predictions, one row per step (0, 25, 50, 75, 100% pruned)."""
    predictions = np.stack(steps)
    scores = np.array([glue_metrics(task, p, labels)["score"] for p in predictions])
    fractions = np.linspace(0, 1, len(predictions))
    return PruningCurve(strategy, fractions, scores, scores[0], [], task, "score", predictions, label_ids(task, labels))


def degrade(base, labels, wrong_at):
    """Predictions that lose ``wrong_at[k]`` more correct examples at step k."""
    right = np.nonzero(base == labels)[0]
    return [flip(base, labels, right[:k], right=False) for k in wrong_at]


def test_heads_prunable_by_intervals():
    labels, base = sst2(200, correct=0.8, seed=7)
    importance = curve(labels, degrade(base, labels, [0, 0, 1, 80, 150]))  # 50% go with no drop
    randoms = [curve(labels, degrade(base, labels, [0, 60, 100, 130, 150]), "random") for _ in range(2)]
    claim = michel.heads_prunable(importance, randoms, task="SST-2")
    assert claim.values == {"prunable": 0.5, "prunable_random_mean": 0.0}
    assert claim.verdict is Verdict.HOLDS and claim.interval.low == claim.interval.high == 0.5
    assert "importance minus random 95% CI [0.5, 0.5]" in claim.ours and "200 dev examples" in claim.interval.method
    # random order does better: partly (the share holds, the comparison differs)
    better = [curve(labels, degrade(base, labels, [0, 0, 0, 0, 150]), "random")]
    assert michel.heads_prunable(importance, better).verdict is Verdict.PARTLY
    # the drop at 25% sits on the 90% line of a small dev set: inconclusive
    labels, base = sst2(20, correct=0.8, seed=7)
    edge = curve(labels, degrade(base, labels, [0, 1, 4, 8, 12]))
    assert edge.prunable() == 0.25
    small = michel.heads_prunable(edge)
    assert small.verdict is Verdict.INCONCLUSIVE and small.interval.low < 0.2 <= 0.25 <= small.interval.high
    # made by hand (no predictions): the point rule; too few examples: no interval
    bare = PruningCurve("importance", edge.fractions, edge.scores, edge.base)
    assert michel.heads_prunable(bare).verdict is Verdict.HOLDS and michel.heads_prunable(bare).interval is None
    tiny = curve(labels[:2], [p[:2] for p in degrade(base, labels, [0, 1, 4, 8, 12])])
    assert not michel.heads_prunable(tiny).interval.finite
