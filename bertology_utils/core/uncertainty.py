"""How sure a number is: an :class:`Interval` and the ways the package gets one.

:func:`bootstrap_interval` resamples paired items (or groups on their own) for a statistic vectorised over
resamples; :func:`bootstrap_weights` and :class:`Draws` resample items whose statistics are ratios of per-item sums
(row-weighted means over whole head grids) in one matrix product; :func:`permutation_interval` turns a
permutation null into an interval of the excess over chance. Every draw is seeded, so an interval is the
same on every run and machine. The claims (:mod:`bertology_utils.papers.claims`) decide their verdicts on
these intervals.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = [
    "Interval",
    "spearman_rho",
    "bootstrap_interval",
    "bootstrap_weights",
    "Draws",
    "permutation_interval",
]


@dataclass(frozen=True)
class Interval:
    """A confidence interval of a claim's statistic: ``level`` and how it was had (``method``, e.g. "bootstrap
    over 72 heads")."""

    low: float
    high: float
    level: float = 0.95
    method: str = "bootstrap"

    def __post_init__(self) -> None:  # JSON has no NaN: a bound that was not finite comes back from claims.json as null
        for end in ("low", "high"):
            object.__setattr__(self, end, math.nan if getattr(self, end) is None else float(getattr(self, end)))

    @property
    def finite(self) -> bool:
        return math.isfinite(self.low) and math.isfinite(self.high)

    def describe(self, short: bool = False) -> str:
        """ "95% CI [0.12, 0.4] (bootstrap over 72 heads)"; ``short`` leaves out the method."""
        how = "" if short else f" ({self.method})"
        if not self.finite:
            return f"no {self.level:.0%} interval{how}"
        return f"{self.level:.0%} CI [{self.low:.3g}, {self.high:.3g}]{how}"

    def __str__(self) -> str:
        return self.describe()


def spearman_rho(x: npt.ArrayLike, y: npt.ArrayLike, axis: int = -1) -> np.ndarray:
    """Spearman's rho of ``x`` and ``y`` along ``axis`` (ties share their mean rank), for many resamples at once;
    NaN where either side is constant."""
    from scipy.stats import rankdata

    rx, ry = (rankdata(np.asarray(v, dtype=np.float64), axis=axis) for v in (x, y))
    rx = rx - rx.mean(axis=axis, keepdims=True)
    ry = ry - ry.mean(axis=axis, keepdims=True)
    denominator = np.sqrt((rx * rx).sum(axis=axis) * (ry * ry).sum(axis=axis))
    with np.errstate(invalid="ignore", divide="ignore"):
        return (rx * ry).sum(axis=axis) / denominator


def bootstrap_interval(
    statistic: Callable[..., np.ndarray],
    *samples: npt.ArrayLike,
    over: str | Sequence[str],
    paired: bool = True,
    level: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    undefined: float | None = None,
) -> Interval:
    """A percentile bootstrap interval of ``statistic(*samples, axis=-1)`` (vectorised, as :func:`spearman_rho`).

    ``paired``: the items of ``samples`` resampled together (one length; an item missing on one side dropped from
    all), and ``over`` names them ("72 heads"); NaN bounds with fewer than 3 items. Not ``paired``: each sample
    resampled on its own (a stratified bootstrap of groups that are not matched item by item, e.g. a difference of
    medians), and ``over`` names each ("specialised", "other heads"); NaN bounds with a sample of fewer than 2.
    Either way NaN bounds when the statistic is not finite on the data, and seeded.

    ``undefined``: the value of a resample on which the statistic is not finite (a rank correlation of a
    resample whose one side came out constant: 0, no relation); None leaves it NaN, and the interval with it.
    """
    from scipy.stats import bootstrap

    def resampled(*arrays: np.ndarray, axis: int = -1) -> np.ndarray:
        values = statistic(*arrays, axis=axis)
        return values if undefined is None else np.where(np.isfinite(values), values, undefined)

    arrays = [np.asarray(sample, dtype=np.float64).ravel() for sample in samples]
    if paired:
        if len({len(a) for a in arrays}) != 1:
            raise ValueError(f"the samples must have one length each, not {[len(a) for a in arrays]}")
        keep = np.logical_and.reduce([np.isfinite(a) for a in arrays])
        arrays = [a[keep] for a in arrays]
        method, enough = f"bootstrap over {len(arrays[0])} {over}", len(arrays[0]) >= 3
    else:
        names = [over] if isinstance(over, str) else list(over)
        if len(names) != len(arrays):
            raise ValueError(f"name each of the {len(arrays)} samples in over, not {names}")
        arrays = [a[np.isfinite(a)] for a in arrays]
        method = "bootstrap within " + " and ".join(f"{len(a)} {name}" for a, name in zip(arrays, names))
        enough = all(len(a) >= 2 for a in arrays)
    if not enough or not np.isfinite(statistic(*arrays, axis=-1)):
        return Interval(math.nan, math.nan, level, method)
    rng = np.random.default_rng(seed)
    if not paired:  # each sample drawn in turn from the one seeded generator
        draws = [a[rng.integers(0, len(a), size=(n_resamples, len(a)))] for a in arrays]
        low, high = np.quantile(resampled(*draws, axis=-1), [(1 - level) / 2, (1 + level) / 2])
        return Interval(float(low), float(high), level, method)
    result = bootstrap(
        arrays,
        resampled,
        paired=True,
        vectorized=True,
        n_resamples=n_resamples,
        confidence_level=level,
        method="percentile",
        rng=rng,
    )
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    return Interval(low, high, level, method)


