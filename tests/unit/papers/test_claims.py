import math
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats

from bertology_utils.papers import clark, context_mixing, kovaleva, michel, voita
from bertology_utils.papers.claims import (
    SEEDS_RULE,
    Claim,
    Draws,
    Interval,
    Seeds,
    Verdict,
    below_floor,
    bootstrap_interval,
    claims_by_task,
    claims_over_seeds,
    claims_table,
    depth_scaled_layers,
    layer_mean,
    on_classifier,
    over_seeds,
    permutation_interval,
    seeds_verdict,
    spearman_rho,
)


def grid(per_layer, heads=2):
    """A (layers, heads) array whose every head has its layer's value."""
    return np.repeat(np.asarray(per_layer, dtype=float)[:, None], heads, axis=1)


def test_verdict_of():
    assert Verdict.of(True) is Verdict.HOLDS and Verdict.of(False) is Verdict.DIFFERS
    assert Verdict.of(True, testable=False) is Verdict.NOT_TESTABLE
    assert str(Verdict.NOT_TESTABLE) == "not testable"


def test_claim_metrics_dict_and_table():
    claim = Claim(
        "sep_middle_layers",
        "text",
        "Clark et al. 2019",
        "> 0.5",
        "0.62",
        "holds",
        "mean > 0.5",
        {"sep_share": np.float64(0.62)},
        note="n",
    )
    assert claim.verdict is Verdict.HOLDS and type(claim.values["sep_share"]) is float
    assert claim.to_metrics("tour.claims") == {
        "tour.claims.sep_middle_layers.verdict": "holds",
        "tour.claims.sep_middle_layers.sep_share": 0.62,
    }
    assert Claim.from_dict(claim.to_dict()) == claim
    table = claims_table([claim, clark.cls_early_layers(grid([0.5, 0.1]))])
    assert list(table.index) == ["sep_middle_layers", "cls_early_layers"]
    assert list(table.columns) == [
        "paper",
        "claim",
        "paper value",
        "ours",
        "verdict",
        "interval, seeds",
        "rule",
        "note",
    ]
    assert table.loc["cls_early_layers", "verdict"] == "holds"
    with pytest.raises(ValueError):
        Claim("a b", "t", "p", "v", "o", Verdict.HOLDS, "r")


@pytest.mark.parametrize(
    ("family", "ours"),
    [
        ("deberta-v2", "ours: deberta-v2 (deberta-v2, 2 layers x 4 heads)"),
        ("albert", "ours: albert (albert, 3 layers x 2 heads)"),  # one shared layer run 3 times
    ],
)
def test_the_table_names_the_model_and_architecture_our_numbers_come_from(family, ours, family_model_dirs):
    from bertology_utils.core.models import load_model

    table = claims_table([clark.cls_early_layers(grid([0.5, 0.1]))], load_model(family_model_dirs[family]))
    assert list(table.columns) == ["paper", "claim", "paper value", ours, "verdict", "interval, seeds", "rule", "note"]


def test_depth_scaled_layers_and_layer_mean():
    assert depth_scaled_layers(6, 10, 12) == (6, 10)
    assert depth_scaled_layers(6, 10, 6) == (3, 5)
    assert depth_scaled_layers(1, 1, 24) == (1, 2)
    assert depth_scaled_layers(12, 12, 6) == (6, 6)
    assert layer_mean(grid([0, 0, 0.3, 0.6, 0.9, 0]), 6, 10) == (pytest.approx(0.6), "3-5")
    assert math.isnan(layer_mean(grid([np.nan] * 6), 6, 10)[0])


@pytest.mark.parametrize("middle, verdict", [(0.51, Verdict.HOLDS), (0.5, Verdict.DIFFERS), (0.2, Verdict.DIFFERS)])
def test_sep_claim_is_the_mean_over_the_scaled_middle_layers(middle, verdict):
    # 6 layers: the paper's 6-10 of 12 are layers 3-5; a [SEP] peak in layer 6 alone must not count
    share = grid([0.0, 0.0, middle, middle, middle, 0.95])
    claim = clark.sep_middle_layers(share)
    assert claim.verdict is verdict and claim.values["sep_share"] == pytest.approx(middle)


def test_sep_claim_not_testable_without_separators_or_numbers():
    assert clark.sep_middle_layers(grid([0.9] * 6), testable=False).verdict is Verdict.NOT_TESTABLE
    assert clark.sep_middle_layers(grid([np.nan] * 6)).verdict is Verdict.NOT_TESTABLE


def test_early_layers_broad_holds_partly_differs():
    entropy = grid([2.0, 2.0, 1.8, 1.5, 1.2, 1.0])
    assert clark.early_layers_broad(entropy, 2.5).verdict is Verdict.HOLDS  # 2.0 / 2.5 = 0.8
    assert clark.early_layers_broad(entropy, 2.6).verdict is Verdict.PARTLY  # below 0.8, above the last layer
    assert clark.early_layers_broad(grid([1.0, 1, 1, 1, 1, 2.0]), 3.0).verdict is Verdict.DIFFERS
    assert clark.early_layers_broad(entropy, 0.0).verdict is Verdict.NOT_TESTABLE


def test_neighbour_heads_name_the_heads():
    share = np.zeros((6, 2))
    share[0, 1] = 0.8
    claim = clark.neighbour_heads(share, "previous")
    assert claim.verdict is Verdict.HOLDS and "(1-2)" in claim.ours
    share[5, 0] = 0.6  # a late one as well
    assert clark.neighbour_heads(share, "previous").verdict is Verdict.DIFFERS
    assert clark.neighbour_heads(np.zeros((6, 2)), "next").verdict is Verdict.DIFFERS


def test_cls_entropy_within_a_tenth_of_the_papers_ratio():
    paper = 3.89 / np.log(128)
    assert clark.cls_entropy_last_layer(grid([0, (paper + 0.09) * 4]), 4.0).verdict is Verdict.HOLDS
    assert clark.cls_entropy_last_layer(grid([0, (paper + 0.11) * 4]), 4.0).verdict is Verdict.DIFFERS
    assert clark.cls_entropy_last_layer(grid([0, 3.0]), math.nan).verdict is Verdict.NOT_TESTABLE


