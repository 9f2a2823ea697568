"""Clark et al. (2019)'s claims on what heads attend to: surface patterns (Section 3) and [SEP] as a no-op
(Section 3.3, gradients and attention removal)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from bertology_utils.core.heads import Head
from bertology_utils.papers.claims import (
    BY_INTERVAL,
    Claim,
    Draws,
    Interval,
    Verdict,
    depth_scaled_layers,
    layer_mean,
    spearman_rho,
)

if TYPE_CHECKING:
    import pandas as pd

    from bertology_utils.interventions.gradients import GradientStats

__all__ = [
    "PAPER",
    "current_token",
    "neighbour_heads",
    "sep_middle_layers",
    "cls_early_layers",
    "punctuation_last_layers",
    "sep_attends_to_sep",
    "early_layers_broad",
    "cls_entropy_last_layer",
    "special_gradient_small",
    "gradients_shrink",
    "attention_removal",
    "objective_claims",
]

PAPER = "Clark et al. 2019"
_TOKENS = {"sep": "[SEP]", "cls": "[CLS]", "punct": "punctuation"}


def _finite(*values: float | None) -> bool:
    return all(v is not None and math.isfinite(v) for v in values)


# --------------------------------------------------------------------------- surface patterns (Section 3)


def _interval(draws: Draws | None, statistic: Callable[[Draws], np.ndarray]) -> Interval | None:
    """The interval of a claim's statistic over ``draws`` (None without them); ``statistic`` maps the draws to one
    value per draw, computed as the claim computes it from the results."""
    return None if draws is None else draws.interval(statistic(draws))


def _median_self_share(values: np.ndarray, axis: int | tuple[int, ...] | None = None) -> np.ndarray:
    with warnings.catch_warnings():  # a grid with no finite head gives NaN, as it should
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmedian(values, axis=axis)


def current_token(self_share: npt.ArrayLike, *, draws: Draws | None = None) -> Claim:
    """ "Most heads put little attention on the current token": the median head's share on its own position.

    ``draws`` (every function here takes them: :meth:`~bertology_utils.analyses.patterns.SurfaceStats.bootstrap`
    of the statistics the arguments come from): the claim gets the bootstrap interval of its statistic over the
    items, and the interval decides (inconclusive where it straddles the threshold)."""
    values = np.asarray(self_share, dtype=np.float64)
    median = float(_median_self_share(values))
    interval = _interval(draws, lambda d: _median_self_share(d["self"], axis=(1, 2)))
    return Claim(
        "current_token",
        "Most heads put little attention on the current token",
        PAPER,
        "most heads",
        f"median self share {median:.2f}",
        Verdict.of(median < 0.1, _finite(median), interval, 0.1, below=True),
        "median over heads of the share on the current position < 0.10" + BY_INTERVAL * (interval is not None),
        {"median_self_share": median},
        interval=interval,
    )


def _neighbour_margin(values: np.ndarray, early: int) -> np.ndarray:
    """min(strongest early head - 0.5, 0.5 - strongest later head), over the trailing (layers, heads) axes: above 0
    exactly when some head of layers 1..``early`` puts more than 0.5 on the neighbour and no later head does."""
    lead = values.shape[:-2]
    first = values[..., :early, :].reshape(lead + (-1,))
    later = values[..., early:, :].reshape(lead + (-1,))
    top = np.nanmax(np.where(np.isfinite(first), first, -np.inf), axis=-1)
    rest = np.nanmax(np.where(np.isfinite(later), later, -np.inf), axis=-1, initial=-np.inf)
    return np.minimum(top - 0.5, 0.5 - rest)


def neighbour_heads(share: npt.ArrayLike, position: str, *, draws: Draws | None = None) -> Claim:
    """ "Some early heads put > 50% on the previous (about 4 heads) / next (about 5) token": all such heads early.

    With ``draws``, the interval is of the margin by which the claim holds: the strongest early head's share over
    0.5, or the strongest later head's under it, whichever is smaller."""
    paper_n = {"previous": 4, "next": 5}[position]
    values = np.asarray(share, dtype=np.float64)
    strong = [Head(int(l), int(h)) for l, h in np.argwhere(values > 0.5)]
    early = depth_scaled_layers(1, 6, values.shape[0])[1]
    listed = ", ".join(map(str, strong)) or "none"
    interval = _interval(draws, lambda d: _neighbour_margin(d[position], early))
    rule = f">= 1 head above 0.5, all in layers 1-{early} (the first half of the depth)"
    if interval is not None:
        rule += "; by the interval of min(strongest early head - 0.5, 0.5 - strongest later head) > 0"
    return Claim(
        f"{position}_token_heads",
        f"Some heads put > 50% on the {position} token, in early layers",
        PAPER,
        f"about {paper_n} of 144 heads",
        f"{len(strong)} of {values.size} heads ({listed})",
        Verdict.of(
            bool(strong) and all(h.layer + 1 <= early for h in strong), bool(np.isfinite(values).any()), interval
        ),
        rule,
        {"heads": len(strong), "last_early_layer": early},
        interval=interval,
    )


