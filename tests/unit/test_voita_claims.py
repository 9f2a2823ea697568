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
    partly = voita.relevance_tracks_confidence([[1.0, 2.0], [3.0, 4.0]], [[2.0, 1.0], [4.0, 3.0]])
    assert partly.values["spearman"] == pytest.approx(0.6) and partly.verdict is Verdict.PARTLY


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
    assert voita.specialised_heads_relevant(relevance, top).verdict is Verdict.HOLDS
    assert voita.specialised_heads_relevant(relevance, bottom).verdict is Verdict.DIFFERS
    unconverged = voita.specialised_heads_relevant(relevance, top, gap=0.2)
    assert unconverged.verdict is Verdict.NOT_TESTABLE and "not converged" in unconverged.ours
    single = np.zeros((3, 4), dtype=bool)
    single[0, 0] = True
    assert voita.specialised_heads_relevant(relevance, single).verdict is Verdict.NOT_TESTABLE
    with pytest.raises(ValueError):
        voita.specialised_heads_relevant(relevance, top[:2])


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


def test_survival_ignores_lambdas_that_keep_all_or_none_and_is_seeded():
    special = np.array([[True, False, False], [False, True, False]])
    masks = np.stack([np.ones((2, 3), bool), special | np.array([[0, 0, 1], [0, 0, 0]], bool), np.zeros((2, 3), bool)])
    first = voita.specialised_survival(masks, special, n_permutations=500, seed=3)
    again = voita.specialised_survival(masks, special, n_permutations=500, seed=3)
    assert first.lambdas == 1 and first.statistic == 2 and first.p_value == again.p_value
    assert math.isnan(first.shares[2]) and first.shares[0] == pytest.approx(2 / 6)
    claim = voita.specialised_heads_survive(first)
    assert claim.verdict in (Verdict.HOLDS, Verdict.PARTLY) and claim.values["kept_specialised"] == 2


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
