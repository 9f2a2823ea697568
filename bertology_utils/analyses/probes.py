"""Probing classifiers: how much dependency syntax the attention maps hold *together*.

Clark et al. (2019), Section 5 and Table 3. Each probe is a small graph-based parser: for every
word j it gives a distribution over the candidate heads of j, ``ROOT`` and the other words of
the sentence, and predicts the most probable one (each word independently, no tree decoding, as
in the paper). Scores are unlabeled attachment scores (UAS) with punctuation left out.

The probes
----------
For a dependent j and a candidate head i, head k of the model (every layer and head, ``K =
layers x heads``) gives two features: ``a_k[j, i]`` (the dependent attends to the candidate) and
``a_k[i, j]`` (the candidate attends to the dependent), read from the word-level maps of
:mod:`bertology_utils.attention.word_attention`.

* :class:`AttentionProbe` (Table 3 "Attn"):
  ``p(i | j) ∝ exp(Σ_k w_k a_k[j, i] + u_k a_k[i, j])``.
* :class:`AttentionWordsProbe` ("Attn + GloVe"): ``w_k`` and ``u_k`` become linear functions of the
  two words' vectors, ``w_k = W_k · (v_j ⊕ v_i) + b_k`` (and ``U`` for ``u``); the vectors are fixed
  (:mod:`bertology_utils.analyses.word_vectors`).
* :class:`DistanceWordsProbe` (baseline "Distances + GloVe"): one hidden layer (tanh) over
  ``v_j ⊕ v_i`` and distance features, no attention.
* :class:`RightBranching` (baseline): every word's head is the next word, the last word is the
  root; the same as Clark's best fixed offset (+1) for all words.
* The random-init baseline is :class:`AttentionWordsProbe` on the maps of a copy of the model with
  its pre-trained embeddings and every other weight random
  (:func:`bertology_utils.core.models.random_init_keeping_embeddings`, as in the paper), with the same word vectors.

ROOT, exactly
-------------
Candidates for the head of word j are ROOT and every word of the sentence except j itself (a
word is never its own head; Clark's code left j among the candidates). ROOT has no word of its
own; as in Clark et al.'s code, its attention features come from the special pseudo-words:
``[CLS]`` (``word_kinds`` 1, the leading special token) and ``[SEP]`` (``word_kinds`` 2, every
separator summed)::

    a_k[j, ROOT] = r_cls * a_k[j, [CLS]] + r_sep * a_k[j, [SEP]]
    a_k[ROOT, j] = r_cls * a_k[[CLS], j] + r_sep * a_k[[SEP], j]

with two learned scalars ``r_cls`` and ``r_sep`` shared by every head and both directions
(Clark's ``root_start``/``root_end``), then weighted by the same ``w_k``/``u_k`` as any word. In
the words probes ROOT's word vector is the zero vector, so ROOT's head weights depend on the
dependent's vector and the biases. Here every candidate is paired with its own vector (a public
PyTorch port of Clark et al.'s TF code documents that the original put the zero column last while
the attention features put ROOT first, pairing each candidate with the next word's vector). A
model without a leading special token has ``a_k[j, [CLS]] = 0``.

Training and scoring
--------------------
Softmax cross-entropy over the candidates of every word (punctuation included, as Clark trained),
Adam, mini-batches of sentences (padding masked), several epochs with early stopping on the dev
UAS; the weights of the best dev epoch are kept. Everything is deterministic for a ``seed``
(initialisation and the order of the data). UAS leaves out punctuation, defined as in
:mod:`bertology_utils.analyses.syntax` (relation ``punct``); root words are scored (ROOT must be predicted).

Data are streamed: :class:`ProbeData` pairs a treebank with its attention (an
:class:`~bertology_utils.attention.store.AttentionStore`, or ItemAttention records for small in-memory
uses) and reads ``block_size`` sentences at a time. The features it prepares from a block (each
sentence's maps among its real words, ROOT's features, word vectors) are fixed, so they are kept
in memory up to ``cache_size`` MB and every later epoch and dev evaluation reuses them; beyond
that budget blocks are read again each pass, so memory stays bounded by the budget, the block
and the batch, never the data set. The estimators follow scikit-learn's conventions (``fit``,
``predict``, ``score``, ``get_params``/``set_params``; fitted attributes end in ``_``); ``X`` is a
:class:`ProbeData`, and the gold trees come from its corpus (``y`` is ignored).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import math
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import safetensors.torch
import torch
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError

from bertology_utils.analyses.syntax import EXCLUDED_RELATIONS, ON_MISMATCH, real_word_positions, word_mismatch
from bertology_utils.attention.alignment import LEADING_SPECIAL, SEPARATOR
from bertology_utils.attention.store import AttentionStore
from bertology_utils.attention.word_attention import ItemAttention
from bertology_utils.core import settings
from bertology_utils.core.cache import cached, entry_name
from bertology_utils.core.errors import BertologyError
from bertology_utils.core.threads import torch_threads
from bertology_utils.data import Corpus

__all__ = [
    "ProbeData",
    "Batch",
    "ProbeEvaluation",
    "AttentionProbe",
    "AttentionWordsProbe",
    "DistanceWordsProbe",
    "RightBranching",
    "fit_probes",
    "PROBE_VERSION",
    "PAPER_TABLE3",
    "TABLE3_ROWS",
    "table3",
    "plot_probe_weights",
    "plot_tree_comparison",
    "N_DISTANCE_FEATURES",
    "distance_features",
]

#: MB of prepared sentences a :class:`ProbeData` keeps for later passes (UD EWT train with vectors: ~1.1 GB).
DEFAULT_CACHE_SIZE = 2048
#: Padding label of gold heads (torch's cross-entropy ignore index).
_IGNORE = -100
#: Score given to impossible candidates (padding, the word itself).
_MASKED = -1e9


# --------------------------------------------------------------------------- data


@dataclass
class _Record:
    """One sentence ready for batching: real words only, ROOT features kept apart."""

    index: int
    n: int
    heads: np.ndarray  # (n,) gold heads, UD convention (0 = ROOT, i = word i)
    scored: np.ndarray  # (n,) bool: counted in the UAS (not punctuation)
    maps: np.ndarray | None  # (n, n, K): [j, i, k] = a_k[j, i] among the real words
    root: np.ndarray | None  # (n, 2, 2, K): word x [[CLS], [SEP]] x [to it, from it] x head
    vectors: np.ndarray | None  # (n, d)


@dataclass
class Batch:
    """Padded tensors for ``B`` sentences of at most ``N`` words (``K`` = layers x heads).

    ``maps[b, j, i, k]`` is ``a_k[j, i]``, how much word j attends to word i in head k (so the
    feature ``a_k[i, j]`` of the pair (j, i) is ``maps[b, i, j, k]``). ``root[b, j, s]`` holds the
    ``2K`` features of word j and the special pseudo-word s (0 = [CLS], 1 = [SEP]): ``a_k[j, s]``
    for every k, then ``a_k[s, j]``. Candidate 0 of the scores is ROOT, candidate ``i + 1`` is word
    i; ``candidates`` masks padding and each word itself. ``heads`` are UD heads (= candidate
    indices) with ``-100`` on padding.
    """

    indices: np.ndarray
    lengths: torch.Tensor
    heads: torch.Tensor
    scored: torch.Tensor
    candidates: torch.Tensor
    maps: torch.Tensor | None = None
    root: torch.Tensor | None = None
    vectors: torch.Tensor | None = None

    @property
    def words(self) -> torch.Tensor:
        """(B, N) bool: real (non-padding) words."""
        return self.heads != _IGNORE


class ProbeData:
    """A treebank and its word-level attention (and word vectors), streamed in batches of sentences.

    Args:
        corpus: sentences with trees (:func:`~bertology_utils.data.load_treebank`, a CoNLL-U file...).
        attention: an :class:`~bertology_utils.attention.store.AttentionStore` extracted from ``corpus``, or
            :class:`~bertology_utils.attention.word_attention.ItemAttention` records whose ``index`` is the
            corpus index; None for probes that read no attention (the baselines).
        vectors: a :class:`~bertology_utils.analyses.word_vectors.WordVectors`, for the probes with words.
        on_mismatch: when an item's words are not its sentence's: ``"raise"`` or ``"skip"`` it
            (counted in :attr:`skipped`), as :func:`bertology_utils.analyses.syntax.score_syntax` does.
        block_size: sentences read from the store at a time.
        cache_size: MB of prepared blocks kept in memory for later passes (0: read every pass).
            UD EWT train takes about 1.1 GB with a 72-head model; blocks past the budget are
            read again on each pass, as if it were 0.

    Sentences without a tree, and those the store skipped (too long for the model), are left out
    and counted in :attr:`skipped`; every probe on the same ``ProbeData`` sees the same sentences.
    """

    def __init__(
        self,
        corpus: Corpus,
        attention=None,
        vectors=None,
        *,
        on_mismatch: str = "raise",
        block_size: int = 512,
        cache_size: float = DEFAULT_CACHE_SIZE,
        name: str | None = None,
    ):
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
        # Probes fitted side by side (fit_probes) share a ProbeData: one of them prepares a block at a time.
        self._lock = threading.Lock()
        self.name = name or corpus.name
        self._items = None
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

    @property
    def n_words(self) -> int:
        return sum(len(self.corpus[int(i)].words) for i in self.indices)

    @property
    def description(self) -> str:
        left_out = ", ".join(f"{v} {k}" for k, v in self.skipped.items() if v)
        return f"{len(self)} sentences of {self.corpus.description}" + (f" (left out: {left_out})" if left_out else "")

    def __repr__(self) -> str:
        return f"ProbeData({self.name!r}, {len(self)} sentences)"

    def fingerprint(self, attention: bool = True, vectors: bool = True) -> dict | None:
        """What a probe fitted on these data depends on (the inputs asked for), for cache keys.

        None when an input asked for has no fingerprint: attention given as in-memory records,
        or word vectors without one (:meth:`~bertology_utils.analyses.word_vectors.WordVectors.fingerprint`).
        """
        out = {
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

    def _gold(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        sentence = self.corpus[i]
        heads = np.asarray(sentence.heads, dtype=np.int64)
        scored = ~np.isin(np.asarray(sentence.relations, dtype=object), EXCLUDED_RELATIONS)
        return heads, scored

    def _record(self, i: int, item: ItemAttention | None, need_vectors: bool) -> _Record | None:
        sentence = self.corpus[i]
        heads, scored = self._gold(i)
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

    def _vectors_of(self, i: int, n: int) -> np.ndarray:
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
    ) -> Iterator[Batch]:
        """Padded batches of sentences; every usable sentence once.

        Sentences are read ``block_size`` at a time (in corpus order, or blocks in a random order
        when ``shuffle``), sorted by length inside the block (little padding) and cut into batches of
        at most ``batch_size`` sentences and ``max_pairs`` padded (dependent, candidate) pairs
        (``B x N x N``), so a batch of long sentences stays small. ``shuffle`` also shuffles the
        batches of a block; the order depends only on ``seed``. Batches are built with torch: on a
        busy machine, ``torch.set_num_threads(1)`` keeps that fast (the probes do so, ``n_jobs``).
        """
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
                records = list(pending.result())  # a new list: the cached one keeps its order
                pending = (
                    pool.submit(self._block, order[k + 1], blocks == order[k + 1], attention, vectors)
                    if k + 1 < len(order)
                    else None
                )
                if shuffle:
                    records = [records[j] for j in rng.permutation(len(records))]
                records.sort(key=lambda r: r.n)  # stable: ties keep the (shuffled) order
                groups, current = [], []
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
                    yield _collate(group, attention, vectors)

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
    batch = Batch(np.array([r.index for r in records]), lengths, heads, scored, candidates)
    if attention:
        K = records[0].maps.shape[-1]
        maps = torch.zeros((B, N, N, K), dtype=torch.float32)
        root = torch.zeros((B, N, 2, 2, K), dtype=torch.float32)
        for b, r in enumerate(records):
            maps[b, : r.n, : r.n] = torch.from_numpy(r.maps)
            root[b, : r.n] = torch.from_numpy(r.root)
        batch.maps = maps
        batch.root = root.view(B, N, 2, 2 * K)
    if vectors:
        d = records[0].vectors.shape[1]
        padded = torch.zeros((B, N, d), dtype=torch.float32)
        for b, r in enumerate(records):
            padded[b, : r.n] = torch.from_numpy(r.vectors)
        batch.vectors = padded
    return batch


# --------------------------------------------------------------------------- scorers (torch)


class _AttentionScorer(torch.nn.Module):
    """Scores of the attention-only probe: ``theta = [w ; u]`` over the 2K features."""

    def __init__(self, n_features: int):
        super().__init__()
        self.theta = torch.nn.Parameter(torch.zeros(n_features))
        self.root_scale = torch.nn.Parameter(torch.ones(2))

    def forward(self, batch: Batch) -> torch.Tensor:
        K = batch.maps.shape[-1]
        w, u = self.theta[:K], self.theta[K:]
        # [j, i]: Σ_k w_k a_k[j, i] + u_k a_k[i, j]; the second sum is computed at [i, j] and transposed.
        words = batch.maps @ w + (batch.maps @ u).transpose(1, 2)
        root = torch.einsum("bjsc,s->bjc", batch.root, self.root_scale) @ self.theta  # (B, N)
        return torch.cat([root.unsqueeze(-1), words], -1)


#: Elements of a pair tensor (:class:`_PairWeighted`'s maps, :class:`_PairTanh`'s hidden layer) handled at a
#: time: 4 MB, in the cache (an AVX2 EPYC's L3) and large enough that the per-chunk Python calls cost little
#: (1 MB chunks: 1.1x slower a Distances + words step).
_PAIR_CHUNK = 1 << 20


def _pair_chunks(B: int, N: int, rows: int) -> list[tuple[int, int, int, int]]:
    """(b0, b1, j0, j1) slices of (B, N) rows, about ``rows`` at a time: whole sentences, or parts of one."""
    if rows >= N:
        step = rows // N
        return [(b, min(B, b + step), 0, N) for b in range(0, B, step)]
    return [(b, b + 1, j, min(N, j + rows)) for b in range(B) for j in range(0, N, rows)]


class _PairWeighted(torch.autograd.Function):
    """``words[b, j, i] = Σ_k maps[b, j, i, k] (dep[b, j, k] + cand[b, i, k])
    + Σ_k maps[b, i, j, k] (cand[b, i, K + k] + dep[b, j, K + k])``, fused (maps: data, no gradient).

    Each weighted sum is one product and one sum over ``k``, in the cache-sized chunks of rows
    :func:`_pair_chunks` cuts (whole sentences, or parts of a long one), in one reused buffer.
    Through autograd the row-weighted half was a batched matrix-vector product (``torch.matmul``
    makes it a ``bmm`` with one column, four times slower on CPU than multiplying and summing) and
    the column half allocated two maps-sized temporaries each way.
    """

    @staticmethod
    def _chunks(maps: torch.Tensor) -> Iterator[tuple[int, int, int, int, torch.Tensor, torch.Tensor]]:
        """Each chunk's slices, its maps and a maps-shaped view of one reused buffer (a chunk is at least one row)."""
        B, N, _, K = maps.shape
        buffer = maps.new_empty(min(maps.numel(), max(_PAIR_CHUNK, N * K)))
        for b0, b1, j0, j1 in _pair_chunks(B, N, max(1, _PAIR_CHUNK // (N * K))):
            m = maps[b0:b1, j0:j1]
            yield b0, b1, j0, j1, m, buffer[: m.numel()].view(m.shape)

    @staticmethod
    def forward(ctx, maps, dep, cand):
        B, N, _, K = maps.shape
        words, back = maps.new_empty(B, N, N), maps.new_empty(B, N, N)
        for b0, b1, j0, j1, m, w in _PairWeighted._chunks(maps):
            # forward features a_k[j, i], weights dep[j] + cand[i]; backward ones a_k[i, j] built at [i, j]
            torch.add(dep[b0:b1, j0:j1, None, :K], cand[b0:b1, None, :, :K], out=w)
            torch.sum(w.mul_(m), -1, out=words[b0:b1, j0:j1])
            torch.add(cand[b0:b1, j0:j1, None, K:], dep[b0:b1, None, :, K:], out=w)
            torch.sum(w.mul_(m), -1, out=back[b0:b1, j0:j1])
        ctx.save_for_backward(maps)
        return words.add_(back.transpose(1, 2))

    @staticmethod
    def backward(ctx, grad):
        (maps,) = ctx.saved_tensors
        B, N, _, K = maps.shape
        d_dep, d_cand = maps.new_zeros(B, N, 2 * K), maps.new_zeros(B, N, 2 * K)
        transposed = grad.transpose(1, 2)
        for b0, b1, j0, j1, m, w in _PairWeighted._chunks(maps):
            torch.mul(m, grad[b0:b1, j0:j1, :, None], out=w)
            d_dep[b0:b1, j0:j1, :K] += w.sum(2)
            d_cand[b0:b1, :, :K] += w.sum(1)
            torch.mul(m, transposed[b0:b1, j0:j1, :, None], out=w)
            d_cand[b0:b1, j0:j1, K:] += w.sum(2)
            d_dep[b0:b1, :, K:] += w.sum(1)
        return None, d_dep, d_cand


class _AttentionWordsScorer(torch.nn.Module):
    """Scores of the attention-and-words probe: per-pair head weights ``W (v_j ⊕ v_i) + b``."""

    def __init__(self, n_features: int, dim: int):
        super().__init__()
        self.dependent = torch.nn.Linear(dim, n_features)  # W's dependent half, and b
        self.candidate = torch.nn.Linear(dim, n_features, bias=False)  # W's candidate half
        for layer in (self.dependent, self.candidate):
            torch.nn.init.zeros_(layer.weight)
        torch.nn.init.zeros_(self.dependent.bias)
        self.root_scale = torch.nn.Parameter(torch.ones(2))

    def forward(self, batch: Batch) -> torch.Tensor:
        dep = self.dependent(batch.vectors)  # (B, N, 2K): the weights' dependent part + bias
        cand = self.candidate(batch.vectors)  # (B, N, 2K): the weights' candidate part
        # Forward features a_k[j, i] = maps[j, i, k] and backward ones a_k[i, j], both weighted dep[j] + cand[i].
        words = _PairWeighted.apply(batch.maps, dep, cand)
        root_features = torch.einsum("bjsc,s->bjc", batch.root, self.root_scale)
        root = (root_features * dep).sum(-1)  # ROOT's vector is zero: its candidate part vanishes
        return torch.cat([root.unsqueeze(-1), words], -1)

    def weights(self, batch: Batch) -> torch.Tensor:
        """(B, N, N + 1, 2K) head weights of every (dependent, candidate) pair, ROOT first."""
        dep = self.dependent(batch.vectors)
        cand = self.candidate(batch.vectors)
        cand = torch.cat([torch.zeros_like(cand[:, :1]), cand], 1)
        return dep[:, :, None, :] + cand[:, None, :, :]


#: Distance features of the words-and-distances baseline (Clark's, without the self indicator).
N_DISTANCE_FEATURES = 7


def distance_features(lengths: torch.Tensor, N: int) -> torch.Tensor:
    """(B, N, N + 1, 7) features of (dependent j, candidate), candidate 0 being ROOT.

    For a candidate word i of a sentence of n words: how far it is ahead ``(i - j) / n`` and behind
    ``(j - i) / n`` (zero on the other side), indicators for ``i = j + 1, j + 2, j - 1, j - 2``, and a
    ROOT indicator that is 1 only for ROOT (whose other features are 0). Clark et al.'s footnote 5:
    "indicator features for short distances as well as continuous distance features, with distance
    ahead/behind treated separately".
    """
    return _offset_features(lengths, N)[:, _offset_index(N)]


def _offset_features(lengths: torch.Tensor, N: int) -> torch.Tensor:
    """(B, 2N, 7): the features of :func:`distance_features` once per offset (they depend on nothing else).

    Row 0 is ROOT; row ``1 + (i - j) + N - 1`` is the offset ``i - j`` of a word candidate.
    """
    n = lengths.to(torch.float32).clamp(min=1)[:, None]
    delta = torch.arange(-(N - 1), N, dtype=torch.float32)[None, :].expand(len(lengths), -1)
    words = torch.stack(
        [
            delta.clamp(min=0) / n,
            (-delta).clamp(min=0) / n,
            (delta == 1).float(),
            (delta == 2).float(),
            (delta == -1).float(),
            (delta == -2).float(),
            torch.zeros_like(delta),
        ],
        -1,
    )
    root = torch.zeros(len(lengths), 1, N_DISTANCE_FEATURES)
    root[..., -1] = 1.0
    return torch.cat([root, words], 1)


def _offset_index(N: int) -> torch.Tensor:
    """(N, N + 1): the row of :func:`_offset_features` of each (dependent j, candidate), ROOT first."""
    j, i = torch.arange(N)[:, None], torch.arange(N)[None, :]
    return torch.cat([torch.zeros(N, 1, dtype=torch.long), i - j + N], 1)


class _PairTanh(torch.autograd.Function):
    """``scores[b, j, c] = o · tanh(dep[b, j] + cand[b, c] + table[b, row(j, c)])``, fused.

    ``row`` is :func:`_offset_index`'s: 0 for ROOT (c = 0), ``N + i - j`` for the word candidate
    ``c = i + 1``. The hidden layer has ``B x N x (N + 1) x hidden`` values, far more than the
    cache; computed by autograd op by op it went through memory some fifteen times per step. Here
    it is built and used chunk by chunk in place, and only its sigmoid is kept for the backward pass.

    Two identities keep the passes over it to three each way. ``tanh(x) = 2 sigmoid(2x) - 1``
    (torch's CPU tanh is several times slower than its sigmoid): the doubling is applied to the
    three small inputs, and the ``2 s - 1`` and the ``o`` of the derivative ``4 o s (1 - s)`` to the
    sums. And the rows are built in reverse order of the dependent, ``j' = N - 1 - j``: word
    candidate ``i`` then reads ``table`` row ``i + j' + 1``, so a chunk's rows are one strided view
    of ``table`` (a Hankel matrix of its rows) added to the candidates in one pass, where a gather
    by row index was the slowest step.
    """

    @staticmethod
    def forward(ctx, dep, cand, table, o):
        B, N, H = dep.shape
        M = N + 1
        dep2, cand2, table2 = (2 * t.contiguous() for t in (dep.flip(1), cand, table))  # dep2: j' order
        scores = dep.new_empty(B, N, M)
        hidden = dep.new_empty(B, N, M, H)
        batch_stride = table2.stride(0)
        for b0, b1, j0, j1 in _pair_chunks(B, N, max(1, _PAIR_CHUNK // (M * H))):
            h = hidden[b0:b1, j0:j1]
            words = table2.as_strided(
                (b1 - b0, j1 - j0, N, H), (batch_stride, H, H, 1), b0 * batch_stride + (1 + j0) * H
            )
            torch.add(words, cand2[b0:b1, None, 1:], out=h[:, :, 1:])
            h[:, :, 0] = (table2[b0:b1, 0] + cand2[b0:b1, 0])[:, None]  # ROOT: row 0
            h.add_(dep2[b0:b1, j0:j1, None])
            torch.sigmoid(h, out=h)
            torch.mv(h.view(-1, H), o, out=scores[b0:b1, j0:j1].view(-1))  # matmul would take a slow bmm
        ctx.save_for_backward(hidden, o)
        ctx.table_shape, ctx.spent = table.shape, False
        return scores.flip(1).mul_(2).sub_(o.sum())

    @staticmethod
    def backward(ctx, grad):
        if ctx.spent:  # retain_graph=True and a second backward pass
            raise RuntimeError("the Distances + words scorer's backward pass runs once: it overwrites what it saved")
        ctx.spent = True
        hidden, o = ctx.saved_tensors
        B, N, M, H = hidden.shape
        d_dep, d_cand = hidden.new_zeros(B, N, H), hidden.new_zeros(B, M, H)
        d_table, d_o = hidden.new_zeros(ctx.table_shape), torch.zeros_like(o)
        flat = d_table.view(-1, H)
        rows = _offset_index(N).flip(0)[None] + (torch.arange(B) * ctx.table_shape[1])[:, None, None]
        grad = grad.flip(1).contiguous()  # j' order, as the hidden rows
        for b0, b1, j0, j1 in _pair_chunks(B, N, max(1, _PAIR_CHUNK // (M * H))):
            s, g = hidden[b0:b1, j0:j1], grad[b0:b1, j0:j1]
            d_o.addmv_(s.reshape(-1, H).T, g.reshape(-1))
            # From here on s holds s (1 - s) g: d score / d hidden, less its factor 4 o (applied to the sums).
            s.addcmul_(s, s, value=-1).mul_(g[..., None])
            d_dep[b0:b1, j0:j1] += s.sum(2)
            d_cand[b0:b1] += s.sum(1)
            flat.index_add_(0, rows[b0:b1, j0:j1].reshape(-1), s.reshape(-1, H))
        factor = 4 * o
        return d_dep.flip(1).mul_(factor), d_cand.mul_(factor), d_table.mul_(factor), d_o.mul_(2).sub_(grad.sum())


class _DistanceWordsScorer(torch.nn.Module):
    """One hidden layer over ``v_j ⊕ v_i ⊕ distance features`` (ROOT's vector is zero)."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.dependent = torch.nn.Linear(dim, hidden)
        self.candidate = torch.nn.Linear(dim, hidden, bias=False)
        self.distance = torch.nn.Linear(N_DISTANCE_FEATURES, hidden, bias=False)
        self.out = torch.nn.Linear(hidden, 1)

    def forward(self, batch: Batch) -> torch.Tensor:
        B, N = batch.heads.shape
        cand = self.candidate(batch.vectors)
        cand = torch.cat([torch.zeros_like(cand[:, :1]), cand], 1)  # ROOT first
        # The distance features depend only on the offset (and the length): one row of hidden units per offset.
        table = self.distance(_offset_features(batch.lengths, N))
        scores = _PairTanh.apply(self.dependent(batch.vectors), cand, table, self.out.weight[0])
        return scores + self.out.bias


# --------------------------------------------------------------------------- evaluation


@dataclass(frozen=True)
class ProbeEvaluation:
    """Predicted heads of every word of a :class:`ProbeData`, and the UAS.

    Arrays run over the words of the evaluated sentences, in corpus order. Heads use the UD
    convention (0 = ROOT, i = the i-th word, from 1).
    """

    name: str
    sentence: np.ndarray  #: corpus index of each word's sentence
    position: np.ndarray  #: 0-based position of the word in its sentence
    gold: np.ndarray  #: gold head
    predicted: np.ndarray  #: predicted head
    relation: np.ndarray  #: gold relation (str)
    scored: np.ndarray  #: counted in the UAS (not punctuation)
    skipped: dict = field(default_factory=dict)
    description: str = ""

    @property
    def correct(self) -> np.ndarray:
        return self.gold == self.predicted

    @property
    def n_sentences(self) -> int:
        return len(np.unique(self.sentence))

    @property
    def n_scored(self) -> int:
        return int(self.scored.sum())

    @property
    def uas(self) -> float:
        """Unlabeled attachment score, punctuation left out (a fraction)."""
        return float(self.correct[self.scored].mean()) if self.scored.any() else math.nan

    @property
    def uas_with_punctuation(self) -> float:
        return float(self.correct.mean()) if len(self.correct) else math.nan

    def by_relation(self, min_count: int = 0) -> pd.DataFrame:
        """UAS per gold relation (punctuation left out), most frequent first."""
        keep = self.scored
        frame = pd.DataFrame({"relation": self.relation[keep], "correct": self.correct[keep]})
        table = frame.groupby("relation")["correct"].agg(count="size", uas="mean")
        table = table[table["count"] >= min_count]
        return table.sort_values(["count"], ascending=False, kind="stable")

    def heads(self, index: int) -> np.ndarray:
        """Predicted heads of corpus sentence ``index`` (UD convention)."""
        where = self.sentence == index
        if not where.any():
            raise KeyError(f"sentence {index} was not evaluated")
        return self.predicted[where]

    def __repr__(self) -> str:
        return f"ProbeEvaluation({self.name!r}: UAS {100 * self.uas:.1f} over {self.n_scored} words)"


def _evaluation(name: str, data: ProbeData, predictions: dict[int, np.ndarray]) -> ProbeEvaluation:
    order = sorted(predictions)
    sentence, position, gold, predicted, relation, scored = [], [], [], [], [], []
    for i in order:
        s = data.corpus[i]
        heads, is_scored = data._gold(i)
        n = len(heads)
        sentence.append(np.full(n, i))
        position.append(np.arange(n))
        gold.append(heads)
        predicted.append(np.asarray(predictions[i], dtype=np.int64))
        relation.append(np.asarray(s.relations, dtype=object))
        scored.append(is_scored)

    def cat(parts, dtype):
        return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype=dtype)

    return ProbeEvaluation(
        name,
        cat(sentence, np.int64),
        cat(position, np.int64),
        cat(gold, np.int64),
        cat(predicted, np.int64),
        cat(relation, object),
        cat(scored, bool),
        dict(data.skipped),
        data.description,
    )


# --------------------------------------------------------------------------- estimators


#: Held while a probe seeds torch's global generator and draws its initial weights (fit_probes runs fits in threads).
_SEEDING = threading.Lock()


def _check_data(X) -> ProbeData:
    if not isinstance(X, ProbeData):
        raise TypeError(
            f"X must be a ProbeData (a treebank with its attention store), not {type(X).__name__}; "
            "build one with bertology_utils.analyses.probes.ProbeData(corpus, store, vectors)"
        )
    return X


class _ProbeBase(BaseEstimator):
    """What every probe shares: scikit-learn conventions over :class:`ProbeData`."""

    #: Which inputs the probe reads.
    _uses_attention = False
    _uses_vectors = False
    #: Table 3 row name.
    label = ""

    def _check_fitted(self) -> None:
        if not hasattr(self, "n_sentences_fit_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet: call fit(train_data) first")

    def _predictions(self, X: ProbeData) -> dict[int, np.ndarray]:
        raise NotImplementedError

    def predict(self, X) -> list[np.ndarray]:
        """Predicted heads (UD convention) of every usable sentence of ``X``, in corpus order."""
        X = _check_data(X)
        self._check_fitted()
        predictions = self._predictions(X)
        return [predictions[i] for i in sorted(predictions)]

    def evaluate(self, X, name: str | None = None) -> ProbeEvaluation:
        """Predictions with the gold trees: UAS, UAS by relation, per-sentence heads."""
        X = _check_data(X)
        self._check_fitted()
        return _evaluation(name or self.label or type(self).__name__, X, self._predictions(X))

    def score(self, X, y=None) -> float:
        """UAS on ``X`` (punctuation left out), a fraction; ``y`` is ignored."""
        return self.evaluate(X).uas


class RightBranching(_ProbeBase):
    """Baseline: each word's head is the next word; the last word is the root.

    Clark et al.'s "right-branching" row (26 UAS on WSJ), the same as their best fixed offset (+1)
    over all words. Nothing is learned; ``fit`` only records the data's size.
    """

    label = "Right-branching"

    def __init__(self):
        pass

    def fit(self, X, y=None, dev=None):
        X = _check_data(X)
        self.n_sentences_fit_ = len(X)
        return self

    def _predictions(self, X):
        out = {}
        for i in X.indices:
            n = len(X.corpus[int(i)].words)
            heads = np.arange(2, n + 2, dtype=np.int64)
            heads[-1] = 0
            out[int(i)] = heads
        return out


class _TrainedProbe(_ProbeBase):
    """Probes trained by softmax cross-entropy over candidate heads, with early stopping on dev."""

    def _build(self, X: ProbeData) -> torch.nn.Module:
        raise NotImplementedError

    def _check_params(self) -> None:
        for name in ("max_epochs", "batch_size", "max_pairs"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")
        if self.patience is not None and int(self.patience) < 1:
            raise ValueError(f"patience must be at least 1 or None, not {self.patience}")
        if not self.lr > 0:
            raise ValueError(f"lr must be positive, not {self.lr}")

    def _shape_of(self, X: ProbeData) -> tuple[int, int]:
        """(layers, heads) of X's attention, reading one item when it is not known yet."""
        if X.shape is None:
            next(iter(X.batches(1, attention=True)), None)
        if X.shape is None:
            raise BertologyError(f"could not read any attention from {X.name}")
        return X.shape

    def _batches(self, X: ProbeData, shuffle: bool = False, epoch: int = 0):
        return X.batches(
            self.batch_size,
            max_pairs=self.max_pairs,
            attention=self._uses_attention,
            vectors=self._uses_vectors,
            shuffle=shuffle,
            seed=(int(self.seed) * 1_000_003 + epoch),
        )

    def _check_compatible(self, X: ProbeData) -> None:
        if self._uses_attention:
            shape = self._shape_of(X)
            if tuple(shape) != tuple(self.attention_shape_):
                raise BertologyError(
                    f"this probe was fit on {self.attention_shape_[0]} x {self.attention_shape_[1]} "
                    f"layers x heads of attention; {X.name} has {shape[0]} x {shape[1]}"
                )
        if self._uses_vectors:
            if X.vectors is None:
                raise BertologyError("this probe needs word vectors: build the ProbeData with vectors=...")
            if X.vectors.dim != self.vector_dim_:
                raise BertologyError(
                    f"this probe was fit on word vectors of dimension {self.vector_dim_}; "
                    f"{X.name}'s have {X.vectors.dim}"
                )

    def fit(self, X, y=None, dev=None, verbose: bool = False):
        """Train on ``X`` (a :class:`ProbeData`); ``dev`` (another) picks the epoch to keep.

        Without ``dev`` every one of ``max_epochs`` epochs runs and the last is kept. ``history_``
        lists each epoch's mean training loss, dev UAS and seconds.
        """
        X = _check_data(X)
        if dev is not None:
            dev = _check_data(dev)
        self._check_params()
        with torch_threads(self.n_jobs):
            return self._fit(X, dev, verbose)

    def _fit(self, X: ProbeData, dev: ProbeData | None, verbose: bool):
        started = time.perf_counter()
        if self._uses_attention:
            self.attention_shape_ = self._shape_of(X)
        if self._uses_vectors:
            if X.vectors is None:
                raise BertologyError(
                    f"{type(self).__name__} needs word vectors: build the ProbeData with vectors=... "
                    "(bertology_utils.analyses.word_vectors.default_word_vectors)"
                )
            self.vector_dim_ = X.vectors.dim
        if dev is not None:
            self._check_compatible(dev)
        with _SEEDING:  # the initial weights come from torch's global generator
            torch.manual_seed(int(self.seed))
            module = self._build(X)
        self.module_ = module
        optimizer = torch.optim.Adam(module.parameters(), lr=float(self.lr), weight_decay=float(self.weight_decay))
        history, best_uas, best_state, best_epoch, stale = [], -math.inf, None, 0, 0
        n_sentences = 0
        for epoch in range(int(self.max_epochs)):
            tick = time.perf_counter()
            module.train()
            total, words, n_sentences = 0.0, 0, 0
            for batch in self._batches(X, shuffle=True, epoch=epoch):
                scores = module(batch).masked_fill(~batch.candidates, _MASKED)
                mask = batch.words
                loss = torch.nn.functional.cross_entropy(scores[mask], batch.heads[mask])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                count = int(mask.sum())
                total += loss.item() * count
                words += count
                n_sentences += len(batch.indices)
            row = {"epoch": epoch + 1, "train_loss": total / max(words, 1)}
            if dev is not None:
                row["dev_uas"] = _evaluation("dev", dev, self._run(dev)).uas
            row["seconds"] = time.perf_counter() - tick
            history.append(row)
            if verbose:
                print(
                    f"{type(self).__name__} epoch {epoch + 1}: loss {row['train_loss']:.4f}"
                    + (f", dev UAS {100 * row['dev_uas']:.2f}" if dev is not None else "")
                    + f" ({row['seconds']:.1f} s)",
                    flush=True,
                )
            if dev is None:
                best_epoch, best_state = epoch + 1, None
                continue
            if row["dev_uas"] > best_uas:
                best_uas, best_epoch, stale = row["dev_uas"], epoch + 1, 0
                best_state = copy.deepcopy(module.state_dict())
            else:
                stale += 1
                if self.patience is not None and stale >= int(self.patience):
                    break
        if best_state is not None:
            module.load_state_dict(best_state)
        module.eval()
        self.history_ = history
        self.best_epoch_ = best_epoch
        self.n_sentences_fit_ = n_sentences
        self.fit_seconds_ = time.perf_counter() - started
        self._fitted_hook()
        return self

    def _fitted_hook(self) -> None:
        pass

    @torch.no_grad()
    def _run(self, X: ProbeData) -> dict[int, np.ndarray]:
        self.module_.eval()
        out = {}
        for batch in self._batches(X):
            scores = self.module_(batch).masked_fill(~batch.candidates, _MASKED)
            best = scores.argmax(-1).numpy()
            for b, (i, n) in enumerate(zip(batch.indices, batch.lengths.tolist())):
                out[int(i)] = best[b, :n].astype(np.int64)
        return out

    def _predictions(self, X):
        self._check_compatible(X)
        with torch_threads(self.n_jobs):
            return self._run(X)


_TRAINING_DOC = """
    Training parameters: ``lr`` (Adam), ``max_epochs``, ``patience`` (epochs without a better dev
    UAS before stopping; None: never stop early), ``batch_size`` (sentences) and ``max_pairs``
    (padded dependent x candidate pairs per batch), ``weight_decay``, ``seed`` (initialisation and
    data order), ``n_jobs`` (torch threads while fitting and predicting; None leaves torch's setting.
    The batches are small: one thread is as fast as two here, and far faster on a busy machine).
"""


class AttentionProbe(_TrainedProbe):
    (
        """Table 3 "Attn": ``p(i | j) ∝ exp(Σ_k w_k a_k[j, i] + u_k a_k[i, j])`` over every head k.

    After ``fit``: ``w_`` and ``u_`` are ``(layers, heads)`` arrays (``w``: the dependent attends to
    the candidate; ``u``: the candidate attends to the dependent), ``root_scale_`` is
    ``(r_cls, r_sep)`` (module docstring).
    """
        + _TRAINING_DOC
    )

    _uses_attention = True
    label = "Attn"

    def __init__(
        self,
        *,
        lr: float = 0.01,
        max_epochs: int = 10,
        patience: int | None = 2,
        batch_size: int = 32,
        max_pairs: int = 16384,
        weight_decay: float = 0.0,
        seed: int = 0,
        n_jobs: int | None = 1,
    ):
        self.lr = lr
        self.max_epochs = max_epochs
        self.patience = patience
        self.batch_size = batch_size
        self.max_pairs = max_pairs
        self.weight_decay = weight_decay
        self.seed = seed
        self.n_jobs = n_jobs

    def _build(self, X):
        L, H = self.attention_shape_
        return _AttentionScorer(2 * L * H)

    def _fitted_hook(self):
        L, H = self.attention_shape_
        theta = self.module_.theta.detach().numpy().copy()
        self.w_ = theta[: L * H].reshape(L, H)
        self.u_ = theta[L * H :].reshape(L, H)
        self.root_scale_ = self.module_.root_scale.detach().numpy().copy()


class AttentionWordsProbe(_TrainedProbe):
    (
        """Table 3 "Attn + GloVe": ``w_k`` and ``u_k`` are linear in the two words' vectors.

    ``p(i | j) ∝ exp(Σ_k (W_k · (v_j ⊕ v_i) + b_k) a_k[j, i] + (U_k · (v_j ⊕ v_i) + c_k) a_k[i, j])``
    with fixed vectors ``v`` from the :class:`ProbeData`'s ``vectors``. Use
    :meth:`effective_weights` to see which heads it relies on (the weights depend on the words).
    Run on the maps of a randomly initialised copy of the model, it is the random-init baseline.
    """
        + _TRAINING_DOC
    )

    _uses_attention = True
    _uses_vectors = True
    label = "Attn + words"

    def __init__(
        self,
        *,
        lr: float = 0.005,
        max_epochs: int = 10,
        patience: int | None = 2,
        batch_size: int = 32,
        max_pairs: int = 16384,
        weight_decay: float = 0.0,
        seed: int = 0,
        n_jobs: int | None = 1,
    ):
        self.lr = lr
        self.max_epochs = max_epochs
        self.patience = patience
        self.batch_size = batch_size
        self.max_pairs = max_pairs
        self.weight_decay = weight_decay
        self.seed = seed
        self.n_jobs = n_jobs

    def _build(self, X):
        L, H = self.attention_shape_
        return _AttentionWordsScorer(2 * L * H, self.vector_dim_)

    def _fitted_hook(self):
        self.root_scale_ = self.module_.root_scale.detach().numpy().copy()

    @torch.no_grad()
    def effective_weights(self, X, relations: Sequence[str] = ()) -> dict[str, np.ndarray]:
        """Mean head weights over the gold arcs of ``X``: ``{"all": (2, layers, heads), relation: ...}``.

        Entry 0 of the first axis is ``w`` (the dependent attends to its head), 1 is ``u`` (the head
        attends to its dependent). For each gold arc (dependent j, head i) the weights the probe gives
        that pair are averaged, over all arcs and over the arcs of each relation in ``relations``.
        Punctuation arcs are left out.
        """
        X = _check_data(X)
        self._check_fitted()
        self._check_compatible(X)
        L, H = self.attention_shape_
        sums = {name: torch.zeros(2 * L * H, dtype=torch.float64) for name in ("all", *relations)}
        counts = dict.fromkeys(sums, 0)
        with torch_threads(self.n_jobs):
            self._sum_arc_weights(X, relations, sums, counts)
        return {name: (sums[name] / max(counts[name], 1)).numpy().reshape(2, L, H) for name in sums if counts[name]}

    def _sum_arc_weights(self, X, relations, sums, counts) -> None:
        for batch in self._batches(X):
            weights = self.module_.weights(batch)  # (B, N, N + 1, 2K)
            gold = batch.heads.clamp(min=0)
            arc = weights.gather(2, gold[:, :, None, None].expand(-1, -1, 1, weights.shape[-1])).squeeze(2)
            keep = batch.scored & batch.words
            sums["all"] += arc[keep].sum(0).double()
            counts["all"] += int(keep.sum())
            if relations:
                for b, i in enumerate(batch.indices):
                    rel = np.asarray(X.corpus[int(i)].relations, dtype=object)
                    for name in relations:
                        where = torch.from_numpy(rel == name) & keep[b, : len(rel)]
                        if where.any():
                            sums[name] += arc[b, : len(rel)][where].sum(0).double()
                            counts[name] += int(where.sum())


class DistanceWordsProbe(_TrainedProbe):
    (
        """Baseline "Distances + GloVe": one hidden layer over both words' vectors and distance features.

    Score of candidate i for dependent j: ``o · tanh(A v_j + B v_i + C d(j, i) + a) + c`` with the
    distance features of :func:`distance_features` (ROOT: zero vector, ROOT indicator). No attention.
    """
        + _TRAINING_DOC
    )

    _uses_vectors = True
    label = "Distances + words"

    def __init__(
        self,
        *,
        hidden_size: int = 256,
        lr: float = 0.005,
        max_epochs: int = 10,
        patience: int | None = 2,
        batch_size: int = 32,
        max_pairs: int = 16384,
        weight_decay: float = 0.0,
        seed: int = 0,
        n_jobs: int | None = 1,
    ):
        self.hidden_size = hidden_size
        self.lr = lr
        self.max_epochs = max_epochs
        self.patience = patience
        self.batch_size = batch_size
        self.max_pairs = max_pairs
        self.weight_decay = weight_decay
        self.seed = seed
        self.n_jobs = n_jobs

    def _build(self, X):
        if int(self.hidden_size) < 1:
            raise ValueError(f"hidden_size must be at least 1, not {self.hidden_size}")
        return _DistanceWordsScorer(self.vector_dim_, int(self.hidden_size))


def fit_probes(
    jobs: Mapping[str, tuple[_ProbeBase, ProbeData, ProbeData | None]],
    *,
    n_jobs: int | None = None,
    cache: bool = False,
    cache_dir=None,
) -> dict[str, _ProbeBase]:
    """Fit several probes side by side: ``{name: (probe, train, dev)}`` -> ``{name: fitted probe}``.

    Each probe trains on one torch thread (its ``n_jobs`` must be 1 or None), ``n_jobs`` of them
    at a time in threads (None: torch's thread count, one per core unless the process was given
    fewer, as ``bertology run --jobs`` does), in the order given: put the slowest first. Every
    fit is the one ``probe.fit(train, dev=dev)`` would give alone (same seed, same data order,
    same thread count), and probes on the same :class:`ProbeData` share its prepared blocks.
    The probes are fitted in place and returned by name.

    With ``cache``, a trained probe is stored (weights in safetensors, the rest in JSON) under
    ``cache_dir`` (default ``$BERTOLOGY_CACHE_DIR/probes``), keyed by its class and parameters,
    the fingerprints of its train and dev data (:meth:`ProbeData.fingerprint`: corpus, attention
    store, word vectors) and :data:`PROBE_VERSION`; a later call with the same key loads it
    (``from_cache_`` is True) instead of training. Probes whose data have no fingerprint are
    trained every time; a corrupt entry is trained again with a
    :class:`~bertology_utils.core.cache.CacheWarning`.
    """
    for name, (probe, _, _) in jobs.items():
        if getattr(probe, "n_jobs", None) not in (1, None):
            raise ValueError(
                f"{name}: fit_probes trains each probe on one thread; set its n_jobs to 1, not {probe.n_jobs}"
            )
    workers = torch.get_num_threads() if n_jobs is None else int(n_jobs)
    if workers < 1:
        raise ValueError(f"n_jobs must be at least 1 or None, not {n_jobs}")
    root = Path(cache_dir) if cache_dir is not None else settings.cache_dir() / "probes"

    def fit(probe, train, dev):
        entry = _cache_entry(root, probe, train, dev) if cache and isinstance(probe, _TrainedProbe) else None
        if entry is None:
            return probe.fit(train, dev=dev)
        _, probe.from_cache_ = cached(
            *entry, lambda: probe.fit(train, dev=dev), _write_fitted, lambda folder: _read_fitted(probe, folder, train)
        )
        return probe

    with torch_threads(1), ThreadPoolExecutor(max_workers=min(workers, max(len(jobs), 1))) as pool:
        futures = {name: pool.submit(fit, probe, train, dev) for name, (probe, train, dev) in jobs.items()}
        return {name: future.result() for name, future in futures.items()}


# --------------------------------------------------------------------------- cache of fitted probes

#: Bump when training changes in a way that changes fitted probes: old cache entries stop matching.
PROBE_VERSION = 1
_FITTED_STATE = ("history_", "best_epoch_", "n_sentences_fit_", "fit_seconds_")


def _cache_entry(root: Path, probe: _TrainedProbe, train: ProbeData, dev: ProbeData | None) -> tuple[Path, dict] | None:
    """Folder and key of ``probe`` fitted on ``train`` (choosing its epoch on ``dev``); None: not cacheable."""
    uses = {"attention": probe._uses_attention, "vectors": probe._uses_vectors}
    data = {"train": train.fingerprint(**uses), "dev": None if dev is None else dev.fingerprint(**uses)}
    if data["train"] is None or (dev is not None and data["dev"] is None):
        return None
    params = {k: v for k, v in probe.get_params().items() if k != "n_jobs"}  # threads do not change the fit
    key = {
        "probe": type(probe).__name__,
        "params": params,
        **data,
        "version": PROBE_VERSION,
        "torch": torch.__version__,
    }
    return root / entry_name(f"{type(probe).__name__}-{train.name}", key), key


def _read_fitted(probe: _TrainedProbe, folder: Path, train: ProbeData) -> _TrainedProbe:
    """Make ``probe`` the fitted one stored in ``folder``."""
    record = json.loads((folder / "probe.json").read_text(encoding="utf-8"))
    if probe._uses_attention:
        probe.attention_shape_ = tuple(record["attention_shape_"])
    if probe._uses_vectors:
        probe.vector_dim_ = int(record["vector_dim_"])
    module = probe._build(train)
    module.load_state_dict(safetensors.torch.load_file(folder / "weights.safetensors"))
    probe.module_ = module.eval()
    for name in _FITTED_STATE:
        setattr(probe, name, record[name])
    probe._fitted_hook()
    return probe


def _write_fitted(probe: _TrainedProbe, folder: Path) -> None:
    """A fitted probe's weights (safetensors) and the rest of its state (JSON) into ``folder``."""
    record = {name: getattr(probe, name) for name in _FITTED_STATE}
    if probe._uses_attention:
        record["attention_shape_"] = list(probe.attention_shape_)
    if probe._uses_vectors:
        record["vector_dim_"] = probe.vector_dim_
    state = {k: v.detach().contiguous() for k, v in probe.module_.state_dict().items()}
    safetensors.torch.save_file(state, folder / "weights.safetensors")
    (folder / "probe.json").write_text(json.dumps(record, indent=1, default=float), encoding="utf-8")


# --------------------------------------------------------------------------- Table 3

#: Table 3 row names here, in the paper's order (words: GloVe there, the vectors given here).
TABLE3_ROWS = ("Right-branching", "Distances + words", "Random-init Attn + words", "Attn", "Attn + words")

#: Clark et al. (2019) Table 3 (BERT-base, WSJ dev, Stanford Dependencies, UAS without punctuation),
#: as ../shared/reference/papers.md transcribes it; "words" were GloVe vectors there.
PAPER_TABLE3 = {
    "Right-branching": 26.0,
    "Distances + words": 58.0,
    "Random-init Attn + words": 30.0,
    "Attn": 61.0,
    "Attn + words": 77.0,
}
#: The structural probe's 80 is UUAS on BERT's vectors (Hewitt and Manning): not comparable.
PAPER_STRUCTURAL_PROBE_UUAS = 80.0


def table3(test: dict[str, ProbeEvaluation], dev: dict[str, ProbeEvaluation] | None = None) -> pd.DataFrame:
    """Table 3 beside ours, UAS in percent: one row per :data:`TABLE3_ROWS` entry given.

    ``test`` and ``dev`` map row names to evaluations. ``test - paper`` is our test UAS minus the
    paper's (WSJ dev, BERT-base), a difference of model and data, not an error.
    """
    rows = []
    for name in TABLE3_ROWS:
        if name not in test:
            continue
        row = {"row": name, "paper (BERT-base, WSJ dev)": PAPER_TABLE3[name], "test": 100 * test[name].uas}
        if dev is not None and name in dev:
            row["dev"] = 100 * dev[name].uas
        row["test - paper"] = row["test"] - PAPER_TABLE3[name]
        row["scored words (test)"] = test[name].n_scored
        rows.append(row)
    return pd.DataFrame(rows).set_index("row")


# --------------------------------------------------------------------------- pictures


def plot_probe_weights(
    weights: np.ndarray, *, axes=None, title: str = "", label: str = "weight", annotate: bool | None = None
):
    """Two ``(layers, heads)`` heatmaps side by side: ``w`` (dependent -> head) and ``u`` (head -> dependent).

    ``weights`` is ``(2, layers, heads)``, e.g. ``np.stack([probe.w_, probe.u_])`` or an entry of
    :meth:`AttentionWordsProbe.effective_weights`. One colour scale, centred on 0, for both.
    ``annotate`` writes the values in the cells (default: when there are at most 100 heads).
    """
    import matplotlib.pyplot as plt

    from bertology_utils.core.figures import plot_layer_head_grid

    weights = np.asarray(weights, dtype=float)
    if weights.ndim != 3 or weights.shape[0] != 2:
        raise ValueError(f"weights must be (2, layers, heads), got {weights.shape}")
    _, L, H = weights.shape
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(2 * (0.5 * H + 2), 0.42 * L + 1.6))
    limit = float(np.abs(weights).max()) or 1.0
    names = ("w: dependent attends to head", "u: head attends to dependent")
    for ax, grid, name in zip(axes, weights, names):
        plot_layer_head_grid(
            grid,
            ax=ax,
            cmap="RdBu_r",
            vmin=-limit,
            vmax=limit,
            label=label,
            fmt=".1f",
            annotate=L * H <= 100 if annotate is None else annotate,
            title=f"{title}{': ' if title else ''}{name}",
        )
    return axes


def plot_tree_comparison(
    words: Sequence[str],
    gold: Sequence[int],
    predicted: Sequence[int],
    *,
    ax=None,
    title: str | None = None,
    scored: Sequence[bool] | None = None,
):
    """A sentence with its gold arcs above the words and the predicted arcs below.

    Heads use the UD convention (0 = ROOT). Predicted arcs are green where they match the gold head
    and red where they do not, light grey for words not scored (``scored`` False: punctuation); a
    root is drawn as a vertical line. Markers sit at the dependent's end of each arc.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Arc

    n = len(words)
    if len(gold) != n or len(predicted) != n:
        raise ValueError(f"{n} words, {len(gold)} gold heads and {len(predicted)} predicted heads")
    scored = [True] * n if scored is None else list(scored)
    if len(scored) != n:
        raise ValueError(f"{n} words and {len(scored)} scored flags")
    if ax is None:
        _, ax = plt.subplots(figsize=(max(6.0, 0.9 * n), 4.0))
    top = 1.0
    for side, heads, sign in (("gold", gold, 1), ("predicted", predicted, -1)):
        for dep, head in enumerate(heads):
            if side == "gold":
                colour = "dimgray"
            elif not scored[dep]:
                colour = "silver"
            else:
                colour = "seagreen" if head == gold[dep] else "crimson"
            if head == 0:
                ax.plot([dep, dep], [0.15 * sign, 0.9 * sign * top], color=colour, lw=1.5)
                ax.text(
                    dep,
                    0.95 * sign * top,
                    "ROOT",
                    ha="center",
                    va="bottom" if sign > 0 else "top",
                    fontsize=7,
                    color=colour,
                )
                continue
            a, b = sorted((dep, head - 1))
            height = min(0.25 + 0.12 * (b - a), 0.85) * top
            ax.add_patch(
                Arc(
                    ((a + b) / 2, 0.15 * sign),
                    b - a,
                    2 * height,
                    theta1=0 if sign > 0 else 180,
                    theta2=180 if sign > 0 else 360,
                    color=colour,
                    lw=1.5,
                )
            )
            ax.plot([dep], [0.15 * sign], marker="v" if sign > 0 else "^", color=colour, ms=4)
    for k, word in enumerate(words):
        ax.text(k, 0, word, ha="center", va="center", fontsize=9)
    ax.text(-0.8, 0.5, "gold", rotation=90, ha="center", va="center", fontsize=9, color="dimgray")
    ax.text(-0.8, -0.5, "predicted", rotation=90, ha="center", va="center", fontsize=9, color="dimgray")
    ax.set_xlim(-1.2, n - 0.4)
    ax.set_ylim(-1.1, 1.1)
    ax.set_axis_off()
    if title:
        ax.set_title(title)
    return ax
