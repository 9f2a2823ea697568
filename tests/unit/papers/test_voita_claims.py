"""Voita et al.'s claims: each verdict branch on hand-made grids, and the survival permutation test
against the exact hypergeometric tail."""

import math

import numpy as np
import pytest
from scipy import stats

from bertology_utils.papers import voita
from bertology_utils.papers.claims import Verdict, on_classifier


def test_rank_agreement_is_spearman_over_finite_heads():
    a = np.array([[1.0, 2.0, 3.0], [4.0, np.nan, 6.0]])
    b = np.array([[1.0, 3.0, 2.0], [4.0, 9.0, 5.0]])
    rho, p, n = voita.rank_agreement(a, b)
    expected = stats.spearmanr([1, 2, 3, 4, 6], [1, 3, 2, 4, 5])
    assert n == 5
    assert rho == pytest.approx(expected.statistic) and p == pytest.approx(expected.pvalue)
    assert math.isnan(voita.rank_agreement(np.ones((2, 3)), b)[0])


def test_relevance_tracks_confidence_verdicts():
    rng = np.random.default_rng(0)
    relevance = rng.random((4, 6))
    assert voita.relevance_tracks_confidence(relevance, relevance + 1).verdict is Verdict.HOLDS
    assert voita.relevance_tracks_confidence(relevance, -relevance).verdict is Verdict.DIFFERS
    assert voita.relevance_tracks_confidence(relevance, np.zeros((4, 6))).verdict is Verdict.NOT_TESTABLE
    floor = on_classifier(voita.relevance_tracks_confidence(relevance, relevance), 0.5, 0.5)
    assert floor.verdict is Verdict.NOT_TESTABLE and "majority" in floor.ours
    both = on_classifier(voita.relevance_tracks_confidence(relevance, relevance + 1, gap=1.17), 0.5, 0.5)
    assert "not converged" in both.ours and both.ours.endswith("the majority class (0.500 vs 0.500)")
    converged = voita.relevance_tracks_confidence(relevance, relevance + 1, gap=voita.MAX_IG_GAP)
    assert converged.verdict is Verdict.HOLDS
    for gap in (1.17, math.nan):  # unconverged (MPNet-base at 8 nodes: 1.17), or not a number
        unconverged = voita.relevance_tracks_confidence(relevance, relevance + 1, gap=gap)
        assert unconverged.verdict is Verdict.NOT_TESTABLE and "not converged" in unconverged.ours
    # four heads ranked 2 1 4 3: rho 0.6 (once "partly"), but four heads cannot place it above 0
    few = voita.relevance_tracks_confidence([[1.0, 2.0], [3.0, 4.0]], [[2.0, 1.0], [4.0, 3.0]])
    assert few.values["spearman"] == pytest.approx(0.6) and few.verdict is Verdict.INCONCLUSIVE
    assert few.interval.low <= 0 < few.interval.high


def test_relevance_tracks_confidence_decides_by_its_bootstrap_interval_over_heads():
    rng = np.random.default_rng(7)
    relevance = rng.dirichlet(np.ones(12), size=6)  # 6 layers x 12 heads, each layer summing to 1 as relevance does
    noise = rng.normal(0, 0.03, size=relevance.shape)
    strong = voita.relevance_tracks_confidence(relevance, 0.3 + relevance + noise, alpha=0.1, task="SST-2")
    assert strong.verdict is Verdict.HOLDS and 0 < strong.interval.low < strong.values["spearman"]
    assert strong.interval.level == pytest.approx(0.9) and strong.interval.method == "bootstrap over 72 heads"
    assert "90% bootstrap interval" in strong.rule and str(strong.interval) in strong.ours
    assert strong.to_metrics("head_roles.claims")["head_roles.claims.relevance_tracks_confidence.SST-2.ci_low"] == (
        strong.interval.low
    )
    reversed_ = voita.relevance_tracks_confidence(relevance, 0.3 - relevance + noise)
    assert reversed_.verdict is Verdict.DIFFERS and reversed_.interval.high <= 0
    small = rng.random((3, 4))  # 12 heads, a weak relation drowned in noise
    weak = voita.relevance_tracks_confidence(small, small + rng.normal(0, 0.5, size=small.shape))
    assert weak.verdict is Verdict.INCONCLUSIVE and weak.interval.low <= 0 < weak.interval.high
    noisy = small + rng.normal(0, 0.5, size=small.shape)
    seeded = voita.relevance_tracks_confidence(small, noisy, seed=3)
    assert seeded == voita.relevance_tracks_confidence(small, noisy, seed=3)  # the same seed, the same interval
    assert seeded.interval != voita.relevance_tracks_confidence(small, noisy, seed=4).interval
    nan_heads = np.full((2, 2), np.nan)
    none = voita.relevance_tracks_confidence(nan_heads, nan_heads)
    assert none.verdict is Verdict.NOT_TESTABLE and none.values["heads"] == 0 and not none.interval.finite


