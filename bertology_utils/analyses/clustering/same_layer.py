"""Are heads of the same layer closer to each other than to the rest? A permutation test.

Clark et al. (2019, `What Does BERT Look At? <https://arxiv.org/abs/1906.04341>`_, Section 6) note
that heads in the same layer tend to be close in their Jensen–Shannon distances
(:func:`~bertology_utils.analyses.clustering.distances.head_distances`); :func:`same_layer_statistic`
puts a number and a p-value on it.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from bertology_utils.analyses.clustering.distances import HeadDistances, distance_matrix

__all__ = ["SameLayerTest", "same_layer_statistic"]


@dataclass(frozen=True)
class SameLayerTest:
    """Mean distance between heads of the same layer and of different layers, with a permutation test.

    The statistic is ``other_mean - same_mean``; ``p_value`` is the share of label permutations
    (plus the observed labelling) whose statistic is at least the observed one: small when heads
    of the same layer are closer than heads drawn at random into groups of the same sizes.

    :param same_mean: mean distance between two heads of one group (layer).
    :param other_mean: mean distance between two heads of different groups.
    :param p_value: the permutation test's p-value; NaN when not testable.
    :param n_permutations: label permutations drawn.
    :param null: ``(n_permutations,)`` the statistic under each permutation.
    :param not_testable: why the test could not be made (one group only, no group with two heads);
        empty when it was.
    """

    same_mean: float
    other_mean: float
    p_value: float
    n_permutations: int
    null: np.ndarray = field(repr=False)  #: the statistic under each permutation
    #: Why the test could not be made (one group only, no group with two heads); empty when it was.
    not_testable: str = ""

    @property
    def testable(self) -> bool:
        """Whether the test could be made."""
        return not self.not_testable

    @property
    def statistic(self) -> float:
        """``other_mean - same_mean``: above 0 when same-layer heads are closer."""
        return self.other_mean - self.same_mean

    @property
    def ratio(self) -> float:
        """same_mean / other_mean: below 1 when same-layer heads are closer."""
        return self.same_mean / self.other_mean if self.other_mean else float("nan")


def same_layer_statistic(
    distances: HeadDistances | ArrayLike,
    layers: Sequence[Hashable] | None = None,
    *,
    n_permutations: int = 10_000,
    seed: int = 0,
    chunk_bytes: int = 32 << 20,
) -> SameLayerTest:
    """Is a head closer to heads of its own layer than to the others? Means and a permutation p-value.

    Clark et al.'s observation that heads in the same layer tend to be close, as a test. Each
    permutation shuffles the labels over the heads, keeping the group sizes; the permutations are
    evaluated in chunks of at most ``chunk_bytes``, each as one batched matrix product (the
    within-group sum of a labelling ``Z`` (one-hot) is ``Σ Zᵀ D Z``). A grouping with one group, or
    with no group of two heads, is legal but cannot be tested: the result has NaN means and p-value
    and says why in ``not_testable``.

    :param distances: a :class:`~bertology_utils.analyses.clustering.distances.HeadDistances` or a
        ``(K, K)`` matrix.
    :param layers: ``(K,)`` a label per head (any hashable values, e.g. ``"model:layer"`` for a joint
        matrix); taken from a ``HeadDistances`` (its layer per head, within its source) when omitted.
    :param n_permutations: label permutations to draw.
    :param seed: the permutations' seed.
    :param chunk_bytes: memory bound of one chunk of permutations.
    :returns: the means, the p-value and the null distribution.
    """
    d = distance_matrix(distances).copy()
    np.fill_diagonal(d, 0.0)
    if layers is None:
        if not isinstance(distances, HeadDistances):
            raise ValueError("pass layers= with a plain matrix")
        layers = [f"{s}:{l}" for s, l in zip(distances.source, distances.layer)]
    _, codes = np.unique(np.asarray(layers), return_inverse=True)
    k = len(d)
    if codes.shape != (k,):
        raise ValueError(f"{len(codes)} layer labels for {k} heads")
    counts = np.bincount(codes)
    n_same = int((counts * (counts - 1)).sum())  # ordered pairs i != j in one group
    n_other = k * (k - 1) - n_same
    if n_same == 0 or n_other == 0:
        why = f"all {k} heads are in one group" if n_other == 0 else "no group has two heads"
        return SameLayerTest(math.nan, math.nan, math.nan, 0, np.empty(0), not_testable=why)
    total = d.sum()

    def within(labelings: np.ndarray) -> np.ndarray:
        """Sum of D over ordered same-group pairs, for each row of (permutations, heads) labels."""
        z = (labelings[:, :, None] == np.arange(len(counts))).astype(np.float64)  # (P, k, groups)
        zt = z.transpose(0, 2, 1)
        return ((zt @ d) * zt).sum(axis=(1, 2))

    def statistic(within_sum: np.ndarray) -> np.ndarray:
        return (total - within_sum) / n_other - within_sum / n_same

    within_observed = within(codes[None])[0]
    observed = statistic(within_observed)
    rng = np.random.default_rng(seed)
    chunk = max(1, chunk_bytes // (3 * 8 * k * len(counts)))  # z, its transpose's product, the product
    null = (
        np.concatenate(
            [
                statistic(within(rng.permuted(np.tile(codes, (min(chunk, n_permutations - start), 1)), axis=1)))
                for start in range(0, n_permutations, chunk)
            ]
        )
        if n_permutations
        else np.empty(0)
    )
    # A permutation that reproduces the observed grouping must count as "at least as large" even
    # when summation order changes the last bits: allow a slack far below any real difference.
    hits = int((null >= observed - 1e-9 * total / (k * (k - 1))).sum())
    return SameLayerTest(
        float(within_observed / n_same),
        float((total - within_observed) / n_other),
        (hits + 1) / (n_permutations + 1),
        n_permutations,
        null,
    )
