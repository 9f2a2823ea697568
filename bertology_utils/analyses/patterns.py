"""Surface statistics of attention heads: where each head's attention goes, and how spread out it is.

Every function reads word-level :class:`~bertology_utils.attention.word_attention.ItemAttention` records
(from :func:`~bertology_utils.attention.extraction.attention_for` or an
:class:`~bertology_utils.attention.store.AttentionStore`, which iterates over its items) and returns one
value per ``(layer, head)``. Layer and head counts come from the data.

:func:`surface_statistics` are Clark et al.'s (2019, `What Does BERT Look At?
<https://arxiv.org/abs/1906.04341>`_, Section 3); :func:`vig_patterns` are Vig & Belinkov's (2019,
`Analyzing the Structure of Attention in a Transformer Language Model
<https://arxiv.org/abs/1906.04284>`_). Averaging follows Clark et al., who averaged over tokens: every attending *word* of every
item is one row, and each row weighs the same, so long sentences count more than short ones.
Rows of the special pseudo-words ([CLS], [SEP], ``<s>``, ``</s>``) are included, as are Clark's.
Stored maps are float16, so a row sums to 1 only within about 1e-3; the statistics below
renormalise each row before using it (:func:`max_row_sum_error` measures the deviation).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bertology_utils.attention.alignment import LEADING_SPECIAL as _CLS_KIND
from bertology_utils.attention.alignment import SEPARATOR as _SEP_KIND
from bertology_utils.attention.alignment import WORD as _WORD_KIND
from bertology_utils.attention.word_attention import ItemAttention
from bertology_utils.core.typing import HeadMatrix, ItemMaps
from bertology_utils.core.uncertainty import Draws, bootstrap_weights
from bertology_utils.data import is_punctuation

if TYPE_CHECKING:
    from bertology_utils.attention.store import AttentionStore

__all__ = [
    "max_row_sum_error",
    "head_table",
    "LEVELS",
    "STATISTICS",
    "SurfaceStats",
    "surface_statistics",
    "VIG_PATTERNS",
    "PatternScores",
    "vig_patterns",
]


def max_row_sum_error(items: Iterable[ItemAttention]) -> float:
    """Largest ``|row sum - 1|`` over every row of every head of every item (float16 rounding shows here).

    :param items: word-level attention.
    :returns: the largest deviation of a row's sum from 1.
    """
    worst = 0.0
    for item in items:
        att = np.asarray(item.attention, dtype=np.float64)
        worst = max(worst, float(np.abs(att.sum(-1) - 1.0).max(initial=0.0)))
    return worst


def head_table(values: Mapping[str, HeadMatrix]) -> pd.DataFrame:
    """One row per (layer, head), both counted from 1 like the papers, one column per ``(L, H)`` array.

    ``surface_statistics(items).table()`` has columns layer, head and one per statistic; melt it
    for seaborn's long format.

    :param values: name -> ``(L, H)`` array, all of one shape.
    :returns: columns ``layer``, ``head`` and one per name, ``L * H`` rows.
    """
    arrays = {name: np.asarray(v) for name, v in values.items()}
    shapes = {v.shape for v in arrays.values()}
    if len(shapes) != 1 or len(next(iter(shapes))) != 2:
        raise ValueError(f"head_table needs (layers, heads) arrays of one shape, got {sorted(shapes)}")
    layers, heads = shapes.pop()
    layer, head = np.meshgrid(np.arange(1, layers + 1), np.arange(1, heads + 1), indexing="ij")
    return pd.DataFrame({"layer": layer.ravel(), "head": head.ravel(), **{k: v.ravel() for k, v in arrays.items()}})


# --------------------------------------------------------------------------- Clark's surface statistics, one pass

#: The levels :func:`surface_statistics` reads: word-level maps, or token-level ones.
LEVELS = ("word", "token")

#: Names of the ``(L, H)`` arrays in :attr:`SurfaceStats.values`, with what each one averages.
STATISTICS = {
    "previous": "share of a row on the previous position (rows that have one)",
    "self": "share of a row on its own position",
    "next": "share of a row on the next position (rows that have one)",
    "cls": "share of a row on the leading special token ([CLS], <s>)",
    "sep": "share of a row on separators ([SEP], </s>)",
    "other": "share of a row on ordinary words/tokens (not [CLS]- or [SEP]-like)",
    "sep_to_sep": "share of a separator's row on separators (separator rows only)",
    "period": 'share of a row on "." ',
    "comma": 'share of a row on ","',
    "punct": "share of a row on any all-punctuation word/token",
    "entropy": "entropy of a row, nats",
    "cls_entropy": "entropy of the leading special token's row, nats",
}

_PIECE_MARKS = ("##", "\u0120", "\u2581", "</w>")  # BERT's ##, GPT-2/RoBERTa's Ġ, SentencePiece's ▁


def _strip_piece(token: str) -> str:
    for mark in _PIECE_MARKS:
        token = token.replace(mark, "")
    return token


@dataclass
class SurfaceStats:
    """What :func:`surface_statistics` returns: per-head means, their row counts and uniform references.

    :param level: ``"word"`` or ``"token"`` (:data:`LEVELS`).
    :param values: name -> ``(L, H)`` mean, see :data:`STATISTICS`.
    :param rows: name -> number of rows the mean is over.
    :param uniform_entropy: mean log(row length) over all rows: a uniform head's entropy.
    :param uniform_cls_entropy: the same over [CLS] rows only.
    :param n_items: items read.
    :param n_pairs: items with two segments.
    :param per_item: name -> ``(N, L, H)`` sums of each item's rows, and ``"rows:" + name`` ->
        ``(N,)`` row counts (``"log_n"``, ``"log_n_cls"``: each item's summed log row length): what
        :meth:`bootstrap` resamples.
    """

    level: str
    values: dict[str, HeadMatrix]  #: name -> (L, H) mean, see :data:`STATISTICS`
    rows: dict[str, int]  #: name -> number of rows the mean is over
    uniform_entropy: float  #: mean log(row length) over all rows: a uniform head's entropy
    uniform_cls_entropy: float  #: the same over [CLS] rows only
    n_items: int
    n_pairs: int = 0  #: items with two segments
    #: name -> (N, L, H) sums of each item's rows, and "rows:" + name -> (N,) row counts
    #: ("log_n", "log_n_cls": each item's summed log row length): what :meth:`bootstrap` resamples
    per_item: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def __getitem__(self, name: str) -> HeadMatrix:
        """The ``(L, H)`` means of one statistic of :data:`STATISTICS`."""
        return self.values[name]

    def bootstrap(self, n_resamples: int = 2000, seed: int = 0, level: float = 0.95) -> Draws:
        """Bootstrap draws of every statistic over the items (sentences, or pairs), resampled whole with their rows.

        Each draw is the statistics of ``n_items`` items drawn with replacement, weighting rows as
        :func:`surface_statistics` does; ``uniform_entropy`` and ``uniform_cls_entropy`` are drawn with
        them. Seeded, so a claim's interval is the same on every run.

        :param n_resamples: draws.
        :param seed: the resampling's seed.
        :param level: the intervals' confidence level.
        :returns: ``(n_resamples, L, H)`` draws per statistic (``(n_resamples,)`` for the uniform references).
        :raises ValueError: without the per-item sums.
        """
        if not self.per_item:
            raise ValueError("these statistics keep no per-item sums to resample: compute them with surface_statistics")
        weights = bootstrap_weights(self.n_items, n_resamples, seed)

        def ratio(numerator: np.ndarray, rows: np.ndarray) -> np.ndarray:
            total = weights @ rows.astype(np.float64)
            drawn = weights @ numerator.reshape(self.n_items, -1).astype(np.float64)
            drawn = drawn.reshape((n_resamples,) + numerator.shape[1:])
            total = total.reshape((n_resamples,) + (1,) * (numerator.ndim - 1))
            with np.errstate(invalid="ignore", divide="ignore"):
                return np.where(total > 0, drawn / np.where(total > 0, total, 1.0), np.nan)

        items = self.per_item
        values = {name: ratio(items[name], items["rows:" + name]) for name in STATISTICS}
        values["uniform_entropy"] = ratio(items["log_n"], items["rows:entropy"])
        values["uniform_cls_entropy"] = ratio(items["log_n_cls"], items["rows:cls_entropy"])
        what = "sentence pairs" if self.n_pairs == self.n_items else "sentences" if not self.n_pairs else "items"
        return Draws(values, f"{self.n_items} {what}", level)

    def table(self) -> pd.DataFrame:
        """:func:`head_table` of every statistic: one row per head."""
        return head_table(self.values)

    def per_layer(self) -> pd.DataFrame:
        """Mean over heads of every statistic.

        :returns: one row per layer (counted from 1), one column per statistic.
        """
        return self.table().drop(columns="head").groupby("layer").mean()


def _view(item: ItemAttention, level: str) -> tuple[np.ndarray, np.ndarray, Sequence[str], np.ndarray]:
    """(attention (L, H, W, W) float64 with rows renormalised, kinds (W,), texts (W,), segments (W,)); at the
    token level T for W."""
    if level == "word":
        att, kinds, texts, segments = item.attention, np.asarray(item.word_kinds), item.words, np.asarray(item.segments)
    elif level == "token":
        if item.token_attention is None:
            raise ValueError(f"item {item.item_id} has no token-level attention: extract with keep_tokens=True")
        assert item.tokens is not None  # kept with the token-level attention
        t2w = np.asarray(item.token_to_word)
        att, kinds, segments = item.token_attention, np.asarray(item.word_kinds)[t2w], np.asarray(item.segments)[t2w]
        texts = tuple(_strip_piece(t) for t in item.tokens)
    else:
        raise ValueError(f"level must be one of {LEVELS}, not {level!r}")
    att = np.asarray(att, dtype=np.float64)
    n = att.shape[-1]
    if att.ndim != 4 or att.shape[-2] != n or len(kinds) != n:
        raise ValueError(f"item {item.item_id}: attention {att.shape} does not fit {len(kinds)} {level}s")
    mass = att.sum(-1, keepdims=True)
    att = np.divide(att, mass, out=np.zeros_like(att), where=mass > 0)
    return att, kinds, texts, segments


def surface_statistics(
    items: Iterable[ItemAttention],
    level: str = "word",
    eps: float = 1e-12,
    punctuation: Collection[str] | None = None,
    *,
    cluster: Any = None,
) -> SurfaceStats:
    """Clark et al.'s surface statistics of every head, one pass over the items, vectorised over heads and rows.

    ``level="word"`` reads the word-level maps (Clark's token -> word conversion); ``level="token"``
    reads the token-level maps kept by ``extract_cached(..., keep_tokens=True)``, where "previous"
    means the previous *token*, as in Clark's Figure 1. Every row (attending position) of every
    item weighs the same; rows are renormalised to sum to 1 first (float16 storage). Special
    tokens are the model's own (from the word kinds: [CLS]/``<s>`` leading, [SEP]/``</s>``
    separators).

    :param items: word-level attention (an :class:`~bertology_utils.attention.store.AttentionStore`
        iterates over its items).
    :param level: one of :data:`LEVELS`.
    :param eps: entropy is ``-sum p log max(p, eps)`` (no mass added; ``eps`` only makes 0 log 0 = 0).
    :param punctuation: the forms that count as punctuation (a treebank's own, from
        :func:`~bertology_utils.data.punctuation_forms`); None: Unicode's punctuation characters.
    :param cluster: ``"local:N"``, a scheduler address or a ``distributed.Client`` (``items`` must then
        be an :class:`~bertology_utils.attention.store.AttentionStore`): the sums are taken over ranges
        of the store on the cluster and added up here, equal to the single-process result up to float
        rounding.
    :returns: the ``(L, H)`` mean of every statistic of :data:`STATISTICS`, with row counts.
    """
    if cluster is None:
        sums = _SurfaceSums(level, eps, punctuation)
        for item in items:
            sums.add(item)
    else:
        from bertology_utils.attention.distributed import map_store

        parts = map_store(_store_in_range(items), _surface_sums_of_range, level, eps, punctuation, cluster=cluster)
        sums = parts[0]
        for part in parts[1:]:
            sums.merge(part)
    return sums.result()


def _store_in_range(items: Iterable[ItemAttention]) -> AttentionStore:
    from bertology_utils.attention.store import AttentionStore

    if not isinstance(items, AttentionStore):
        raise ValueError("cluster= needs an AttentionStore: its workers read the store's items themselves")
    return items


def _surface_sums_of_range(
    store_path: str, lo: int, hi: int, level: str, eps: float, punctuation: Collection[str] | None
) -> _SurfaceSums:
    """One map task of :func:`surface_statistics` on a cluster: the sums over items ``lo:hi`` of a store."""
    from bertology_utils.attention.store import AttentionStore

    sums = _SurfaceSums(level, eps, punctuation)
    for item in AttentionStore.open(store_path).iter_items(range(lo, hi)):
        sums.add(item)
    return sums


class _SurfaceSums:
    """The running sums behind :func:`surface_statistics`: added item by item, merged range by range."""

    def __init__(self, level: str, eps: float, punctuation: Collection[str] | None):
        self.level, self.eps, self.punctuation = level, eps, punctuation
        self.sums: dict[str, HeadMatrix] = {}
        self.rows = {name: 0 for name in STATISTICS}
        self.log_n = self.log_n_cls = 0.0
        self.n_items = self.n_pairs = 0
        self.shape: tuple[int, ...] | None = None
        self.per_item: dict[str, list] = {}  # what SurfaceStats.bootstrap resamples; float32 halves the memory

    def _check_shape(self, shape: tuple[int, ...], what: str) -> None:
        if self.shape is None:
            self.shape = shape
            self.sums = {name: np.zeros(shape) for name in STATISTICS}
        elif shape != self.shape:
            raise ValueError(f"{what} has {shape} layers x heads, earlier items {self.shape}")

    def add(self, item: ItemAttention) -> None:
        att, kinds, texts, segments = _view(item, self.level)
        self._check_shape(att.shape[:2], f"item {item.item_id}")
        sums, rows, log_n, log_n_cls = self._item(att, kinds, texts)
        self.n_items += 1
        self.n_pairs += int(len(np.unique(segments)) > 1)
        for name in STATISTICS:
            self.sums[name] += sums[name]
            self.rows[name] += rows[name]
            self.per_item.setdefault(name, []).append(sums[name].astype(np.float32))
            self.per_item.setdefault("rows:" + name, []).append(rows[name])
        self.log_n += log_n
        self.log_n_cls += log_n_cls
        self.per_item.setdefault("log_n", []).append(log_n)
        self.per_item.setdefault("log_n_cls", []).append(log_n_cls)

    def _item(
        self, att: ItemMaps, kinds: np.ndarray, texts: Sequence[str]
    ) -> tuple[dict[str, HeadMatrix], dict[str, int], float, float]:
        """One item's sums over its rows and its row counts per statistic, and its summed log row lengths."""
        zero = np.zeros(att.shape[:2])
        sums = dict.fromkeys(STATISTICS, zero)
        rows = dict.fromkeys(STATISTICS, 0)
        n = att.shape[-1]
        idx = np.arange(n)
        cls, sep = kinds == _CLS_KIND, kinds == _SEP_KIND
        word = kinds == _WORD_KIND
        period = word & np.array([t == "." for t in texts])
        comma = word & np.array([t == "," for t in texts])
        punct = word & np.array([is_punctuation(t, self.punctuation) for t in texts])
        cols = np.stack([cls, sep, word, period, comma, punct], axis=1).astype(np.float64)  # (n, 6)
        shares = att @ cols  # (L, H, n, 6)
        for k, name in enumerate(("cls", "sep", "other", "period", "comma", "punct")):
            sums[name], rows[name] = shares[..., k].sum(-1), n
        if n > 1:
            sums["previous"], rows["previous"] = att[..., idx[1:], idx[:-1]].sum(-1), n - 1
            sums["next"], rows["next"] = att[..., idx[:-1], idx[1:]].sum(-1), n - 1
        sums["self"], rows["self"] = att[..., idx, idx].sum(-1), n
        if sep.any():
            sums["sep_to_sep"], rows["sep_to_sep"] = shares[..., sep, 1].sum(-1), int(sep.sum())
        h = -(att * np.log(np.maximum(att, self.eps))).sum(-1)  # (L, H, n)
        sums["entropy"], rows["entropy"] = h.sum(-1), n
        log_n_cls = 0.0
        if cls.any():
            sums["cls_entropy"], rows["cls_entropy"] = h[..., cls].sum(-1), int(cls.sum())
            log_n_cls = int(cls.sum()) * float(np.log(n))
        return sums, rows, n * float(np.log(n)), log_n_cls

    def merge(self, other: _SurfaceSums) -> None:
        """Add the sums of another range (an empty one changes nothing)."""
        if other.shape is None:
            return
        self._check_shape(other.shape, "a range")
        for name in STATISTICS:
            self.sums[name] += other.sums[name]
            self.rows[name] += other.rows[name]
        self.log_n += other.log_n
        self.log_n_cls += other.log_n_cls
        self.n_items += other.n_items
        self.n_pairs += other.n_pairs
        for name, values in other.per_item.items():
            self.per_item.setdefault(name, []).extend(values)

    def result(self) -> SurfaceStats:
        if self.shape is None:
            raise ValueError("no items: the statistics need at least one item")
        sums, rows, shape = self.sums, self.rows, self.shape
        values = {name: (sums[name] / rows[name] if rows[name] else np.full(shape, np.nan)) for name in STATISTICS}
        return SurfaceStats(
            self.level,
            values,
            rows,
            float(self.log_n / max(rows["entropy"], 1)),
            float(self.log_n_cls / rows["cls_entropy"]) if rows["cls_entropy"] else float("nan"),
            self.n_items,
            self.n_pairs,
            {name: np.asarray(values) for name, values in self.per_item.items()},
        )


def _surface_statistics_loop(
    items: Iterable[ItemAttention], level: str = "word", eps: float = 1e-12, punctuation: Collection[str] | None = None
) -> dict[str, HeadMatrix]:
    """The same means as :func:`surface_statistics`, computed the straightforward way: a Python loop
    over items, heads and rows. Only for checking and for the benchmark (it is ~100x slower)."""
    sums: dict[str, HeadMatrix] = {}
    rows = {name: 0 for name in STATISTICS}
    shape: tuple[int, int] | None = None
    for item in items:
        att, kinds, texts, _ = _view(item, level)
        L, H, n, _ = att.shape
        if shape is None:
            shape = (L, H)
            sums = {name: np.zeros(shape) for name in STATISTICS}
        for l in range(L):
            for h in range(H):
                for i in range(n):
                    row = att[l, h, i]
                    for j in range(n):
                        p = row[j]
                        word = kinds[j] == _WORD_KIND
                        if kinds[j] == _CLS_KIND:
                            sums["cls"][l, h] += p
                        if kinds[j] == _SEP_KIND:
                            sums["sep"][l, h] += p
                            if kinds[i] == _SEP_KIND:
                                sums["sep_to_sep"][l, h] += p
                        if word:
                            sums["other"][l, h] += p
                        if word and texts[j] == ".":
                            sums["period"][l, h] += p
                        if word and texts[j] == ",":
                            sums["comma"][l, h] += p
                        if word and is_punctuation(texts[j], punctuation):
                            sums["punct"][l, h] += p
                        if j == i - 1:
                            sums["previous"][l, h] += p
                        if j == i:
                            sums["self"][l, h] += p
                        if j == i + 1:
                            sums["next"][l, h] += p
                        ent = -p * math.log(max(p, eps))
                        sums["entropy"][l, h] += ent
                        if kinds[i] == _CLS_KIND:
                            sums["cls_entropy"][l, h] += ent
        for name in ("cls", "sep", "other", "period", "comma", "punct", "self", "entropy"):
            rows[name] += n
        rows["previous"] += n - 1
        rows["next"] += n - 1
        rows["sep_to_sep"] += int((kinds == _SEP_KIND).sum())
        rows["cls_entropy"] += int((kinds == _CLS_KIND).sum())
    if shape is None:
        raise ValueError("no items: the statistics need at least one item")
    return {name: (sums[name] / rows[name] if rows[name] else np.full(shape, np.nan)) for name in STATISTICS}


# --------------------------------------------------------------------------- Vig's patterns, one score per head

#: Vig & Belinkov (2019)'s patterns, and what the score of each is (a mean over the rows it applies to).
VIG_PATTERNS = {
    "previous_word": "share of a word's row on the previous word",
    "next_word": "share of a word's row on the next word",
    "identical_word": "share of a word's row on other occurrences of the same word (rows that have one)",
    "identical_word_across": "the same, counting only occurrences in the other segment (pairs)",
    "same_word_pieces": "share of a word-piece's row on the other pieces of its word (token level)",
    "delimiter": "share of a row on [CLS]/[SEP]-like tokens",
    "bag_of_words": "entropy of a word's row over the real words, divided by log(#words): 1 = uniform",
}


@dataclass
class PatternScores:
    """What :func:`vig_patterns` returns.

    :param values: pattern -> ``(L, H)`` score, see :data:`VIG_PATTERNS`.
    :param rows: pattern -> rows averaged (0: not measurable on these items).
    """

    values: dict[str, HeadMatrix]  #: pattern -> (L, H) score
    rows: dict[str, int]  #: pattern -> rows averaged (0: not measurable on these items)

    def top(self, pattern: str, k: int = 5) -> pd.DataFrame:
        """The heads with the highest score for one pattern.

        :param pattern: one of :data:`VIG_PATTERNS`.
        :param k: heads to list.
        :returns: ``k`` rows, best first: layer, head (from 1) and the score.
        """
        table = head_table({pattern: self.values[pattern]})
        return table.dropna().sort_values(pattern, ascending=False).head(k).reset_index(drop=True)

    def table(self) -> pd.DataFrame:
        """:func:`head_table` of every pattern: one row per head."""
        return head_table(self.values)


def vig_patterns(items: Iterable[ItemAttention], eps: float = 1e-12) -> PatternScores:
    """Vig & Belinkov's attention patterns, one score per head (see :data:`VIG_PATTERNS`).

    `Analyzing the Structure of Attention in a Transformer Language Model
    <https://arxiv.org/abs/1906.04284>`_. Word-level maps give every score except ``same_word_pieces``,
    which needs token maps (items extracted with ``keep_tokens=True``); without them it is NaN with 0
    rows. Rows of real words only (specials left out) for the word patterns; "identical" compares
    lower-cased words.

    :param items: word-level attention.
    :param eps: the floor under ``p`` in ``p log p`` (makes 0 log 0 = 0).
    :returns: the ``(L, H)`` score of every pattern, with row counts.
    :raises ValueError: without items.
    """
    sums, rows, shape = {}, {name: 0 for name in VIG_PATTERNS}, None
    for item in items:
        att, kinds, texts, segments = _view(item, "word")
        if shape is None:
            shape = att.shape[:2]
            sums = {name: np.zeros(shape) for name in VIG_PATTERNS}
        n = att.shape[-1]
        word = kinds == _WORD_KIND
        special = ~word
        wi = np.flatnonzero(word)
        sums["delimiter"] += (att @ special.astype(np.float64)).sum(-1)
        rows["delimiter"] += n
        prev_ok = wi[(wi > 0) & word[np.maximum(wi - 1, 0)] & (segments[np.maximum(wi - 1, 0)] == segments[wi])]
        next_ok = wi[
            (wi < n - 1) & word[np.minimum(wi + 1, n - 1)] & (segments[np.minimum(wi + 1, n - 1)] == segments[wi])
        ]
        if len(prev_ok):
            sums["previous_word"] += att[..., prev_ok, prev_ok - 1].sum(-1)
            rows["previous_word"] += len(prev_ok)
        if len(next_ok):
            sums["next_word"] += att[..., next_ok, next_ok + 1].sum(-1)
            rows["next_word"] += len(next_ok)
        lower = np.array([t.lower() for t in texts])
        same = (lower[:, None] == lower[None, :]) & word[:, None] & word[None, :] & ~np.eye(n, dtype=bool)
        for name, mask in (
            ("identical_word", same),
            ("identical_word_across", same & (segments[:, None] != segments[None, :])),
        ):
            has = mask.any(1)
            if has.any():
                sums[name] += (att[..., has, :] * mask[has]).sum((-2, -1))
                rows[name] += int(has.sum())
        if len(wi) > 1:
            p = att[..., wi[:, None], wi[None, :]]
            mass = p.sum(-1, keepdims=True)
            p = np.divide(p, mass, out=np.zeros_like(p), where=mass > 0)
            sums["bag_of_words"] += (-(p * np.log(np.maximum(p, eps))).sum(-1) / np.log(len(wi))).sum(-1)
            rows["bag_of_words"] += len(wi)
        if item.token_attention is not None:
            tatt, tkinds, _, _ = _view(item, "token")
            t2w = np.asarray(item.token_to_word)
            piece = (t2w[:, None] == t2w[None, :]) & ~np.eye(len(t2w), dtype=bool) & (tkinds == _WORD_KIND)[:, None]
            has = piece.any(1)
            if has.any():
                sums["same_word_pieces"] += (tatt[..., has, :] * piece[has]).sum((-2, -1))
                rows["same_word_pieces"] += int(has.sum())
    if shape is None:
        raise ValueError("no items")
    values = {name: (sums[name] / rows[name] if rows[name] else np.full(shape, np.nan)) for name in VIG_PATTERNS}
    return PatternScores(values, rows)
