"""Jensen–Shannon distances between all pairs of heads, streamed over the items of one or more sources.

Clark et al. (2019, `What Does BERT Look At? <https://arxiv.org/abs/1906.04341>`_, Section 6) measure
how differently two heads behave as the Jensen–Shannon divergence between their attention
distributions, summed over every attending token of the data. :func:`head_distances` does the same at
word level: it streams items from one or more :class:`~bertology_utils.attention.store.AttentionStore`
(or lists of :class:`~bertology_utils.attention.word_attention.ItemAttention`) and returns the distances
between all pairs of heads at once. Several sources extracted from the same corpus (two models, or a
checkpoint before and after fine-tuning) give one joint matrix, so all heads land in one space.

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
import itertools
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, DTypeLike
from tqdm.auto import tqdm

from bertology_utils.attention.store import AttentionStore
from bertology_utils.attention.word_attention import ItemAttention
from bertology_utils.core.heads import Head

__all__ = ["REDUCTIONS", "JSAccumulator", "HeadDistances", "head_distances", "distance_matrix"]

# What one source of maps is: a store, or word-level items in index order.
_Source: TypeAlias = "AttentionStore | Iterable[ItemAttention]"
# Layers x heads of each source.
_Shapes: TypeAlias = "list[tuple[int, ...]]"

#: How the per-row divergences add up: summed (Clark et al.) or averaged over attending rows.
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

    Feed it maps with :meth:`add` (``(K, W, W)`` arrays, rows attending, one item at a time, the heads
    of every source stacked); :meth:`distances` gives the ``(K, K)`` matrix at any point. See the
    module docstring for the definition and the smoothing.

    :param n_heads: K, the heads of every source together.
    :param smoothing: the share of the uniform distribution mixed into each row, in [0, 1).
    :param dtype: float32 or float64, of the tiles (the running sums are float64 either way).
    :param max_bytes: bound on the block and tile buffers.
    """

    def __init__(
        self, n_heads: int, *, smoothing: float = 1e-3, dtype: DTypeLike = np.float64, max_bytes: int = 64 << 20
    ) -> None:
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

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (sent between cluster workers) as its sums only: the block is flushed, the buffers dropped."""
        if self._filled:
            self._flush()
        return {k: v for k, v in self.__dict__.items() if k not in ("_block", "_sums", "_logs")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._buffers()

    def merge(self, other: JSAccumulator) -> None:
        """Add another accumulator's sums (the same heads and smoothing, other rows).

        :param other: sums over other items (a range of a store on another worker).
        """
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
        """Add one item's maps; rows are renormalised and smoothed here.

        :param maps: ``(K, W, W)``, every head of every source, rows attending.
        """
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
        """The summed (or mean) Jensen–Shannon divergences between all pairs of heads so far, in nats.

        :param reduction: one of :data:`REDUCTIONS`.
        :returns: ``(K, K)``, symmetric, 0 on the diagonal.
        """
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
    """Distances between all heads of one or more sources, with who each head is (:func:`head_distances`).

    ``matrix[i, j]`` is the distance between heads ``i`` and ``j``; head ``i`` is head
    ``head[i]`` of layer ``layer[i]`` (both 0-based) of source ``source[i]``, named
    ``source_names[source[i]]``. Heads are ordered source by source, then layer by layer.

    :param matrix: ``(K, K)`` distances, K the heads of every source together.
    :param source: ``(K,)`` each head's source.
    :param layer: ``(K,)`` each head's layer, from 0.
    :param head: ``(K,)`` each head's index within its layer, from 0.
    :param source_names: one name per source.
    :param n_items: items the distances sum over.
    :param n_rows: attending rows (words) the distances sum over.
    :param reduction: one of :data:`REDUCTIONS`.
    :param smoothing: the share of the uniform distribution mixed into each row.
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
        """K, the heads of every source together."""
        return len(self.layer)

    def labels(self) -> list[str]:
        """Each head's name.

        :returns: :class:`~bertology_utils.core.heads.Head` written per head (``"3-7"``), prefixed
            ``"<source>:"`` with several sources.
        """
        base = [str(Head(int(l), int(h))) for l, h in zip(self.layer, self.head)]
        if len(self.source_names) == 1:
            return base
        return [f"{self.source_names[s]}:{b}" for s, b in zip(self.source, base)]

    def table(self) -> pd.DataFrame:
        """Who each head is, as a table.

        :returns: one row per head: source name, layer and head (both from 1).
        """
        return pd.DataFrame(
            {"source": [self.source_names[s] for s in self.source], "layer": self.layer + 1, "head": self.head + 1}
        )

    def block(self, i: int, j: int) -> np.ndarray:
        """The distances between the heads of two sources.

        :param i: the source of the rows.
        :param j: the source of the columns.
        :returns: ``(K_i, K_j)``.
        """
        return self.matrix[np.ix_(self.source == i, self.source == j)]


def _source_name(source: _Source, position: int) -> str:
    if isinstance(source, AttentionStore):
        return str(source.metadata["model"].get("name", f"source {position}"))
    return f"source {position}"


def _iter_source(source: _Source, indices: Sequence[int] | None) -> Iterable[ItemAttention]:
    if isinstance(source, AttentionStore):
        return source.iter_items(indices)
    if indices is None:
        return iter(source)
    wanted = set(int(i) for i in indices)
    return (item for item in source if item.index in wanted)


def _check_same_corpus(sources: Sequence[_Source]) -> None:
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


