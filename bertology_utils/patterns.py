"""Surface statistics of attention heads: where each head's attention goes, and how spread out it is.

Every function reads word-level :class:`~bertology_utils.word_attention.ItemAttention` records
(from :func:`~bertology_utils.extraction.attention_for` or an
:class:`~bertology_utils.store.AttentionStore`, which iterates over its items) and returns one
value per ``(layer, head)``. Layer and head counts come from the data.

Averaging follows Clark et al. (2019), who averaged over tokens: every attending *word* of every
item is one row, and each row weighs the same, so long sentences count more than short ones.
Rows of the special pseudo-words ([CLS], [SEP], ``<s>``, ``</s>``) are included, as are Clark's.
Stored maps are float16, so a row sums to 1 only within about 1e-3; the statistics below
renormalise each row before using it (:func:`max_row_sum_error` measures the deviation).
"""
from __future__ import annotations

from typing import Iterable, Mapping, NamedTuple

import numpy as np
import pandas as pd

from .alignment import LEADING_SPECIAL, SEPARATOR, WORD
from .word_attention import ItemAttention

#: Keys of :func:`attention_to_kinds`, and the word kind each one collects.
KINDS = {"cls": LEADING_SPECIAL, "sep": SEPARATOR, "other": WORD}


class EntropyStats(NamedTuple):
    """What :func:`attention_entropy` returns (unpacks as a tuple)."""

    entropy: np.ndarray     #: (layers, heads) mean entropy of the attention rows, in nats
    uniform_entropy: float  #: mean over the same rows of log(row length): a head attending uniformly
    mean_row_length: float  #: mean number of words a row spreads over (row-weighted, specials included)


def _items(items: Iterable[ItemAttention]) -> Iterable[tuple[ItemAttention, np.ndarray]]:
    """Each item with its attention as float64 (L, H, n, n), checking shapes agree across items."""
    shape = None
    for item in items:
        att = np.asarray(item.attention, dtype=np.float64)
        n = len(item.words)
        if att.ndim != 4 or att.shape[2:] != (n, n):
            raise ValueError(f"item {item.item_id}: attention of shape {att.shape} does not fit {n} words")
        if len(item.word_kinds) != n:
            raise ValueError(f"item {item.item_id}: {len(item.word_kinds)} word kinds for {n} words")
        if shape is None:
            shape = att.shape[:2]
        elif att.shape[:2] != shape:
            raise ValueError(f"item {item.item_id} has {att.shape[:2]} layers x heads, earlier items {shape}")
        yield item, att
    if shape is None:
        raise ValueError("no items: the statistics need at least one item")


def attention_to_kinds(items: Iterable[ItemAttention]) -> dict[str, np.ndarray]:
    """Mean share of attention each head puts on [CLS]-like words, on separators and on other words.

    For every attending word (row) of every item, the row is renormalised to sum to 1 and
    split by the kind of the attended word (see :mod:`bertology_utils.alignment`); the shares
    are then averaged over all rows of all items, each row weighing the same (Clark et al.'s
    average over tokens, taken at word level). Rows of special words are included; rows that
    are all zero are left out.

    Returns ``{"cls": ..., "sep": ..., "other": ...}``, each of shape ``(layers, heads)``;
    the three sum to 1 for every head.
    """
    totals, rows = None, None
    kinds = np.array(list(KINDS.values()))
    for item, att in _items(items):
        one_hot = (np.asarray(item.word_kinds)[:, None] == kinds[None, :]).astype(np.float64)  # (n, 3)
        by_kind = att @ one_hot                                  # (L, H, n, 3): mass of each row per kind
        mass = by_kind.sum(-1, keepdims=True)                    # (L, H, n, 1): the row sums
        valid = mass > 0
        shares = np.divide(by_kind, mass, out=np.zeros_like(by_kind), where=valid)
        if totals is None:
            totals, rows = np.zeros(shares.shape[:2] + (3,)), np.zeros(shares.shape[:2] + (1,))
        totals += shares.sum(axis=2)
        rows += valid.sum(axis=2)
    means = np.divide(totals, rows, out=np.full_like(totals, np.nan), where=rows > 0)
    return {name: means[..., k] for k, name in enumerate(KINDS)}


def attention_entropy(items: Iterable[ItemAttention], eps: float = 1e-12) -> EntropyStats:
    """Mean entropy (nats) of each head's attention rows, with the uniform reference.

    Each row ``p`` is renormalised to sum to 1 (float16 storage leaves it within ~1e-3), then
    ``H(p) = -sum_j p_j log(max(p_j, eps))``. Clipping inside the logarithm only, with no mass
    added, makes ``0 log 0 = 0`` exact and leaves every positive entry's contribution unchanged
    (for ``p_j >= eps``); it is the only smoothing. Rows are averaged as in
    :func:`attention_to_kinds` (every attending word of every item weighs the same; all-zero rows
    are left out).

    ``uniform_entropy`` is the mean over the same rows of ``log(n)``, ``n`` the number of words
    the row spreads over: what a head attending uniformly would score, so ``entropy /
    uniform_entropy`` near 1 means "attends broadly, bag-of-words like".
    """
    totals, rows, n_rows, log_n, length = None, None, 0, 0.0, 0.0
    for item, att in _items(items):
        mass = att.sum(-1, keepdims=True)
        valid = mass > 0
        p = np.divide(att, mass, out=np.zeros_like(att), where=valid)
        h = -(p * np.log(np.maximum(p, eps))).sum(-1)            # (L, H, n)
        if totals is None:
            totals, rows = np.zeros(h.shape[:2]), np.zeros(h.shape[:2])
        totals += h.sum(-1)
        rows += valid[..., 0].sum(-1)
        n = att.shape[-1]
        if n:
            n_rows, log_n, length = n_rows + n, log_n + n * np.log(n), length + n * n
    entropy = np.divide(totals, rows, out=np.full_like(totals, np.nan), where=rows > 0)
    return EntropyStats(entropy, float(log_n / max(n_rows, 1)), float(length / max(n_rows, 1)))


def max_row_sum_error(items: Iterable[ItemAttention]) -> float:
    """Largest ``|row sum - 1|`` over every row of every head of every item (float16 rounding shows here)."""
    worst = 0.0
    for _, att in _items(items):
        worst = max(worst, float(np.abs(att.sum(-1) - 1.0).max(initial=0.0)))
    return worst


def head_table(values: Mapping[str, np.ndarray]) -> pd.DataFrame:
    """One row per (layer, head), both counted from 1 like the papers, one column per ``(layers, heads)`` array.

    ``head_table(attention_to_kinds(items))`` has columns layer, head, cls, sep, other; melt it
    for seaborn's long format.
    """
    arrays = {name: np.asarray(v) for name, v in values.items()}
    shapes = {v.shape for v in arrays.values()}
    if len(shapes) != 1 or len(next(iter(shapes))) != 2:
        raise ValueError(f"head_table needs (layers, heads) arrays of one shape, got {sorted(shapes)}")
    layers, heads = shapes.pop()
    layer, head = np.meshgrid(np.arange(1, layers + 1), np.arange(1, heads + 1), indexing="ij")
    return pd.DataFrame({"layer": layer.ravel(), "head": head.ravel(), **{k: v.ravel() for k, v in arrays.items()}})