def test_roles_found():
    grid = np.zeros((2, 3), dtype=bool)
    one = grid.copy()
    one[1, 2] = True
    assert voita.roles_found({"positional": one, "syntactic": one, "rare": one}).verdict is Verdict.HOLDS
    claim = voita.roles_found({"positional": one, "syntactic": grid, "rare": grid})
    assert claim.verdict is Verdict.PARTLY and claim.values == {
        "positional_heads": 1,
        "syntactic_heads": 0,
        "rare_heads": 0,
    }
    untestable_syntax = voita.roles_found(
        {"positional": one, "syntactic": grid, "rare": one}, testable={"syntactic": False}
    )
    assert untestable_syntax.verdict is Verdict.HOLDS and "not testable" in untestable_syntax.ours
    assert voita.roles_found({"positional": grid, "syntactic": grid, "rare": grid}).verdict is Verdict.DIFFERS
    assert voita.roles_found({"syntactic": grid}, testable={"syntactic": False}).verdict is Verdict.NOT_TESTABLE


def test_specialised_heads_relevant():
    relevance = np.arange(12, dtype=float).reshape(3, 4)
    top = relevance >= 8
    bottom = relevance < 4
    holds = voita.specialised_heads_relevant(relevance, top)
    assert holds.verdict is Verdict.HOLDS and holds.interval.low > 0
    assert holds.interval.method == "bootstrap within 4 specialised and 8 other heads"
    differs = voita.specialised_heads_relevant(relevance, bottom)
    assert differs.verdict is Verdict.DIFFERS and differs.interval.high <= 0
    unconverged = voita.specialised_heads_relevant(relevance, top, gap=0.2)
    assert unconverged.verdict is Verdict.NOT_TESTABLE and "not converged" in unconverged.ours
    single = np.zeros((3, 4), dtype=bool)
    single[0, 0] = True
    lone = voita.specialised_heads_relevant(relevance, single)
    assert lone.verdict is Verdict.NOT_TESTABLE and not lone.interval.finite
    with pytest.raises(ValueError):
        voita.specialised_heads_relevant(relevance, top[:2])


def test_specialised_heads_relevant_decides_by_a_stratified_bootstrap_of_the_median_difference():
    rng = np.random.default_rng(3)
    relevance = rng.dirichlet(np.ones(12), size=6)  # 72 heads
    specialised = np.zeros((6, 12), dtype=bool)
    specialised.flat[rng.choice(72, size=10, replace=False)] = True
    lifted = np.where(specialised, relevance + 0.1, relevance)
    holds = voita.specialised_heads_relevant(lifted, specialised, alpha=0.1, seed=4)
    difference = holds.values["median_specialised"] - holds.values["median_other"]
    assert holds.verdict is Verdict.HOLDS and 0 < holds.interval.low <= difference <= holds.interval.high
    assert holds.interval.level == pytest.approx(0.9)
    assert holds.interval.method == "bootstrap within 10 specialised and 62 other heads"
    assert "90% stratified bootstrap interval" in holds.rule and "median" in holds.rule
    lowered = np.where(specialised, relevance * 0.1, relevance)
    assert voita.specialised_heads_relevant(lowered, specialised).verdict is Verdict.DIFFERS
    # the roles drawn at random: the same distribution on both sides, the interval straddles 0
    same = voita.specialised_heads_relevant(relevance, specialised)
    assert same.verdict is Verdict.INCONCLUSIVE and same.interval.low <= 0 < same.interval.high
    assert same == voita.specialised_heads_relevant(relevance, specialised)  # seeded: the same every run
    assert same.interval != voita.specialised_heads_relevant(relevance, specialised, seed=1).interval


