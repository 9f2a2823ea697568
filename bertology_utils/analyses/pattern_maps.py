"""Attention maps as the pattern-type classifiers read them, and planted maps of each type to test them on.

Kovaleva et al. (2019, "Revealing the Dark Secrets of BERT", https://arxiv.org/abs/1908.08593) classify
attention maps into five types (:mod:`~bertology_utils.analyses.pattern_types`). The classifiers of
:mod:`~bertology_utils.analyses.pattern_models` read a map either as :data:`FEATURES`, interpretable numbers
(:func:`map_features`), or as small images with position channels
(:func:`~bertology_utils.analyses.pattern_cnn.map_images`). :func:`planted_maps` makes clear, noisy maps of every
type: the
anchors the classifiers are fitted with, and test data.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from bertology_utils.analyses.pattern_types import TYPES, template_scores
from bertology_utils.attention.alignment import LEADING_SPECIAL, SEPARATOR, WORD
from bertology_utils.core.typing import WordMap, WordValues

__all__ = [
    "Map",
    "normalised_maps",
    "FEATURES",
    "map_features",
    "scored_features",
    "planted_layout",
    "planted_map",
    "planted_maps",
    "with_anchors",
    "stack_maps",
    "checked_types",
]

Map = tuple[WordMap, WordValues, WordValues]

FEATURES = (
    "vertical",  # template: share on special tokens
    "diagonal",  # template: share on words at offset -1, 0, +1
    "block",  # template: in-segment share of word-to-word attention (pairs; 0.5 for single sentences)
    "block_spread",  # template: entropy inside the own segment (pairs; 0 for single sentences)
    "block_lift",  # in-segment share above what uniform attention would give, (s - e) / (1 - e) (pairs; else 0)
    "pair",
    "cls",  # share on the leading special token
    "sep",  # share on separators
    "top_column",  # share of all attention on the busiest column
    "top2_columns",  # ... on the two busiest columns
    "top_word_column",  # ... on the busiest column that is a word (a stripe on an ordinary word)
    "offset_prev",  # share on the word at offset -1 (words only)
    "offset_self",
    "offset_next",
    "offset_best",  # largest mean share at any single offset |k| <= 3 (a shifted diagonal)
    "row_entropy",  # mean row entropy / log(n): 1 = uniform
    "row_max",  # mean of each row's largest weight
    "column_gini",  # inequality of the columns' total attention
    "log_words",
)


def normalised_maps(attention: np.ndarray) -> np.ndarray:
    """Maps with every row summing to 1 (an all-zero row stays zero), what the features and images read.

    :param attention: maps, (..., W, W).
    :returns: float64, (..., W, W).
    :raises ValueError: for NaN, infinite or negative weights.
    """
    att = np.asarray(attention, dtype=np.float64)
    if not np.isfinite(att).all() or (att < 0).any():
        raise ValueError("attention maps must be finite and non-negative (NaN, infinite or negative weights found)")
    mass = att.sum(-1, keepdims=True)
    return np.divide(att, mass, out=np.zeros_like(att), where=mass > 0)


def map_features(attention: WordMap, word_kinds: Sequence | WordValues, segments: Sequence | WordValues) -> np.ndarray:
    """:data:`FEATURES` of maps that share one sentence's layout.

    :param attention: word maps, (..., W, W).
    :param word_kinds: each word's kind, (W,).
    :param segments: each word's segment, (W,).
    :returns: (..., F), F = len(:data:`FEATURES`).
    :raises ValueError: for NaN, infinite or negative weights.
    """
    return scored_features(attention, word_kinds, segments)[0]


def scored_features(
    attention: WordMap, word_kinds: Sequence | WordValues, segments: Sequence | WordValues
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """:func:`map_features` and the template scores it starts from (so a caller that shows both computes them once).

    :param attention: word maps, (..., W, W).
    :param word_kinds: each word's kind, (W,).
    :param segments: each word's segment, (W,).
    :returns: the features, (..., F), and :func:`~bertology_utils.analyses.pattern_types.template_scores`.
    """
    p = normalised_maps(attention)
    kinds = np.asarray(word_kinds)
    n = p.shape[-1]
    lead = p.shape[:-2]
    scores = template_scores(p, kinds, segments)
    pair = not np.isnan(np.asarray(scores["block"], float)).all()
    word = kinds == WORD
    columns = p.mean(-2)  # (..., n): share of all attention on each column
    ranked = np.sort(columns, axis=-1)[..., ::-1]
    word_columns = np.where(word, columns, 0.0)
    lift = np.zeros(lead)
    if pair:
        # uniform attention already keeps a word of the long segment of an uneven pair mostly "inside"
        segs = np.asarray(segments)
        rows = np.flatnonzero(word)
        same = (segs[rows][:, None] == segs[word][None, :]).astype(np.float64)
        expected = same.mean(-1)  # (w,) share of the words in the row's own segment
        to_words = p[..., rows, :][..., word]
        total = to_words.sum(-1)
        inside = np.divide((to_words * same).sum(-1), total, out=expected * np.ones_like(total), where=total > 0)
        lift = ((inside - expected) / np.maximum(1 - expected, 1e-12)).mean(-1)
    offsets = {}
    for k in range(-3, 4):
        # the rows whose word has a word at offset k, and that cell of each: no pass over the whole map
        rows = np.flatnonzero(word[max(0, -k) : n - max(0, k)]) + max(0, -k)
        rows = rows[word[rows + k]]
        offsets[k] = p[..., rows, rows + k].mean(-1) if len(rows) else np.zeros(lead)
    entropy = -(p * np.log(np.maximum(p, 1e-12))).sum(-1).mean(-1) / np.log(max(n, 2))
    sorted_columns = np.sort(columns, axis=-1)
    index = np.arange(1, n + 1)
    gini = ((2 * index - n - 1) * sorted_columns).sum(-1) / (n * np.maximum(sorted_columns.sum(-1), 1e-12))
    values = {
        "vertical": scores["vertical"],
        "diagonal": scores["diagonal"],
        "block": np.nan_to_num(np.asarray(scores["block"], float), nan=0.5),
        "block_spread": np.nan_to_num(np.asarray(scores["block_spread"], float), nan=0.0),
        "block_lift": lift,
        "pair": np.full(lead, float(pair)),
        "cls": p[..., kinds == LEADING_SPECIAL].sum(-1).mean(-1),
        "sep": p[..., kinds == SEPARATOR].sum(-1).mean(-1),
        "top_column": ranked[..., 0],
        "top2_columns": ranked[..., :2].sum(-1),
        "top_word_column": word_columns.max(-1) if word.any() else np.zeros(lead),
        "offset_prev": offsets[-1],
        "offset_self": offsets[0],
        "offset_next": offsets[1],
        "offset_best": np.max(np.stack(list(offsets.values())), axis=0),
        "row_entropy": entropy,
        "row_max": p.max(-1).mean(-1),
        "column_gini": gini,
        "log_words": np.full(lead, np.log(n)),
    }
    return np.stack([np.broadcast_to(np.asarray(values[f], float), lead) for f in FEATURES], axis=-1), scores


def planted_layout(n_first: int, n_second: int = 0) -> tuple[WordValues, WordValues]:
    """The layout of ``[CLS] a.. [SEP]``, or of ``[CLS] a.. [SEP] b.. [SEP]`` when ``n_second``.

    :param n_first: words of the first sentence.
    :param n_second: words of the second (0: a single sentence).
    :returns: word kinds and segments, int8, (W,) each.
    """
    kinds = [LEADING_SPECIAL] + [WORD] * n_first + [SEPARATOR]
    segments = [0] * (n_first + 2)
    if n_second:
        kinds += [WORD] * n_second + [SEPARATOR]
        segments += [1] * (n_second + 1)
    return np.asarray(kinds, np.int8), np.asarray(segments, np.int8)


def planted_map(kind: str, rng: np.random.Generator, pair: bool | None = None) -> Map:
    """One clear map of type ``kind`` with noise, 5 to 19 words a sentence: 80% of every row on the pattern
    (a special-token column, or a word's 1 time in 5; the diagonal at offset -1, 0 or +1; the own segment's
    words) and the rest Dirichlet(1) noise; vertical+diagonal puts 45% on each.

    :param kind: a type of :data:`~bertology_utils.analyses.pattern_types.TYPES`.
    :param rng: the random generator.
    :param pair: a sentence pair (default: a coin toss; always for ``block``).
    :returns: (attention (W, W), word kinds (W,), segments (W,)).
    :raises ValueError: for an unknown ``kind``.
    """
    if kind not in TYPES:
        raise ValueError(f"kind must be one of {TYPES}, not {kind!r}")
    pair = kind == "block" or (bool(rng.random() < 0.5) if pair is None else pair)
    kinds, segments = planted_layout(int(rng.integers(5, 20)), int(rng.integers(5, 20)) if pair else 0)
    n = len(kinds)
    noise = rng.dirichlet(np.ones(n), size=n)
    if kind == "heterogeneous":
        return noise, kinds, segments
    planted = np.zeros((n, n))
    if kind in ("vertical", "vertical+diagonal"):
        planted[:, rng.choice(np.flatnonzero(kinds != WORD)) if rng.random() < 0.8 else rng.integers(n)] += 1.0
    if kind in ("diagonal", "vertical+diagonal"):
        i = np.arange(n)
        planted[i, np.clip(i + int(rng.choice([-1, 0, 1])), 0, n - 1)] += 1.0
    if kind == "block":
        planted = (segments[:, None] == segments[None, :]) * (kinds == WORD)[None, :] + 1e-3
    planted /= planted.sum(-1, keepdims=True)
    weight = 0.9 if kind == "vertical+diagonal" else 0.8
    return weight * planted + (1 - weight) * noise, kinds, segments


def planted_maps(per_type: int, seed: int = 0) -> tuple[list[Map], np.ndarray]:
    """:func:`planted_map` of every type, shuffled; deterministic for a seed.

    :param per_type: maps of each type.
    :param seed: the seed.
    :returns: the maps and their types, (n,).
    """
    rng = np.random.default_rng(seed)
    rows = [(planted_map(t, rng), t) for t in TYPES for _ in range(per_type)]
    order = rng.permutation(len(rows))
    return [rows[k][0] for k in order], np.asarray([rows[k][1] for k in order], dtype=object)


def with_anchors(
    X: Sequence[Map], y: Sequence[str] | np.ndarray, anchors: int, seed: int
) -> tuple[list[Map], np.ndarray]:
    """The labelled maps plus ``anchors`` planted clear maps of each type, which pin down how a classifier reads
    unambiguous cases (a pure [CLS] column, a pure diagonal) that a few hundred real maps leave to chance.

    :param X: the labelled maps.
    :param y: their types, (n,).
    :param anchors: planted maps of each type (:func:`planted_maps`).
    :param seed: the planted maps' seed.
    :returns: the maps and their types, anchors last.
    """
    y = checked_types(y)
    if not anchors:
        return list(X), y
    maps, labels = planted_maps(anchors, seed)
    return [*X, *maps], np.concatenate([y, labels])


def stack_maps(maps: Sequence[Map], encode: Callable[..., np.ndarray]) -> np.ndarray:
    """Each map encoded (:func:`map_features`, :func:`~bertology_utils.analyses.pattern_cnn.map_images`), stacked.

    :param maps: the maps.
    :param encode: takes a map's attention, word kinds and segments.
    :returns: (n, ...).
    :raises ValueError: for no maps.
    """
    if len(maps) == 0:
        raise ValueError("no maps")
    return np.stack([encode(*m) for m in maps])


def checked_types(y: Sequence[str] | np.ndarray) -> np.ndarray:
    """Labels checked to be pattern types.

    :param y: the labels, (n,).
    :returns: them as an object array.
    :raises ValueError: for a label that is not a type.
    """
    y = np.asarray(y, dtype=object)
    unknown = sorted(set(y) - set(TYPES))
    if unknown:
        raise ValueError(f"labels {unknown} are not pattern types {TYPES}")
    return y
