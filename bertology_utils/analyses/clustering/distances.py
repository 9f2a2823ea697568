"""Clustering attention heads by behaviour: Jensen–Shannon distances between heads, MDS, dendrograms.

Clark et al. (2019, section 6) measure how differently two heads behave as the Jensen–Shannon
divergence between their attention distributions, summed over every attending token of the
data, embed the heads in 2-D with multidimensional scaling, and note that heads in the same
layer tend to be close. This module does the same at word level:

* :func:`head_distances` streams items from one or more :class:`~bertology_utils.attention.store.AttentionStore`
  (or lists of :class:`~bertology_utils.attention.word_attention.ItemAttention`) and returns the distances
  between all pairs of heads at once. Several sources extracted from the same corpus (two models,
  or a checkpoint before and after fine-tuning) give one joint matrix, so all heads land in one space.
* :func:`embed_heads` (metric MDS), :func:`head_linkage` and :func:`plot_dendrogram`
  (hierarchical clustering) turn the matrix into pictures.
* :func:`same_layer_statistic` puts a number and a p-value on "heads in the same layer are close".

**What the distance is.** For one attending word (one row of a map), with the two heads'
attention rows ``p`` and ``q`` (each renormalised to sum to 1, since float16 storage leaves
rows within ~1e-3 of 1, then smoothed as below),

    JS(p, q) = ½ KL(p ‖ m) + ½ KL(q ‖ m),   m = (p + q) / 2,   natural logarithm (nats),

the Jensen–Shannon *divergence* (between 0 and log 2). ``scipy.spatial.distance.jensenshannon``
returns the Jensen–Shannon *distance*, its square root: ``JS = jensenshannon(p, q) ** 2``.
The distance between two heads is the divergence summed over all rows of all items
(``reduction="sum"``, Clark's choice, so it grows with the data) or averaged over them
(``reduction="mean"``, comparable across data sets). Rows of the special pseudo-words ([CLS],
[SEP]) are included, as Clark included them. The summed divergence is not itself a metric, but
its square root is (the Euclidean combination of per-row Jensen–Shannon distances).

**Smoothing.** As in Clark's code, each row is mixed with the uniform distribution over its
``n`` words before comparison: ``p' = (1 - smoothing) * p + smoothing / n`` with
``smoothing=1e-3`` by default. With ``smoothing=0`` zero entries are handled exactly
(``0 log 0 = 0``).

**How it is computed.** Every term of the summed divergence is a sum over the entries of the
maps, so with ``g(t) = t log t`` and ``s = x + y``,

    D[a, b] = ½ Σ g(x_a) + ½ Σ g(x_b) − ½ Σ g(s) + ½ log 2 · (Σ x_a + Σ x_b),

where the sums run over every entry ``e`` of every map. Only ``Σ_e g(x_a,e + x_b,e)`` involves
both heads; it has no matrix-product form (the logarithm of a sum does not factor), so it is
computed for all pairs on tiles of ``(heads, heads, entries)``: entries of consecutive items are
packed into fixed-size blocks (an item may straddle two blocks: entries are independent), and
each block is swept in tiles over the upper triangle of head pairs. Memory stays bounded by
``max_bytes`` however many items or heads there are (plus one item's maps as read).
"""

from __future__ import annotations

import enum
import inspect
import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from bertology_utils.attention.store import AttentionStore
from bertology_utils.attention.word_attention import ItemAttention
from bertology_utils.core.heads import Head
from bertology_utils.core.typing import HeadMatrix

__all__ = [
    "HeadDistances",
    "head_distances",
    "JSAccumulator",
    "Embedding",
    "embed_heads",
    "head_linkage",
    "nearest_heads",
    "plot_dendrogram",
    "SameLayerTest",
    "same_layer_statistic",
    "neighbour_attention",
    "plot_embedding",
    "plot_two_models",
    "REDUCTIONS",
]

REDUCTIONS = ("sum", "mean")

# Tile shape. Tiles of a few MB stay in the CPU cache: on this project's 2-core machines all pairs
# of the default model over 1,000 EWT sentences took 2.2 s with blocks of 512 to 8192 entries and
# 1-16 MB tiles, 5.6 s with one 160 MB tile per block, 60 s with 2 GB tiles. max_bytes only ever
# lowers these.
_BLOCK_ENTRIES = 2048
_TILE_BYTES = 4 << 20