def test_l0_prunes_most_heads():
    claim = voita.l0_prunes_most_heads([24, 12, 6, 2], [0.90, 0.89, 0.85, 0.60], 0.90, 24, keep=0.9)
    assert claim.values["prunable"] == pytest.approx(1 - 6 / 24) and claim.verdict is Verdict.HOLDS
    partly = voita.l0_prunes_most_heads([24, 20, 6], [0.90, 0.88, 0.5], 0.90, 24, keep=0.9)
    assert partly.values["prunable"] == pytest.approx(4 / 24) and partly.verdict is Verdict.PARTLY
    assert voita.l0_prunes_most_heads([24, 24], [0.9, 0.9], 0.9, 24).verdict is Verdict.NOT_TESTABLE
    assert voita.l0_prunes_most_heads([24, 12], [0.9, 0.1], 0.9, 24).verdict is Verdict.DIFFERS
    stuck = on_classifier(voita.l0_prunes_most_heads([24, 6], [0.5, 0.5], 0.5, 24), 0.5, 0.5)
    assert stuck.verdict is Verdict.NOT_TESTABLE


def test_survival_with_one_lambda_is_the_hypergeometric_tail():
    special = np.zeros((3, 4), dtype=bool)
    special.flat[[0, 1, 2, 3]] = True  # 4 of 12 heads
    kept = np.zeros((3, 4), dtype=bool)
    kept.flat[[0, 1, 2, 7, 9]] = True  # 5 kept, 3 of them specialised
    test = voita.specialised_survival(kept[None], special, n_permutations=40_000, seed=1)
    exact = stats.hypergeom(12, 4, 5).sf(3 - 1)  # P(X >= 3)
    assert test.statistic == 3 and test.lambdas == 1
    assert test.overall == pytest.approx(4 / 12) and test.shares[0] == pytest.approx(3 / 5)
    assert test.p_value == pytest.approx(exact, abs=0.01)
    assert test.null_mean == pytest.approx(5 * 4 / 12, abs=0.05)
    assert str(test) == (
        f"3 specialised heads kept over 1 lambdas vs {test.null_mean:.1f} expected at random "
        f"(permutation p = {test.p_value:.2g}); their share among the kept heads per lambda: 60%, of all heads 33%"
    )
    none = voita.specialised_survival(np.ones((1, 3, 4), bool), special)
    assert str(none).startswith("not testable: 0 lambdas") and "nan" not in str(none)


def test_survival_ignores_lambdas_that_keep_all_or_none_and_is_seeded():
    special = np.array([[True, False, False], [False, True, False]])
    masks = np.stack([np.ones((2, 3), bool), special | np.array([[0, 0, 1], [0, 0, 0]], bool), np.zeros((2, 3), bool)])
    first = voita.specialised_survival(masks, special, n_permutations=500, seed=3)
    again = voita.specialised_survival(masks, special, n_permutations=500, seed=3)
    assert first.lambdas == 1 and first.statistic == 2 and first.p_value == again.p_value
    assert math.isnan(first.shares[2]) and first.shares[0] == pytest.approx(2 / 6)
    claim = voita.specialised_heads_survive(first)
    assert claim.values["kept_specialised"] == 2
    # kept minus expected at random, against the null's central 95%: at most 2 of 2 can be kept, so never beyond it
    assert claim.interval.low == pytest.approx(2 - np.quantile(first.null, 0.975))
    assert claim.interval.high == pytest.approx(2 - np.quantile(first.null, 0.025))
    assert claim.verdict is Verdict.INCONCLUSIVE and claim.interval.low <= 0 < claim.interval.high