def sep_middle_layers(sep_share: npt.ArrayLike, testable: bool = True, *, draws: Draws | None = None) -> Claim:
    """ "More than half of the attention in layers 6-10 goes to [SEP]" (Clark's Figure 2, Section 3.2).

    The one definition every notebook uses: the mean [SEP] share over the heads of the layers that
    cover depths 6/12 to 10/12 (layers 6-10 of BERT-base) must exceed 0.5. Figure 2 plots each
    layer's average attention to [SEP], and the claim is about those layers together; the
    maximum over any one layer (an earlier definition here) would pass a model whose [SEP]
    peak sits elsewhere, and fail none that the paper's statement fails. ``testable``: the inputs
    had separators at all (a corpus without [SEP] cannot show it).
    """
    mean, layers = layer_mean(sep_share, 6, 10)
    interval = _interval(draws, lambda d: layer_mean(d["sep"], 6, 10, draws=True)[0])
    return Claim(
        "sep_middle_layers",
        "More than half of the attention in layers 6-10 goes to [SEP]",
        PAPER,
        "> 0.5 in layers 6-10",
        f"{mean:.2f} in layers {layers}",
        Verdict.of(mean > 0.5, testable and _finite(mean), interval, 0.5),
        "mean [SEP] share over the heads of the depth-scaled layers 6-10 > 0.5" + BY_INTERVAL * (interval is not None),
        {"sep_share": mean},
        interval=interval,
    )


def cls_early_layers(cls_share: npt.ArrayLike, *, draws: Draws | None = None) -> Claim:
    """ "[CLS] draws attention in early layers": the depth-scaled layers 1-4 against 5-12."""
    early, lay_e = layer_mean(cls_share, 1, 4)
    late, lay_l = layer_mean(cls_share, 5, 12)
    interval = _interval(
        draws, lambda d: layer_mean(d["cls"], 1, 4, draws=True)[0] - layer_mean(d["cls"], 5, 12, draws=True)[0]
    )
    return Claim(
        "cls_early_layers",
        "[CLS] draws attention in early layers",
        PAPER,
        "early > later",
        f"{early:.2f} (layers {lay_e}) vs {late:.2f} (layers {lay_l})",
        Verdict.of(early > late, _finite(early, late), interval),
        "mean [CLS] share, depth-scaled layers 1-4 > layers 5-12" + BY_INTERVAL * (interval is not None),
        {"early": early, "later": late},
        interval=interval,
    )


def _last_minus_rest(punct: np.ndarray) -> np.ndarray:
    """Per draw of ``punct`` (draws, L, H): the mean share of layers 11-12 (scaled) minus that of layers 1-10."""
    return layer_mean(punct, 11, 12, draws=True)[0] - layer_mean(punct, 1, 10, draws=True)[0]


