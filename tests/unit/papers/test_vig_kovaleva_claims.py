"""Vig's query·key dimension claim and Kovaleva et al.'s Figure 5 claims, on hand-made numbers."""

import math

import numpy as np
import pandas as pd
import pytest

from bertology_utils.papers import kovaleva, vig
from bertology_utils.papers.claims import Claim, Draws, Verdict, claims_table

# --------------------------------------------------------------------------- Vig


def heads(sep_dims, next_dims, other_dims=()):
    """(1, n) arrays: dims, sep share, next share for sep-heads, then next-word heads, then neither."""
    dims = np.array([list(sep_dims) + list(next_dims) + list(other_dims)], dtype=float)
    n_sep, n_next, n_other = len(sep_dims), len(next_dims), len(other_dims)
    sep = np.array([[0.8] * n_sep + [0.1] * n_next + [0.2] * n_other])
    nxt = np.array([[0.05] * n_sep + [0.7] * n_next + [0.2] * n_other])
    return dims, sep, nxt


@pytest.mark.parametrize(
    "sep_dims, next_dims, verdict",
    [
        # 6 vs 6 heads apart: beyond what relabelling them gives (one-sided Mann-Whitney p = 1/924)
        ([0.1, 0.15, 0.12, 0.2, 0.11, 0.13], [0.6, 0.7, 0.8, 0.5, 0.65, 0.55], Verdict.HOLDS),
        ([0.1, 0.15, 0.12, 0.2], [0.6, 0.7, 0.8, 0.5], Verdict.INCONCLUSIVE),  # 4 vs 4: 3% of relabellings as far
        ([0.1, 0.2], [0.5, 0.6], Verdict.INCONCLUSIVE),  # in order, but 2 vs 2 heads never decide it
        ([0.6, 0.7, 0.8, 0.5, 0.65, 0.55], [0.1, 0.15, 0.12, 0.2, 0.11, 0.13], Verdict.DIFFERS),
        ([0.1, 0.2, 0.3], [0.9], Verdict.NOT_TESTABLE),
    ],
)
def test_qk_dimensions_by_pattern_verdicts(sep_dims, next_dims, verdict):
    dims, sep, nxt = heads(sep_dims, next_dims, other_dims=[0.99, 0.01])
    claim = vig.qk_dimensions_by_pattern(dims, sep, nxt)
    assert isinstance(claim, Claim) and claim.verdict is verdict and claim.paper == vig.PAPER
    assert claim.values["sep_broad_heads"] == len(sep_dims) and claim.values["next_word_heads"] == len(next_dims)
    if verdict is Verdict.NOT_TESTABLE:
        assert "1 next-word heads" in claim.ours and math.isnan(claim.values["p_value"])
    else:
        assert 0 < claim.values["p_value"] <= 1
    if verdict is Verdict.HOLDS:
        assert claim.values["p_value"] == pytest.approx(1 / 924) and claim.interval.low > 0
        assert "10000 relabellings" in claim.interval.method and claim == vig.qk_dimensions_by_pattern(dims, sep, nxt)
    if verdict is Verdict.INCONCLUSIVE:
        assert claim.interval.low <= 0 < claim.interval.high
    assert claim.values["median_dims_sep_broad"] == pytest.approx(np.median(sep_dims))
    assert "MPNet" in claim.note and "[CLS]/[SEP] queries left out" in claim.note
    assert claims_table([claim]).loc["qk_dimensions_by_pattern", "verdict"] == verdict.value