def gradient_stats(ratio, norm, *, items=40, spread=0.1, seed=0, share=(0.1, 0.6, 0.7, 0.2), heads=2):
    """:class:`GradientStats` of ``items`` items whose gradient per weight to [SEP] (and [CLS]) over ordinary tokens'
    is ``ratio`` per layer and whose gradient norm is ``norm`` per layer, each item's values off by up to
    ``spread`` (relative, uniform); ``share`` the attention to [SEP] and [CLS] per layer."""
    from bertology_utils.interventions.gradients import GradientStats
    from bertology_utils.interventions.objectives import KINDS

    rng = np.random.default_rng(seed)
    ratio, norm = np.asarray(ratio, dtype=float), np.asarray(norm, dtype=float)
    jitter = 1 + spread * rng.uniform(-1, 1, size=(items, len(ratio)))
    weights = np.tile([2.0, 2.0, 4.0, 20.0], (items, 1))  # weights per kind of one head, per item
    per_weight = np.stack([ratio * jitter, ratio * jitter, np.ones_like(jitter), np.ones_like(jitter)], axis=-1)
    summed = per_weight * weights[:, None, :] * heads  # (items, layers, kinds), over the heads
    item_norm = norm * (1 + spread * rng.uniform(-1, 1, size=(items, len(norm))))
    gradient = summed.sum(0) / weights.sum(0) / heads  # (layers, kinds), per weight and head
    attention = {k: grid(share if k in ("sep", "cls") else np.zeros(len(ratio)), heads) for k in KINDS}
    return GradientStats(
        "m",
        "o",
        items,
        0,
        10 * items,
        1.0,
        attention,
        {k: np.repeat(gradient[:, i, None], heads, axis=1) for i, k in enumerate(KINDS)},
        {k: np.zeros((len(ratio), heads)) for k in KINDS},
        {k: int(weights[:, i].sum()) for i, k in enumerate(KINDS)},
        1.0,
        item_norm.mean(0),
        np.repeat(item_norm.mean(0)[:, None], heads, axis=1),
        {"gradient": summed, "weights": weights, "norm": item_norm, "pair": np.zeros(items, dtype=bool)},
    )


def test_gradient_claims():
    stats = gradient_stats([1.2, 0.4, 0.5, 1.1], [4.0, 3.0, 2.0, 1.0])
    small = clark.special_gradient_small(stats, "sep", "mlm")
    assert small.id == "sep_gradient_small.mlm" and small.verdict is Verdict.HOLDS
    high, low = small.values["high_ratio"], small.values["low_ratio"]
    assert high == pytest.approx(0.45, abs=0.02) and low == pytest.approx(1.15, abs=0.05)
    assert small.interval.low < min(1, low) - high < small.interval.high  # the margin's interval
    assert small.interval.method == "bootstrap over 40 sentences" and small.interval.level == 0.95
    shrink = clark.gradients_shrink(stats, "mlm")
    assert shrink.verdict is Verdict.HOLDS and shrink.values["spearman_with_depth"] == -1.0
    assert shrink.interval.low <= -1.0 <= shrink.interval.high  # the interval is of rho, which lies below 0
    assert clark.gradients_shrink(gradient_stats([1] * 4, [1.0, 2, 3, 4])).verdict is Verdict.DIFFERS
    constant = gradient_stats([1] * 4, np.ones(4), spread=0.0)
    assert clark.gradients_shrink(constant).verdict is Verdict.NOT_TESTABLE  # a constant has no rank correlation
    # Above 1 in the layers with most attention: differs; one draw of the items for every claim on the objective.
    assert clark.special_gradient_small(gradient_stats([0.8, 1.3, 1.4, 0.9], np.ones(4))).verdict is Verdict.DIFFERS
    draws = stats.bootstrap(n_resamples=500, seed=3)
    assert clark.special_gradient_small(stats, draws=draws).interval == draws.interval(
        1 - draws["gradient_ratio:sep"][:, [1, 2]].mean(-1)
    )
    claims = clark.objective_claims(stats, clark_ablation_summary([0.3] * 8, [1.0] * 8), "mlm")
    assert [c.verdict for c in claims] == [Verdict.HOLDS] * 4
    assert [c.interval.method for c in claims[:3]] == ["bootstrap over 40 sentences"] * 3


def test_gradient_claims_are_inconclusive_on_a_near_tie_over_few_items():
    tie = gradient_stats([1.2, 0.97, 0.98, 1.1], [1.0, 1.02, 0.99, 0.98], items=5, spread=0.4, seed=1)
    small = clark.special_gradient_small(tie)
    assert small.verdict is Verdict.INCONCLUSIVE and small.interval.low < 0 < small.interval.high
    assert 0 < min(1, small.values["low_ratio"]) - small.values["high_ratio"]  # the point alone would say holds
    shrink = clark.gradients_shrink(tie)
    assert shrink.verdict is Verdict.INCONCLUSIVE and shrink.interval.low < 0 < shrink.interval.high
    assert shrink.values["spearman_with_depth"] < 0


def test_gradient_claims_without_an_interval_are_not_testable():
    few = gradient_stats([1.2, 0.4, 0.5, 1.1], [4.0, 3.0, 2.0, 1.0], items=2)  # too few items to resample
    for claim in (clark.special_gradient_small(few), clark.gradients_shrink(few)):
        assert claim.verdict is Verdict.NOT_TESTABLE and not claim.interval.finite
    bare = SimpleNamespace(  # statistics without per-item sums
        attention={"sep": grid([0.1, 0.6, 0.7, 0.2])},
        gradient_ratio=lambda kind: np.array([1.2, 0.4, 0.5, 1.1]),
        gradient_norm=np.array([4.0, 3.0, 2.0, 1.0]),
    )
    assert clark.special_gradient_small(bare).verdict is Verdict.NOT_TESTABLE
    assert clark.gradients_shrink(bare).verdict is Verdict.NOT_TESTABLE
    nan = gradient_stats([np.nan] * 4, [np.nan] * 4)
    assert clark.special_gradient_small(nan).verdict is Verdict.NOT_TESTABLE
    assert clark.gradients_shrink(nan).verdict is Verdict.NOT_TESTABLE
    single = gradient_stats([0.5], [1.0], share=(0.6,))  # one layer: no other layers, no trend
    assert clark.special_gradient_small(single).verdict is Verdict.HOLDS
    assert clark.gradients_shrink(single).verdict is Verdict.NOT_TESTABLE