def bootstrap_weights(n_items: int, n_resamples: int = 2000, seed: int = 0) -> np.ndarray:
    """How often each of ``n_items`` items is drawn in each of ``n_resamples`` bootstrap resamples: an
    ``(n_resamples, n_items)`` array of multinomial counts, seeded. A statistic that is a ratio of per-item sums (a
    row-weighted mean) is then one matrix product per resample: ``(weights @ sums) / (weights @ rows)``."""
    rng = np.random.default_rng(seed)
    return rng.multinomial(n_items, np.full(n_items, 1.0 / n_items), size=n_resamples).astype(np.float64)


@dataclass(frozen=True)
class Draws:
    """Bootstrap draws of an analysis's results, every result drawn from the same resampled items:
    ``values[name]`` has the result's shape behind a leading ``(n_resamples,)`` axis. ``over`` names the items
    ("400 sentences"). A claim computes its statistic on the draws as on the results (vectorised over the
    leading axis) and reads :meth:`interval`. Made by e.g.
    :meth:`~bertology_utils.analyses.patterns.SurfaceStats.bootstrap`."""

    values: Mapping[str, np.ndarray]
    over: str
    level: float = 0.95

    def __getitem__(self, name: str) -> np.ndarray:
        return self.values[name]

    def interval(self, statistic: np.ndarray) -> Interval:
        """The percentile interval of a statistic's draws (one value per draw). Draws where it is not finite (a
        resample without any row it reads) are left out; NaN bounds when more than ``1 - level`` of them are."""
        values = np.asarray(statistic, dtype=np.float64).ravel()
        finite = values[np.isfinite(values)]
        method = f"bootstrap over {self.over}"
        if not values.size or len(finite) < self.level * len(values):
            return Interval(math.nan, math.nan, self.level, method)
        low, high = np.quantile(finite, [(1 - self.level) / 2, (1 + self.level) / 2])
        return Interval(float(low), float(high), self.level, method)


def permutation_interval(
    observed: float, null: npt.ArrayLike, *, level: float = 0.95, method: str = "permutation"
) -> Interval:
    """The interval of an excess over chance: ``observed`` minus the central ``level`` range of its permutation
    ``null`` (the statistic under each relabelling). It lies above 0 when ``observed`` is above the range, below 0
    when under it; NaN bounds with no null or a statistic that is not finite."""
    null = np.asarray(null, dtype=np.float64).ravel()
    if not null.size or not math.isfinite(observed):
        return Interval(math.nan, math.nan, level, method)
    low, high = np.quantile(null, [(1 + level) / 2, (1 - level) / 2])
    return Interval(observed - float(low), observed - float(high), level, method)
