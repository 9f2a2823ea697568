"""The context-mixing papers' claims: verdicts from synthetic numbers whose answer is known."""

import numpy as np
import pandas as pd
import pytest

from bertology_utils.papers import context_mixing
from bertology_utils.papers.claims import Draws, Verdict


def table(rhos: dict, reference="blank_out", layer=6):
    """Faithfulness rows from method -> per-item rho."""
    rows = [(m, reference, layer, k, float(r)) for m, values in rhos.items() for k, r in enumerate(values)]
    return pd.DataFrame(rows, columns=["method", "reference", "layer", "item", "spearman"])


def test_norm_weighting_discounting_special_tokens():
    raw = {"cls": [0.1, 0.45, 0.48], "sep": [0.05, 0.02, 0.02], "punct": [0.1, 0.07, 0.07]}
    low = {"cls": [0.04, 0.09, 0.09], "sep": [0.03, 0.03, 0.02], "punct": [0.1, 0.12, 0.1]}
    claim = context_mixing.norm_discounts_special_tokens(raw, low)
    assert claim.verdict == Verdict.HOLDS and claim.values["relative_drop"] > 0.5
    slight = {k: [0.95 * v for v in values] for k, values in raw.items()}
    assert context_mixing.norm_discounts_special_tokens(raw, slight).verdict == Verdict.PARTLY
    higher = {k: [1.2 * v for v in values] for k, values in raw.items()}
    assert context_mixing.norm_discounts_special_tokens(raw, higher).verdict == Verdict.DIFFERS
    none = {k: [0.0, 0.001, 0.0] for k in raw}
    assert context_mixing.norm_discounts_special_tokens(none, none).verdict == Verdict.NOT_TESTABLE


def test_norm_weighting_decides_by_the_interval_of_the_drop_over_sentences():
    """Draws of (draws, layers, heads) shares: a drop of 0.2-0.3 in every draw holds; a drop drawn from 0.1 to 0.3
    straddles the 20% line (inconclusive); from -0.05 to 0.15 it is neither partly nor differs (inconclusive)."""
    raw = {"cls": [0.5, 0.5, 0.5]}

    def draws(per_draw):
        return Draws(
            {"cls": np.broadcast_to(np.asarray(per_draw)[:, None, None], (len(per_draw), 3, 2))}, "50 sentences"
        )

    def claim(low, high):
        mean = (low + high) / 2
        return context_mixing.norm_discounts_special_tokens(
            raw,
            {"cls": [0.5 * (1 - mean)] * 3},
            draws=(draws(np.full(100, 0.5)), draws(0.5 * (1 - np.linspace(low, high, 100)))),
        )

    holds = claim(0.21, 0.3)
    assert holds.verdict is Verdict.HOLDS and 0.21 <= holds.interval.low < holds.interval.high <= 0.3
    assert holds.interval.method == "bootstrap over 50 sentences"
    assert claim(0.1, 0.3).verdict is Verdict.INCONCLUSIVE
    assert claim(0.05, 0.15).verdict is Verdict.PARTLY
    assert claim(-0.05, 0.15).verdict is Verdict.INCONCLUSIVE
    assert claim(-0.2, -0.1).verdict is Verdict.DIFFERS
    with pytest.raises(ValueError, match="same items"):
        context_mixing.norm_discounts_special_tokens(raw, raw, draws=(draws(np.ones(3)), Draws({}, "3 sentences")))


def test_rollout_and_flow_ordering_is_paired_by_item():
    rng = np.random.default_rng(0)
    raw = rng.uniform(-0.2, 0.4, size=30)
    rollout = raw + rng.uniform(0.1, 0.3, size=30)
    holds = context_mixing.rollout_and_flow_beat_raw(
        table({"attention": raw, "rollout": rollout, "flow": rollout + 0.01}), "blank_out", 6, alpha=0.1
    )
    assert holds.verdict == Verdict.HOLDS and holds.values["n_items"] == 30
    # the claim's interval is rollout - raw's, over items, around the mean difference
    gain = float(np.mean(rollout - raw))
    assert 0 < holds.interval.low < gain < holds.interval.high and holds.interval.level == pytest.approx(0.9)
    assert holds.interval.method == "bootstrap over 30 items" and "90% bootstrap interval" in holds.rule
    assert holds.values["flow_vs_rollout_low"] == pytest.approx(0.01)  # a constant difference: a point interval
    assert holds.values["flow_vs_rollout_high"] == pytest.approx(0.01)
    flow_worse = context_mixing.rollout_and_flow_beat_raw(
        table({"attention": raw, "rollout": rollout, "flow": rollout - 0.3}), "blank_out", 6
    )
    assert flow_worse.verdict == Verdict.DIFFERS and flow_worse.values["flow_vs_rollout_high"] < 0  # half fails
    # flow as good as rollout, up to item noise: not clearly below, so the claim holds
    flow_noisy = rollout + rng.normal(0, 0.1, size=30)
    assert (
        context_mixing.rollout_and_flow_beat_raw(
            table({"attention": raw, "rollout": rollout, "flow": flow_noisy}), "blank_out", 6
        ).verdict
        == Verdict.HOLDS
    )
    reversed_ = context_mixing.rollout_and_flow_beat_raw(
        table({"attention": rollout, "rollout": raw, "flow": raw - 0.3}), "blank_out", 6
    )
    assert reversed_.verdict == Verdict.DIFFERS and reversed_.interval.high <= 0
    # a small gain drowned in item noise on a dozen items: the interval straddles 0
    noisy = raw[:12] + 0.02 + rng.normal(0, 0.3, size=12)
    weak = context_mixing.rollout_and_flow_beat_raw(
        table({"attention": raw[:12], "rollout": noisy, "flow": noisy}), "blank_out", 6
    )
    assert weak.verdict == Verdict.INCONCLUSIVE and weak.interval.low <= 0 < weak.interval.high
    few = context_mixing.rollout_and_flow_beat_raw(
        table({"attention": raw[:5], "rollout": rollout[:5], "flow": rollout[:5]}), "blank_out", 6
    )
    assert few.verdict == Verdict.NOT_TESTABLE and not few.interval.finite
    other_layer = context_mixing.rollout_and_flow_beat_raw(
        table({"attention": raw, "rollout": rollout, "flow": rollout}), "blank_out", 3
    )
    assert other_layer.verdict == Verdict.NOT_TESTABLE  # no rows at that layer
    seeded = table({"attention": raw[:12], "rollout": noisy, "flow": noisy})
    first = context_mixing.rollout_and_flow_beat_raw(seeded, "blank_out", 6, seed=5)
    assert first == context_mixing.rollout_and_flow_beat_raw(seeded, "blank_out", 6, seed=5)
    assert first.interval != context_mixing.rollout_and_flow_beat_raw(seeded, "blank_out", 6, seed=6).interval