def clark_ablation_summary(target, control, layers=3, seed=0):
    """:func:`ablation_summary` of curves whose items change by ``target`` (moving [SEP]'s attention away, mode
    zero) and ``control`` (the matched control), in every one of ``layers`` layers, each layer off by a little."""
    import pandas as pd

    from bertology_utils.interventions.ablations import ablation_summary

    rng = np.random.default_rng(seed)
    rows = []
    for layer in range(1, layers + 1):
        for kind, changes in (("target", target), ("control", control)):
            values = np.asarray(changes, dtype=float) * (1 + 0.01 * rng.uniform(-1, 1, len(changes)))
            row = {"layer": layer, "target": "sep", "intervention": kind, "mode": "zero", "mass": 0.3}
            row |= {"hidden_change": values.mean(), "hidden_change_items": values, "negative_share": 0.0}
            rows.append(row)
    return ablation_summary(pd.DataFrame(rows))


@pytest.mark.parametrize(
    ("target", "control", "verdict"),
    [
        ([0.3, 0.5, 0.4, 0.6, 0.2, 0.4, 0.5, 0.3], [1.0, 1.1, 0.9, 1.2, 0.8, 1.0, 1.1, 0.9], Verdict.HOLDS),
        ([1.3, 1.5, 1.4, 1.6, 1.2, 1.4, 1.5, 1.3], [1.0, 1.1, 0.9, 1.2, 0.8, 1.0, 1.1, 0.9], Verdict.DIFFERS),
        ([0.5, 1.4, 0.9, 1.1], [1.0, 1.0, 1.2, 0.9], Verdict.INCONCLUSIVE),  # a near-tie on four items
        ([0.3, 0.5], [1.0, 1.1], Verdict.NOT_TESTABLE),  # too few items for an interval
    ],
)
def test_attention_removal_decides_by_the_interval_over_items(target, control, verdict):
    summary = clark_ablation_summary(target, control)
    row = summary.iloc[0]
    removal = clark.attention_removal(row, "mlm")
    assert removal.id == "ablation.mlm.sep.zero" and removal.verdict is verdict
    assert removal.values["ratio"] == pytest.approx(np.sum(target) / np.sum(control), rel=0.01)
    if verdict is not Verdict.NOT_TESTABLE:
        assert removal.interval.low < removal.values["ratio"] < removal.interval.high  # the ratio's own interval
        assert (removal.interval.low, removal.interval.high) == (row.ratio_low, row.ratio_high)
        assert removal.interval.method == f"bootstrap over {len(target)} items"


def test_attention_removal_without_an_interval_is_not_testable():
    assert clark.attention_removal(_ROW, "sst2").verdict is Verdict.HOLDS
    bare = {k: v for k, v in _ROW.items() if not k.startswith("ratio_")}  # a summary row without the interval
    assert clark.attention_removal(bare).verdict is Verdict.NOT_TESTABLE
    assert clark.attention_removal({**_ROW, "ratio": math.nan}).verdict is Verdict.NOT_TESTABLE
    assert clark.attention_removal({**_ROW, "ratio_low": 0.9, "ratio_high": 1.1}).verdict is Verdict.INCONCLUSIVE
    assert clark.attention_removal({**_ROW, "ratio_low": 1.0, "ratio_high": 1.2}).verdict is Verdict.DIFFERS


def test_same_layer_claims():
    from bertology_utils.analyses.clustering import SameLayerTest

    null = np.random.default_rng(0).normal(0.0, 2.0, size=1000)  # other - same under relabelling
    close = SameLayerTest(40.0, 50.0, 0.001, 1000, null)
    claim = clark.same_layer_close(close)
    assert claim.verdict is Verdict.HOLDS and claim.values == {"ratio": 0.8, "p_value": 0.001}
    assert claim.interval == permutation_interval(10.0, null, method="permutation, 1000 relabellings of the heads")
    assert clark.same_layer_close(replace(close, null=null * 8)).verdict is Verdict.INCONCLUSIVE  # a wide null
    assert clark.heads_cluster_by_behaviour(SameLayerTest(50.0, 40.0, 1.0, 1000, null)).verdict is Verdict.DIFFERS
    assert clark.same_layer_close(replace(close, null=np.empty(0))).verdict is Verdict.NOT_TESTABLE


def ablation(head_deltas, layer_deltas, loss=None):
    head_deltas = np.asarray(head_deltas, dtype=float)
    return SimpleNamespace(
        head_deltas=head_deltas,
        layer_deltas=np.asarray(layer_deltas, dtype=float),
        base=0.8,
        head_loss_deltas=np.zeros_like(head_deltas) if loss is None else np.asarray(loss),
    )


def test_kovaleva_ablation_claims():
    assert kovaleva.single_heads_dispensable(ablation([[0.0, 0.01], [-0.02, 0.0]], [0, 0])).verdict is Verdict.HOLDS
    assert kovaleva.single_heads_dispensable(ablation([[0.0, -0.01], [-0.02, 0.0]], [0, 0])).verdict is Verdict.PARTLY
    assert kovaleva.single_heads_dispensable(ablation([[-0.1, -0.01], [-0.02, 0.01]], [0, 0])).verdict is Verdict.PARTLY
    assert (
        kovaleva.single_heads_dispensable(ablation([[-0.1, -0.01], [-0.02, -0.01]], [0, 0])).verdict is Verdict.DIFFERS
    )
    assert kovaleva.single_heads_dispensable(ablation(np.zeros((2, 2)), [0, 0])).verdict is Verdict.NOT_TESTABLE
    better = kovaleva.layer_ablation_improves(ablation(np.zeros((2, 2)), [-0.01, 0.03]), task="RTE")
    assert (
        better.verdict is Verdict.HOLDS
        and better.id == "layer_ablation_improves.RTE"
        and "layer 2, +0.030" in better.ours
    )
    assert kovaleva.layer_ablation_improves(ablation(np.zeros((2, 2)), [-0.01, 0.0])).verdict is Verdict.DIFFERS
    for flat in ([0.0, 0.0], [np.nan, np.nan]):
        assert kovaleva.layer_ablation_improves(ablation(np.zeros((2, 2)), flat)).verdict is Verdict.NOT_TESTABLE


def test_last_layers_change_most():
    cos = grid([0.99, 0.98, 0.97, 0.90])
    assert kovaleva.last_layers_change_most(cos).verdict is Verdict.HOLDS
    assert kovaleva.last_layers_change_most(grid([0.99, 0.90, 0.97, 0.91])).verdict is Verdict.DIFFERS
    assert kovaleva.last_layers_change_most(grid([0.99, 0.92, 0.97, 0.91])).verdict is Verdict.PARTLY
    assert kovaleva.last_layers_change_most(grid([0.9])).verdict is Verdict.NOT_TESTABLE