def test_groups_from_cls_entropy_and_flags():
    dims = np.array([[0.1, 0.1, 0.2, 0.6, 0.7, 0.9]])
    sep = np.array([[0.3, 0.0, 0.0, 0.0, 0.0, 0.6]])
    cls = np.array([[0.3, 0.0, 0.0, 0.0, 0.0, 0.0]])
    nxt = np.array([[0.0, 0.0, 0.1, 0.8, 0.9, 0.6]])  # the last head meets both definitions
    entropy = np.array([[1.0, 2.9, 1.0, 0.5, 0.5, 0.5]])
    labels = vig.pattern_groups(sep, nxt, entropy, cls_share=cls, uniform_entropy=3.0)
    assert labels.tolist() == [[vig.SEP_BROAD, vig.SEP_BROAD, "", vig.NEXT_WORD, vig.NEXT_WORD, ""]]
    # without [CLS] the first head is in no group; the broad flags stand in for entropy
    flags = np.array([[False, True, False, False, False, False]])
    assert vig.pattern_groups(sep, nxt, flags).tolist()[0][:2] == ["", vig.SEP_BROAD]
    assert vig.pattern_groups(sep, nxt, entropy, uniform_entropy=3.0, broad_ratio=0.99).tolist()[0][1] == ""
    claim = vig.qk_dimensions_by_pattern(dims, sep, nxt, entropy, cls_share=cls, uniform_entropy=3.0)
    assert claim.values["heads_in_both"] == 1
    assert (claim.values["sep_broad_heads"], claim.values["next_word_heads"]) == (2, 2)
    assert claim.verdict is Verdict.INCONCLUSIVE
    assert "[SEP]+[CLS] share >= 0.5" in claim.rule and "entropy >= 0.9" in claim.rule
    # heads without queries (NaN) are left out of their group
    dims[0, 0] = np.nan
    assert vig.qk_dimensions_by_pattern(dims, sep, nxt, entropy, cls_share=cls, uniform_entropy=3.0).verdict is (
        Verdict.NOT_TESTABLE
    )
    with pytest.raises(ValueError, match="uniform_entropy"):
        vig.pattern_groups(sep, nxt, entropy)
    with pytest.raises(ValueError, match="layers, heads"):
        vig.qk_dimensions_by_pattern(dims[0], sep, nxt)
    with pytest.raises(ValueError, match="shape"):
        vig.qk_dimensions_by_pattern(dims[:, :3], sep, nxt)


def test_plot_query_key_dimensions():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dims, sep, nxt = heads([0.1, 0.2], [0.6, 0.7], [0.4, 0.5])
    grid, s, n = dims.reshape(2, 3), sep.reshape(2, 3), nxt.reshape(2, 3)
    fig = vig.plot_query_key_dimensions(grid, vig.pattern_groups(s, n), title="t")
    try:
        assert len(fig.axes) == 3  # grid, the groups, the colour bar
        assert [t.get_text().split("\n")[0] for t in fig.axes[1].get_xticklabels()] == [
            vig.SEP_BROAD,
            vig.NEXT_WORD,
            "other",
        ]
    finally:
        plt.close(fig)
    plt.close(vig.plot_query_key_dimensions(grid))


# --------------------------------------------------------------------------- Kovaleva, Figure 5


def frame(cls, sep, punct=None):
    """Per-layer shares indexed by layer from 1, as ``SurfaceStats.per_layer()`` gives (extra columns too)."""
    data = {"cls": cls, "sep": sep, "punct": punct if punct is not None else [0.05] * len(cls), "next": 0.1}
    return pd.DataFrame(data, index=pd.RangeIndex(1, len(cls) + 1, name="layer"))


RISING = frame([0.5, 0.4, 0.3, 0.2, 0.1, 0.1], [0.1, 0.1, 0.2, 0.3, 0.5, 0.6])  # [CLS] early, [SEP] late
FLAT_CLS = frame([0.2] * 6, [0.1, 0.1, 0.2, 0.3, 0.5, 0.6])  # only the [SEP] half
REVERSED = frame([0.1, 0.1, 0.2, 0.3, 0.4, 0.5], [0.6, 0.5, 0.3, 0.2, 0.1, 0.1])


def test_layer_thirds_follow_the_depth():
    assert kovaleva.layer_thirds(12) == ((1, 4), (9, 12))
    assert kovaleva.layer_thirds(6) == ((1, 2), (5, 6))
    assert kovaleva.layer_thirds(3) == ((1, 1), (3, 3))
    with pytest.raises(ValueError):
        kovaleva.layer_thirds(2)