def _plan(n_heads: int, itemsize: int, max_bytes: int) -> tuple[int, int]:
    """Entries per block and head rows per tile, so block + two tiles fit in ``max_bytes``."""
    column = n_heads * itemsize  # one entry of every head: a column of the block, or of a one-row tile
    block = min(_BLOCK_ENTRIES, max_bytes // (3 * column))
    if block < 1:
        raise ValueError(
            f"max_bytes={max_bytes} is too small for {n_heads} heads: it needs at least {3 * column} bytes"
        )
    rows = min(n_heads, max(1, _TILE_BYTES // (block * column)), (max_bytes // (block * column) - 1) // 2)
    return block, rows


class JSAccumulator:
    """Running sums from which the Jensen–Shannon distances between all pairs of heads follow.

    Feed it maps with :meth:`add` (``(heads, n, n)`` arrays, rows attending, one item at a time,
    heads of every source stacked); :meth:`distances` gives the ``(heads, heads)`` matrix at any
    point. See the module docstring for the definition and the smoothing.
    """

    def __init__(self, n_heads: int, *, smoothing: float = 1e-3, dtype=np.float64, max_bytes: int = 64 << 20):
        if not 0 <= smoothing < 1:
            raise ValueError(f"smoothing must be in [0, 1), not {smoothing}")
        self.n_heads = n_heads
        self.smoothing = float(smoothing)
        self.dtype = np.dtype(dtype)
        if self.dtype not in (np.float32, np.float64):
            raise ValueError(f"dtype must be float32 or float64, not {self.dtype}")
        self.block_entries, self.tile_rows = _plan(n_heads, self.dtype.itemsize, max_bytes)
        self._buffers()
        self._tiny = np.finfo(self.dtype).tiny
        # Running sums in float64 whatever the tile dtype: they add up hundreds of thousands of terms.
        self._cross = np.zeros((n_heads, n_heads))  # Σ_e g(x_a + x_b), upper triangle
        self._self = np.zeros(n_heads)  # Σ_e g(x_a)
        self._mass = np.zeros(n_heads)  # Σ_e x_a (the number of rows, up to rounding)
        self.n_rows = 0
        self.n_items = 0

    def _buffers(self) -> None:
        self._block = np.empty((self.n_heads, self.block_entries), self.dtype)
        self._filled = 0
        self._sums = np.empty((self.tile_rows, self.n_heads, self.block_entries), self.dtype)
        self._logs = np.empty_like(self._sums)

    def __getstate__(self) -> dict:
        """Pickled (sent between cluster workers) as its sums only: the block is flushed, the buffers dropped."""
        if self._filled:
            self._flush()
        return {k: v for k, v in self.__dict__.items() if k not in ("_block", "_sums", "_logs")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._buffers()

    def merge(self, other: JSAccumulator) -> None:
        """Add another accumulator's sums (the same heads and smoothing, other rows)."""
        if (other.n_heads, other.smoothing) != (self.n_heads, self.smoothing):
            raise ValueError(
                f"cannot merge {other.n_heads} heads with smoothing {other.smoothing} into "
                f"{self.n_heads} heads with smoothing {self.smoothing}"
            )
        if other._filled:
            other._flush()
        self._cross += other._cross
        self._self += other._self
        self._mass += other._mass
        self.n_rows += other.n_rows
        self.n_items += other.n_items

    @property
    def working_bytes(self) -> int:
        """Bytes held by the block and tile buffers (what ``max_bytes`` bounds)."""
        return self._block.nbytes + self._sums.nbytes + self._logs.nbytes

    def _log(self, x: np.ndarray, out: np.ndarray) -> np.ndarray:
        """``log(x)`` into ``out``, with zeros mapped to a finite log so that ``0 log 0`` sums to 0."""
        if self.smoothing == 0:
            np.maximum(x, self._tiny, out=out)
            return np.log(out, out=out)
        return np.log(x, out=out)

    def add(self, maps: np.ndarray) -> None:
        """Add one item's maps, ``(heads, n, n)``; rows are renormalised and smoothed here."""
        maps = np.asarray(maps, dtype=self.dtype)
        if maps.ndim != 3 or maps.shape[0] != self.n_heads or maps.shape[1] != maps.shape[2]:
            raise ValueError(f"expected ({self.n_heads}, n, n) maps, got {maps.shape}")
        n = maps.shape[-1]
        if n == 0:
            return
        mass = maps.sum(-1, keepdims=True)
        if not (np.isfinite(maps).all() and (maps >= 0).all() and (mass > 0).all()):
            raise ValueError("attention rows must be finite, non-negative and not all zero")
        x = (maps / mass * (1.0 - self.smoothing) + self.smoothing / n).reshape(self.n_heads, n * n)
        logs = self._log(x, np.empty_like(x))
        self._self += np.einsum("ke,ke->k", x, logs, dtype=np.float64)
        self._mass += x.sum(-1, dtype=np.float64)
        self.n_rows += n
        self.n_items += 1
        start = 0
        while start < x.shape[1]:
            take = min(self.block_entries - self._filled, x.shape[1] - start)
            self._block[:, self._filled : self._filled + take] = x[:, start : start + take]
            self._filled += take
            start += take
            if self._filled == self.block_entries:
                self._flush()

    def _flush(self) -> None:
        """Add Σ_e g(x_a + x_b) over the filled part of the block for every pair a <= b, tile by tile."""
        e, k = self._filled, self.n_heads
        block = self._block[:, :e]
        for a0 in range(0, k, self.tile_rows):
            a1 = min(a0 + self.tile_rows, k)
            # Rows a0:a1 against columns a0:k cover the upper triangle; the few pairs below the
            # diagonal inside the tile are computed and ignored rather than cut out.
            sums = self._sums[: a1 - a0, : k - a0, :e]
            np.add(block[a0:a1, None, :], block[None, a0:, :], out=sums)
            logs = self._log(sums, self._logs[: a1 - a0, : k - a0, :e])
            self._cross[a0:a1, a0:] += np.einsum("abe,abe->ab", sums, logs)  # (np.vecdot needs numpy 2)
        self._filled = 0

    def distances(self, reduction: str = "sum") -> np.ndarray:
        """The ``(heads, heads)`` matrix of summed (or mean) Jensen–Shannon divergences, in nats."""
        if reduction not in REDUCTIONS:
            raise ValueError(f"reduction must be one of {REDUCTIONS}, not {reduction!r}")
        if self.n_rows == 0:
            raise ValueError("no attention rows were added")
        if self._filled:
            self._flush()
        cross = np.triu(self._cross)
        cross = cross + np.triu(cross, 1).T
        half_self = 0.5 * (self._self + math.log(2.0) * self._mass)
        d = half_self[:, None] + half_self[None, :] - 0.5 * cross
        # Exactly 0 on the diagonal by definition; elsewhere a divergence is >= 0, and anything
        # below is float rounding of terms that cancel (identical heads of two sources).
        np.fill_diagonal(d, 0.0)
        np.maximum(d, 0.0, out=d)
        return d / self.n_rows if reduction == "mean" else d


@dataclass(frozen=True)
class HeadDistances:
    """Distances between all heads of one or more sources, with who each head is.

    ``matrix[i, j]`` is the distance between heads ``i`` and ``j``; head ``i`` is head
    ``head[i]`` of layer ``layer[i]`` (both 0-based) of source ``source[i]``, named
    ``source_names[source[i]]``. Heads are ordered source by source, then layer by layer.
    """

    matrix: np.ndarray
    source: np.ndarray
    layer: np.ndarray
    head: np.ndarray
    source_names: tuple[str, ...]
    n_items: int
    n_rows: int
    reduction: str
    smoothing: float

    @property
    def n_heads(self) -> int:
        return len(self.layer)

    def labels(self) -> list[str]:
        """:class:`~bertology_utils.core.heads.Head` written per head (``"3-7"``); prefixed ``"<source>:"`` with
        several sources."""
        base = [str(Head(int(l), int(h))) for l, h in zip(self.layer, self.head)]
        if len(self.source_names) == 1:
            return base
        return [f"{self.source_names[s]}:{b}" for s, b in zip(self.source, base)]

    def table(self) -> pd.DataFrame:
        """One row per head: source name, layer and head (both from 1)."""
        return pd.DataFrame(
            {"source": [self.source_names[s] for s in self.source], "layer": self.layer + 1, "head": self.head + 1}
        )

    def block(self, i: int, j: int) -> np.ndarray:
        """The distances between the heads of source ``i`` (rows) and those of source ``j`` (columns)."""
        return self.matrix[np.ix_(self.source == i, self.source == j)]


def _source_name(source, position: int) -> str:
    if isinstance(source, AttentionStore):
        return str(source.metadata["model"].get("name", f"source {position}"))
    return f"source {position}"


def _iter_source(source, indices: Sequence[int] | None) -> Iterable[ItemAttention]:
    if isinstance(source, AttentionStore):
        return source.iter_items(indices)
    if indices is None:
        return iter(source)
    wanted = set(int(i) for i in indices)
    return (item for item in source if item.index in wanted)


def _check_same_corpus(sources) -> None:
    corpora = {}
    for i, s in enumerate(sources):
        if isinstance(s, AttentionStore):
            corpora[i] = (s.metadata["corpus"].get("name"), s.metadata["corpus"].get("sha256"))
    if len(set(corpora.values())) > 1:
        described = "; ".join(f"source {i}: {name} (sha256 {str(sha)[:12]})" for i, (name, sha) in corpora.items())
        raise ValueError(
            f"the stores were extracted from different corpora ({described}); "
            "joint head distances need the same inputs for every model"
        )


class _Missing(enum.Enum):
    """The filler of a source that ran out of items (one member, so mypy narrows ``is not MISSING``)."""

    MISSING = enum.auto()


def _aligned(sources, indices) -> Iterable[tuple[ItemAttention, ...]]:
    """Items of every source, index by index; refuses sources whose items do not line up."""
    missing = _Missing.MISSING
    streams: list[Iterable[ItemAttention | _Missing]] = [_iter_source(s, indices) for s in sources]
    for slots in itertools.zip_longest(*streams, fillvalue=missing):
        group = tuple(item for item in slots if item is not missing)
        if len(group) < len(slots):
            ended = [i for i, item in enumerate(slots) if item is missing]
            raise ValueError(
                f"source(s) {ended} ran out of items before the others: the sources do not hold "
                "the same items (e.g. one model skipped a long item); pass indices= with the "
                "items they all hold"
            )
        first = group[0]
        for i, item in enumerate(group[1:], 1):
            if (item.index, item.item_id) != (first.index, first.item_id):
                raise ValueError(
                    f"items do not line up: source 0 has item {first.index} ({first.item_id}) "
                    f"where source {i} has item {item.index} ({item.item_id}); pass indices= with "
                    "the items they all hold"
                )
            if item.n_words != first.n_words:
                raise ValueError(
                    f"item {first.index} ({first.item_id}) has {first.n_words} words in source 0 but "
                    f"{item.n_words} in source {i} (different special tokens?); their attention "
                    "rows cannot be compared"
                )
        yield group


def head_distances(
    *sources,
    reduction: str = "sum",
    smoothing: float = 1e-3,
    indices: Sequence[int] | None = None,
    names: Sequence[str] | None = None,
    dtype=np.float64,
    max_bytes: int = 64 << 20,
    progress: bool = False,
    cluster=None,
) -> HeadDistances:
    """Jensen–Shannon distances between all pairs of heads of the given sources, over all their items.

    Each source is an :class:`~bertology_utils.attention.store.AttentionStore` or an iterable of
    :class:`~bertology_utils.attention.word_attention.ItemAttention` in index order. With several sources
    (e.g. two models, or two checkpoints, on the same corpus) the heads of all of them go into
    one joint matrix; their items must be the same, index by index, with the same number of
    words, or a ValueError says where they differ (``indices`` restricts every source to the
    given item indices). ``reduction`` is ``"sum"`` (Clark et al.) or ``"mean"`` over attending
    rows; ``smoothing`` mixes each row with the uniform distribution (module docstring).
    ``dtype=np.float32`` roughly halves the time; the float64 default keeps rounding negligible.
    ``max_bytes`` bounds the tile buffers. ``cluster`` (``"local:N"``, a scheduler address or a
    ``distributed.Client``; every source an :class:`~bertology_utils.attention.store.AttentionStore`): the sums
    are taken over ranges of items on the cluster and added up here, equal to the single-process result up
    to float rounding.
    """
    if not sources:
        raise ValueError("head_distances needs at least one source")
    _check_same_corpus(sources)
    names = tuple(names) if names is not None else tuple(_source_name(s, i) for i, s in enumerate(sources))
    if len(names) != len(sources):
        raise ValueError(f"{len(names)} names for {len(sources)} sources")
    if cluster is None:
        total = (
            len(indices)
            if indices is not None
            else (len(sources[0]) if isinstance(sources[0], AttentionStore) else None)
        )
        shapes, accumulator = _accumulate(sources, indices, smoothing, dtype, max_bytes, progress, total)
    else:
        from bertology_utils.attention.distributed import map_store

        if not all(isinstance(s, AttentionStore) for s in sources):
            raise ValueError("cluster= needs AttentionStore sources: its workers read the stores themselves")
        others = tuple(str(s.path) for s in sources[1:])
        wanted = None if indices is None else np.asarray(sorted(set(int(i) for i in indices)))
        parts = map_store(sources[0], _distances_of_range, others, wanted, smoothing, dtype, max_bytes, cluster=cluster)
        shapes, accumulator = None, None
        for part_shapes, part in parts:
            if part is None:
                continue
            if accumulator is None:
                shapes, accumulator = part_shapes, part
            elif part_shapes != shapes:
                raise ValueError(f"items have layers x heads {part_shapes} in one range, {shapes} in another")
            else:
                accumulator.merge(part)
    if accumulator is None:
        raise ValueError("no items: the sources are empty (or every item was skipped)")
    source, layer, head = (
        np.concatenate(parts)
        for parts in zip(
            *(
                (np.full(l * h, i), np.repeat(np.arange(l), h), np.tile(np.arange(h), l))
                for i, (l, h) in enumerate(shapes)
            )
        )
    )
    return HeadDistances(
        accumulator.distances(reduction),
        source,
        layer,
        head,
        names,
        accumulator.n_items,
        accumulator.n_rows,
        reduction,
        accumulator.smoothing,
    )


def _accumulate(sources, indices, smoothing, dtype, max_bytes, progress=False, total=None):
    """(layers x heads of each source, the filled :class:`JSAccumulator`), or (None, None) without items."""
    shapes, accumulator = None, None
    for group in tqdm(
        _aligned(sources, indices), total=total, desc="head distances", unit="item", disable=not progress
    ):
        item_shapes = [item.attention.shape[:2] for item in group]
        if shapes is None:
            shapes = item_shapes
            accumulator = JSAccumulator(
                sum(l * h for l, h in shapes), smoothing=smoothing, dtype=dtype, max_bytes=max_bytes
            )
        elif item_shapes != shapes:
            raise ValueError(f"item {group[0].index} has layers x heads {item_shapes}, earlier items {shapes}")
        n = group[0].n_words
        accumulator.add(np.concatenate([np.asarray(item.attention).reshape(-1, n, n) for item in group]))
    return shapes, accumulator


def _distances_of_range(first: str, lo: int, hi: int, others, wanted, smoothing, dtype, max_bytes):
    """One map task of :func:`head_distances` on a cluster: the sums over items ``lo:hi`` of the stores."""
    sources = [AttentionStore.open(path) for path in (first, *others)]
    span = np.arange(lo, hi) if wanted is None else wanted[(wanted >= lo) & (wanted < hi)]
    return _accumulate(sources, span.tolist(), smoothing, dtype, max_bytes)


# --------------------------------------------------------------------------- embedding and clustering


def _matrix(distances) -> np.ndarray:
    d = np.asarray(distances.matrix if isinstance(distances, HeadDistances) else distances, dtype=np.float64)
    if d.ndim != 2 or d.shape[0] != d.shape[1]:
        raise ValueError(f"expected a square distance matrix, got shape {d.shape}")
    if not np.allclose(d, d.T, rtol=1e-10, atol=0):
        raise ValueError("the distance matrix is not symmetric")
    return d


@dataclass(frozen=True)
class Embedding:
    """Points from :func:`embed_heads` and how faithfully they keep the distances."""

    coords: np.ndarray  #: (heads, n_components)
    stress: float  #: Kruskal's stress-1: sqrt(Σ (d - d̂)² / Σ d²) over pairs; 0 is a perfect fit


def embed_heads(
    distances, n_components: int = 2, *, seed: int = 0, max_iter: int = 1000, eps: float = 1e-9
) -> Embedding:
    """Metric MDS (scikit-learn, SMACOF) of a precomputed distance matrix, as Clark et al. did.

    Started from classical MDS where scikit-learn offers it (>= 1.8), else from ``seed``'s random
    start, best of 4; either way the result is fixed for a given seed. One or two heads (a model
    that small) are placed exactly: at the origin, or on the first axis at their distance.
    """
    from sklearn.manifold import MDS

    d = _matrix(distances)
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


def nearest_heads(distances, k: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Each head's ``k`` nearest other heads, nearest first: ``(index, distance)``, both ``(heads, k)``.

    ``k`` is capped at ``heads - 1`` (a head is never its own neighbour); equal distances keep the
    lower index first, so the answer does not depend on the sort. ``index`` counts heads as the
    rows of ``distances`` (:meth:`HeadDistances.labels` names them).
    """
    d = _matrix(distances).copy()
    k = max(0, min(k, len(d) - 1))
    np.fill_diagonal(d, np.inf)
    index = np.argsort(d, axis=1, kind="stable")[:, :k]
    return index, np.take_along_axis(d, index, axis=1)


def head_linkage(distances, method: str = "average") -> np.ndarray:
    """Hierarchical clustering of heads (scipy ``linkage`` on the condensed matrix).

    ``"average"`` (UPGMA) is the default because it needs no Euclidean geometry; ``"ward"`` and
    ``"centroid"`` assume one and are better used on the square root of the summed divergence.
    """
    from scipy.cluster.hierarchy import linkage
    from scipy.spatial.distance import squareform

    d = _matrix(distances)
    if len(d) < 2:  # one head: nothing to merge
        return np.empty((0, 4))
    return linkage(squareform(d, checks=False), method=method)


def plot_dendrogram(
    linkage_matrix: np.ndarray,
    labels: Sequence[str],
    *,
    label_colours: Sequence | None = None,
    ax=None,
    title: str | None = None,
):
    """Dendrogram of :func:`head_linkage`'s result, leaves labelled (and optionally coloured) per head."""
    import matplotlib.pyplot as plt
    from scipy.cluster.hierarchy import dendrogram

    if ax is None:
        _, ax = plt.subplots(figsize=(max(6.0, 0.12 * len(labels)), 4))
    if not len(linkage_matrix):
        ax.text(0.5, 0.5, f"one head ({', '.join(labels)}): no clustering", ha="center", transform=ax.transAxes)
        return {}
    tree = dendrogram(
        linkage_matrix,
        labels=list(labels),
        ax=ax,
        color_threshold=0,
        above_threshold_color="0.4",
        leaf_font_size=max(4, min(9, 700 // max(len(labels), 1))),
    )
    if label_colours is not None:
        colour_of = dict(zip(labels, label_colours))
        for tick in ax.get_xticklabels():
            tick.set_color(colour_of[tick.get_text()])
    ax.set_ylabel("distance")
    if title:
        ax.set_title(title)
    return tree


# --------------------------------------------------------------------------- same layer, closer?


@dataclass(frozen=True)
class SameLayerTest:
    """Mean distance between heads of the same layer and of different layers, with a permutation test.

    The statistic is ``other_mean - same_mean``; ``p_value`` is the share of label permutations
    (plus the observed labelling) whose statistic is at least the observed one: small when heads
    of the same layer are closer than heads drawn at random into groups of the same sizes.
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
        return not self.not_testable

    @property
    def statistic(self) -> float:
        return self.other_mean - self.same_mean

    @property
    def ratio(self) -> float:
        """same_mean / other_mean: below 1 when same-layer heads are closer."""
        return self.same_mean / self.other_mean if self.other_mean else float("nan")


def same_layer_statistic(
    distances,
    layers: Sequence | None = None,
    *,
    n_permutations: int = 10_000,
    seed: int = 0,
    chunk_bytes: int = 32 << 20,
) -> SameLayerTest:
    """Is a head closer to heads of its own layer than to the others? Means and a permutation p-value.

    ``layers`` labels each head (any hashable values, e.g. ``"model:layer"`` for a joint matrix);
    taken from a :class:`HeadDistances` (its layer per head, within its source) when omitted.
    Each permutation shuffles the labels over the heads, keeping the group sizes; the
    permutations are evaluated in chunks of at most ``chunk_bytes``, each as one batched
    matrix product (the within-group sum of a labelling ``Z`` (one-hot) is ``Σ Zᵀ D Z``).
    A grouping with one group, or with no group of two heads, is legal but cannot be tested: the
    result has NaN means and p-value and says why in ``not_testable``.
    """
    d = _matrix(distances).copy()
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

    def statistic(within_sum):
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


# --------------------------------------------------------------------------- behaviour colours


def neighbour_attention(items: Iterable[ItemAttention]) -> dict[str, HeadMatrix]:
    """Mean share of attention each head puts on the previous word, itself, the next word and punctuation.

    These are :func:`bertology_utils.analyses.patterns.surface_statistics`' means (every attending word of
    every item weighs the same, special pseudo-words included; ``"previous"`` and ``"next"`` over
    the rows that have such a neighbour), as ``(layers, heads)`` arrays under ``"previous"``,
    ``"self"``, ``"next"`` and ``"punct"``: what the embedding plots colour heads by.
    """
    from bertology_utils.analyses.patterns import surface_statistics

    stats = surface_statistics(items)
    return {key: stats[key] for key in ("previous", "self", "next", "punct")}


def plot_embedding(
    coords: np.ndarray,
    values,
    *,
    ax=None,
    title: str | None = None,
    label: str = "",
    cmap: str = "viridis",
    categorical: bool | None = None,
    markers=None,
    size: float = 40,
):
    """Scatter of 2-D head coordinates coloured by ``values`` (numbers: a colour bar; labels: a legend).

    ``markers`` optionally gives one marker per point (e.g. per model in a joint embedding).
    """
    import matplotlib.pyplot as plt

    coords = np.asarray(coords)
    values = np.asarray(values)
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 4.5))
    if categorical is None:
        categorical = not np.issubdtype(values.dtype, np.number)
    markers = np.asarray(markers) if markers is not None else np.full(len(coords), "o")
    if categorical:
        categories = list(dict.fromkeys(values.tolist()))
        palette = plt.get_cmap("tab10" if len(categories) <= 10 else "tab20")
        for c, category in enumerate(categories):
            labelled = False  # one legend entry per category, whatever its markers
            for marker in np.unique(markers):
                keep = (values == category) & (markers == marker)
                if keep.any():
                    ax.scatter(
                        *coords[keep].T,
                        color=palette(c % palette.N),
                        marker=marker,
                        s=size,
                        edgecolor="k",
                        linewidth=0.3,
                        label=None if labelled else str(category),
                    )
                    labelled = True
        ax.legend(title=label or None, fontsize=7, title_fontsize=8, loc="best", markerscale=0.8)
    else:
        vmin, vmax = np.nanmin(values), np.nanmax(values)
        for marker in np.unique(markers):
            keep = markers == marker
            points = ax.scatter(
                *coords[keep].T,
                c=values[keep],
                cmap=cmap,
                vmin=vmin,
                vmax=vmax,
                marker=marker,
                s=size,
                edgecolor="k",
                linewidth=0.3,
            )
        ax.figure.colorbar(points, ax=ax, label=label, shrink=0.8)
    ax.set_xticks([])
    ax.set_yticks([])
    if title:
        ax.set_title(title)
    return ax


def plot_two_models(distances: HeadDistances, coords: np.ndarray, names: Sequence[str], *, counterparts: bool = False):
    """The heads of two models (``distances`` from :func:`head_distances` of two stores, ``coords`` their joint
    embedding) in one plane, coloured by layer: the first model's as circles, the second's as triangles. With
    ``counterparts`` (models of one shape), a grey line joins each head to the same head of the other model.
    Returns the figure."""
    import matplotlib.pyplot as plt

    coords = np.asarray(coords)
    fig, ax = plt.subplots(figsize=(7, 6))
    if counterparts:
        for a, b in zip(coords[distances.source == 0], coords[distances.source == 1]):
            ax.plot(*np.stack([a, b]).T, color="0.75", linewidth=0.5, zorder=0)
    plot_embedding(
        coords,
        distances.layer + 1,
        ax=ax,
        label="layer",
        markers=np.where(distances.source == 0, "o", "^"),
        title=f"{names[0]} (circles) and {names[1]} (triangles)",
    )
    return fig
