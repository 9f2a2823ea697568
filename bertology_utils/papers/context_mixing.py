"""Beyond raw attention weights: the context-mixing papers' claims, checked against our numbers.

Kobayashi et al. 2020 (norm-weighted attention), Abnar & Zuidema 2020 (rollout and flow), Mohebbi et al. 2023
(value zeroing) and Modarressi et al. 2023 (DecompX); paper values are from ../shared/reference/papers.md. The
numbers come from :mod:`bertology_utils.interventions.mixing`: per-layer shares of attention on
special tokens, and the per-item Spearman correlations of :func:`~bertology_utils.interventions.mixing.faithfulness`.
The faithfulness claims are judged on a fine-tuned classifier: the notebook passes them through
:func:`~bertology_utils.papers.claims.on_classifier` with its dev score and its baseline's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from bertology_utils.interventions.references import reference_title
from bertology_utils.papers.claims import (
    Claim,
    Draws,
    Interval,
    Verdict,
    bootstrap_interval,
    claims_over_seeds,
    on_classifier,
)

__all__ = [
    "KOBAYASHI",
    "ABNAR",
    "MOHEBBI",
    "MODARRESSI",
    "ABNAR_TABLE",
    "norm_discounts_special_tokens",
    "rollout_and_flow_beat_raw",
    "value_zeroing_agrees_best",
    "decompx_agrees_best",
    "faithfulness_claims_by_seed",
    "paired_rho",
]

KOBAYASHI = "Kobayashi et al. 2020"
ABNAR = "Abnar & Zuidema 2020"
MOHEBBI = "Mohebbi et al. 2023"
MODARRESSI = "Modarressi et al. 2023"
#: Abnar & Zuidema's last-layer Spearman correlations (verb-agreement model; SST-2 DistilBERT for gradients).
ABNAR_TABLE = {
    "blank_out": "raw 0.29, rollout 0.71, flow 0.70 (last layer; layer 3: -0.11, 0.51, 0.70)",
    "input_x_gradient": "raw 0.46, rollout 0.54, flow 0.61 (DistilBERT on SST-2: 0.09, 0.13, 0.14)",
}
#: Fewer paired items than this cannot support a paired test.
MIN_ITEMS = 10


def _kind_totals(shares: Mapping[str, Any], kinds: Sequence[str], draws: bool = False) -> np.ndarray:
    """The per-layer shares of ``kinds`` summed: (layers,), or (draws, layers) from :class:`Draws` (heads averaged)."""
    if draws:
        return np.sum([np.nanmean(np.asarray(shares[k], dtype=float), axis=-1) for k in kinds], axis=0)
    return np.sum([np.asarray(shares[k], dtype=float) for k in kinds], axis=0)


def _relative_drop(raw_total: np.ndarray, norm_total: np.ndarray) -> np.ndarray:
    raw_mean = raw_total.mean(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(raw_mean > 0, 1 - norm_total.mean(-1) / np.where(raw_mean > 0, raw_mean, 1.0), np.nan)


def norm_discounts_special_tokens(
    raw: Mapping[str, Sequence[float]],
    norm: Mapping[str, Sequence[float]],
    *,
    drop: float = 0.2,
    draws: tuple[Draws, Draws] | None = None,
) -> Claim:
    """ "Weighted by the norm of the transformed value vectors, [CLS], [SEP] and punctuation get little attention".

    ``raw`` and ``norm``: kind -> per-layer mean share of attention on that kind (e.g. ``cls``, ``sep``,
    ``punct``), under raw weights and under norm weighting (rows renormalised). Their sum per layer is
    compared. Holds when the norm-weighted share is lower in at least 3/4 of the layers and at least
    ``drop`` lower relative to raw on average; partly when lower on average; differs otherwise. Not
    testable when raw weights put (almost) nothing there (under 0.01 in every layer).

    ``draws``: the raw and the norm-weighted surface statistics' :class:`~bertology_utils.core.uncertainty.Draws`
    over the same sentences with the same seed (``SurfaceStats.bootstrap``), so that each draw resamples both alike.
    The relative drop's interval then decides holds against ``drop`` and, below it, partly against 0; an interval
    straddling its threshold reads inconclusive.
    """
    kinds = [k for k in raw if k in norm]
    raw_total, norm_total = _kind_totals(raw, kinds), _kind_totals(norm, kinds)
    lower = float(np.mean(norm_total < raw_total))
    relative = float(_relative_drop(raw_total, norm_total)) if kinds else math.nan
    testable = bool(kinds) and bool(np.any(raw_total >= 0.01))
    interval = None
    if not testable:
        verdict = Verdict.NOT_TESTABLE
    elif draws is None:
        verdict = Verdict.graded(lower >= 0.75 and relative >= drop, relative > 0)
    else:
        raw_draws, norm_draws = draws
        if raw_draws.over != norm_draws.over:
            raise ValueError(f"the draws must resample the same items, not {raw_draws.over} and {norm_draws.over}")
        drawn = _relative_drop(
            _kind_totals(raw_draws.values, kinds, True), _kind_totals(norm_draws.values, kinds, True)
        )
        interval = raw_draws.interval(drawn)
        full = Verdict.by_interval(interval, drop) if lower >= 0.75 else Verdict.DIFFERS
        verdict = Verdict.stepwise(full, Verdict.by_interval(interval))
    names = " + ".join(kinds)
    rule = f"holds: lower in >= 75% of layers and >= {drop:.0%} lower on average; partly: lower on average"
    return Claim(
        "norm_discounts_special_tokens",
        f"Norm weighting gives {names} far less attention than raw weights do",
        KOBAYASHI,
        "BERT pays little attention to [CLS], [SEP] and punctuation under norm weighting",
        f"{names}: {raw_total.mean():.2f} raw vs {norm_total.mean():.2f} norm-weighted (layer mean); "
        f"lower in {lower:.0%} of layers",
        verdict,
        rule + ("; the drop by its bootstrap interval, inconclusive where it straddles" if interval else ""),
        {
            "raw_share": float(raw_total.mean()),
            "norm_share": float(norm_total.mean()),
            "relative_drop": relative,
            "layers_lower": lower,
        },
        interval=interval,
    )


def paired_rho(table: pd.DataFrame, reference: str, layer: int, methods: Sequence[str]) -> pd.DataFrame:
    """Per-item rho of ``methods`` against ``reference`` at ``layer``: one column per method, items with all of them."""
    part = table[(table.reference == reference) & (table.layer == layer) & table.method.isin(methods)]
    wide = part.pivot_table(index="item", columns="method", values="spearman", aggfunc="first")
    return wide.reindex(columns=list(methods)).dropna()


def _wilcoxon_p(diff: np.ndarray) -> float:
    """The two-sided paired Wilcoxon p-value of per-item differences (1.0 when every difference is 0)."""
    return float(stats.wilcoxon(diff).pvalue) if np.any(diff) else 1.0


def _mean_gain(a: pd.Series, b: pd.Series, level: float, seed: int) -> Interval:
    """Percentile bootstrap interval over items of the mean per-item rho difference ``a`` - ``b``."""
    return bootstrap_interval(np.mean, (a - b).to_numpy(), over="items", level=level, seed=seed)


def rollout_and_flow_beat_raw(
    table: pd.DataFrame, reference: str, layer: int, *, alpha: float = 0.05, task: str = "", seed: int = 0
) -> Claim:
    """Abnar & Zuidema's ordering raw < rollout <= flow, in agreement with ``reference`` at ``layer``.

    ``table``: :func:`~bertology_utils.interventions.mixing.faithfulness` rows (methods ``attention``,
    ``rollout``, ``flow``). Paired by item, each with a percentile bootstrap interval over items (``seed``) at level
    1 - ``alpha`` of a mean per-item rho difference: the claim's interval is that of rollout - raw. Holds when it
    lies above 0 and the interval of flow - rollout reaches 0 (flow not clearly below rollout); differs when the
    rollout - raw interval lies at or below 0, or flow - rollout's lies below 0 (either half of the ordering
    clearly fails); inconclusive otherwise. Not testable with fewer than ``MIN_ITEMS`` items having all three.
    The paired Wilcoxon p-values are recorded beside, not read.
    """
    wide = paired_rho(table, reference, layer, ("attention", "rollout", "flow"))
    n = len(wide)
    level = 1 - alpha
    means = {m: float(wide[m].mean()) if n else math.nan for m in ("attention", "rollout", "flow")}
    if n >= MIN_ITEMS:
        rollout_gain = _mean_gain(wide["rollout"], wide["attention"], level, seed)
        flow_gain = _mean_gain(wide["flow"], wide["rollout"], level, seed)
        p_rollout = _wilcoxon_p((wide["rollout"] - wide["attention"]).to_numpy())
        p_flow = _wilcoxon_p((wide["flow"] - wide["rollout"]).to_numpy())
        verdict = Verdict.by_interval(rollout_gain)
        if verdict is not Verdict.NOT_TESTABLE and flow_gain.high < 0:
            verdict = Verdict.DIFFERS
    else:
        rollout_gain = flow_gain = Interval(math.nan, math.nan, level, f"bootstrap over {n} items")
        p_rollout = p_flow = math.nan
        verdict = Verdict.NOT_TESTABLE
    suffix = f".{task}" if task else ""
    return Claim(
        f"rollout_flow_beat_raw.{reference}.layer{layer}{suffix}",
        f"Rollout and flow agree with {reference_title(reference)} better than raw attention (raw < rollout <= flow)",
        ABNAR,
        ABNAR_TABLE.get(reference, "raw < rollout <= flow"),
        f"raw {means['attention']:.2f}, rollout {means['rollout']:.2f}, flow {means['flow']:.2f} "
        f"(mean Spearman, layer {layer}, {n} items); rollout - raw {rollout_gain}; flow - rollout "
        f"[{flow_gain.low:.3g}, {flow_gain.high:.3g}]",
        verdict,
        f"holds: the {level:.0%} bootstrap interval over items of the mean rho difference rollout - raw lies above "
        "0, and that of flow - rollout reaches 0; differs: rollout - raw's lies at or below 0, or flow - rollout's "
        f"below 0; inconclusive: otherwise; not testable: < {MIN_ITEMS} items",
        {
            "raw": means["attention"],
            "rollout": means["rollout"],
            "flow": means["flow"],
            "p_rollout_vs_raw": p_rollout,
            "p_flow_vs_rollout": p_flow,
            "flow_vs_rollout_low": flow_gain.low,
            "flow_vs_rollout_high": flow_gain.high,
            "n_items": n,
        },
        note=f"task: {task}" if task else "",
        interval=rollout_gain,
    )


def _agrees_best(
    table: pd.DataFrame,
    reference: str,
    layer: int,
    method: str,
    rivals: Sequence[str],
    *,
    claim: tuple[str, str, str, str],
    alpha: float,
    task: str,
    seed: int,
) -> Claim:
    """``method`` agrees with ``reference`` better than every one of ``rivals`` at ``layer``, paired by item.

    The statistic is the margin over the closest rival: the minimum over ``rivals`` of the mean per-item rho
    difference ``method`` - rival, with a percentile bootstrap interval over items (``seed``; the rivals resampled
    together, item by item) at level 1 - ``alpha``. Holds when the interval lies above 0 (``method`` beats every
    rival), differs when it lies at or below 0 (some rival is at least as good), inconclusive when it straddles 0.
    ``beaten`` counts the rivals whose own interval of the mean difference lies above 0. Not testable with fewer
    than ``MIN_ITEMS`` items having every method (a method the model refused has none). ``claim``: the claim's
    id prefix, statement, paper and what the paper found.
    """
    wide = paired_rho(table, reference, layer, (method, *rivals))
    n = len(wide)
    level = 1 - alpha
    means = {m: float(wide[m].mean()) if n else math.nan for m in (method, *rivals)}

    def margin(*differences: np.ndarray, axis: int = -1) -> np.ndarray:  # the smallest mean difference over the rivals
        return np.min([np.mean(d, axis=axis) for d in differences], axis=0)

    if n >= MIN_ITEMS and rivals:
        differences = [(wide[method] - wide[r]).to_numpy() for r in rivals]
        interval = bootstrap_interval(margin, *differences, over="items", level=level, seed=seed)
        beaten = [
            r for r in rivals if Verdict.by_interval(_mean_gain(wide[method], wide[r], level, seed)) is Verdict.HOLDS
        ]
        verdict = Verdict.by_interval(interval)
    else:
        interval = Interval(math.nan, math.nan, level, f"bootstrap over {n} items")
        beaten = []
        verdict = Verdict.NOT_TESTABLE
    prefix, statement, paper, expected = claim
    return Claim(
        f"{prefix}.{reference}.layer{layer}" + (f".{task}" if task else ""),
        statement.format(reference=reference_title(reference)),
        paper,
        expected,
        ", ".join(f"{m} {v:.2f}" for m, v in means.items())
        + f" (mean Spearman, layer {layer}, {n} items); margin over the closest rival {interval}",
        verdict,
        f"holds: the {level:.0%} bootstrap interval over items of the smallest mean rho difference {method} - rival "
        f"(over {', '.join(rivals)}) lies above 0; differs: at or below 0; inconclusive: it straddles 0; "
        f"not testable: < {MIN_ITEMS} items",
        {**{f"rho.{m}": v for m, v in means.items()}, "beaten": len(beaten), "n_items": n},
        note=f"task: {task}" if task else "",
        interval=interval,
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
    seed: int = 0,
) -> Claim:
    """Mohebbi et al.: value zeroing agrees with ``reference`` better than raw, rollout and norm-based maps, by the
    margin over the closest rival (:func:`_agrees_best`; ``table``: :func:`~bertology_utils.interventions.mixing.
    faithfulness` rows)."""
    claim = (
        "value_zeroing_best",
        "Value zeroing agrees with {reference} better than raw, rollout and norm-based maps",
        MOHEBBI,
        "higher correlation than the other maps",
    )
    return _agrees_best(table, reference, layer, method, rivals, claim=claim, alpha=alpha, task=task, seed=seed)


def decompx_agrees_best(
    table: pd.DataFrame,
    reference: str,
    layer: int,
    *,
    method: str = "decompx",
    rivals: Sequence[str] = ("globenc", "alti"),
    alpha: float = 0.05,
    task: str = "",
    seed: int = 0,
) -> Claim:
    """Modarressi et al. 2023: DecompX, whose decomposition goes through the feed-forward blocks, agrees with
    ``reference`` better than the vector-based maps that leave them out (GlobEnc, ALTI), by the margin over the
    closest rival (:func:`_agrees_best`). The paper's own test perturbs the input by DecompX's ranking with the
    classifier head included; this one reads the map's first-token row, as every map here is read."""
    claim = (
        "decompx_best",
        "DecompX, carried through the feed-forward blocks, agrees with {reference} better than GlobEnc and ALTI",
        MODARRESSI,
        "more faithful than GlobEnc and ALTI (input perturbation, with the classifier head)",
    )
    return _agrees_best(table, reference, layer, method, rivals, claim=claim, alpha=alpha, task=task, seed=seed)


