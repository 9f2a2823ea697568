"""The probes' data: a treebank paired with its attention (and word vectors), streamed as padded batches."""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from bertology_utils.analyses.syntax.scoring import EXCLUDED_RELATIONS, ON_MISMATCH, real_word_positions, word_mismatch
from bertology_utils.analyses.word_vectors import WordVectors
from bertology_utils.attention.alignment import LEADING_SPECIAL, SEPARATOR
from bertology_utils.attention.store import AttentionStore
from bertology_utils.attention.word_attention import ItemAttention
from bertology_utils.core.batching import to_device
from bertology_utils.core.errors import BertologyError
from bertology_utils.core.typing import ItemValues, ItemWordVectors, WordCodes, WordValues
from bertology_utils.data import Corpus

__all__ = ["DEFAULT_CACHE_SIZE", "Batch", "ProbeData", "probe_device"]

#: MB of prepared sentences a :class:`ProbeData` keeps for later passes (UD EWT train with vectors: ~1.1 GB).
DEFAULT_CACHE_SIZE = 2048
#: Padding label of gold heads (torch's cross-entropy ignore index).
_IGNORE = -100


@dataclass
class _Record:
    """One sentence ready for batching: real words only, ROOT features kept apart."""

    index: int
    n: int
    heads: WordValues  # (W,) gold heads, UD convention (0 = ROOT, i = word i)
    scored: WordValues  # (W,) bool: counted in the UAS (not punctuation)
    maps: np.ndarray | None  # (W, W, K): [j, i, k] = a_k[j, i] among the real words
    root: np.ndarray | None  # (W, 2, 2, K): word x [[CLS], [SEP]] x [to it, from it] x head
    vectors: ItemWordVectors | None  # (W, E)


@dataclass
class Batch:
    """Padded tensors for ``B`` sentences of at most ``W`` words (``K`` = layers x heads).

    ``maps[b, j, i, k]`` is ``a_k[j, i]``, how much word j attends to word i in head k (so the
    feature ``a_k[i, j]`` of the pair (j, i) is ``maps[b, i, j, k]``). ``root[b, j, s]`` holds the
    ``2K`` features of word j and the special pseudo-word s (0 = [CLS], 1 = [SEP]): ``a_k[j, s]``
    for every k, then ``a_k[s, j]``. Candidate 0 of the scores is ROOT, candidate ``i + 1`` is word
    i; ``candidates`` masks padding and each word itself. ``heads`` are UD heads (= candidate
    indices) with ``-100`` on padding.

    :param indices: ``(B,)`` corpus index of each sentence.
    :param lengths: ``(B,)`` words per sentence.
    :param heads: ``(B, W)`` gold heads, ``-100`` on padding.
    :param scored: ``(B, W)`` bool: counted in the UAS (not punctuation).
    :param candidates: ``(B, W, W + 1)`` bool: possible heads of each word, ROOT first.
    :param maps: ``(B, W, W, K)`` attention features, when asked for.
    :param root: ``(B, W, 2, 2K)`` ROOT's attention features, when asked for.
    :param vectors: ``(B, W, E)`` word vectors, when asked for.
    :param positions: ``(M,)`` flat positions ``b * W + j`` of the real words in row-major order: the rows of
        a ``(B * W, ...)`` flattening that the loss and the predictions read, found on the host (on a GPU,
        finding them there would wait for the device).
    :param host: for a batch gathered on a device (:meth:`ProbeData.batches` with ``device``), the same batch
        on the host without its features: what a loop reads without waiting for the device.
    """

    indices: np.ndarray
    lengths: ItemValues
    heads: WordCodes
    scored: WordCodes
    candidates: torch.Tensor
    maps: torch.Tensor | None = None
    root: torch.Tensor | None = None
    vectors: torch.Tensor | None = None
    positions: torch.Tensor | None = None
    host: Batch | None = None

    @property
    def words(self) -> WordCodes:
        """``(B, W)`` bool: real (non-padding) words."""
        return self.heads != _IGNORE

    def to(self, device: torch.device) -> Batch:
        """The batch with its tensors on ``device`` (``indices`` stay a host array).

        To a GPU the tensors go through pinned memory without waiting for the copy (the device's
        stream orders it before the work that reads it); on the CPU the batch itself is returned.

        :param device: where its tensors go.
        :returns: a batch on ``device``.
        """
        if device.type == "cpu":
            return self
        moved = dataclasses.replace(self)
        for field in dataclasses.fields(self):
            if isinstance(value := getattr(self, field.name), torch.Tensor):
                setattr(moved, field.name, to_device(value, device))
        return moved


