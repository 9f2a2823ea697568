"""The context-mixing papers' claims: verdicts from synthetic numbers whose answer is known."""

import numpy as np
import pandas as pd

from bertology_utils.papers import context_mixing
from bertology_utils.papers.claims import Verdict


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


def test_rollout_and_flow_ordering_is_paired_by_item():
    rng = np.random.default_rng(0)
    raw = rng.uniform(-0.2, 0.4, size=30)
    rollout = raw + rng.uniform(0.1, 0.3, size=30)
    holds = context_mixing.rollout_and_flow_beat_raw(
        table({"attention": raw, "rollout": rollout, "flow": rollout + 0.01}), "blank_out", 6
    )
    assert holds.verdict == Verdict.HOLDS and holds.values["n_items"] == 30
    flow_worse = context_mixing.rollout_and_flow_beat_raw(
        table({"attention": raw, "rollout": rollout, "flow": rollout - 0.3}), "blank_out", 6
    )
    assert flow_worse.verdict == Verdict.PARTLY
    reversed_ = context_mixing.rollout_and_flow_beat_raw(
        table({"attention": rollout, "rollout": raw, "flow": raw - 0.3}), "blank_out", 6
    )
    assert reversed_.verdict == Verdict.DIFFERS
    few = context_mixing.rollout_and_flow_beat_raw(
        table({"attention": raw[:5], "rollout": rollout[:5], "flow": rollout[:5]}), "blank_out", 6
    )
    assert few.verdict == Verdict.NOT_TESTABLE
    other_layer = context_mixing.rollout_and_flow_beat_raw(
        table({"attention": raw, "rollout": rollout, "flow": rollout}), "blank_out", 3
    )
    assert other_layer.verdict == Verdict.NOT_TESTABLE  # no rows at that layer


def test_value_zeroing_against_its_rivals():
    rng = np.random.default_rng(1)
    base = rng.uniform(0, 0.3, size=20)
    rhos = {"value_zeroing_rollout": base + 0.3, "attention": base, "rollout": base + 0.05, "norm_layer": base + 0.4}
    claim = context_mixing.value_zeroing_agrees_best(table(rhos), "blank_out", 6)
    assert claim.verdict == Verdict.PARTLY and claim.values["beaten"] == 2
    rhos["norm_layer"] = base
    assert context_mixing.value_zeroing_agrees_best(table(rhos), "blank_out", 6).verdict == Verdict.HOLDS