def test_value_zeroing_against_its_rivals():
    rng = np.random.default_rng(1)
    base = rng.uniform(0, 0.3, size=20)
    rhos = {"value_zeroing_rollout": base + 0.3, "attention": base, "rollout": base + 0.05, "norm_layer": base + 0.4}
    # norm-based maps clearly better: the margin over the closest rival lies below 0
    claim = context_mixing.value_zeroing_agrees_best(table(rhos), "blank_out", 6)
    assert claim.verdict == Verdict.DIFFERS and claim.values["beaten"] == 2
    assert claim.interval.high <= 0 and claim.interval.low == pytest.approx(-0.1)
    rhos["norm_layer"] = base
    best = context_mixing.value_zeroing_agrees_best(table(rhos), "blank_out", 6)
    assert best.verdict == Verdict.HOLDS and best.values["beaten"] == 3
    assert best.interval.low == pytest.approx(0.25)  # the closest rival, rollout, 0.05 behind
    assert "smallest mean rho difference" in best.rule and best.interval.method == "bootstrap over 20 items"


def test_value_zeroing_with_noisy_items_is_inconclusive_and_few_items_not_testable():
    rng = np.random.default_rng(2)
    base = rng.uniform(0, 0.3, size=40)
    rhos = {
        "value_zeroing_rollout": base + 0.2 + rng.normal(0, 0.1, size=40),
        "attention": base + rng.normal(0, 0.1, size=40),
        "rollout": base + 0.2 + rng.normal(0, 0.3, size=40),  # as good on average, noisier per item
        "norm_layer": base + rng.normal(0, 0.1, size=40),
    }
    claim = context_mixing.value_zeroing_agrees_best(table(rhos), "blank_out", 6, alpha=0.1)
    assert claim.verdict == Verdict.INCONCLUSIVE and claim.interval.low <= 0 < claim.interval.high
    assert claim.values["beaten"] == 2 and claim.interval.level == pytest.approx(0.9)
    few = context_mixing.value_zeroing_agrees_best(table({m: v[:5] for m, v in rhos.items()}), "blank_out", 6)
    assert few.verdict == Verdict.NOT_TESTABLE and few.values["beaten"] == 0 and not few.interval.finite


def test_decompx_against_globenc_and_alti_and_not_testable_without_its_maps():
    rng = np.random.default_rng(3)
    base = rng.uniform(0, 0.3, size=20)
    rhos = {"decompx": base + 0.2, "globenc": base + 0.1, "alti": base, "attention": base + 0.5}
    claim = context_mixing.decompx_agrees_best(table(rhos), "blank_out", 6, task="SST-2")
    assert claim.id == "decompx_best.blank_out.layer6.SST-2" and claim.paper == context_mixing.MODARRESSI
    assert claim.verdict == Verdict.HOLDS and claim.values["beaten"] == 2  # raw attention is no rival here
    assert claim.interval.low == pytest.approx(0.1) and "globenc, alti" in claim.rule
    rhos["globenc"] = base + 0.25
    assert context_mixing.decompx_agrees_best(table(rhos), "blank_out", 6).verdict == Verdict.DIFFERS
    refused = table({m: v for m, v in rhos.items() if m != "decompx"})  # ModernBERT: no DecompX maps
    assert context_mixing.decompx_agrees_best(refused, "blank_out", 6).verdict == Verdict.NOT_TESTABLE


def test_faithfulness_claims_are_made_on_every_seed_and_joined():
    base = np.random.default_rng(2).uniform(0, 0.3, size=20)
    rhos = {"attention": base, "rollout": base + 0.2, "flow": base + 0.2, "value_zeroing_rollout": base + 0.3}
    rhos["norm_layer"] = base
    rhos.update(decompx=base + 0.1, globenc=base, alti=base)
    both = pd.concat([table(rhos), table(rhos, reference="input_x_gradient")])
    tables = {0: both, 1: both}
    claims = context_mixing.faithfulness_claims_by_seed(tables, {0: 0.9, 1: 0.5}, 0.5, 6, task="SST-2")
    assert [c.id for c in claims] == [
        "rollout_flow_beat_raw.blank_out.layer6.SST-2",
        "rollout_flow_beat_raw.input_x_gradient.layer6.SST-2",
        "value_zeroing_best.blank_out.layer6.SST-2",
        "decompx_best.blank_out.layer6.SST-2",
    ]
    assert all(c.seeds.n == 2 and c.seeds.not_testable == 1 for c in claims)
    assert claims[0].verdict == Verdict.HOLDS