def test_survival_decides_by_its_permutation_interval():
    special = np.zeros((4, 6), dtype=bool)
    special[:2] = True  # 12 of 24 heads
    kept = np.zeros((3, 4, 6), dtype=bool)
    kept[0, :2] = True  # the specialised heads kept, and in the next lambdas some of them
    kept[1, 0] = True
    kept[2, 0, :3] = True
    holds = voita.specialised_heads_survive(voita.specialised_survival(kept, special, n_permutations=2000))
    assert holds.verdict is Verdict.HOLDS and holds.interval.low > 0
    differs = voita.specialised_heads_survive(voita.specialised_survival(kept, ~special, n_permutations=2000))
    assert differs.verdict is Verdict.DIFFERS and differs.interval.high <= 0


@pytest.mark.parametrize(
    "masks",
    [np.ones((2, 2, 3), bool), np.zeros((1, 2, 3), bool)],
    ids=["every head kept", "none kept"],
)
def test_survival_not_testable_for_a_degenerate_sweep(masks):
    special = np.array([[True, False, False], [False, True, False]])
    test = voita.specialised_survival(masks, special, n_permutations=100)
    assert test.lambdas == 0 and math.isnan(test.p_value)
    assert voita.specialised_heads_survive(test).verdict is Verdict.NOT_TESTABLE


def test_survival_differs_when_specialised_heads_go_first():
    special = np.zeros((4, 6), dtype=bool)
    special[0] = True
    masks = np.stack([~special, ~special & (np.arange(6) < 3)[None]])
    test = voita.specialised_survival(masks, special, n_permutations=2000)
    assert test.statistic == 0 and test.p_value == pytest.approx(1.0)
    assert voita.specialised_heads_survive(test).verdict is Verdict.DIFFERS


def test_survival_table_counts_kept_heads_per_lambda_and_role():
    masks = np.array([[[1, 1], [1, 1]], [[1, 0], [0, 1]], [[0, 0], [0, 0]]], dtype=bool)
    roles = {"positional": np.array([[1, 0], [0, 0]], bool), "rare": np.array([[0, 0], [0, 1]], bool)}
    specialised = roles["positional"] | roles["rare"]
    table = voita.survival_table([0.0, 0.1, 1.0], masks, roles, specialised)
    assert list(table.index) == ["λ=0", "λ=0.1", "λ=1", "all heads"]
    assert list(table.columns) == ["kept", "positional", "rare", "specialised kept"]
    assert table.loc["λ=0.1"].tolist() == [2, 1, 1, 2] and table.loc["λ=1"].tolist() == [0, 0, 0, 0]
    assert table.loc["all heads"].tolist() == [4, 1, 1, 2]


def test_plot_relevance_draws_the_grid_and_the_specialised_heads_apart():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    relevance = np.array([[0.1, 0.9], [0.3, 0.7]])
    confidence = np.array([[0.2, 0.8], [0.4, 0.6]])
    specialised = np.array([[False, True], [False, False]])
    fig = voita.plot_relevance(relevance, confidence, specialised, task="SST-2")
    grid, scatter = fig.axes[0], fig.axes[1]
    assert grid.get_title().startswith("SST-2: head relevance")
    assert scatter.get_title() == "Spearman ρ = 1.00 (p = 0)"
    other, special = (c.get_offsets() for c in scatter.collections)
    np.testing.assert_array_equal(special, [[0.8, 0.9]])
    np.testing.assert_array_equal(other, [[0.2, 0.1], [0.4, 0.3], [0.6, 0.7]])
    with pytest.raises(ValueError):
        voita.plot_relevance(relevance, confidence[:1], specialised)
    plt.close("all")