@pytest.mark.parametrize(
    "shares, verdict",
    [
        ({"SST-2": RISING, "MRPC": RISING}, Verdict.HOLDS),
        ({"SST-2": RISING, "MRPC": REVERSED}, Verdict.PARTLY),  # holds for some task
        ({"SST-2": FLAT_CLS, "MRPC": REVERSED}, Verdict.PARTLY),  # only one half, somewhere
        ({"SST-2": REVERSED, "MRPC": REVERSED}, Verdict.DIFFERS),
        ({}, Verdict.NOT_TESTABLE),
        ({"SST-2": frame([0.5, 0.1], [0.1, 0.5])}, Verdict.NOT_TESTABLE),  # fewer than 3 layers
    ],
)
def test_cls_early_sep_late(shares, verdict):
    claim = kovaleva.cls_early_sep_late(shares)
    assert claim.verdict is verdict and claim.id == "cls_early_sep_late"
    assert claim.values["tasks"] == len(shares)
    if verdict in (Verdict.HOLDS, Verdict.PARTLY, Verdict.DIFFERS):
        # thirds of 6 layers: 1-2 and 5-6
        first, last = claim.values["sst2.cls_first"], claim.values["sst2.cls_last"]
        expected = shares["SST-2"]["cls"]
        assert first == pytest.approx(expected.loc[1:2].mean()) and last == pytest.approx(expected.loc[5:6].mean())
        assert claim.values["sst2.punct_first"] == pytest.approx(0.05)
        assert "layers 1-2 vs 5-6 of 6" in claim.ours
    assert all(part.replace("_", "").replace(".", "").isalnum() for part in claim.values)


def test_cls_early_sep_late_records_the_pretrained_model_and_reads_any_depth():
    pre = frame([0.3] * 6, [0.3] * 6)
    claim = kovaleva.cls_early_sep_late({"SST-2": RISING, "QQP": RISING}, pre)
    assert claim.verdict is Verdict.HOLDS and claim.values["qqp.pretrained_sep_last"] == pytest.approx(0.3)
    assert "pre-trained" in claim.ours and "pre-trained" in claim.note
    per_task = kovaleva.cls_early_sep_late({"SST-2": RISING}, {"SST-2": pre})
    assert per_task.values["sst2.pretrained_cls_first"] == pytest.approx(0.3)
    # 12 layers in a shuffled index: thirds 1-4 and 9-12, layers sorted first
    twelve = frame(list(np.linspace(0.6, 0.05, 12)), list(np.linspace(0.05, 0.6, 12))).iloc[::-1]
    claim = kovaleva.cls_early_sep_late({"RTE": twelve})
    assert claim.verdict is Verdict.HOLDS and "layers 1-4 vs 9-12 of 12" in claim.ours
    nan = frame([np.nan] * 6, [0.1] * 6)
    assert kovaleva.cls_early_sep_late({"RTE": nan}).verdict is Verdict.NOT_TESTABLE
    with pytest.raises(ValueError, match="lack the columns"):
        kovaleva.cls_early_sep_late({"RTE": RISING.drop(columns="sep")})


@pytest.mark.parametrize(
    "sep_means, verdict",
    [
        ({"SST-2": 0.5, "MRPC": 0.3, "QQP": 0.2}, Verdict.HOLDS),
        ({"SST-2": 0.3, "MRPC": 0.5}, Verdict.DIFFERS),
        ({"MRPC": 0.5, "QQP": 0.3}, Verdict.NOT_TESTABLE),  # no SST-2
        ({"SST-2": 0.5}, Verdict.NOT_TESTABLE),  # one task
    ],
)
def test_sst2_largest_sep(sep_means, verdict):
    shares = {
        task: frame([0.1] * 4, [mean - 0.05, mean - 0.05, mean + 0.05, mean + 0.05]) for task, mean in sep_means.items()
    }
    claim = kovaleva.sst2_largest_sep(shares)
    assert claim.verdict is verdict and claim.id == "sst2_largest_sep"
    for task, mean in sep_means.items():
        key = task.lower().replace("-", "")
        assert claim.values[f"sep_mean.{key}"] == pytest.approx(mean)
    if "SST-2" in sep_means:
        assert claim.values["sst2_rank"] == sorted(sep_means.values(), reverse=True).index(sep_means["SST-2"]) + 1
    else:
        assert "SST-2 is not among the tasks" in claim.ours


def draws_around(shares: pd.DataFrame, spread: float, n: int = 200, heads: int = 2) -> Draws:
    """Draws of a task's statistics: every layer's share moved by the same amount, from -spread to +spread."""
    shift = np.linspace(-spread, spread, n)[:, None, None]
    return Draws(
        {k: shares[k].to_numpy()[None, :, None] + shift + np.zeros((1, 1, heads)) for k in ("cls", "sep")},
        f"{n} examples",
    )