class ProbeData:
    """A treebank and its word-level attention (and word vectors), streamed in batches of sentences.

    The ``X`` of the probes of Clark et al. (2019, `What Does BERT Look At?
    <https://arxiv.org/abs/1906.04341>`_, Section 5). Sentences without a tree, and those the store
    skipped (too long for the model), are left out and counted in :attr:`skipped`; every probe on the
    same ``ProbeData`` sees the same sentences.

    :param corpus: sentences with trees (:func:`~bertology_utils.data.load_treebank`, a CoNLL-U file...).
    :param attention: an :class:`~bertology_utils.attention.store.AttentionStore` extracted from ``corpus``,
        or :class:`~bertology_utils.attention.word_attention.ItemAttention` records whose ``index`` is the
        corpus index; None for probes that read no attention (the baselines).
    :param vectors: a :class:`~bertology_utils.analyses.word_vectors.WordVectors`, for the probes with words.
    :param on_mismatch: when an item's words are not its sentence's: ``"raise"`` or ``"skip"`` it
        (counted in :attr:`skipped`), as :func:`bertology_utils.analyses.syntax.scoring.score_syntax` does.
    :param block_size: sentences read from the store at a time.
    :param cache_size: MB of prepared blocks kept in memory for later passes (0: read every pass).
        UD EWT train takes about 1.1 GB with a 72-head model; blocks past the budget are read again on
        each pass, as if it were 0. :meth:`batches` with a ``device`` keeps blocks there within a budget
        of the same size (a block past it is sent again on each pass).
    :param name: what to call the data; the corpus's name by default.
    """

    def __init__(
        self,
        corpus: Corpus,
        attention: AttentionStore | Iterable[ItemAttention] | None = None,
        vectors: WordVectors | None = None,
        *,
        on_mismatch: str = "raise",
        block_size: int = 512,
        cache_size: float = DEFAULT_CACHE_SIZE,
        name: str | None = None,
    ) -> None:
        if on_mismatch not in ON_MISMATCH:
            raise ValueError(f"on_mismatch must be one of {ON_MISMATCH}, not {on_mismatch!r}")
        if block_size < 1:
            raise ValueError(f"block_size must be at least 1, not {block_size}")
        if not cache_size >= 0:
            raise ValueError(f"cache_size must be at least 0 (MB), not {cache_size}")
        self.corpus = corpus
        self.attention = attention
        self.vectors = vectors
        self.on_mismatch = on_mismatch
        self.block_size = int(block_size)
        self.cache_size = cache_size
        self._cache: dict[int, list[_Record]] = {}  # block -> its prepared records
        self._cached_bytes = 0
        # (device, block, "attention" | "vectors") -> that block's features there, within cache_size of its own
        self._device_cache: dict[tuple[str, int, str], _Packed] = {}
        self._device_bytes = 0
        # Probes fitted side by side (fit_probes) share a ProbeData: one of them prepares a block at a time.
        self._lock = threading.Lock()
        self.name = name or corpus.name
        self._items: dict[int, ItemAttention] = {}  # the records given, by corpus index (not a store)
        has_tree = np.array([s.has_syntax for s in corpus], dtype=bool)
        self.skipped = {"no tree": int((~has_tree).sum())}
        present = np.ones(len(corpus), dtype=bool)
        if isinstance(attention, AttentionStore):
            if attention.n_items != len(corpus):
                raise BertologyError(
                    f"the attention store at {attention.path} holds {attention.n_items} items, "
                    f"the corpus {corpus.name} {len(corpus)}: it was extracted from other data"
                )
            status = attention.status()
            present = status == 0
            self.skipped["too long for the model"] = int((has_tree & (status == 1)).sum())
            self.skipped["not extracted"] = int((has_tree & (status == -1)).sum())
        elif attention is not None:
            items = {}
            for item in attention:
                if not isinstance(item, ItemAttention):
                    raise TypeError(
                        f"attention must be an AttentionStore or ItemAttention records, got a {type(item).__name__}"
                    )
                i = int(item.index)
                if not 0 <= i < len(corpus):
                    raise BertologyError(
                        f"item {item.item_id} has index {i}, outside the corpus of {len(corpus)} sentences"
                    )
                if i in items:
                    raise BertologyError(f"sentence {i} ({corpus[i].id}) comes twice in the attention given")
                items[i] = item
            self._items = items
            present = np.zeros(len(corpus), dtype=bool)
            present[list(items)] = True
            self.skipped["not in the attention given"] = int((has_tree & ~present).sum())
        self.skipped["words differ from the treebank"] = 0
        self._mismatched: set[int] = set()
        self.indices = np.flatnonzero(has_tree & present)
        self.shape: tuple[int, int] | None = None
        if isinstance(attention, AttentionStore):
            self.shape = (attention.num_layers, attention.num_heads)
        if not len(self.indices):
            reasons = ", ".join(f"{k}: {v}" for k, v in self.skipped.items() if v) or "the corpus is empty"
            raise BertologyError(f"no sentence of {corpus.name} can be used ({reasons})")

    def __len__(self) -> int:
        return len(self.indices)

    def __getstate__(self) -> dict[str, Any]:
        """Everything but the kept blocks (a copy reads its own) and the lock: what a fit in another process needs."""
        state = dict(self.__dict__)
        del state["_lock"]
        state.update(_cache={}, _cached_bytes=0, _device_cache={}, _device_bytes=0)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def n_words(self) -> int:
        """Words of the usable sentences."""
        return sum(len(self.corpus[int(i)].words) for i in self.indices)

    @property
    def description(self) -> str:
        """How many sentences of what, and what was left out."""
        left_out = ", ".join(f"{v} {k}" for k, v in self.skipped.items() if v)
        return f"{len(self)} sentences of {self.corpus.description}" + (f" (left out: {left_out})" if left_out else "")

    def __repr__(self) -> str:
        return f"ProbeData({self.name!r}, {len(self)} sentences)"

    def fingerprint(self, attention: bool = True, vectors: bool = True) -> dict[str, Any] | None:
        """What a probe fitted on these data depends on (the inputs asked for), for cache keys.

        :param attention: include the attention's identity.
        :param vectors: include the word vectors' identity.
        :returns: a JSON-able description; None when an input asked for has no fingerprint: attention
            given as in-memory records, or word vectors without one
            (:meth:`~bertology_utils.analyses.word_vectors.WordVectors.fingerprint`).
        """
        out: dict[str, Any] = {
            "corpus": {"name": self.corpus.name, "sha256": self.corpus.sha256, "items": len(self.corpus)},
            "sentences": hashlib.sha256(np.ascontiguousarray(self.indices, dtype=np.int64).tobytes()).hexdigest(),
            "block_size": self.block_size,
            "on_mismatch": self.on_mismatch,
        }
        if attention:
            if not isinstance(self.attention, AttentionStore):
                return None
            out["attention"] = self.attention.metadata
        if vectors:
            out["vectors"] = None if self.vectors is None else self.vectors.fingerprint()
            if out["vectors"] is None:
                return None
        return out

    # -- reading ------------------------------------------------------------------------------

    def _items_of(self, indices: np.ndarray) -> Iterator[ItemAttention]:
        if isinstance(self.attention, AttentionStore):
            yield from self.attention.iter_items(indices=indices.tolist(), dtype=np.float16)
        else:
            for i in indices:
                yield self._items[int(i)]

    def gold(self, i: int) -> tuple[WordValues, WordValues]:
        """The gold tree of one sentence.

        :param i: a corpus index.
        :returns: ``(heads, scored)``, both ``(W,)``: gold heads (UD convention) and which words the UAS counts.
        """
        sentence = self.corpus[i]
        heads = np.asarray(sentence.heads, dtype=np.int64)
        scored = ~np.isin(np.asarray(sentence.relations, dtype=object), EXCLUDED_RELATIONS)
        return heads, scored

    def _record(self, i: int, item: ItemAttention | None, need_vectors: bool) -> _Record | None:
        sentence = self.corpus[i]
        heads, scored = self.gold(i)
        n = len(heads)
        maps = root = None
        if item is not None:
            att = np.asarray(item.attention)
            m = len(item.words)
            if att.ndim != 4 or att.shape[2:] != (m, m):
                raise BertologyError(
                    f"item {i} ({item.item_id}): attention of shape {att.shape}, expected "
                    f"(layers, heads, {m}, {m}) for its {m} words and special tokens"
                )
            if self.shape is None:
                self.shape = tuple(att.shape[:2])
            elif tuple(att.shape[:2]) != self.shape:
                raise BertologyError(
                    f"item {i} ({item.item_id}) has {att.shape[0]} x {att.shape[1]} layers x heads, "
                    f"earlier items {self.shape[0]} x {self.shape[1]}"
                )
            real = real_word_positions(item)
            problem = word_mismatch(item, real, sentence.words)
            if problem is not None:
                if self.on_mismatch == "raise":
                    raise BertologyError(
                        f"sentence {i} ({sentence.id}): {problem}; the attention does not belong to "
                        "this treebank (pass on_mismatch='skip' to leave such sentences out)"
                    )
                self._mismatched.add(i)
                self.skipped["words differ from the treebank"] = len(self._mismatched)
                return None
            k = att.shape[0] * att.shape[1]
            att = att.reshape(k, m, m)
            kinds = np.asarray(item.word_kinds)
            if len(real) and real[-1] - real[0] == len(real) - 1:  # contiguous words: slice, no gather
                sub = att[:, real[0] : real[-1] + 1, real[0] : real[-1] + 1]
            else:
                sub = att[:, real[:, None], real[None, :]]
            maps = np.ascontiguousarray(sub.transpose(1, 2, 0))  # [j, i, k] = a_k[j, i]
            root = np.zeros((n, 2, 2, k), dtype=np.float32)  # [j, special, direction, k]
            for s, kind in enumerate((LEADING_SPECIAL, SEPARATOR)):
                cols = np.flatnonzero(kinds == kind)
                if len(cols):
                    root[:, s, 0] = att[:, real[:, None], cols[None, :]].sum(-1, dtype=np.float32).T
                    root[:, s, 1] = att[:, cols[:, None], real[None, :]].sum(-2, dtype=np.float32).T
        vectors = self._vectors_of(i, n) if need_vectors else None
        return _Record(i, n, heads, scored, maps, root, vectors)

    def _vectors_of(self, i: int, n: int) -> ItemWordVectors:
        if self.vectors is None:
            raise BertologyError(
                "this probe needs word vectors: build the ProbeData with vectors=... "
                "(bertology_utils.analyses.word_vectors.default_word_vectors)"
            )
        vectors = np.asarray(self.vectors(self.corpus[i].words), dtype=np.float32)
        if vectors.shape != (n, self.vectors.dim):
            raise BertologyError(
                f"word vectors of shape {vectors.shape} for the {n} words of sentence {i}, "
                f"expected ({n}, {self.vectors.dim})"
            )
        return vectors

    def batches(
        self,
        batch_size: int = 32,
        *,
        max_pairs: int = 16384,
        attention: bool = True,
        vectors: bool = False,
        shuffle: bool = False,
        seed: int = 0,
        device: str | torch.device | None = None,
    ) -> Iterator[Batch]:
        """Padded batches of sentences; every usable sentence once.

        Sentences are read ``block_size`` at a time (in corpus order, or blocks in a random order
        when ``shuffle``), sorted by length inside the block (little padding) and cut into batches of
        at most ``batch_size`` sentences and ``max_pairs`` padded (dependent, candidate) pairs
        (``B x N x N``), so a batch of long sentences stays small. ``shuffle`` also shuffles the
        batches of a block; the order depends only on ``seed``. Batches are built with torch: on a
        busy machine, ``torch.set_num_threads(1)`` keeps that fast (the probes do so, ``n_jobs``).

        With ``device`` the same batches, to the bit, come on that device: a block's features go there
        once, packed (kept for later passes within ``cache_size``, a budget of its own), and each batch
        is one gather of them by an index built on the host, instead of padded on the host and copied
        whole; its :attr:`Batch.host` is the batch on the host without features. On a GPU that leaves
        the host a few small copies a batch.

        :param batch_size: sentences per batch at most.
        :param max_pairs: padded (dependent, candidate) pairs per batch at most.
        :param attention: include the attention features.
        :param vectors: include the word vectors.
        :param shuffle: read blocks, and batches within a block, in a random order.
        :param seed: the shuffle's seed.
        :param device: where the batches go, gathered there; None: padded on the host.
        :returns: the batches.
        """
        groups = self._groups(batch_size, max_pairs, attention, vectors, shuffle, seed)
        if device is None:
            yield from (_collate(group, attention, vectors) for _, _, group in groups)
            return
        device = torch.device(device)
        parts = [part for part, wanted in (("attention", attention), ("vectors", vectors)) if wanted]
        for block, records, group in groups:
            host = _collate(group, attention=False, vectors=False)
            moved = dataclasses.replace(host.to(device), host=host)  # a copy even on the CPU: host keeps no features
            if not parts:
                yield moved
                continue
            packed = {part: self._on_device(device, block, part, records) for part in parts}
            words, pairs = packed[parts[0]].rows_of(group, device)
            B, N = host.heads.shape
            if attention:
                maps, root = packed["attention"].tensors
                moved.maps = maps.index_select(0, pairs).view(B, N, N, -1).to(torch.float32)
                moved.root = root.index_select(0, words).view(B, N, 2, -1)
            if vectors:
                moved.vectors = packed["vectors"].tensors[0].index_select(0, words).view(B, N, -1)
            yield moved

    def _on_device(self, device: torch.device, block: int, part: str, records: list[_Record]) -> _Packed:
        """One block's features of one part on ``device``, packed; kept for later passes while the budget allows."""
        key = (str(device), block, part)
        with self._lock:
            if (packed := self._device_cache.get(key)) is None:
                packed = _Packed.of(records, part, device)
                if self._device_bytes + packed.nbytes <= self.cache_size * 2**20:
                    self._device_cache[key] = packed
                    self._device_bytes += packed.nbytes
            return packed

    def _groups(
        self, batch_size: int, max_pairs: int, attention: bool, vectors: bool, shuffle: bool, seed: int
    ) -> Iterator[tuple[int, list[_Record], list[_Record]]]:
        """The sentences of each batch, with its block and the block's records: what :meth:`batches` pads."""
        if attention and self.attention is None:
            raise BertologyError("this probe reads attention: build the ProbeData with attention=<store>")
        rng = np.random.default_rng(seed)
        blocks = self.indices // self.block_size
        order = np.unique(blocks)
        if shuffle:
            order = rng.permutation(order)
        # One thread reads and prepares the next block while the caller works on this one: memory
        # holds at most two blocks.
        with ThreadPoolExecutor(max_workers=1) as pool:
            pending = None
            for k, block in enumerate(order):
                if pending is None:
                    pending = pool.submit(self._block, block, blocks == block, attention, vectors)
                prepared = pending.result()
                records = list(prepared)  # a new list: the prepared one keeps its order
                pending = (
                    pool.submit(self._block, order[k + 1], blocks == order[k + 1], attention, vectors)
                    if k + 1 < len(order)
                    else None
                )
                if shuffle:
                    records = [records[j] for j in rng.permutation(len(records))]
                records.sort(key=lambda r: r.n)  # stable: ties keep the (shuffled) order
                groups: list[list[_Record]] = []
                current: list[_Record] = []
                for record in records:  # ascending lengths: record.n is the longest so far
                    if current and (len(current) >= batch_size or (len(current) + 1) * record.n**2 > max_pairs):
                        groups.append(current)
                        current = []
                    current.append(record)
                if current:
                    groups.append(current)
                if shuffle:
                    groups = [groups[j] for j in rng.permutation(len(groups))]
                for group in groups:
                    yield int(block), prepared, group

    def _block(self, block: int, where: np.ndarray, attention: bool, vectors: bool) -> list[_Record]:
        """Records of one block of sentences (those whose words differ from the treebank left out).

        A cached block serves any later pass that needs no more than it holds: its attention
        features when ``attention``, its vectors when ``vectors`` (added to the cached records once).
        """
        with self._lock:
            return self._prepared_block(block, where, attention, vectors)

    def _prepared_block(self, block: int, where: np.ndarray, attention: bool, vectors: bool) -> list[_Record]:
        cached = self._cache.get(block)
        if cached is not None and (not attention or cached[0].maps is not None):
            if not vectors or cached[0].vectors is not None:
                return cached
            records = [dataclasses.replace(r, vectors=self._vectors_of(r.index, r.n)) for r in cached]
        else:
            indices = self.indices[where]
            items = self._items_of(indices) if attention else iter([None] * len(indices))
            records = []
            for i, item in zip(indices, items):
                if item is not None and int(item.index) != int(i):
                    raise BertologyError(f"the attention gave item {item.index} where {i} was expected")
                record = self._record(int(i), item, vectors)
                if record is not None:
                    records.append(record)
        self._keep(block, records, cached)
        return records

    def _keep(self, block: int, records: list[_Record], cached: list[_Record] | None) -> None:
        """Keep ``records`` in place of what the block held (``cached``) when the budget allows."""
        freed = sum(_nbytes(r) for r in cached) if cached else 0
        size = sum(_nbytes(r) for r in records)
        if records and self._cached_bytes - freed + size <= self.cache_size * 2**20:
            self._cache[block] = records
            self._cached_bytes += size - freed