def test_random_init_claim():
    claim = kovaleva.pretrained_beats_random_init
    assert claim({"SST-2": (0.8, 0.6), "RTE": (0.6, 0.55)}).verdict is Verdict.HOLDS
    mixed = claim({"SST-2": (0.8, 0.6), "RTE": (0.6, 0.62)}, majority={"SST-2": 0.5, "RTE": 0.53})
    assert mixed.verdict is Verdict.PARTLY and "majority class 0.530" in mixed.ours
    assert claim({"RTE": (0.5, 0.55)}).verdict is Verdict.DIFFERS
    floor = {"SST-2": 0.509, "RTE": 0.527}
    stuck = claim({"SST-2": (0.8, 0.58), "RTE": (0.527, 0.473)}, majority=floor)
    assert stuck.verdict is Verdict.PARTLY and "learned nothing" in stuck.ours
    assert claim({"RTE": (0.527, 0.473)}, majority=floor).verdict is Verdict.NOT_TESTABLE
    assert claim({"STS-B": (0.4, float("nan"))}).verdict is Verdict.HOLDS
    assert claim({"STS-B": (float("nan"), float("nan"))}).verdict is Verdict.NOT_TESTABLE
    with pytest.raises(ValueError):
        claim({})


def _heads(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-head importance and independent noise."""
    rng = np.random.default_rng(7)
    return rng.gamma(2.0, size=n), rng.normal(size=n)


def _agreeing(n: int) -> tuple[np.ndarray, np.ndarray]:
    importance, noise = _heads(n)
    return importance, importance + 0.3 * noise


def curve(prunable):
    return SimpleNamespace(prunable=lambda keep: prunable, base=0.9)


def test_michel_claims():
    assert michel.heads_prunable(curve(0.4), [curve(0.2), curve(0.3)], task="SST-2").verdict is Verdict.HOLDS
    assert michel.heads_prunable(curve(0.2), [curve(0.3)]).verdict is Verdict.PARTLY  # random order does better
    assert michel.heads_prunable(curve(0.1)).verdict is Verdict.PARTLY
    assert michel.heads_prunable(curve(0.0)).verdict is Verdict.DIFFERS
    assert michel.heads_prunable(curve(1.0)).verdict is Verdict.NOT_TESTABLE  # the metric never dropped
    importance, noise = _heads(48)
    holds = michel.importance_matches_ablation(importance, importance + 0.3 * noise, task="SST-2")
    assert holds.verdict is Verdict.HOLDS and holds.interval.low > 0 and "48 heads" in holds.interval.method
    assert holds.values["spearman"] == pytest.approx(stats.spearmanr(importance, importance + 0.3 * noise)[0])
    assert michel.importance_matches_ablation(importance, -importance + 0.3 * noise).verdict is Verdict.DIFFERS
    weak = michel.importance_matches_ablation(importance[:12], noise[:12])  # 12 unrelated heads
    assert weak.verdict is Verdict.INCONCLUSIVE and weak.interval.low < 0 < weak.interval.high
    assert michel.importance_matches_ablation(importance, np.ones(48)).verdict is Verdict.NOT_TESTABLE


def test_kovaleva_pattern_claims():
    assert kovaleva.heterogeneous_share(0.32).verdict is Verdict.HOLDS
    assert kovaleva.heterogeneous_share(0.33).verdict is Verdict.DIFFERS
    assert kovaleva.heterogeneous_share(math.nan).verdict is Verdict.NOT_TESTABLE
    assert kovaleva.pattern_types_recognisable(0.81).verdict is Verdict.HOLDS
    assert kovaleva.pattern_types_recognisable(0.80).verdict is Verdict.DIFFERS
    assert "cnn macro F1 0.90" in kovaleva.pattern_types_recognisable(0.9, "cnn").ours


def test_the_one_rule_for_a_classifier_that_learned_nothing():
    stuck = "the classifier does not beat its baseline, the majority class (0.441 vs 0.527)"
    assert below_floor(0.441, 0.527) == stuck
    assert below_floor(0.527, 0.527) == stuck.replace("0.441", "0.527")  # at the floor is not above it
    assert below_floor(0.6, 0.5, "its random-init control") == ""
    assert below_floor(0.4, 0.5, "its random-init control").endswith("its random-init control (0.400 vs 0.500)")
    assert below_floor(0.9, 0.5) == "" and below_floor(0.2, None) == "" and below_floor(0.2, math.nan) == ""
    assert below_floor(None, 0.5) == ""  # no score: not a classifier's claim
    assert below_floor(math.nan, None) == "the classifier does not beat its baseline, the majority class (nan)"
    assert below_floor(math.nan, 0.5).endswith("(nan vs 0.500)")  # a constant regressor has no correlation


def _gradient_stats():
    return gradient_stats([1.2, 0.4, 0.5, 1.1], [4.0, 3.0, 2.0, 1.0])


def _faithfulness(rhos: dict):
    import pandas as pd

    rows = [(m, "blank_out", 6, k, float(r)) for m, values in rhos.items() for k, r in enumerate(values)]
    return pd.DataFrame(rows, columns=["method", "reference", "layer", "item", "spearman"])


_RHO = np.random.default_rng(0).uniform(-0.2, 0.4, size=30)
_RELEVANCE = np.arange(12, dtype=float).reshape(3, 4)
_ROW = {
    "target": "sep",
    "mode": "zero",
    "ratio": 0.66,
    "hidden_change (target)": 0.03,
    "hidden_change (control)": 0.05,
    "mean mass moved": 0.04,
    "ratio_low": 0.5,
    "ratio_high": 0.8,
    "ratio_level": 0.95,
    "items": 64,
}
#: every claim a notebook computes on one fine-tuned classifier (02's SST-2 objective, 06, 07, 08), holding here
CLASSIFIER_CLAIMS = {
    "02 sep_gradient_small": lambda: clark.special_gradient_small(_gradient_stats(), "sep", "sst2"),
    "02 cls_gradient_small": lambda: clark.special_gradient_small(_gradient_stats(), "cls", "sst2"),
    "02 gradients_shrink": lambda: clark.gradients_shrink(_gradient_stats(), "sst2"),
    "02 attention_removal": lambda: clark.attention_removal(_ROW, "sst2"),
    "06 last_layers_change_most": lambda: kovaleva.last_layers_change_most(grid([0.99, 0.98, 0.97, 0.90]), "RTE"),
    "06 single_heads_dispensable": lambda: kovaleva.single_heads_dispensable(
        ablation([[0.0, 0.01], [-0.02, 0.0]], [0, 0]), task="RTE"
    ),
    "06 layer_ablation_improves": lambda: kovaleva.layer_ablation_improves(
        ablation(np.zeros((2, 2)), [0.03, -0.01]), task="RTE"
    ),
    "06 heads_prunable": lambda: michel.heads_prunable(curve(0.4), [curve(0.2)], task="RTE"),
    "06 importance_matches_ablation": lambda: michel.importance_matches_ablation(*_agreeing(48), task="RTE"),
    "07 relevance_tracks_confidence": lambda: voita.relevance_tracks_confidence(_RELEVANCE, _RELEVANCE + 1),
    "07 specialised_heads_relevant": lambda: voita.specialised_heads_relevant(_RELEVANCE, _RELEVANCE >= 8),
    "07 l0_prunes_most_heads": lambda: voita.l0_prunes_most_heads([24, 12, 6], [0.9, 0.89, 0.85], 0.9, 24),
    "07 specialised_heads_survive": lambda: voita.specialised_heads_survive(
        voita.SurvivalTest(np.array([0.6]), 0.3, 6.0, 0.01, 1, 2.0, np.repeat([1.0, 2.0, 3.0], [30, 40, 30]))
    ),
    "08 rollout_and_flow_beat_raw": lambda: context_mixing.rollout_and_flow_beat_raw(
        _faithfulness({"attention": _RHO, "rollout": _RHO + 0.2, "flow": _RHO + 0.21}), "blank_out", 6, task="SST-2"
    ),
    "08 value_zeroing_agrees_best": lambda: context_mixing.value_zeroing_agrees_best(
        _faithfulness(
            {
                m: _RHO + 0.3 * (m == "value_zeroing_rollout")
                for m in ("value_zeroing_rollout", "attention", "rollout", "norm_layer")
            }
        ),
        "blank_out",
        6,
    ),
    "08 decompx_agrees_best": lambda: context_mixing.decompx_agrees_best(
        _faithfulness({m: _RHO + 0.3 * (m == "decompx") for m in ("decompx", "globenc", "alti")}), "blank_out", 6
    ),
}


@pytest.mark.parametrize("name", list(CLASSIFIER_CLAIMS))
def test_a_claim_on_a_classifier_that_does_not_beat_its_baseline_is_not_testable(name):
    claim = CLASSIFIER_CLAIMS[name]()
    assert claim.verdict is Verdict.HOLDS
    learned = on_classifier(claim, 0.8, 0.509)
    assert (learned.id, learned.verdict, learned.ours, learned.values) == (
        claim.id,
        claim.verdict,
        claim.ours,
        claim.values,
    )
    assert "does not beat its baseline" in learned.rule
    for score, floor, reason in [
        (0.441, 0.527, "(0.441 vs 0.527)"),  # RTE at the project's budget
        (0.527, 0.527, "(0.527 vs 0.527)"),  # the majority class itself
        (math.nan, 0.5, "(nan vs 0.500)"),
    ]:
        stuck = on_classifier(claim, score, floor)
        assert stuck.verdict is Verdict.NOT_TESTABLE and (stuck.id, stuck.values) == (claim.id, claim.values)
        assert stuck.ours == f"{claim.ours}; the classifier does not beat its baseline, the majority class {reason}"
        assert stuck.seeds == Seeds(0, 1)
    assert learned.seeds == Seeds(1, 1) and "one seed" in learned.uncertainty  # a single-seed verdict says so
    joined = over_seeds([learned, learned])
    assert on_classifier(joined, 0.8, 0.509).seeds == Seeds(2, 2)  # seeds counted already are kept
    assert on_classifier(claim, 0.2, math.nan).verdict is Verdict.HOLDS  # no majority class: a regression task
    assert on_classifier(claim, None, None) == claim  # not a classifier's claim (02's masked-LM objective)


def test_graded_verdicts_and_the_one_sided_group_test():
    from scipy.stats import mannwhitneyu

    from bertology_utils.papers.claims import greater

    assert Verdict.graded(True, True) is Verdict.HOLDS and Verdict.graded(False, True) is Verdict.PARTLY
    assert Verdict.graded(False, False) is Verdict.DIFFERS
    assert Verdict.graded(True, True, testable=False) is Verdict.NOT_TESTABLE
    a, b = [3.0, 4.0, 5.0, np.nan], [1.0, 2.0, 2.5]
    u, p, median_a, median_b = greater(a, b)
    expected = mannwhitneyu([3.0, 4.0, 5.0], b, alternative="greater")
    assert (u, p) == (expected.statistic, expected.pvalue) and (median_a, median_b) == (4.0, 2.0)
    u, p, median_a, median_b = greater([1.0], b)
    assert math.isnan(u) and math.isnan(p) and median_a == 1.0


def test_tagged_ids_and_head_grids():
    from bertology_utils.papers.claims import head_grid, tagged

    assert tagged("heads_prunable", "SST-2") == "heads_prunable.SST-2" and tagged("roles_found", "") == "roles_found"
    grid = head_grid([[1, 2], [3, 4]], "x", (2, 2), dtype=np.float64)
    assert grid.dtype == np.float64 and grid.shape == (2, 2)
    for bad, shape in (([1.0, 2.0], None), ([[1.0, 2.0]], (2, 1))):
        with pytest.raises(ValueError, match="x must be a"):
            head_grid(bad, "x", shape)


def test_verdict_by_interval_and_the_interval_in_metrics_and_records():
    assert Verdict.by_interval(Interval(0.1, 0.4)) is Verdict.HOLDS
    assert Verdict.by_interval(Interval(-0.4, 0.0)) is Verdict.DIFFERS  # at the threshold: not above it
    assert Verdict.by_interval(Interval(-0.1, 0.4)) is Verdict.INCONCLUSIVE
    assert Verdict.by_interval(Interval(0.6, 0.9), threshold=0.5) is Verdict.HOLDS
    assert Verdict.by_interval(Interval(math.nan, 0.4)) is Verdict.NOT_TESTABLE
    assert Verdict.by_interval(Interval(0.02, 0.08), 0.1, below=True) is Verdict.HOLDS
    assert Verdict.by_interval(Interval(0.1, 0.3), 0.1, below=True) is Verdict.DIFFERS  # at the threshold: not under
    assert Verdict.by_interval(Interval(0.05, 0.3), 0.1, below=True) is Verdict.INCONCLUSIVE
    # Verdict.of: the interval decides where there is one, whatever the point estimate says
    assert Verdict.of(True, True, Interval(0.4, 0.6), 0.5) is Verdict.INCONCLUSIVE
    assert Verdict.of(True, False, Interval(0.6, 0.7), 0.5) is Verdict.NOT_TESTABLE
    # a graded rule by two intervals: "partly" is asked only where "holds" differs
    assert Verdict.stepwise(Verdict.HOLDS, Verdict.DIFFERS) is Verdict.HOLDS
    assert Verdict.stepwise(Verdict.INCONCLUSIVE, Verdict.HOLDS) is Verdict.INCONCLUSIVE
    assert Verdict.stepwise(Verdict.DIFFERS, Verdict.HOLDS) is Verdict.PARTLY
    assert Verdict.stepwise(Verdict.DIFFERS, Verdict.INCONCLUSIVE) is Verdict.INCONCLUSIVE
    assert Verdict.stepwise(Verdict.DIFFERS, Verdict.DIFFERS) is Verdict.DIFFERS
    # the parts of a rule, each decided on its own
    H, D, I, N = Verdict.HOLDS, Verdict.DIFFERS, Verdict.INCONCLUSIVE, Verdict.NOT_TESTABLE
    assert [Verdict.all_of(p) for p in ([H, H], [H, I], [I, D], [D, N])] == [H, I, D, N]
    assert [Verdict.any_of(p) for p in ([D, H], [D, I], [D, D], [I, I])] == [H, I, D, I]
    claim = michel.importance_matches_ablation(*_agreeing(30), task="MRPC")
    key = "pruning.claims.importance_matches_ablation.MRPC"
    metrics = claim.to_metrics("pruning.claims")
    assert (metrics[f"{key}.ci_low"], metrics[f"{key}.ci_high"]) == (claim.interval.low, claim.interval.high)
    assert Claim.from_dict(claim.to_dict()) == claim
    assert claim.uncertainty.startswith("95% CI [") and claim.uncertainty.endswith("(bootstrap over 30 heads)")
    assert claims_table([claim]).loc[claim.id, "interval, seeds"] == claim.uncertainty


def test_bootstrap_interval_is_seeded_paired_and_refuses_ragged_samples():
    x, noise = _heads(40)
    first = bootstrap_interval(spearman_rho, x, x + noise, over="heads", seed=3)
    assert first == bootstrap_interval(spearman_rho, x, x + noise, over="heads", seed=3)
    assert first != bootstrap_interval(spearman_rho, x, x + noise, over="heads", seed=4)
    assert first.low < spearman_rho(x, x + noise) < first.high
    narrow = bootstrap_interval(spearman_rho, x, x + noise, over="heads", level=0.5)
    assert first.low < narrow.low < narrow.high < first.high
    # paired: y is a function of x item by item, so every resample keeps rho at 1
    assert bootstrap_interval(spearman_rho, x, 2 * x, over="heads") == Interval(
        1.0, 1.0, 0.95, "bootstrap over 40 heads"
    )
    nan_first = np.r_[np.nan, x[1:]]  # an item missing on one side is dropped from both
    assert bootstrap_interval(spearman_rho, nan_first, x, over="heads").method == "bootstrap over 39 heads"
    assert not bootstrap_interval(spearman_rho, x[:2], x[:2], over="heads").finite
    assert not bootstrap_interval(spearman_rho, x, np.ones(40), over="heads").finite
    with pytest.raises(ValueError, match="one length"):
        bootstrap_interval(spearman_rho, x, x[:-1], over="heads")
    # 4 heads, one side nearly constant: some resamples have no rank correlation at all
    small = ([1.0, 2.0, 3.0, 4.0], [1.0, 1.0, 1.0, 2.0])
    assert not bootstrap_interval(spearman_rho, *small, over="heads").finite
    counted = bootstrap_interval(spearman_rho, *small, over="heads", undefined=0.0)
    assert counted.finite and counted.low <= 0 < counted.high
    # not paired: each group resampled on its own, of its own length
    gap = bootstrap_interval(
        lambda a, b, axis=-1: np.median(a, axis=axis) - np.median(b, axis=axis),
        x[:10] + 5,
        x[10:],
        over=("high", "low heads"),
        paired=False,
    )
    assert gap.method == "bootstrap within 10 high and 30 low heads" and 0 < gap.low < gap.high
    one = bootstrap_interval(np.subtract, x[:1], x[1:], over=("a", "b"), paired=False)
    assert not one.finite and one.method == "bootstrap within 1 a and 39 b"
    with pytest.raises(ValueError, match="name each"):
        bootstrap_interval(np.subtract, x, x, over="heads", paired=False)
    rows = np.stack([x, -x])
    np.testing.assert_allclose(spearman_rho(rows, np.stack([x, x])), [1.0, -1.0])


def _seeded(verdict, rho, low, high, seed_text="s"):
    return Claim(
        "importance_matches_ablation.SST-2",
        "c",
        "Michel et al. 2019",
        "p",
        f"rho {rho} ({seed_text})",
        verdict,
        "rule",
        {"spearman": rho, "kind": "raw"},
        interval=Interval(low, high),
    )


def test_seeds_verdict_is_the_majoritys_where_no_seed_decides_otherwise():
    H, D, P, I, N = (Verdict(v) for v in ("holds", "differs", "partly", "inconclusive", "not testable"))
    assert seeds_verdict([H, H, H]) is H and seeds_verdict([D]) is D
    assert seeds_verdict([H, H, I]) is H and seeds_verdict([I, D, D]) is D and seeds_verdict([P, I, P]) is P
    assert seeds_verdict([H, I]) is I and seeds_verdict([H, I, I]) is I  # no majority
    assert seeds_verdict([H, H, D]) is I and seeds_verdict([H, H, P]) is I  # seeds that decide differently
    assert seeds_verdict([N, H, I]) is I and seeds_verdict([N, N, H]) is H and seeds_verdict([N, N]) is N
    assert seeds_verdict(["holds", "holds", "inconclusive"]) is H


def test_more_seeds_of_a_real_effect_read_holds_more_often_not_less():
    # each seed's interval clears the threshold 80% of the time and straddles it otherwise: a veto by any
    # straddling seed would read this effect inconclusive ever more often as seeds are added
    rng = np.random.default_rng(0)

    def holding(n):
        draws = rng.random((2000, n)) < 0.8
        verdicts = np.where(draws, Verdict.HOLDS, Verdict.INCONCLUSIVE)
        return np.mean([seeds_verdict(row) is Verdict.HOLDS for row in verdicts])

    assert holding(1) < holding(3) < holding(9) and holding(9) > 0.95


def test_over_seeds_joins_the_seeds_verdicts_values_and_intervals():
    same = over_seeds([_seeded("holds", 0.5, 0.2, 0.7), _seeded("holds", 0.3, 0.1, 0.6)])
    assert same.verdict is Verdict.HOLDS and same.seeds == Seeds(2, 2) and str(same.seeds) == "holds in 2 of 2 seeds"
    assert same.values["spearman"] == pytest.approx(0.4) and same.values["spearman_sd"] == pytest.approx(0.1414, 1e-3)
    assert same.values["kind"] == "raw" and (same.interval.low, same.interval.high) == pytest.approx((0.15, 0.65))
    assert "median of 2 seeds" in same.interval.method and same.ours.endswith("holds in 2 of 2 seeds")
    assert SEEDS_RULE in same.rule
    split = over_seeds([_seeded("holds", 0.5, 0.2, 0.7), _seeded("inconclusive", 0.1, -0.1, 0.3)])
    assert split.verdict is Verdict.INCONCLUSIVE and split.seeds == Seeds(1, 2)
    # the median seed's interval reads as the majority does: above 0 where two of three seeds' intervals are
    three = [_seeded("holds", 0.5, 0.2, 0.7), _seeded("inconclusive", 0.1, -0.1, 0.3), _seeded("holds", 0.4, 0.05, 0.8)]
    most = over_seeds(three)
    assert most.verdict is Verdict.HOLDS and most.seeds == Seeds(2, 3)
    assert (most.interval.low, most.interval.high) == (0.05, 0.7)
    assert Verdict.by_interval(most.interval) is most.verdict
    untestable = _seeded("not testable", math.nan, math.nan, math.nan)
    # a seed whose classifier learned nothing has its numbers kept out of the mean and the interval, and is counted
    untestable = replace(untestable, values={"spearman": 0.9, "kind": "raw"}, interval=Interval(0.8, 0.95))
    one_left = over_seeds([untestable, _seeded("differs", -0.4, -0.6, -0.1)])
    assert one_left.verdict is Verdict.DIFFERS and one_left.values["spearman"] == pytest.approx(-0.4)
    assert (one_left.interval.low, one_left.interval.high) == (-0.6, -0.1)
    assert one_left.seeds == Seeds(0, 2, 1) and str(one_left.seeds) == "holds in 0 of 2 seeds (1 not testable)"
    assert Claim.from_dict(one_left.to_dict()).seeds == Seeds(0, 2, 1)
    assert over_seeds([untestable, untestable]).verdict is Verdict.NOT_TESTABLE
    single = over_seeds([_seeded("holds", 0.5, 0.2, 0.7)])
    assert single.seeds == Seeds(1, 1) and str(single.seeds) == "one seed" and "spearman_sd" not in single.values
    assert (
        single.ours == "rho 0.5 (s)"
        and single.to_metrics("pruning.claims")["pruning.claims.importance_matches_ablation.SST-2.seeds"] == 1
    )
    assert Claim.from_dict(same.to_dict()) == same
    with pytest.raises(ValueError, match="one claim"):
        over_seeds([_seeded("holds", 0.5, 0.2, 0.7), replace(_seeded("holds", 0.5, 0.2, 0.7), id="other")])
    with pytest.raises(ValueError, match="at least one"):
        over_seeds([])


def test_claims_over_seeds_joins_each_claim_over_the_seeds_that_made_it():
    other = replace(_seeded("differs", -0.2, -0.5, -0.1), id="other")
    joined = claims_over_seeds(
        [[_seeded("holds", 0.5, 0.2, 0.7), other], [_seeded("inconclusive", 0.1, -0.1, 0.3)], []]
    )
    assert [c.id for c in joined] == ["importance_matches_ablation.SST-2", "other"]
    assert joined[0].verdict is Verdict.INCONCLUSIVE and joined[0].seeds == Seeds(1, 2)
    assert joined[1] == other  # made once: as it was, with no seed count where it had none
    assert claims_over_seeds([]) == []


def test_claims_by_task_joins_each_tasks_seeds_in_the_first_seeds_task_order():
    made = []

    def make(task, value):
        made.append((task, value))
        return [replace(_seeded("holds" if value > 0 else "differs", value, value - 0.1, value + 0.1), id=task)]

    joined = claims_by_task({"RTE": 0.5, "SST-2": -0.4}, {("SST-2", 1): -0.3, ("RTE", 1): 0.6, ("RTE", 2): 0.4}, make)
    assert made == [("RTE", 0.5), ("RTE", 0.6), ("RTE", 0.4), ("SST-2", -0.4), ("SST-2", -0.3)]
    assert [c.id for c in joined] == ["RTE", "SST-2"]
    assert joined[0].seeds == Seeds(3, 3) and joined[1].seeds == Seeds(0, 2)


def test_a_permutation_interval_is_the_excess_over_the_nulls_central_range():
    null = np.arange(101, dtype=float)  # 0..100: the central 90% is [5, 95]
    interval = permutation_interval(120.0, null, level=0.9, method="m")
    assert (interval.low, interval.high, interval.level, interval.method) == (25.0, 115.0, 0.9, "m")
    assert Verdict.by_interval(permutation_interval(50.0, null)) is Verdict.INCONCLUSIVE
    assert not permutation_interval(math.nan, null).finite and not permutation_interval(1.0, []).finite


def draws_of(per_layer_draws, heads=2, name="sep", over="40 sentences", **more) -> Draws:
    """Draws whose every head of a layer has that layer's value, one row of ``per_layer_draws`` per draw."""
    values = np.repeat(np.asarray(per_layer_draws, dtype=float)[:, :, None], heads, axis=2)
    return Draws({name: values, **more}, over)


def test_draws_give_a_percentile_interval_and_none_when_too_many_draws_are_undefined():
    draws = Draws({}, "40 sentences")
    interval = draws.interval(np.linspace(0, 1, 101))
    assert (interval.low, interval.high) == (pytest.approx(0.025), pytest.approx(0.975))
    assert interval.method == "bootstrap over 40 sentences"
    assert draws.interval(np.r_[np.linspace(0, 1, 99), np.nan]).finite  # one resample without rows: left out
    assert not draws.interval(np.r_[np.zeros(90), np.full(10, np.nan)]).finite
    assert layer_mean(np.stack([grid([0, 0, 0.3, 0.6, 0.9, 0]), grid([0.0] * 6)]), 6, 10, draws=True)[0] == (
        pytest.approx([0.6, 0.0])
    )


@pytest.mark.parametrize(
    "spread, verdict", [(0.05, Verdict.HOLDS), (0.2, Verdict.INCONCLUSIVE), (-0.05, Verdict.DIFFERS)]
)
def test_surface_claims_decide_by_the_interval_of_their_draws(spread, verdict):
    """The [SEP] claim with a point estimate of 0.55: draws over [0.5 + spread, 0.6 + spread] hold, draws reaching
    under 0.5 straddle its threshold, draws wholly under it differ."""
    share = grid([0.0, 0.0, 0.55, 0.55, 0.55, 0.95])
    if spread < 0:
        share = grid([0.0, 0.0, 0.45, 0.45, 0.45, 0.95])
    middle = np.linspace(0.5 + spread, 0.6 + spread, 200) if spread >= 0 else np.linspace(0.4, 0.5 + spread, 200)
    if spread == 0.2:
        middle = np.linspace(0.35, 0.75, 200)
    per_layer = np.stack([np.zeros(200), np.zeros(200), middle, middle, middle, np.full(200, 0.95)], axis=1)
    claim = clark.sep_middle_layers(share, draws=draws_of(per_layer))
    assert claim.verdict is verdict and claim.interval.low <= claim.values["sep_share"] + 0.2
    assert claim.interval.method == "bootstrap over 40 sentences" and "straddles" in claim.rule
    without = clark.sep_middle_layers(share)
    assert without.interval is None and without.verdict is Verdict.of(claim.values["sep_share"] > 0.5)


def test_the_other_surface_claims_read_their_own_statistics_off_the_draws():
    flat = np.ones((100, 6))
    # [CLS] clearly higher early: holds; the median self share straddles 0.1: inconclusive
    cls = clark.cls_early_layers(
        grid([0.5] * 3 + [0.1] * 3), draws=draws_of(flat * np.array([0.5] * 3 + [0.1] * 3), name="cls")
    )
    assert cls.verdict is Verdict.HOLDS and cls.interval.low == pytest.approx(0.5 - (0.5 + 3 * 0.1) / 4)
    selfish = draws_of(np.linspace(0.05, 0.15, 100)[:, None] * flat, name="self")
    assert clark.current_token(grid([0.09] * 6), draws=selfish).verdict is Verdict.INCONCLUSIVE
    # a previous-token head in layer 1 at 0.6-0.7 in every draw, no later head above 0.2: holds
    previous = np.zeros((100, 6, 2))
    previous[:, 0, 1] = np.linspace(0.6, 0.7, 100)
    previous[:, 4, 0] = 0.2
    heads = clark.neighbour_heads(previous[0], "previous", draws=Draws({"previous": previous}, "9 sentences"))
    assert heads.verdict is Verdict.HOLDS and heads.interval.low == pytest.approx(0.1, abs=0.01)
    previous[:, 4, 0] = np.linspace(0.4, 0.6, 100)  # a later head near 0.5 in some draws
    assert clark.neighbour_heads(previous[0], "previous", draws=Draws({"previous": previous}, "9")).verdict is (
        Verdict.INCONCLUSIVE
    )
    # entropy: near-uniform early layers hold; a ratio that straddles 0.8 is inconclusive
    entropy = flat * [2.0, 2.0, 1.8, 1.5, 1.2, 1.0]
    near = draws_of(entropy, name="entropy", uniform_entropy=np.full(100, 2.4))
    assert clark.early_layers_broad(grid(entropy[0]), 2.4, draws=near).verdict is Verdict.HOLDS
    wide = draws_of(entropy, name="entropy", uniform_entropy=np.linspace(2.2, 2.8, 100))
    assert clark.early_layers_broad(grid(entropy[0]), 2.5, draws=wide).verdict is Verdict.INCONCLUSIVE
    low = draws_of(entropy, name="entropy", uniform_entropy=np.full(100, 4.0))  # 0.5 of uniform, above the last
    partly = clark.early_layers_broad(grid(entropy[0]), 4.0, draws=low)
    assert partly.verdict is Verdict.PARTLY and partly.interval.low == pytest.approx(1.0)
    # [CLS] entropy: inside the paper's band in every draw holds; drifting out of it is inconclusive
    paper = 3.89 / np.log(128)
    inside = draws_of(flat * paper * 4, name="cls_entropy", uniform_cls_entropy=np.full(100, 4.0))
    assert clark.cls_entropy_last_layer(grid([0] * 5 + [paper * 4]), 4.0, draws=inside).verdict is Verdict.HOLDS
    drift = draws_of(
        np.linspace(paper, paper + 0.2, 100)[:, None] * 4 * flat,
        name="cls_entropy",
        uniform_cls_entropy=np.full(100, 4.0),
    )
    assert clark.cls_entropy_last_layer(grid([0] * 5 + [paper * 4]), 4.0, draws=drift).verdict is (Verdict.INCONCLUSIVE)


def test_kovaleva_pattern_claims_decide_by_their_intervals():
    pairs = np.r_[np.full(10, 0.2), np.full(10, 0.4)]  # a share of 0.3 whose interval straddles 0.32
    share = kovaleva.heterogeneous_share(0.3, per_pair=pairs)
    assert share.verdict is Verdict.INCONCLUSIVE and share.interval.method == "bootstrap over 20 MRPC pairs"
    constant = kovaleva.heterogeneous_share(0.2, per_pair=np.full(40, 0.2))
    assert constant.verdict is Verdict.HOLDS and (constant.interval.low, constant.interval.high) == (0.2, 0.2)
    assert kovaleva.heterogeneous_share(math.nan, per_pair=[]).verdict is Verdict.NOT_TESTABLE
    assert kovaleva.heterogeneous_share(0.21, per_pair=np.r_[np.full(50, 0.2), np.full(50, 0.22)]).verdict is (
        Verdict.HOLDS
    )
    f1 = kovaleva.pattern_types_recognisable(0.83, "features", interval=Interval(0.78, 0.88))
    assert f1.verdict is Verdict.INCONCLUSIVE and f1.interval == Interval(0.78, 0.88)


def test_a_claims_case_reads_as_people_name_it():
    from bertology_utils.papers.claims import claim_case

    assert claim_case("heads_prunable.SST-2") == "SST-2"
    assert claim_case("table1.auxpass") == "auxpass"
    assert claim_case("ablation.sst2.cls.zero") == "SST-2 classifier · [CLS] · zero"
    assert claim_case("decompx_best.blank_out.layer6.SST-2") == "blank-out · layer 6 · SST-2"
    assert claim_case("beat_raw.input_x_gradient.layer_12.RTE") == "input × gradient · layer 12 · RTE"
    assert claim_case("layered.layer6x") == "layer6x", "only a whole part names a layer"
    assert claim_case("positional") == ""