def test_figure5_claims_decide_by_the_intervals_of_their_draws():
    """With draws, the margins' intervals decide: shares that move together keep every margin (holds); [SEP] shares
    of SST-2 and MRPC 0.02 apart, each drawn 0.1 either way, cannot rank them (inconclusive)."""
    rising = {"SST-2": RISING, "MRPC": RISING}
    steady = kovaleva.cls_early_sep_late(rising, draws={t: draws_around(f, 0.05) for t, f in rising.items()})
    assert steady.verdict is Verdict.HOLDS and steady.interval.low == pytest.approx(0.35, abs=0.01)
    assert "each task's examples (200 examples, 200 examples)" in steady.interval.method
    # margins differ per draw: SST-2's [CLS] rises late in some draws
    wobbly = {"SST-2": draws_around(RISING, 0.05), "MRPC": draws_around(RISING, 0.05)}
    wobbly["SST-2"].values["cls"][:100, -2:] += 0.5
    assert kovaleva.cls_early_sep_late(rising, draws=wobbly).verdict is Verdict.INCONCLUSIVE
    close = {"SST-2": frame([0.1] * 4, [0.31] * 4), "MRPC": frame([0.1] * 4, [0.29] * 4)}
    assert kovaleva.sst2_largest_sep(close).verdict is Verdict.HOLDS  # by the point estimates
    near = {"SST-2": draws_around(close["SST-2"], 0.1), "MRPC": draws_around(close["MRPC"], 0.1)}
    near["MRPC"] = Draws({k: v[::-1] for k, v in near["MRPC"].values.items()}, "200 examples")  # not in step
    claim = kovaleva.sst2_largest_sep(close, draws=near)
    assert claim.verdict is Verdict.INCONCLUSIVE and claim.interval.low < 0.02 < claim.interval.high


def test_sst2_largest_sep_records_the_pretrained_model():
    shares = {"sst2": frame([0.1] * 3, [0.6] * 3), "CoLA": frame([0.1] * 3, [0.2] * 3)}
    claim = kovaleva.sst2_largest_sep(shares, frame([0.1] * 3, [0.4] * 3))
    assert claim.verdict is Verdict.HOLDS
    assert claim.values["pretrained_sep_mean.cola"] == pytest.approx(0.4)
    assert claim.values["sep_mean.sst2"] == pytest.approx(0.6)


#: RTE's classifier at the project's budget: below always predicting the majority class
SCORES, MAJORITY = {"SST-2": 0.811, "MRPC": 0.75, "RTE": 0.441}, {"SST-2": 0.509, "MRPC": 0.684, "RTE": 0.527}
STUCK = "the classifier does not beat its baseline, the majority class (0.441 vs 0.527)"


def test_fig5_claims_do_not_count_a_task_whose_classifier_learned_nothing():
    shares = {"SST-2": RISING, "RTE": REVERSED}
    assert kovaleva.cls_early_sep_late(shares).verdict is Verdict.PARTLY  # RTE counted: no scores given
    claim = kovaleva.cls_early_sep_late(shares, scores=SCORES, majority=MAJORITY)
    assert claim.verdict is Verdict.HOLDS and claim.values["tasks"] == 1 and claim.values["tasks_both"] == 1
    assert claim.values["rte.cls_first"] == pytest.approx(0.1)  # still recorded
    assert f"(not counted: {STUCK})" in claim.ours and "does not beat its baseline" in claim.rule
    learned = kovaleva.cls_early_sep_late(shares, scores={**SCORES, "RTE": 0.6}, majority=MAJORITY)
    assert learned.verdict is Verdict.PARTLY and learned.values == kovaleva.cls_early_sep_late(shares).values
    nothing = kovaleva.cls_early_sep_late({"RTE": RISING}, scores=SCORES, majority=MAJORITY)
    assert nothing.verdict is Verdict.NOT_TESTABLE and STUCK in nothing.ours and nothing.values["tasks"] == 0

    def sep(mean):
        return frame([0.1] * 4, [mean] * 4)

    shares = {"SST-2": sep(0.5), "MRPC": sep(0.3), "RTE": sep(0.6)}
    assert kovaleva.sst2_largest_sep(shares).verdict is Verdict.DIFFERS  # RTE ranked first
    claim = kovaleva.sst2_largest_sep(shares, scores=SCORES, majority=MAJORITY)
    assert claim.verdict is Verdict.HOLDS and claim.values["sst2_rank"] == 1 and claim.values["tasks"] == 2
    assert claim.values["sep_mean.rte"] == pytest.approx(0.6) and f"RTE 0.600 not ranked: {STUCK}" in claim.ours
    learned = kovaleva.sst2_largest_sep(shares, scores={**SCORES, "RTE": 0.6}, majority=MAJORITY)
    assert learned.verdict is Verdict.DIFFERS and learned.values == kovaleva.sst2_largest_sep(shares).values
    no_sst2 = kovaleva.sst2_largest_sep(shares, scores={**SCORES, "SST-2": 0.5}, majority=MAJORITY)
    assert no_sst2.verdict is Verdict.NOT_TESTABLE and "SST-2 is not among the tasks ranked" in no_sst2.ours
    assert "sst2_rank" not in no_sst2.values


