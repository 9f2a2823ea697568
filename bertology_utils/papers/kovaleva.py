"""Kovaleva et al. (2019), *Revealing the Dark Secrets of BERT*: each claim, checked against our numbers.

One function per claim, each returning a :class:`~bertology_utils.papers.claims.Claim`; paper values
are from ../shared/reference/papers.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from bertology_utils.papers.claims import Claim, Verdict, below_floor

if TYPE_CHECKING:
    from bertology_utils.interventions.pruning import AblationResult

__all__ = [
    "PAPER",
    "heterogeneous_share",
    "pattern_types_recognisable",
    "last_layers_change_most",
    "single_heads_dispensable",
    "layer_ablation_improves",
    "pretrained_beats_random_init",
]

PAPER = "Kovaleva et al. 2019"


def _tagged(claim_id: str, task: str) -> str:
    return f"{claim_id}.{task}" if task else claim_id


def heterogeneous_share(mrpc_share: float) -> Claim:
    """ "Heterogeneous maps are at most 32% (MRPC) to 61% (QQP)": our classifier's share on MRPC; not testable without it."""
    return Claim(
        "heterogeneous_share",
        "Heterogeneous maps are at most 32% (MRPC) to 61% (QQP) of all maps",
        PAPER,
        "<= 0.32 on MRPC",
        f"{mrpc_share:.2f} on MRPC",
        Verdict.of(mrpc_share <= 0.32, math.isfinite(mrpc_share)),
        "our classifier's heterogeneous share on MRPC <= 0.32",
        {"mrpc_share": mrpc_share},
    )


def pattern_types_recognisable(macro_f1: float) -> Claim:
    """ "Pattern types can be recognised automatically" (a CNN, F1 about 0.86): our templates' macro F1."""
    return Claim(
        "pattern_types_recognisable",
        "The five pattern types can be recognised automatically",
        PAPER,
        "CNN macro F1 about 0.86",
        f"template macro F1 {macro_f1:.2f}",
        Verdict.of(macro_f1 >= 0.81, math.isfinite(macro_f1)),
        "macro F1 on our labelled maps >= 0.86 - 0.05",
        {"macro_f1": macro_f1},
    )


def last_layers_change_most(cosine, task: str = "") -> Claim:
    """ "Fine-tuning changes the last two layers most": per-layer mean cosine of the maps before and after.

    Holds when the two least similar layers are the last two, partly when the least similar one is.
    """
    by_layer = np.asarray(cosine, dtype=np.float64).mean(-1)
    testable = len(by_layer) >= 2 and bool(np.isfinite(by_layer).all())
    lowest = set(np.argsort(by_layer)[:2].tolist())
    last_two = {len(by_layer) - 1, len(by_layer) - 2}
    verdict = (
        Verdict.NOT_TESTABLE
        if not testable
        else Verdict.HOLDS
        if lowest == last_two
        else Verdict.PARTLY
        if int(np.argmin(by_layer)) in last_two
        else Verdict.DIFFERS
    )
    return Claim(
        _tagged("last_layers_change_most", task),
        "The last two layers change most in fine-tuning",
        PAPER,
        "the last two layers (except QQP)",
        "mean cosine by layer: " + ", ".join(f"{v:.3f}" for v in by_layer),
        verdict,
        "holds: the two lowest layer-mean cosines are the last two layers; partly: the lowest is",
        {"least_similar_layer": int(np.argmin(by_layer)) + 1 if testable else None},
        note=f"task: {task}" if task else "",
    )


def single_heads_dispensable(
    ablation: AblationResult, tolerance: float = 0.0, task: str = "", majority: float | None = None
) -> Claim:
    """ "Disabling a single head often does not hurt, and sometimes improves the score" (Fig. 6).

    Holds when at least half the heads do not hurt and some improve; partly when only one of
    the two; not testable when no single-head removal changes the metric at all (too few examples)
    or the classifier does not beat ``majority`` (the majority-class score, see :func:`below_floor`).
    """
    d = np.asarray(ablation.head_deltas, dtype=np.float64)
    not_hurting, improve = float((d >= -tolerance).mean()), float((d > tolerance).mean())
    lower_loss = float((np.asarray(ablation.head_loss_deltas) < 0).mean())
    floor = below_floor(ablation.base, majority)
    verdict = (
        Verdict.NOT_TESTABLE
        if not np.any(d) or floor
        else Verdict.HOLDS
        if not_hurting >= 0.5 and improve > 0
        else Verdict.PARTLY
        if not_hurting >= 0.5 or improve > 0
        else Verdict.DIFFERS
    )
    return Claim(
        _tagged("single_heads_dispensable", task),
        "Disabling one head often does not hurt, sometimes improves",
        PAPER,
        "often no drop; some heads improve the score",
        f"{not_hurting:.0%} of heads do not hurt, {improve:.0%} improve (base {ablation.base:.3f}); "
        f"{lower_loss:.0%} lower the dev loss" + (f"; {floor}" if floor else ""),
        verdict,
        "holds: >= 50% of heads do not lower the metric and > 0 raise it; partly: one of the two; "
        "not testable: no head changes the metric, or the classifier does not beat the majority class",
        {"share_not_hurting": not_hurting, "share_improve": improve},
        note=f"task: {task}" if task else "",
    )


