"""Heads placed by their distances: a 2-D embedding (metric MDS), nearest neighbours, hierarchical clustering.

Clark et al. (2019, `What Does BERT Look At? <https://arxiv.org/abs/1906.04341>`_, Section 6) embed
the heads in 2-D with multidimensional scaling of their Jensen–Shannon distances
(:func:`~bertology_utils.analyses.clustering.distances.head_distances`); :func:`embed_heads` does the
same, :func:`head_linkage` clusters the heads hierarchically, :func:`nearest_heads` lists neighbours.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from bertology_utils.analyses.clustering.distances import HeadDistances, distance_matrix

__all__ = ["Embedding", "embed_heads", "nearest_heads", "head_linkage"]


@dataclass(frozen=True)
class Embedding:
    """Points from :func:`embed_heads` and how faithfully they keep the distances.

    :param coords: ``(K, n_components)`` one point per head.
    :param stress: Kruskal's stress-1, ``sqrt(Σ (d - d̂)² / Σ d²)`` over pairs; 0 is a perfect fit.
    """

    coords: np.ndarray  #: (K, n_components), K the heads
    stress: float  #: Kruskal's stress-1: sqrt(Σ (d - d̂)² / Σ d²) over pairs; 0 is a perfect fit


def embed_heads(
    distances: HeadDistances | ArrayLike,
    n_components: int = 2,
    *,
    seed: int = 0,
    max_iter: int = 1000,
    eps: float = 1e-9,
) -> Embedding:
    """Metric MDS (scikit-learn, SMACOF) of a precomputed distance matrix, as Clark et al. did.

    Started from classical MDS where scikit-learn offers it (>= 1.8), else from ``seed``'s random
    start, best of 4; either way the result is fixed for a given seed. One or two heads (a model
    that small) are placed exactly: at the origin, or on the first axis at their distance.

    :param distances: a :class:`~bertology_utils.analyses.clustering.distances.HeadDistances` or a
        ``(K, K)`` matrix.
    :param n_components: the dimensions of the embedding.
    :param seed: the random start's seed.
    :param max_iter: SMACOF's iterations at most.
    :param eps: SMACOF's convergence tolerance.
    :returns: the ``(K, n_components)`` points and their stress.
    """
    from sklearn.manifold import MDS

    d = distance_matrix(distances)
    if len(d) <= 2:
        coords = np.zeros((len(d), n_components))
        if len(d) == 2:
            coords[:, 0] = [-d[0, 1] / 2, d[0, 1] / 2]
        return Embedding(coords, 0.0)
    options = dict(n_components=n_components, max_iter=max_iter, eps=eps, random_state=seed)
    if "metric_mds" in inspect.signature(MDS).parameters:  # scikit-learn >= 1.8 renamed the options
        mds = MDS(metric="precomputed", metric_mds=True, init="classical_mds", n_init=1, **options)
    else:
        mds = MDS(dissimilarity="precomputed", metric=True, n_init=4, **options)
    coords = mds.fit_transform(d)
    upper = np.triu_indices_from(d, 1)
    fitted = np.linalg.norm(coords[:, None, :] - coords[None, :, :], axis=-1)[upper]
    stress = math.sqrt(((d[upper] - fitted) ** 2).sum() / max((d[upper] ** 2).sum(), np.finfo(float).tiny))
    return Embedding(coords, stress)


def nearest_heads(distances: HeadDistances | ArrayLike, k: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Each head's ``k`` nearest other heads, nearest first.

    ``k`` is capped at ``K - 1`` (a head is never its own neighbour); equal distances keep the lower
    index first, so the answer does not depend on the sort.

    :param distances: a :class:`~bertology_utils.analyses.clustering.distances.HeadDistances` or a
        ``(K, K)`` matrix.
    :param k: neighbours per head.
    :returns: ``(index, distance)``, both ``(K, k)``; ``index`` counts heads as the rows of
        ``distances`` (:meth:`~bertology_utils.analyses.clustering.distances.HeadDistances.labels`
        names them).
    """
    d = distance_matrix(distances).copy()
    k = max(0, min(k, len(d) - 1))
    np.fill_diagonal(d, np.inf)
    index = np.argsort(d, axis=1, kind="stable")[:, :k]
    return index, np.take_along_axis(d, index, axis=1)


def head_linkage(distances: HeadDistances | ArrayLike, method: str = "average") -> np.ndarray:
    """Hierarchical clustering of heads (scipy ``linkage`` on the condensed matrix).

    ``"average"`` (UPGMA) is the default because it needs no Euclidean geometry; ``"ward"`` and
    ``"centroid"`` assume one and are better used on the square root of the summed divergence.

    :param distances: a :class:`~bertology_utils.analyses.clustering.distances.HeadDistances` or a
        ``(K, K)`` matrix.
    :param method: scipy's linkage method.
    :returns: ``(K - 1, 4)`` scipy linkage matrix; ``(0, 4)`` for one head.
    """
    from scipy.cluster.hierarchy import linkage
    from scipy.spatial.distance import squareform

    d = distance_matrix(distances)
    if len(d) < 2:  # one head: nothing to merge
        return np.empty((0, 4))
    return linkage(squareform(d, checks=False), method=method)