def test_plot_special_token_shares_draws_each_task_fine_tuned_and_pretrained():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layers = pd.Index([1, 2, 3], name="layer")
    frame = lambda v: pd.DataFrame({"cls": [v, 0, 0], "sep": [0, v, 0], "punct": [0, 0, v]}, index=layers)
    fine_tuned, pretrained = {"SST-2": frame(0.5), "RTE": frame(0.3)}, {"SST-2": frame(0.1), "RTE": frame(0.2)}
    fig = kovaleva.plot_special_token_shares(fine_tuned, pretrained)
    assert [ax.get_title() for ax in fig.axes] == [
        "attention on [CLS]",
        "attention on [SEP]",
        "attention on punctuation",
    ]
    lines = fig.axes[1].get_lines()
    assert len(lines) == 4  # per task: fine-tuned, then pre-trained dotted, in the task's colour
    assert lines[0].get_ydata().tolist() == [0, 0.5, 0] and lines[1].get_linestyle() == ":"
    assert lines[2].get_color() == lines[3].get_color() != lines[0].get_color()
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["SST-2", "RTE"]  # one legend, for the figure
    plt.close("all")


def test_plot_head_ablation_shows_heads_and_layers_with_symmetric_scales():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bertology_utils.interventions.pruning import AblationResult

    deltas = np.array([[0.0, -0.2, 0.1], [0.05, 0.0, 0.0]])
    loss = np.array([[0.001, 0.004, -0.002], [0.0, 0.0, 0.003]])
    result = AblationResult("t", "accuracy", 0.8, deltas, np.array([0.1, -0.3]), 0.5, loss, np.array([0.0, 0.01]))
    fig = kovaleva.plot_head_ablation(result, task="RTE")
    titled = {ax.get_title(): ax for ax in fig.axes if ax.get_title()}
    heads_metric = titled["RTE: one head disabled, metric (base 0.800)"]
    heads_loss = titled["RTE: one head disabled, dev loss (base 0.500)"]
    layers_metric, layers_loss = [ax for ax in fig.axes if ax.get_title() == "layer disabled"]
    assert [t.get_text() for t in layers_loss.get_xticklabels()] == ["all"]
    np.testing.assert_allclose(np.reshape(heads_loss.collections[0].get_array(), (2, 3)), 1e3 * loss)  # in thousandths
    assert heads_metric.collections[0].get_clim() == pytest.approx((-0.2, 0.2))
    assert layers_metric.collections[0].get_clim() == pytest.approx((-0.3, 0.3))
    plt.close("all")


def test_plot_init_comparison_puts_the_two_inits_side_by_side():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = pd.DataFrame(
        {"pre-trained": [0.9, 0.6], "random init": [0.7, 0.5], "majority class": [0.5, 0.52]}, index=["SST-2", "RTE"]
    )
    ax = kovaleva.plot_init_comparison(table).axes[0]
    pretrained, random = ax.containers
    assert [b.get_height() for b in pretrained] == [0.9, 0.6] and [b.get_height() for b in random] == [0.7, 0.5]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["SST-2", "RTE"]
    np.testing.assert_allclose(ax.collections[0].get_offsets()[:, 1], [0.5, 0.52])
    plt.close("all")