def layer_ablation_improves(
    ablation: AblationResult, tolerance: float = 0.0, task: str = "", majority: float | None = None
) -> Claim:
    """ "Disabling a whole layer sometimes improves the score" (RTE: layer 1, about +3 points).

    Not testable when no layer changes the metric, or the classifier does not beat ``majority``.
    """
    d = np.asarray(ablation.layer_deltas, dtype=np.float64)
    floor = below_floor(ablation.base, majority)
    testable = bool(np.isfinite(d).any() and np.any(np.nan_to_num(d))) and not floor
    best = int(np.nanargmax(d)) if np.isfinite(d).any() else None
    ours = (
        f"best: layer {best + 1}, {d[best]:+.3f}; worst {np.nanmin(d):+.3f}"
        if best is not None
        else "no layer was disabled"
    ) + (f"; {floor}" if floor else "")
    return Claim(
        _tagged("layer_ablation_improves", task),
        "Disabling a whole layer sometimes improves the score",
        PAPER,
        "RTE: layer 1, about +3 points",
        ours,
        Verdict.of(best is not None and d[best] > tolerance, testable),
        f"the best layer's metric change > {tolerance:g}; not testable when no layer changes the metric "
        "or the classifier does not beat the majority class",
        {
            "best_layer": best + 1 if best is not None else None,
            "best_layer_delta": float(d[best]) if best is not None else math.nan,
        },
        note=f"task: {task}" if task else "",
    )


def pretrained_beats_random_init(
    scores: Mapping[str, tuple[float, float]], *, majority: Mapping[str, float] | None = None
) -> Claim:
    """ "Pre-trained BERT fine-tuned beats the same architecture from random init on every task".

    ``scores``: task -> (dev score fine-tuned from the pre-trained weights, from random init), same
    recipe and budget; ``majority``: task -> the dev score of always predicting the majority class.
    A task where the pre-trained run does not beat the majority class learned nothing under its
    budget: it says nothing about pre-training and counts as neither a win nor a loss. Holds when
    pre-trained wins on every task, partly on some, not testable when no task learned. A nan
    score (a regression model predicting a constant has no correlation) counts as below any number.
    """
    if not scores:
        raise ValueError("no task scores to compare")
    majority = majority or {}
    outcome, parts = {}, []
    for task, (pre, rand) in scores.items():
        pre_, rand_, floor = (np.nan_to_num(x, nan=-np.inf) for x in (pre, rand, majority.get(task, np.nan)))
        outcome[task] = "no signal" if pre_ <= floor else "win" if pre_ > rand_ else "loss"
        base = f", majority class {majority[task]:.3f}" if task in majority and not np.isnan(majority[task]) else ""
        note = " (pre-trained not above the majority class: learned nothing)" if outcome[task] == "no signal" else ""
        parts.append(f"{task}: {pre:.3f} vs {rand:.3f}{base}{note}")
    counted = [o for o in outcome.values() if o != "no signal"]
    verdict = (
        Verdict.NOT_TESTABLE
        if not counted
        else Verdict.HOLDS
        if all(o == "win" for o in outcome.values())
        else Verdict.PARTLY
        if "win" in counted
        else Verdict.DIFFERS
    )
    return Claim(
        "pretrained_beats_random_init",
        "Fine-tuning the pre-trained model beats the same architecture from random init, on every task",
        PAPER,
        "every GLUE task",
        "pre-trained vs random init: " + "; ".join(parts),
        verdict,
        "holds: pre-trained above random init on every task; partly: on some; tasks where pre-trained is "
        "not above the majority class are not counted",
        {"wins": counted.count("win"), "losses": counted.count("loss"), "tasks": len(outcome)},
    )