def faithfulness_claims_by_seed(
    tables: Mapping[int, pd.DataFrame], scores: Mapping[int, float], majority: float, layer: int, *, task: str
) -> list[Claim]:
    """The faithfulness claims on each seed's classifier, each joined over the seeds.

    Abnar & Zuidema's ordering against blank-out and against input x gradient, Mohebbi et al.'s value zeroing
    and Modarressi et al.'s DecompX against blank-out; a classifier that does not beat the majority class makes
    none (:func:`~bertology_utils.papers.claims.on_classifier`).

    :param tables: each seed's :func:`~bertology_utils.interventions.mixing.faithfulness` rows, the first seed's
        first.
    :param scores: each seed's classifier's dev score.
    :param majority: the task's majority-class dev score.
    :param layer: the layer the maps are judged at.
    :param task: the task's name.
    :returns: the four claims, each over the seeds.
    """
    return claims_over_seeds(
        [
            on_classifier(claim, scores[s], majority)
            for claim in (
                *(
                    rollout_and_flow_beat_raw(t, reference, layer, task=task)
                    for reference in ("blank_out", "input_x_gradient")
                ),
                value_zeroing_agrees_best(t, "blank_out", layer, task=task),
                decompx_agrees_best(t, "blank_out", layer, task=task),
            )
        ]
        for s, t in tables.items()
    )