def punctuation_last_layers(
    period_share: npt.ArrayLike, comma_share: npt.ArrayLike, testable: bool = True, *, draws: Draws | None = None
) -> Claim:
    """'"." and "," draw attention in the last layers': their summed share, layers 11-12 (scaled) vs 1-10."""
    punct = np.asarray(period_share, dtype=np.float64) + np.asarray(comma_share, dtype=np.float64)
    last, lay = layer_mean(punct, 11, 12)
    rest, _ = layer_mean(punct, 1, 10)
    interval = _interval(draws, lambda d: _last_minus_rest(d["period"] + d["comma"]))
    return Claim(
        "punctuation_last_layers",
        '"." and "," draw attention in the last layers',
        PAPER,
        "last > earlier",
        f"{last:.3f} (layers {lay}) vs {rest:.3f}",
        Verdict.of(last > rest, testable and _finite(last, rest), interval),
        'mean "." + "," share, depth-scaled layers 11-12 > layers 1-10' + BY_INTERVAL * (interval is not None),
        {"last": last, "earlier": rest},
        interval=interval,
    )


def sep_attends_to_sep(sep_to_sep: npt.ArrayLike, testable: bool = True, *, draws: Draws | None = None) -> Claim:
    """ "From [SEP], heads attend to [SEP] (> 90%)": separator rows, depth-scaled layers 6-10."""
    mean, lay = layer_mean(sep_to_sep, 6, 10)
    interval = _interval(draws, lambda d: layer_mean(d["sep_to_sep"], 6, 10, draws=True)[0])
    return Claim(
        "sep_to_sep",
        "From [SEP], heads attend to [SEP]",
        PAPER,
        "> 0.9",
        f"{mean:.2f} in layers {lay}",
        Verdict.of(mean > 0.9, testable and _finite(mean), interval, 0.9),
        "mean [SEP]->[SEP] share over the depth-scaled layers 6-10 > 0.9" + BY_INTERVAL * (interval is not None),
        {"sep_to_sep": mean},
        interval=interval,
    )


def _last_layer_mean(values: np.ndarray) -> np.ndarray:
    """Mean over the heads of the last layer (the trailing (layers, heads) axes); NaN heads left out."""
    last = values[..., -1, :]
    finite = np.isfinite(last)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(finite, last, 0.0).sum(-1) / finite.sum(-1)


def early_layers_broad(entropy: npt.ArrayLike, uniform_entropy: float, *, draws: Draws | None = None) -> Claim:
    """ "Early layers attend broadly (high entropy, about a bag of words)".

    Holds when the first 2/12 of the depth reach 0.8 of the uniform entropy (near a bag of words);
    partly when they only attend more broadly than the last layer. With ``draws``, the interval of the ratio to
    uniform decides holds (above 0.8) or not (below); below, the interval of early minus last entropy decides
    partly or differs; an interval straddling its threshold reads inconclusive, and the claim carries the
    interval that decided.
    """
    values = np.asarray(entropy, dtype=np.float64)
    early, lay = layer_mean(values, 1, 2)
    last = float(_last_layer_mean(values)) if np.isfinite(values[-1]).any() else math.nan
    ratio = early / uniform_entropy if _finite(early, uniform_entropy) and uniform_entropy > 0 else math.nan
    testable = _finite(ratio, last)
    interval = None
    if draws is None or not testable:
        verdict = Verdict.graded(ratio >= 0.8, early > last, testable)
    else:
        drawn_early = layer_mean(draws["entropy"], 1, 2, draws=True)[0]
        interval = draws.interval(drawn_early / draws["uniform_entropy"])
        verdict = Verdict.by_interval(interval, 0.8)
        if verdict is Verdict.DIFFERS:  # not near a bag of words: is it broader than the last layer?
            interval = draws.interval(drawn_early - _last_layer_mean(draws["entropy"]))
            verdict = Verdict.stepwise(verdict, Verdict.by_interval(interval))
    rule = (
        "holds: mean entropy / uniform >= 0.8 in the depth-scaled layers 1-2; partly: below that but above "
        "the last layer's"
    )
    return Claim(
        "early_layers_broad",
        "Early layers attend broadly (near bag-of-words)",
        PAPER,
        "high entropy",
        f"{ratio:.2f} of uniform (layers {lay}); {early:.2f} vs {last:.2f} nats in the last layer",
        verdict,
        rule + ("; each step by its interval, inconclusive where it straddles" if interval is not None else ""),
        {"early_entropy": early, "last_entropy": last, "early_ratio_to_uniform": ratio},
        interval=interval,
    )