def _aligned(sources: Sequence[_Source], indices: Sequence[int] | None) -> Iterator[tuple[ItemAttention, ...]]:
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
    *sources: _Source,
    reduction: str = "sum",
    smoothing: float = 1e-3,
    indices: Sequence[int] | None = None,
    names: Sequence[str] | None = None,
    dtype: DTypeLike = np.float64,
    max_bytes: int = 64 << 20,
    progress: bool = False,
    cluster: Any = None,
) -> HeadDistances:
    """Jensen–Shannon distances between all pairs of heads of the given sources, over all their items.

    Clark et al.'s head distance (module docstring). With several sources (e.g. two models, or two
    checkpoints, on the same corpus) the heads of all of them go into one joint matrix; their items
    must be the same, index by index, with the same number of words, or a ValueError says where
    they differ.

    :param sources: each an :class:`~bertology_utils.attention.store.AttentionStore` or an iterable of
        :class:`~bertology_utils.attention.word_attention.ItemAttention` in index order.
    :param reduction: ``"sum"`` (Clark et al.) or ``"mean"`` over attending rows.
    :param smoothing: the share of the uniform distribution mixed into each row (module docstring).
    :param indices: restricts every source to these item indices.
    :param names: one name per source; by default a store's model name, else ``"source <i>"``.
    :param dtype: ``np.float32`` roughly halves the time; the float64 default keeps rounding negligible.
    :param max_bytes: bound on the tile buffers.
    :param progress: show a progress bar.
    :param cluster: ``"local:N"``, a scheduler address or a ``distributed.Client`` (every source an
        :class:`~bertology_utils.attention.store.AttentionStore`): the sums are taken over ranges of
        items on the cluster and added up here, equal to the single-process result up to float rounding.
    :returns: the ``(K, K)`` distances and who each head is, K the heads of every source together.
    """
    if not sources:
        raise ValueError("head_distances needs at least one source")
    _check_same_corpus(sources)
    labels = tuple(names) if names is not None else tuple(_source_name(s, i) for i, s in enumerate(sources))
    if len(labels) != len(sources):
        raise ValueError(f"{len(labels)} names for {len(sources)} sources")
    shapes: _Shapes | None
    accumulator: JSAccumulator | None
    if cluster is None:
        first = sources[0]
        total = len(indices) if indices is not None else (len(first) if isinstance(first, AttentionStore) else None)
        shapes, accumulator = _accumulate(sources, indices, smoothing, dtype, max_bytes, progress, total)
    else:
        from bertology_utils.attention.distributed import map_store

        stores = [s for s in sources if isinstance(s, AttentionStore)]
        if len(stores) < len(sources):
            raise ValueError("cluster= needs AttentionStore sources: its workers read the stores themselves")
        others = tuple(str(s.path) for s in stores[1:])
        wanted = None if indices is None else np.asarray(sorted(set(int(i) for i in indices)))
        parts = map_store(stores[0], _distances_of_range, others, wanted, smoothing, dtype, max_bytes, cluster=cluster)
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
    if accumulator is None or shapes is None:
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
        labels,
        accumulator.n_items,
        accumulator.n_rows,
        reduction,
        accumulator.smoothing,
    )


def _accumulate(
    sources: Sequence[_Source],
    indices: Sequence[int] | None,
    smoothing: float,
    dtype: DTypeLike,
    max_bytes: int,
    progress: bool = False,
    total: int | None = None,
) -> tuple[_Shapes | None, JSAccumulator | None]:
    """(layers x heads of each source, the filled :class:`JSAccumulator`), or (None, None) without items."""
    shapes: _Shapes | None = None
    accumulator: JSAccumulator | None = None
    for group in tqdm(
        _aligned(sources, indices), total=total, desc="head distances", unit="item", disable=not progress
    ):
        item_shapes = [item.attention.shape[:2] for item in group]
        if shapes is None or accumulator is None:
            shapes = item_shapes
            accumulator = JSAccumulator(
                sum(l * h for l, h in shapes), smoothing=smoothing, dtype=dtype, max_bytes=max_bytes
            )
        elif item_shapes != shapes:
            raise ValueError(f"item {group[0].index} has layers x heads {item_shapes}, earlier items {shapes}")
        n = group[0].n_words
        accumulator.add(np.concatenate([np.asarray(item.attention).reshape(-1, n, n) for item in group]))
    return shapes, accumulator


def _distances_of_range(
    first: str,
    lo: int,
    hi: int,
    others: tuple[str, ...],
    wanted: np.ndarray | None,
    smoothing: float,
    dtype: DTypeLike,
    max_bytes: int,
) -> tuple[_Shapes | None, JSAccumulator | None]:
    """One map task of :func:`head_distances` on a cluster: the sums over items ``lo:hi`` of the stores."""
    sources = [AttentionStore.open(path) for path in (first, *others)]
    span = np.arange(lo, hi) if wanted is None else wanted[(wanted >= lo) & (wanted < hi)]
    return _accumulate(sources, span.tolist(), smoothing, dtype, max_bytes)


def distance_matrix(distances: HeadDistances | ArrayLike) -> np.ndarray:
    """The square matrix of ``distances``, checked, as the embedding, clustering and test read it.

    :param distances: a :class:`HeadDistances` or a plain ``(K, K)`` matrix, K the heads.
    :returns: ``(K, K)`` float64.
    :raises ValueError: when the matrix is not square or not symmetric.
    """
    d = np.asarray(distances.matrix if isinstance(distances, HeadDistances) else distances, dtype=np.float64)
    if d.ndim != 2 or d.shape[0] != d.shape[1]:
        raise ValueError(f"expected a square distance matrix, got shape {d.shape}")
    if not np.allclose(d, d.T, rtol=1e-10, atol=0):
        raise ValueError("the distance matrix is not symmetric")
    return d
