"""Michel et al. (2019), *Are Sixteen Heads Really Better than One?*: each claim, checked against our numbers.

One function per claim, each returning a :class:`~bertology_utils.papers.claims.Claim`; paper values
are from ../shared/reference/papers.md. Every claim here is computed on a fine-tuned classifier: a
notebook passes it through :func:`~bertology_utils.papers.claims.on_classifier` with the classifier's
dev score and its baseline's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from bertology_utils.papers.claims import Claim, Verdict, bootstrap_interval, spearman_rho, tagged

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from bertology_utils.interventions.pruning import PruningCurve

__all__ = ["PAPER", "heads_prunable", "importance_matches_ablation", "plot_importance"]

PAPER = "Michel et al. 2019"


def heads_prunable(
    curve: PruningCurve,
    random_curves: Sequence[PruningCurve] = (),
    *,
    keep: float = 0.9,
    task: str = "",
    n_resamples: int = 2000,
    seed: int = 0,
) -> Claim:
    """ "Many heads (about 40% on MNLI) can be pruned by importance without a noticeable drop".

    Holds when at least 20% of the heads go before the metric falls below ``keep`` of the original
    and importance order does at least as well as random order on average; partly when only some
    heads go. Not testable when the metric never drops, even with every head pruned: such a curve
    says nothing about heads.

    With the curves' per-example predictions (:meth:`~bertology_utils.interventions.pruning.PruningCurve.draws`),
    the prunable shares are recomputed on ``n_resamples`` bootstrap resamples of the dev examples (``seed``; every
    curve on the same resamples), and intervals decide: the importance order's share (the claim's interval) against
    20% and its excess over the random orders' mean share against 0, each holding when all of its interval lies at or
    above the threshold (the rule's ">="), differing when all of it lies below; partly when the share's interval lies
    above 0 and a part of "holds" differs; inconclusive where an interval that decides straddles.
    """
    share = curve.prunable(keep)
    rand = [c.prunable(keep) for c in random_curves]
    rand_mean = float(np.mean(rand)) if rand else math.nan
    rand_text = f"; random order {rand_mean:.0%} on average" if rand else ""
    ours = f"{share:.0%} pruned by importance{rand_text}"
    made = [getattr(c, "draws", None) for c in (curve, *random_curves)]
    drawn = [d(keep, n_resamples, seed) if callable(d) else None for d in made]
    ready = [d for d in drawn if d is not None]
    interval = None
    if len(ready) != len(drawn):  # a curve made by hand: the point shares decide
        verdict = (
            Verdict.NOT_TESTABLE
            if share >= 1.0
            else Verdict.HOLDS
            if share >= 0.2 and (not rand or share >= rand_mean)
            else Verdict.PARTLY
            if share > 0
            else Verdict.DIFFERS
        )
        rule = "holds: >= 20% prunable by importance and >= random order's mean; partly: > 0%"
    else:
        shares = [d["prunable"] for d in ready]
        interval = ready[0].interval(shares[0])
        at_least = -1e-9  # shares come in steps: ">= x" is "above just under x"
        halves = [Verdict.by_interval(interval, 0.2 + at_least)]
        if rand:
            excess = ready[0].interval(shares[0] - np.mean(shares[1:], axis=0))
            halves.append(Verdict.by_interval(excess, at_least))
            ours += f"; importance minus random {excess.describe(True)}"
        some = Verdict.by_interval(interval, 0.0)
        verdict = Verdict.NOT_TESTABLE if share >= 1.0 else Verdict.stepwise(Verdict.all_of(halves), some)
        rule = (
            "holds: >= 20% prunable by importance and >= random order's mean, each by its bootstrap interval over "
            "resampled dev examples (the claim's interval: the share's; the excess over random order's mean share); "
            "partly: the share's interval above 0% and a part of holds at or below; inconclusive where an interval "
            "that decides straddles"
        )
    return Claim(
        tagged("heads_prunable", task),
        f"Many heads can be pruned keeping {keep:.0%} of the metric, importance beats random",
        PAPER,
        "about 40% (MNLI)",
        ours,
        verdict,
        rule + "; not testable: the metric never drops",
        {"prunable": share, "prunable_random_mean": rand_mean},
        note=f"task: {task}" if task else "",
        interval=interval,
    )


def importance_matches_ablation(
    importance: npt.ArrayLike, harm: npt.ArrayLike, *, alpha: float = 0.05, task: str = "", seed: int = 0
) -> Claim:
    """Importance, a first-order estimate of the loss change, ranks heads like removing each one alone does.

    ``importance`` and ``harm``: per head (any shape), the raw importance and the dev-loss increase when the head
    alone is disabled (``AblationResult.harm("loss")``). The statistic is Spearman's rho, with a percentile
    bootstrap interval over heads at level 1 - ``alpha`` (a resample with a constant side counts rho 0): holds
    when the interval lies above 0, differs when it lies at or below 0, inconclusive when it straddles 0; not
    testable when either side is constant.
    """
    from scipy.stats import spearmanr

    importance, harm = np.ravel(np.asarray(importance, dtype=np.float64)), np.ravel(np.asarray(harm, dtype=np.float64))
    interval = bootstrap_interval(
        spearman_rho, importance, harm, over="heads", level=1 - alpha, seed=seed, undefined=0.0
    )
    rho = float(spearman_rho(importance, harm))
    p = float(spearmanr(importance, harm).pvalue) if math.isfinite(rho) else math.nan
    return Claim(
        tagged("importance_matches_ablation", task),
        "Importance (a first-order estimate of the loss change) ranks heads like removing each one alone",
        PAPER,
        "importance defined as that estimate",
        f"Spearman rho {rho:.2f} (p = {p:.2g}) with the dev-loss increase",
        Verdict.by_interval(interval),
        f"holds: the {1 - alpha:.0%} bootstrap interval of rho over heads lies above 0; differs: at or below 0; "
        "inconclusive: it straddles 0",
        {"spearman": rho, "p_value": p},
        note=f"task: {task}" if task else "",
        interval=interval,
    )


def plot_importance(
    importance: np.ndarray,
    raw_importance: npt.ArrayLike,
    loss_deltas: npt.ArrayLike,
    agreement: tuple[float, float],
    *,
    task: str = "",
) -> Figure:
    """Left: the (per-layer normalised) ``importance`` as a layers x heads grid. Right: each head's raw importance
    against the dev loss change when it alone is disabled (``loss_deltas``), coloured by layer, titled with
    ``agreement`` (Spearman's rho and p, e.g. from ``pruning.importance_ablation_agreement``). Returns the figure."""
    import matplotlib.pyplot as plt

    from bertology_utils.core.figures import plot_layer_head_grid

    importance = np.asarray(importance, dtype=float)
    layers, heads = importance.shape
    fig, axes = plt.subplots(
        1, 2, figsize=(0.55 * heads + 8, 0.45 * layers + 1.5), gridspec_kw={"width_ratios": [heads + 2, 6]}
    )
    title = "importance (L2-normalised per layer)"
    plot_layer_head_grid(importance, ax=axes[0], label="importance", title=f"{task}: {title}" if task else title)
    layer_of = np.repeat(np.arange(layers), heads)
    points = axes[1].scatter(np.ravel(loss_deltas), np.ravel(raw_importance), c=layer_of + 1, cmap="viridis", s=18)
    axes[1].axvline(0, color="k", lw=0.5)
    rho, p = agreement
    axes[1].set(
        xlabel="Δ dev loss, head disabled alone",
        ylabel="raw importance E|∂L/∂ξ|",
        title=f"Spearman ρ = {rho:.2f} (p = {p:.2g})",
    )
    fig.colorbar(points, ax=axes[1], label="layer")
    fig.tight_layout()
    return fig