def cls_entropy_last_layer(
    cls_entropy: npt.ArrayLike, uniform_cls_entropy: float, *, draws: Draws | None = None
) -> Claim:
    """ "In the last layer the [CLS] token's attention has entropy about 3.89 nats", relative to uniform.

    Clark's inputs were about 128 tokens, so log 128 is taken as their uniform reference (an assumption). With
    ``draws``, the interval of our ratio holds when it lies inside the 0.10 band around the paper's, differs when
    it lies wholly outside.
    """
    values = np.asarray(cls_entropy, dtype=np.float64)
    last = float(_last_layer_mean(values)) if np.isfinite(values[-1]).any() else math.nan
    paper_ratio = 3.89 / np.log(128)
    ours = last / uniform_cls_entropy if _finite(last, uniform_cls_entropy) and uniform_cls_entropy > 0 else math.nan
    interval = _interval(draws, lambda d: _last_layer_mean(d["cls_entropy"]) / d["uniform_cls_entropy"])
    verdict = Verdict.of(abs(ours - paper_ratio) <= 0.1, _finite(ours))
    if interval is not None and verdict is not Verdict.NOT_TESTABLE:  # inside the band: above its floor, below its top
        verdict = Verdict.all_of(
            [
                Verdict.by_interval(interval, paper_ratio - 0.1),
                Verdict.by_interval(interval, paper_ratio + 0.1, below=True),
            ]
        )
    return Claim(
        "cls_entropy_last_layer",
        "Last layer: [CLS] attention entropy about 3.89 nats",
        PAPER,
        f"3.89 nats ({paper_ratio:.2f} of log 128)",
        f"{last:.2f} nats ({ours:.2f} of uniform)",
        verdict,
        "entropy / uniform within 0.10 of the paper's 3.89 / log 128" + BY_INTERVAL * (interval is not None),
        {"entropy": last, "ratio_to_uniform": ours},
        note="log 128 as Clark's uniform reference is an assumption",
        interval=interval,
    )


# --------------------------------------------------------------------------- [SEP] as a no-op (Section 3.3)