@dataclass
class _Packed:
    """One block's features of one part on a device, every sentence's rows one after another.

    ``tensors`` are ``(maps, root)`` for the attention, ``(vectors,)`` for the word vectors: maps
    ``(pairs + 1, K)`` (sentence by sentence, row ``j * n + i`` of a sentence is ``maps[j, i]``),
    root ``(words + 1, 4K)`` and vectors ``(words + 1, E)``; the last row of each is zeros, what
    padding reads.
    """

    rows: dict[int, tuple[int, int]]  # corpus index -> (its first word row, its first pair row)
    n_words: int
    n_pairs: int
    tensors: tuple[torch.Tensor, ...]

    @classmethod
    def of(cls, records: list[_Record], part: str, device: torch.device) -> _Packed:
        ns = np.array([r.n for r in records], dtype=np.int64)
        word_ends, pair_ends = np.cumsum(ns), np.cumsum(ns**2)
        rows = {r.index: (int(w - n), int(p - n * n)) for r, n, w, p in zip(records, ns, word_ends, pair_ends)}
        if part == "attention":
            arrays = [_stack((r.maps for r in records), ns**2), _stack((r.root for r in records), ns)]
        else:
            arrays = [_stack((r.vectors for r in records), ns)]
        tensors = tuple(to_device(a, device) for a in arrays)
        return cls(rows, int(word_ends[-1]), int(pair_ends[-1]), tensors)

    @property
    def nbytes(self) -> int:
        return sum(t.nelement() * t.element_size() for t in self.tensors)

    def rows_of(self, group: list[_Record], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """``(B * W,)`` word rows and ``(B * W * W,)`` pair rows of a padded batch of ``group``, on ``device``.

        Built on the host with numpy and sent in one copy; padding reads the zero rows.
        """
        starts = np.array([self.rows[r.index] for r in group], dtype=np.int64)  # (B, 2)
        ns = np.array([r.n for r in group], dtype=np.int64)
        j = np.arange(ns.max())
        real = j[None, :] < ns[:, None]  # (B, W)
        words = np.where(real, starts[:, :1] + j[None, :], self.n_words)
        pairs = np.where(
            real[:, :, None] & real[:, None, :],
            starts[:, 1, None, None] + j[None, :, None] * ns[:, None, None] + j[None, None, :],
            self.n_pairs,
        )
        both = to_device(np.concatenate([words.ravel(), pairs.ravel()]), device)
        return both[: words.size], both[words.size :]


def _stack(arrays: Iterable[np.ndarray | None], rows: Iterable[int]) -> np.ndarray:
    """The arrays one after another, each as ``rows[i]`` rows, then a row of zeros."""
    stacked = []
    for array, n in zip(arrays, rows):
        assert array is not None  # ProbeData._groups prepared every record with the part asked for
        stacked.append(array.reshape(int(n), -1))
    return np.concatenate([*stacked, np.zeros_like(stacked[0][:1])])


def _nbytes(record: _Record) -> int:
    return sum(
        a.nbytes for a in (record.heads, record.scored, record.maps, record.root, record.vectors) if a is not None
    )


def _collate(records: list[_Record], attention: bool, vectors: bool) -> Batch:
    """A padded :class:`Batch`; attention features and vectors only when asked for (a cached record may hold more)."""
    B, N = len(records), max(r.n for r in records)
    lengths = torch.tensor([r.n for r in records], dtype=torch.long)
    heads = torch.full((B, N), _IGNORE, dtype=torch.long)
    scored = torch.zeros((B, N), dtype=torch.bool)
    for b, r in enumerate(records):
        heads[b, : r.n] = torch.from_numpy(r.heads)
        scored[b, : r.n] = torch.from_numpy(r.scored)
    positions = torch.arange(N)
    # candidates[b, j, 0] is ROOT; candidates[b, j, i + 1] is word i: real, and not j itself.
    words = positions[None, None, :] < lengths[:, None, None]
    valid = words & (positions[None, :, None] != positions[None, None, :])
    candidates = torch.cat([torch.ones((B, N, 1), dtype=torch.bool), valid], -1)
    positions = torch.nonzero(heads.flatten() != _IGNORE).squeeze(1)
    batch = Batch(np.array([r.index for r in records]), lengths, heads, scored, candidates, positions=positions)
    if attention:
        assert records[0].maps is not None  # ProbeData._prepared_block read attention for every record
        K = records[0].maps.shape[-1]
        maps = torch.zeros((B, N, N, K), dtype=torch.float32)
        root = torch.zeros((B, N, 2, 2, K), dtype=torch.float32)
        for b, r in enumerate(records):
            maps[b, : r.n, : r.n] = torch.from_numpy(r.maps)
            root[b, : r.n] = torch.from_numpy(r.root)
        batch.maps = maps
        batch.root = root.view(B, N, 2, 2 * K)
    if vectors:
        assert records[0].vectors is not None  # and vectors, when asked for
        d = records[0].vectors.shape[1]
        padded = torch.zeros((B, N, d), dtype=torch.float32)
        for b, r in enumerate(records):
            padded[b, : r.n] = torch.from_numpy(r.vectors)
        batch.vectors = padded
    return batch


def probe_device(device: str | torch.device | None) -> torch.device:
    """The device a probe's ``device`` parameter names, checked when it is fitted (None: the CPU).

    :param device: None, a ``torch.device`` or a device name (``"cpu"``, ``"cuda:0"``).
    :returns: the device.
    :raises ValueError: for something that names no device.
    :raises BertologyError: for a CUDA device this torch cannot see.
    """
    if device is None:
        return torch.device("cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(
            f"device must be None, a torch.device or a device name such as 'cpu' or 'cuda:0', not {device!r}"
        ) from error
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise BertologyError(f"device {device!r}: this torch sees no CUDA GPU (device=None fits on the CPU)")
    return resolved
