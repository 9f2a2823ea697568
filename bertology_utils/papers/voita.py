"""Voita et al. (2019), *Analyzing Multi-Head Self-Attention*: each claim, checked against our numbers.

One function per claim, each returning a :class:`~bertology_utils.papers.claims.Claim`; paper values
are from ../shared/reference/papers.md. The functions take plain ``(layers, heads)`` arrays (head
roles from :mod:`bertology_utils.analyses.head_roles`, relevance from
:mod:`bertology_utils.interventions.head_relevance`, keep masks from :mod:`bertology_utils.interventions.l0`),
so that they test the claims of any model shape, and of numbers computed elsewhere. A claim computed
on a fine-tuned classifier (relevance, L0 gates) goes through
:func:`~bertology_utils.papers.claims.on_classifier` in the notebook, with the classifier's dev score
and its baseline's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
from scipy import stats

from bertology_utils.papers.claims import (
    Claim,
    Verdict,
    bootstrap_interval,
    greater,
    head_grid,
    permutation_interval,
    spearman_rho,
    tagged,
)

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

__all__ = [
    "PAPER",
    "MAX_IG_GAP",
    "rank_agreement",
    "relevance_tracks_confidence",
    "roles_found",
    "specialised_heads_relevant",
    "l0_prunes_most_heads",
    "SurvivalTest",
    "specialised_survival",
    "specialised_heads_survive",
    "survival_table",
    "plot_relevance",
]

PAPER = "Voita et al. 2019"
#: Relevance by integrated gradients must account for the output change of every example to within this
#: share (the largest relative completeness gap); beyond it the quadrature has not converged and the
#: per-head relevance is not a measurement (raise the number of nodes, or use an adaptive rule: ``tolerance``).
MAX_IG_GAP = 0.05


def _not_converged(gap: float | None) -> str:
    """Why a relevance claim cannot be tested: its attributions did not converge; else ""."""
    if gap is None or gap <= MAX_IG_GAP:
        return ""
    return (
        f"integrated gradients not converged (completeness gap up to {gap:.2g} of the output change, "
        f"tolerance {MAX_IG_GAP}): raise the number of nodes or set a tolerance (adaptive panels)"
    )


def rank_agreement(a: npt.ArrayLike, b: npt.ArrayLike) -> tuple[float, float, int]:
    """Spearman's rho and its two-sided p-value between two (layers, heads) grids, over heads finite in
    both, and that number of heads; (NaN, NaN, n) when fewer than 3 heads or either side is constant."""
    x, y = head_grid(a, "a", dtype=np.float64).ravel(), head_grid(b, "b", dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError(f"grids of {x.size} and {y.size} heads")
    finite = np.isfinite(x) & np.isfinite(y)
    x, y = x[finite], y[finite]
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan, math.nan, int(len(x))
    rho, p = stats.spearmanr(x, y)
    return float(rho), float(p), int(len(x))


def relevance_tracks_confidence(
    relevance: npt.ArrayLike,
    confidence: npt.ArrayLike,
    *,
    alpha: float = 0.05,
    task: str = "",
    gap: float | None = None,
    seed: int = 0,
) -> Claim:
    """ "The most relevant heads are also the most confident".

    ``relevance`` and ``confidence``: (layers, heads). The statistic is Spearman's rho over heads, with a
    percentile bootstrap interval over heads (paired, ``seed``; a resample with a constant side counts rho 0) at
    level 1 - ``alpha``: holds when the interval lies above 0, differs when it lies at or below 0, inconclusive
    when it straddles 0. Not testable (checked first) when a side is constant or fewer than 3 heads are finite,
    or when the relevance's largest relative completeness ``gap`` exceeds :data:`MAX_IG_GAP`.
    """
    rho, p, n = rank_agreement(relevance, confidence)
    unconverged = _not_converged(gap)
    level = 1 - alpha
    x = head_grid(relevance, "relevance", dtype=np.float64)
    y = head_grid(confidence, "confidence", x.shape, dtype=np.float64)
    interval = bootstrap_interval(spearman_rho, x, y, over="heads", level=level, seed=seed, undefined=0.0)
    testable = math.isfinite(rho) and not unconverged
    verdict = Verdict.by_interval(interval) if testable else Verdict.NOT_TESTABLE
    return Claim(
        tagged("relevance_tracks_confidence", task),
        "The most relevant heads are also the most confident",
        PAPER,
        "most relevant heads have the highest confidence (their Fig. 1-2)",
        f"Spearman rho {rho:.2f} (p = {p:.2g}) over {n} heads, {interval}"
        + (f"; {unconverged}" if unconverged else ""),
        verdict,
        f"holds: the {level:.0%} bootstrap interval of Spearman rho over heads lies above 0; differs: at or below 0; "
        f"inconclusive: it straddles 0; not testable: a constant side, fewer than 3 heads, or a completeness gap "
        f"above {MAX_IG_GAP}",
        {"spearman": rho, "p_value": p, "heads": n},
        note=f"task: {task}" if task else "",
        interval=interval,
    )


def roles_found(masks: Mapping[str, np.ndarray], *, testable: Mapping[str, bool] | None = None) -> Claim:
    """ "Positional, syntactic and rare-word heads exist".

    ``masks``: role -> (layers, heads) bool; ``testable``: role -> whether the data could show it
    (e.g. False for syntax on a treebank without the paper's relations). Holds when every testable
    role has at least one head, partly when some do, differs when none do; not testable when no role is.
    """
    testable = {role: True for role in masks} | dict(testable or {})
    counts = {role: int(np.asarray(masks[role], dtype=bool).sum()) for role in masks}
    tested = [role for role in counts if testable.get(role, True)]
    found = [role for role in tested if counts[role] > 0]
    verdict = Verdict.graded(len(found) == len(tested), bool(found), bool(tested))
    ours = ", ".join(
        f"{role} {counts[role]}" + ("" if testable.get(role, True) else " (not testable)") for role in counts
    )
    return Claim(
        "roles_found",
        "Heads with positional, syntactic and rare-word roles exist",
        PAPER,
        "all three roles found in every model (48 encoder heads)",
        f"heads per role: {ours}",
        verdict,
        "holds: every testable role has a head; partly: some do; differs: none",
        {f"{role}_heads": n for role, n in counts.items()},
    )


def specialised_heads_relevant(
    relevance: npt.ArrayLike,
    specialised: npt.ArrayLike,
    *,
    alpha: float = 0.05,
    task: str = "",
    gap: float | None = None,
    seed: int = 0,
    n_resamples: int = 2000,
) -> Claim:
    """ "The roles are found in the most important heads": specialised heads are more relevant than the rest.

    The statistic is the median ``relevance`` (layers, heads) of the ``specialised`` heads (bool grid) minus the
    median of the others (the medians, as the one-sided Mann-Whitney test recorded beside it), with a percentile
    interval at level 1 - ``alpha`` from a stratified bootstrap: each group resampled with replacement on its own
    (``n_resamples`` times, ``seed``), as the two groups are not paired. Holds when the interval lies above 0,
    differs when it lies at or below 0, inconclusive when it straddles 0. Not testable (checked first) with fewer
    than 2 heads on either side, or a completeness ``gap`` above :data:`MAX_IG_GAP` (as
    :func:`relevance_tracks_confidence`).
    """
    values = head_grid(relevance, "relevance", dtype=np.float64)
    special = np.asarray(specialised, dtype=bool)
    if special.shape != values.shape:
        raise ValueError(f"specialised has shape {special.shape}, relevance {values.shape}")
    ours_, rest = values[special & np.isfinite(values)], values[~special & np.isfinite(values)]
    unconverged = _not_converged(gap)
    _, p, med_s, med_r = greater(ours_, rest)
    level = 1 - alpha

    def median_gap(specialised_: np.ndarray, other: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.median(specialised_, axis=axis) - np.median(other, axis=axis)

    interval = bootstrap_interval(
        median_gap,
        ours_,
        rest,
        over=("specialised", "other heads"),
        paired=False,
        level=level,
        n_resamples=n_resamples,
        seed=seed,
    )
    testable = math.isfinite(p) and not unconverged
    verdict = Verdict.by_interval(interval) if testable else Verdict.NOT_TESTABLE
    return Claim(
        tagged("specialised_heads_relevant", task),
        "Specialised heads (positional, syntactic, rare-word) are among the most relevant",
        PAPER,
        "each role is found in the most important heads",
        f"median relevance {med_s:.3f} for {len(ours_)} specialised heads vs {med_r:.3f} for {len(rest)} others, "
        f"difference {interval} (one-sided Mann-Whitney p = {p:.2g})" + (f"; {unconverged}" if unconverged else ""),
        verdict,
        f"holds: the {level:.0%} stratified bootstrap interval of the median relevance of specialised heads minus "
        "that of the others lies above 0; differs: at or below 0; inconclusive: it straddles 0; not testable: < 2 "
        f"heads on a side, or a completeness gap above {MAX_IG_GAP}",
        {"median_specialised": med_s, "median_other": med_r, "p_value": p, "specialised": len(ours_)},
        note=f"task: {task}" if task else "",
        interval=interval,
    )


def l0_prunes_most_heads(
    kept: Sequence[int],
    scores: Sequence[float],
    base: float,
    total: int,
    *,
    keep: float = 0.9,
    task: str = "",
) -> Claim:
    """ "Most heads can be pruned with L0 gates for a small drop (38 of 48 encoder heads, -0.15 BLEU)".

    ``kept`` and ``scores``: heads kept and dev score at each lambda; ``base``: every head on. The
    prunable share is the largest share pruned at a lambda whose score stays at or above ``keep`` of
    ``base`` (notebook 06's criterion). Holds at >= 50% of the heads, partly above 0; not testable
    when no lambda pruned any head.
    """
    kept_a, scores_a = np.asarray(kept, dtype=np.int64), np.asarray(scores, dtype=np.float64)
    pruned = 1 - kept_a / total
    good = scores_a >= keep * base
    share = float(pruned[good].max()) if good.any() else 0.0
    verdict = Verdict.graded(share >= 0.5, share > 0, bool((pruned > 0).any()))
    return Claim(
        tagged("l0_prunes_most_heads", task),
        f"Most heads can be pruned with L0 gates keeping {keep:.0%} of the score",
        PAPER,
        "38 of 48 encoder heads (79%) pruned for -0.15 BLEU (En-Ru)",
        f"{share:.0%} of {total} heads pruned at >= {keep:.0%} of {base:.3f}",
        verdict,
        "holds: >= 50% pruned; partly: > 0%; not testable: no lambda pruned a head",
        {"prunable": share, "base": float(base)},
        note=f"task: {task}" if task else "",
    )


@dataclass(frozen=True)
class SurvivalTest:
    """Are specialised heads kept more often than heads drawn at random? (see :func:`specialised_survival`)"""

    shares: np.ndarray  #: (lambdas,) share of specialised heads among those kept; NaN where none kept
    overall: float  #: share of specialised heads among all heads
    statistic: float  #: specialised heads kept, summed over the informative lambdas
    p_value: float  #: one-sided permutation p-value (NaN when not testable)
    lambdas: int  #: lambdas that kept some but not all heads (the informative ones)
    null_mean: float  #: the statistic's mean under random labels
    null: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)  #: the statistic per relabelling

    def __str__(self) -> str:  # for people: the notebook prints it
        if not math.isfinite(self.statistic):
            return f"not testable: {self.lambdas} lambdas kept some but not all heads, or no head (or every head) is specialised"
        shares = ", ".join(f"{s:.0%}" for s in self.shares[np.isfinite(self.shares)])
        return (
            f"{self.statistic:g} specialised heads kept over {self.lambdas} lambdas vs {self.null_mean:.1f} expected at "
            f"random (permutation p = {self.p_value:.2g}); their share among the kept heads per lambda: {shares}, "
            f"of all heads {self.overall:.0%}"
        )


def specialised_survival(
    masks: npt.ArrayLike, specialised: npt.ArrayLike, *, n_permutations: int = 10_000, seed: int = 0
) -> SurvivalTest:
    """Specialised heads among the survivors of each lambda, against the same count of heads drawn at random.

    ``masks``: (lambdas, layers, heads) bool, True = kept; ``specialised``: (layers, heads) bool. The
    statistic is the number of specialised heads kept, summed over the lambdas that kept some but not
    all heads; its null distribution relabels which heads are specialised (a uniform permutation over
    heads, the same one for every lambda, so nested keep sets stay nested). p = (1 + #null >= observed)
    / (1 + n_permutations).
    """
    kept = np.asarray(masks, dtype=bool)
    special = np.asarray(specialised, dtype=bool).ravel()
    if kept.ndim != 3 or kept.shape[1:] != np.asarray(specialised).shape:
        raise ValueError(f"masks {kept.shape} do not match specialised {np.asarray(specialised).shape}")
    flat = kept.reshape(len(kept), -1)
    counts = flat.sum(1)
    shares = np.where(counts > 0, (flat & special).sum(1) / np.maximum(counts, 1), np.nan)
    overall = float(special.mean()) if special.size else math.nan
    informative = flat[(counts > 0) & (counts < flat.shape[1])]
    if not len(informative) or not 0 < special.sum() < special.size:
        return SurvivalTest(shares, overall, math.nan, math.nan, len(informative), math.nan, np.zeros(0))
    observed = float((informative & special).sum())
    rng = np.random.default_rng(seed)
    labels = rng.permuted(np.tile(special, (n_permutations, 1)), axis=1).astype(np.float64)
    null = labels @ informative.sum(0).astype(np.float64)  # specialised kept over all lambdas, per relabelling
    p = float((1 + np.sum(null >= observed - 1e-9)) / (1 + n_permutations))
    return SurvivalTest(shares, overall, observed, p, len(informative), float(null.mean()), null)


def specialised_heads_survive(test: SurvivalTest, *, alpha: float = 0.05, task: str = "") -> Claim:
    """ "Specialised heads are the last to be pruned".

    The statistic is the excess of specialised heads kept over random heads (:func:`specialised_survival`), with
    the interval the permutation null gives it: observed minus the null's central 1 - ``alpha`` range. Holds when
    the interval lies above 0 (more kept than at random, beyond chance), differs when it lies at or below 0,
    inconclusive when it straddles 0. Not testable when no lambda pruned some but not all heads, or no (or every)
    head is specialised.
    """
    method = f"permutation, {test.null.size} relabellings of the specialised heads" if test.null.size else "permutation"
    interval = permutation_interval(test.statistic, test.null, level=1 - alpha, method=method)
    finite = test.shares[np.isfinite(test.shares)]
    shares = ", ".join(f"{s:.0%}" for s in finite) or "none"
    return Claim(
        tagged("specialised_heads_survive", task),
        "Specialised heads (positional, syntactic, rare-word) are the last to be pruned",
        PAPER,
        "the heads left at high lambda are the specialised ones",
        f"specialised share among survivors per lambda: {shares} vs {test.overall:.0%} of all heads; "
        f"{test.statistic:g} kept vs {test.null_mean:.1f} expected at random (permutation p = {test.p_value:.2g})",
        Verdict.by_interval(interval),
        f"holds: specialised heads kept minus those expected at random, with its {1 - alpha:.0%} permutation "
        "interval, lies above 0; differs: at or below 0; inconclusive: it straddles 0; not testable: no lambda "
        "pruned some but not all heads, or no head (or every head) is specialised",
        {
            "overall_share": test.overall,
            "kept_specialised": test.statistic,
            "expected_at_random": test.null_mean,
            "p_value": test.p_value,
            "informative_lambdas": test.lambdas,
        },
        note=f"task: {task}" if task else "",
        interval=interval,
    )


def survival_table(
    lambdas: Sequence[float], masks: np.ndarray, role_masks: Mapping[str, np.ndarray], specialised: npt.ArrayLike
) -> pd.DataFrame:
    """Heads kept per lambda (``masks``: (lambdas, layers, heads) bool), in all, per role and specialised, and
    a last row "all heads" with the same counts before pruning: the counts behind :func:`specialised_survival`."""
    import pandas as pd

    special = np.asarray(specialised, dtype=bool)
    masks = np.asarray(masks, dtype=bool)
    rows = {}
    for lam, mask in zip(lambdas, masks):
        rows[f"λ={lam:g}"] = {
            "kept": int(mask.sum()),
            **{role: int((mask & m).sum()) for role, m in role_masks.items()},
            "specialised kept": int((mask & special).sum()),
        }
    rows["all heads"] = {
        "kept": int(np.prod(masks.shape[1:])),
        **{role: int(m.sum()) for role, m in role_masks.items()},
        "specialised kept": int(special.sum()),
    }
    return pd.DataFrame(rows).T


def plot_relevance(
    relevance: npt.ArrayLike, confidence: npt.ArrayLike, specialised: npt.ArrayLike, *, task: str = ""
) -> Figure:
    """Left: each head's relevance as a layers x heads grid. Right: relevance against confidence, the
    specialised heads in red, with Spearman's rho (:func:`rank_agreement`). Returns the figure."""
    import matplotlib.pyplot as plt

    from bertology_utils.core.figures import plot_layer_head_grid

    relevance = head_grid(relevance, "relevance", dtype=np.float64)
    confidence = head_grid(confidence, "confidence", relevance.shape, dtype=np.float64)
    special = head_grid(specialised, "specialised", relevance.shape).astype(bool).ravel()
    layers, heads = relevance.shape
    fig, axes = plt.subplots(
        1, 2, figsize=(0.55 * heads + 8, 0.45 * layers + 2), gridspec_kw={"width_ratios": [heads + 2, 6]}
    )
    title = "head relevance (integrated gradients over gates)"
    plot_layer_head_grid(
        relevance, ax=axes[0], label="relevance (sums to 1 per layer)", title=f"{task}: {title}" if task else title
    )
    x, y = confidence.ravel(), relevance.ravel()
    axes[1].scatter(x[~special], y[~special], s=16, c="gray", label="no role")
    axes[1].scatter(x[special], y[special], s=22, c="tab:red", label="positional / syntactic / rare-word")
    rho, p, _ = rank_agreement(relevance, confidence)
    axes[1].set(
        xlabel="confidence (mean max weight on a word)",
        ylabel="relevance",
        title=f"Spearman ρ = {rho:.2f} (p = {p:.2g})",
    )
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    return fig