def _finite_mean(values: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """Mean over ``columns`` of the last axis, NaN entries left out; NaN where none is finite (or no columns)."""
    part = values[..., columns]
    finite = np.isfinite(part)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(finite, part, 0.0).sum(-1) / np.where(finite.any(-1), finite.sum(-1), np.nan)


def _gradient_margin(ratio: np.ndarray, high: np.ndarray, low: np.ndarray) -> np.ndarray:
    """min(1, the other layers' ratio) - the top layers' ratio, over the last (layers) axis: above 0 exactly when
    the top layers' ratio is below 1 and below the other layers' (below 1 alone when there are no other layers)."""
    return np.fmin(1.0, _finite_mean(ratio, low)) - _finite_mean(ratio, high)


def _gradient_draws(stats: GradientStats, level: float, n_resamples: int, seed: int) -> Draws | None:
    """:meth:`GradientStats.bootstrap`, None for statistics that keep no per-item sums (no interval then)."""
    return stats.bootstrap(n_resamples, seed, level) if getattr(stats, "per_item", None) else None


def _interval_of(draws: Draws | None, statistic: Callable[[Draws], np.ndarray], level: float) -> Interval:
    """:func:`_interval`, with NaN bounds (so not testable) where the statistics keep nothing to resample."""
    return _interval(draws, statistic) or Interval(math.nan, math.nan, level, "bootstrap: no per-item sums to resample")


def special_gradient_small(
    stats: GradientStats,
    kind: str = "sep",
    objective: str = "",
    *,
    draws: Draws | None = None,
    level: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> Claim:
    """ "From layer 5 on, gradients for attention to [SEP] are small" (Figure 3), for [SEP] or, as a control, [CLS].

    The layers with the most attention to the token (the top half) must have a gradient per
    weight for it below ordinary tokens' (ratio < 1) and below its own ratio in the other layers: the statistic is
    the margin min(1, other layers' ratio) - top layers' ratio, above 0 exactly then. Its interval is a percentile
    bootstrap over the items the statistics were measured on (``draws``, else :meth:`GradientStats.bootstrap`
    with ``level``, ``n_resamples`` and ``seed``): each draw resamples the items with their gradient sums and
    weight counts together, the layers split as on all items. Holds when the interval lies above 0, differs at or
    below 0, inconclusive when it straddles 0; not testable without a finite ratio or an interval.
    """
    token = _TOKENS.get(kind, kind)
    share = np.nanmean(stats.attention[kind], axis=1)
    ratio = np.asarray(stats.gradient_ratio(kind), dtype=np.float64)
    order = np.argsort(-share, kind="stable")
    high, low = order[: max(1, len(order) // 2)], order[max(1, len(order) // 2) :]
    high_ratio, low_ratio = float(_finite_mean(ratio, high)), float(_finite_mean(ratio, low))
    draws = draws if draws is not None else _gradient_draws(stats, level, n_resamples, seed)
    interval = _interval_of(draws, lambda d: _gradient_margin(d[f"gradient_ratio:{kind}"], high, low), level)
    suffix = f".{objective}" if objective else ""
    return Claim(
        f"{kind}_gradient_small{suffix}",
        f"In the layers with most attention to {token}, the gradient per weight for it is small "
        "(below ordinary tokens', and below its own in the other layers)",
        PAPER,
        "from layer 5 on, [SEP] gradients small" if kind == "sep" else "not claimed (a control)",
        f"{token}/other gradient per weight: {high_ratio:.2f} in the {len(high)} layers with most {token} "
        f"attention (mean share {share[high].mean():.2f}), {low_ratio:.2f} in the rest",
        Verdict.by_interval(interval) if _finite(high_ratio) else Verdict.NOT_TESTABLE,
        "top half of layers by attention share: gradient ratio to ordinary tokens < 1 and < the other layers' "
        f"ratio; holds: the {interval.level:.0%} bootstrap interval over items of min(1, other layers' ratio) - "
        "top layers' ratio lies above 0; differs: at or below 0; inconclusive: it straddles 0",
        {"high_ratio": high_ratio, "low_ratio": low_ratio},
        note=f"objective: {objective}" if objective else "",
        interval=interval,
    )


def _depth_rho(norm: np.ndarray) -> np.ndarray:
    """Spearman's rho of the last axis (layers) with depth; 0 where the norms are finite but constant (a resample
    without a trend), NaN where they are not finite."""
    depth = np.broadcast_to(np.arange(norm.shape[-1], dtype=np.float64), norm.shape)
    rho = spearman_rho(depth, norm, axis=-1)
    return np.where(np.isfinite(norm).all(-1) & ~np.isfinite(rho), 0.0, rho)


def gradients_shrink(
    stats: GradientStats,
    objective: str = "",
    *,
    draws: Draws | None = None,
    level: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> Claim:
    """ "Gradients shrink with depth": Spearman's rho of the per-layer gradient norm (mean over items) with the
    layer index < 0.

    The interval is a percentile bootstrap over the items (``draws``, else :meth:`GradientStats.bootstrap` with
    ``level``, ``n_resamples`` and ``seed``): each draw resamples the items, averages their per-layer norms and
    recomputes rho (a draw whose norms came out constant counts rho 0). Holds when the interval of rho lies below
    0, differs at or above 0, inconclusive when it straddles 0; not testable when rho is not defined (one layer,
    constant norms) or there is no interval.
    """
    from scipy.stats import spearmanr

    norm = np.asarray(stats.gradient_norm, dtype=np.float64)
    rho = float(spearmanr(np.arange(len(norm)), norm)[0]) if len(norm) > 1 else math.nan
    draws = draws if draws is not None else _gradient_draws(stats, level, n_resamples, seed)
    interval = _interval_of(draws, lambda d: _depth_rho(d["gradient_norm"]), level)
    suffix = f".{objective}" if objective else ""
    return Claim(
        f"gradients_shrink{suffix}",
        "Gradients shrink with depth",
        PAPER,
        "smaller in deeper layers",
        f"norm layer 1: {norm[0]:.3g}, layer {len(norm)}: {norm[-1]:.3g} (Spearman with depth {rho:.2f})",
        Verdict.by_interval(interval, below=True) if _finite(rho) else Verdict.NOT_TESTABLE,
        f"Spearman rho of the layer's gradient norm with depth < 0; holds: its {interval.level:.0%} bootstrap "
        "interval over items lies below 0; differs: at or above 0; inconclusive: it straddles 0",
        {"spearman_with_depth": rho},
        note=f"objective: {objective}" if objective else "",
        interval=interval,
    )


def objective_claims(
    stats: GradientStats,
    ablation: pd.DataFrame,
    objective: str = "",
    *,
    level: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> list[Claim]:
    """Every claim on one objective: small gradients for attention to [SEP] (and [CLS], the control), gradients
    shrinking with depth, and :func:`attention_removal` for each row of its ``ablation`` summary
    (:func:`~bertology_utils.interventions.ablations.ablation_summary`). The gradient claims' intervals come from
    one bootstrap of the items (:meth:`GradientStats.bootstrap` with ``level``, ``n_resamples`` and ``seed``)."""
    draws = _gradient_draws(stats, level, n_resamples, seed)
    return [
        special_gradient_small(stats, "sep", objective, draws=draws, level=level),
        special_gradient_small(stats, "cls", objective, draws=draws, level=level),
        gradients_shrink(stats, objective, draws=draws, level=level),
        *(attention_removal(row, objective) for _, row in ablation.iterrows()),
    ]


def _row_number(row: Mapping, name: str, default: float = math.nan) -> float:
    """``row[name]`` as a float; ``default`` when it is missing or not a number."""
    value = row.get(name, default)
    try:
        return float(value) if value is not None else default
    except (TypeError, ValueError):
        return default


def attention_removal(row: Mapping, objective: str = "") -> Claim:
    """Beyond the paper, what a no-op predicts: moving the attention on a token away changes the output less
    than moving the same mass off a random ordinary token. ``row``: one row of
    :func:`~bertology_utils.interventions.ablations.ablation_summary` (target, mode, changes, ratio, mass, and the
    ratio's bootstrap interval over the items: ``ratio_low``, ``ratio_high``, ``ratio_level``, ``items``).

    The statistic is the ratio (target's change over the matched control's), with the summary's interval over
    the items (each item's change averaged over layers, target and control resampled together). Holds when it
    lies below 1, differs at or above 1, inconclusive when it straddles 1; not testable without a finite ratio or
    a summary interval.
    """
    target, mode, ratio = row["target"], row["mode"], float(row["ratio"])
    token = _TOKENS.get(target, target)
    level, items = _row_number(row, "ratio_level", 0.95), _row_number(row, "items", 0.0)
    low, high = _row_number(row, "ratio_low"), _row_number(row, "ratio_high")
    over = f"{int(items)} items" if math.isfinite(items) and items > 0 else "items"
    interval = Interval(low, high, level, f"bootstrap over {over}")
    suffix = f".{objective}" if objective else ""
    return Claim(
        f"ablation{suffix}.{target}.{mode}",
        f"Moving the attention on {token} away ({mode}) changes the output less than moving the same mass "
        "off a random token",
        PAPER,
        "not tested; what a no-op predicts" if target == "sep" else "not tested",
        f"hidden-state change {row['hidden_change (target)']:.3g} vs {row['hidden_change (control)']:.3g} "
        f"(ratio {ratio:.2f}; mean mass moved {row['mean mass moved']:.2f})",
        Verdict.by_interval(interval, 1.0, below=True) if _finite(ratio) else Verdict.NOT_TESTABLE,
        f"hidden-state change, target / matched control < 1; holds: its {level:.0%} bootstrap interval over items "
        "lies below 1; differs: at or above 1; inconclusive: it straddles 1",
        {"ratio": ratio},
        note="beyond the paper" + (f"; objective: {objective}" if objective else ""),
        interval=interval,
    )
