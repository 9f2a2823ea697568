import math
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats

from bertology_utils.papers import clark, context_mixing, kovaleva, michel, voita
from bertology_utils.papers.claims import (
    Claim,
    Interval,
    Seeds,
    Verdict,
    below_floor,
    bootstrap_interval,
    claims_over_seeds,
    claims_table,
    depth_scaled_layers,
    layer_mean,
    on_classifier,
    over_seeds,
    permutation_interval,
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


def test_gradient_claims():
    stats = SimpleNamespace(
        attention={"sep": grid([0.1, 0.6, 0.7, 0.2])},
        gradient_ratio=lambda kind: np.array([1.2, 0.4, 0.5, 1.1]),
        gradient_norm=np.array([4.0, 3.0, 2.0, 1.0]),
    )
    small = clark.special_gradient_small(stats, "sep", "mlm")
    assert small.id == "sep_gradient_small.mlm" and small.verdict is Verdict.HOLDS
    assert small.values == {"high_ratio": pytest.approx(0.45), "low_ratio": pytest.approx(1.15)}
    assert clark.gradients_shrink(stats, "mlm").verdict is Verdict.HOLDS
    stats.gradient_norm = np.ones(4)
    assert clark.gradients_shrink(stats).verdict is Verdict.NOT_TESTABLE  # a constant has no rank correlation
    row = dict(_ROW)
    removal = clark.attention_removal(row, "sst2")
    assert removal.id == "ablation.sst2.sep.zero" and removal.verdict is Verdict.HOLDS
    assert clark.attention_removal({**row, "ratio": 1.0}).verdict is Verdict.DIFFERS


def test_probe_claims():
    test = {
        name: SimpleNamespace(uas=uas)
        for name, uas in {
            "Right-branching": 0.30,
            "Attn": 0.25,
            "Attn + words": 0.45,
            "Distances + words": 0.45,
        }.items()
    }
    claims = {c.id: c for c in clark.table3_claims(test)}
    assert claims["table3.attn_beats_right_branching"].verdict is Verdict.DIFFERS
    assert claims["table3.attn_words_beats_distances"].verdict is Verdict.DIFFERS  # a tie is no win
    assert claims["table3.words_help_attn"].values["test_margin"] == pytest.approx(20.0)
    assert claims["table3.trained_beats_random_init"].verdict is Verdict.NOT_TESTABLE  # no random-init row
    assert claims["table3.trained_beats_random_init"].ours == "not testable: no Random-init Attn + words row"


def test_same_layer_claims():
    close = SimpleNamespace(same_mean=40.0, other_mean=50.0, ratio=0.8, p_value=0.049, testable=True)
    assert clark.same_layer_close(close).verdict is Verdict.HOLDS
    assert clark.same_layer_close(SimpleNamespace(**{**vars(close), "p_value": 0.05})).verdict is Verdict.DIFFERS
    assert clark.heads_cluster_by_behaviour(SimpleNamespace(**{**vars(close), "ratio": 1.1})).verdict is Verdict.DIFFERS


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
    return SimpleNamespace(
        attention={"sep": grid([0.1, 0.6, 0.7, 0.2]), "cls": grid([0.1, 0.6, 0.7, 0.2])},
        gradient_ratio=lambda kind: np.array([1.2, 0.4, 0.5, 1.1]),
        gradient_norm=np.array([4.0, 3.0, 2.0, 1.0]),
    )


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


def test_over_seeds_keeps_a_common_verdict_and_is_inconclusive_otherwise():
    same = over_seeds([_seeded("holds", 0.5, 0.2, 0.7), _seeded("holds", 0.3, 0.1, 0.6)])
    assert same.verdict is Verdict.HOLDS and same.seeds == Seeds(2, 2) and str(same.seeds) == "holds in 2 of 2 seeds"
    assert same.values["spearman"] == pytest.approx(0.4) and same.values["spearman_sd"] == pytest.approx(0.1414, 1e-3)
    assert same.values["kind"] == "raw" and (same.interval.low, same.interval.high) == (0.1, 0.7)
    assert "envelope of 2 seeds" in same.interval.method and same.ours.endswith("holds in 2 of 2 seeds")
    split = over_seeds([_seeded("holds", 0.5, 0.2, 0.7), _seeded("inconclusive", 0.1, -0.1, 0.3)])
    assert split.verdict is Verdict.INCONCLUSIVE and split.seeds == Seeds(1, 2)
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


def test_a_permutation_interval_is_the_excess_over_the_nulls_central_range():
    null = np.arange(101, dtype=float)  # 0..100: the central 90% is [5, 95]
    interval = permutation_interval(120.0, null, level=0.9, method="m")
    assert (interval.low, interval.high, interval.level, interval.method) == (25.0, 115.0, 0.9, "m")
    assert Verdict.by_interval(permutation_interval(50.0, null)) is Verdict.INCONCLUSIVE
    assert not permutation_interval(math.nan, null).finite and not permutation_interval(1.0, []).finite
