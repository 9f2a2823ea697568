"""Beyond raw attention weights: the context-mixing papers' claims, checked against our numbers.

Kobayashi et al. 2020 (norm-weighted attention), Abnar & Zuidema 2020 (rollout and flow) and
Mohebbi et al. 2023 (value zeroing); paper values are from ../shared/reference/papers.md. The
numbers come from :mod:`bertology_utils.interventions.mixing`: per-layer shares of attention on
special tokens, and the per-item Spearman correlations of :func:`~bertology_utils.interventions.mixing.faithfulness`.
The faithfulness claims are judged on a fine-tuned classifier: the notebook passes them through
:func:`~bertology_utils.papers.claims.on_classifier` with its dev score and its baseline's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from bertology_utils.papers.claims import Claim, Verdict

__all__ = [
    "KOBAYASHI",
    "ABNAR",
    "MOHEBBI",
    "ABNAR_TABLE",
    "norm_discounts_special_tokens",
    "rollout_and_flow_beat_raw",
    "value_zeroing_agrees_best",
    "paired_rho",
]

KOBAYASHI = "Kobayashi et al. 2020"
ABNAR = "Abnar & Zuidema 2020"
MOHEBBI = "Mohebbi et al. 2023"
#: Abnar & Zuidema's last-layer Spearman correlations (verb-agreement model; SST-2 DistilBERT for gradients).
ABNAR_TABLE = {
    "blank_out": "raw 0.29, rollout 0.71, flow 0.70 (last layer; layer 3: -0.11, 0.51, 0.70)",
    "input_x_gradient": "raw 0.46, rollout 0.54, flow 0.61 (DistilBERT on SST-2: 0.09, 0.13, 0.14)",
}
#: Fewer paired items than this cannot support a paired test.
MIN_ITEMS = 10


def norm_discounts_special_tokens(
    raw: Mapping[str, Sequence[float]], norm: Mapping[str, Sequence[float]], *, drop: float = 0.2
) -> Claim:
    """ "Weighted by the norm of the transformed value vectors, [CLS], [SEP] and punctuation get little attention".

    ``raw`` and ``norm``: kind -> per-layer mean share of attention on that kind (e.g. ``cls``, ``sep``,
    ``punct``), under raw weights and under norm weighting (rows renormalised). Their sum per layer is
    compared. Holds when the norm-weighted share is lower in at least 3/4 of the layers and at least
    ``drop`` lower relative to raw on average; partly when lower on average; differs otherwise. Not
    testable when raw weights put (almost) nothing there (under 0.01 in every layer).
    """
    kinds = [k for k in raw if k in norm]
    raw_total = np.sum([np.asarray(raw[k], dtype=float) for k in kinds], axis=0)
    norm_total = np.sum([np.asarray(norm[k], dtype=float) for k in kinds], axis=0)
    lower = float(np.mean(norm_total < raw_total))
    relative = float(1 - norm_total.mean() / raw_total.mean()) if raw_total.mean() > 0 else math.nan
    testable = bool(kinds) and bool(np.any(raw_total >= 0.01))
    verdict = (
        Verdict.NOT_TESTABLE
        if not testable
        else Verdict.HOLDS
        if lower >= 0.75 and relative >= drop
        else Verdict.PARTLY
        if relative > 0
        else Verdict.DIFFERS
    )
    names = " + ".join(kinds)
    return Claim(
        "norm_discounts_special_tokens",
        f"Norm weighting gives {names} far less attention than raw weights do",
        KOBAYASHI,
        "BERT pays little attention to [CLS], [SEP] and punctuation under norm weighting",
        f"{names}: {raw_total.mean():.2f} raw vs {norm_total.mean():.2f} norm-weighted (layer mean); "
        f"lower in {lower:.0%} of layers",
        verdict,
        f"holds: lower in >= 75% of layers and >= {drop:.0%} lower on average; partly: lower on average",
        {
            "raw_share": float(raw_total.mean()),
            "norm_share": float(norm_total.mean()),
            "relative_drop": relative,
            "layers_lower": lower,
        },
    )


def paired_rho(table: pd.DataFrame, reference: str, layer: int, methods: Sequence[str]) -> pd.DataFrame:
    """Per-item rho of ``methods`` against ``reference`` at ``layer``: one column per method, items with all of them."""
    part = table[(table.reference == reference) & (table.layer == layer) & table.method.isin(methods)]
    wide = part.pivot_table(index="item", columns="method", values="spearman", aggfunc="first")
    return wide.reindex(columns=list(methods)).dropna()


def _better(a: pd.Series, b: pd.Series, alpha: float) -> tuple[bool, bool, float]:
    """(a beats b: mean difference > 0 with Wilcoxon p < alpha; a is not worse: not significantly below; p)."""
    diff = (a - b).to_numpy()
    if not np.any(diff):
        return False, True, 1.0
    p = float(stats.wilcoxon(diff).pvalue)
    return bool(diff.mean() > 0 and p < alpha), bool(diff.mean() >= 0 or p >= alpha), p


def rollout_and_flow_beat_raw(
    table: pd.DataFrame, reference: str, layer: int, *, alpha: float = 0.05, task: str = ""
) -> Claim:
    """Abnar & Zuidema's ordering raw < rollout <= flow, in agreement with ``reference`` at ``layer``.

    ``table``: :func:`~bertology_utils.interventions.mixing.faithfulness` rows (methods ``attention``,
    ``rollout``, ``flow``). Paired by item: holds when rollout beats raw (mean rho difference > 0,
    Wilcoxon p < ``alpha``) and flow is not significantly below rollout; partly when one of the two
    holds; differs otherwise. Not testable with fewer than ``MIN_ITEMS`` items having all three.
    """
    wide = paired_rho(table, reference, layer, ("attention", "rollout", "flow"))
    n = len(wide)
    means = {m: float(wide[m].mean()) if n else math.nan for m in ("attention", "rollout", "flow")}
    if n >= MIN_ITEMS:
        rollout_wins, _, p_rollout = _better(wide["rollout"], wide["attention"], alpha)
        _, flow_keeps, p_flow = _better(wide["flow"], wide["rollout"], alpha)
        verdict = (
            Verdict.HOLDS
            if rollout_wins and flow_keeps
            else Verdict.PARTLY
            if rollout_wins or flow_keeps
            else Verdict.DIFFERS
        )
    else:
        p_rollout = p_flow = math.nan
        verdict = Verdict.NOT_TESTABLE
    suffix = f".{task}" if task else ""
    return Claim(
        f"rollout_flow_beat_raw.{reference}.layer{layer}{suffix}",
        f"Rollout and flow agree with {reference.replace('_', ' ')} better than raw attention (raw < rollout <= flow)",
        ABNAR,
        ABNAR_TABLE.get(reference, "raw < rollout <= flow"),
        f"raw {means['attention']:.2f}, rollout {means['rollout']:.2f}, flow {means['flow']:.2f} "
        f"(mean Spearman, layer {layer}, {n} items)",
        verdict,
        f"holds: rollout > raw (paired Wilcoxon p < {alpha}) and flow not significantly below rollout; "
        f"partly: one of the two; not testable: < {MIN_ITEMS} items",
        {
            "raw": means["attention"],
            "rollout": means["rollout"],
            "flow": means["flow"],
            "p_rollout_vs_raw": p_rollout,
            "p_flow_vs_rollout": p_flow,
            "n_items": n,
        },
        note=f"task: {task}" if task else "",
    )


def value_zeroing_agrees_best(
    table: pd.DataFrame,
    reference: str,
    layer: int,
    *,
    method: str = "value_zeroing_rollout",
    rivals: Sequence[str] = ("attention", "rollout", "norm_layer"),
    alpha: float = 0.05,
    task: str = "",
) -> Claim:
    """Mohebbi et al.: value zeroing agrees with ``reference`` better than raw, rollout and norm-based maps.

    Paired by item at ``layer``: holds when ``method`` beats every rival (mean rho difference > 0,
    Wilcoxon p < ``alpha``), partly when it beats some, differs when none. Not testable with fewer
    than ``MIN_ITEMS`` items having every method.
    """
    wide = paired_rho(table, reference, layer, (method, *rivals))
    n = len(wide)
    means = {m: float(wide[m].mean()) if n else math.nan for m in (method, *rivals)}
    beaten = [r for r in rivals if n >= MIN_ITEMS and _better(wide[method], wide[r], alpha)[0]]
    verdict = (
        Verdict.NOT_TESTABLE
        if n < MIN_ITEMS
        else Verdict.HOLDS
        if len(beaten) == len(rivals)
        else Verdict.PARTLY
        if beaten
        else Verdict.DIFFERS
    )
    suffix = f".{task}" if task else ""
    return Claim(
        f"value_zeroing_best.{reference}.layer{layer}{suffix}",
        f"Value zeroing agrees with {reference.replace('_', ' ')} better than raw, rollout and norm-based maps",
        MOHEBBI,
        "higher correlation than the other maps",
        ", ".join(f"{m} {v:.2f}" for m, v in means.items()) + f" (mean Spearman, layer {layer}, {n} items)",
        verdict,
        f"holds: beats every rival (paired Wilcoxon p < {alpha}); partly: some; not testable: < {MIN_ITEMS} items",
        {**{f"rho.{m}": v for m, v in means.items()}, "beaten": len(beaten), "n_items": n},
        note=f"task: {task}" if task else "",
    )
