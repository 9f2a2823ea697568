"""Kovaleva et al. (2019)'s five self-attention pattern types and a transparent classifier of them.

Kovaleva et al. (2019, "Revealing the Dark Secrets of BERT", https://arxiv.org/abs/1908.08593) hand-labelled
about 400 attention maps as *vertical* (attention to [CLS]/[SEP]),
*diagonal* (previous/next token), *vertical + diagonal*, *block* (within a segment of a sentence
pair) or *heterogeneous*, then trained a CNN (F1 about 0.86). This module holds the types, the
transparent template rules below (the baseline) and the project's hand-labelled maps; the classifiers
trained on those maps, and :func:`~bertology_utils.analyses.pattern_models.classify_map` and
:func:`~bertology_utils.analyses.pattern_models.classify_items`, which use by default the one that
cross-validated best (``method="best"``), are in :mod:`~bertology_utils.analyses.pattern_models`,
which imports this one. Each type gets a template score, a share of attention a reader can check on
the picture:

- ``vertical``: mean share of a row on the special tokens ([CLS], [SEP], ``<s>``, ``</s>``);
- ``diagonal``: mean share of a row on the real words at offset -1, 0 or +1 (specials excluded,
  so a [CLS] column next to the diagonal is not counted twice);
- ``block``: for pairs only, mean over real-word rows of the share of the row's attention to real
  words that stays in the row's own segment (1 = two blocks, about 0.5 for uniform attention).
  NaN for single sentences: block needs two segments;
- ``block_spread``: for pairs, mean over real-word rows of the entropy of the row restricted to its
  own segment's words, over log(their number): a block is *broad* inside its segment, which tells it
  from local (near-diagonal) attention that also stays inside the segment.

Rows are renormalised and every row weighs the same. The thresholds in :data:`THRESHOLDS`
read "most of the attention" as Clark et al.'s 50% and were fixed from that definition *before*
the classifier was run on the hand-labelled set (``data/pattern_labels``); they are not fitted to it.
Rules, in order: vertical+diagonal if both shares are at least ``part`` and together at least
``most``; vertical if its share alone is at least ``most``; diagonal likewise; block if the map is a
pair's, neither of those, the in-segment share is at least ``block`` and the spread at least
``spread``; else heterogeneous.

``block_spread`` came after the first three: the rules' own "block" examples on unlabelled treebank
pairs were near-diagonal maps (a definitional flaw seen in the pictures, not fitted to the labels);
its threshold 0.5 (half of uniform) was set without a search. How the rules score on the labelled
maps is in docs/guide/pattern-types.md.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from bertology_utils.attention.alignment import WORD
from bertology_utils.core import settings
from bertology_utils.core.errors import BertologyError
from bertology_utils.core.typing import HeadMatrix, WordMap, WordValues

__all__ = [
    "TYPES",
    "METHODS",
    "THRESHOLDS",
    "THRESHOLD_GRID",
    "LABELS_DIR",
    "template_scores",
    "classify_scores",
    "type_proportions",
    "head_types",
    "f1_report",
    "load_labelled_maps",
    "score_labelled",
    "split_labelled",
    "fit_thresholds",
]

TYPES = ("vertical", "diagonal", "vertical+diagonal", "block", "heterogeneous")
#: The classifiers ``classify_map`` and ``classify_items`` can use (``"best"`` picks among the trained ones).
METHODS = ("template", "features", "cnn")

#: Fixed a priori from the paper's wording (see the module docstring); never fitted to the labels.
THRESHOLDS = {"most": 0.5, "part": 0.2, "block": 0.8, "spread": 0.5}

#: The hand-labelled set: the checkout's data/pattern_labels, or the copy an installed wheel carries.
LABELS_DIR = (settings.project_data_dir() or settings.PROJECT_ROOT / "data") / "pattern_labels"


def template_scores(
    attention: np.ndarray, word_kinds: Sequence[str] | WordValues, segments: Sequence[int] | WordValues
) -> dict[str, np.ndarray]:
    """The template scores of the module docstring for word maps that share one sentence's layout: the shares of
    attention a reader can check on the picture for the module's types.

    :param attention: word maps, (..., W, W) (e.g. (L, H, W, W)).
    :param word_kinds: each word's kind (:data:`~bertology_utils.attention.alignment.WORD` or a special), (W,).
    :param segments: each word's segment (0, or 1 for a pair's second sentence), (W,).
    :returns: ``vertical``, ``diagonal``, ``block`` and ``block_spread``, each of shape ``attention.shape[:-2]``.
    :raises ValueError: when the maps, kinds and segments do not fit.
    """
    att = np.asarray(attention, dtype=np.float64)
    n = att.shape[-1]
    kinds, segments = np.asarray(word_kinds), np.asarray(segments)
    if att.shape[-2:] != (n, n) or kinds.shape != (n,) or segments.shape != (n,):
        raise ValueError(f"maps {att.shape} do not fit {kinds.shape} word kinds / {segments.shape} segments")
    mass = att.sum(-1, keepdims=True)
    p = np.divide(att, mass, out=np.zeros_like(att), where=mass > 0)
    word = kinds == WORD
    vertical = (p @ (~word).astype(np.float64)).mean(-1)
    i, j = np.indices((n, n))
    band = (np.abs(i - j) <= 1) & word[None, :]
    diagonal = (p * band).sum(-1).mean(-1)
    if len(np.unique(segments[word])) > 1:
        rows = np.flatnonzero(word)
        to_words = p[..., rows, :][..., word]  # (..., w, w)
        same = segments[rows][:, None] == segments[word][None, :]
        total = to_words.sum(-1)
        inside = (to_words * same).sum(-1)
        block = np.divide(inside, total, out=np.full_like(total, np.nan), where=total > 0)
        # spread: entropy of the row inside its own segment's words / log(their number)
        own = to_words * same
        own_mass = own.sum(-1, keepdims=True)
        q = np.divide(own, own_mass, out=np.zeros_like(own), where=own_mass > 0)
        size = same.sum(-1)
        h = -(q * np.log(np.maximum(q, 1e-12))).sum(-1)
        spread = np.divide(h, np.log(size), out=np.full_like(h, np.nan), where=size > 1)
        with warnings.catch_warnings():  # a row with no defined value (one-word segments) is NaN, as it should be
            warnings.simplefilter("ignore", RuntimeWarning)
            block = np.nanmean(block, axis=-1) if block.shape[-1] else np.full(att.shape[:-2], np.nan)
            spread = np.nanmean(spread, axis=-1) if spread.shape[-1] else np.full(att.shape[:-2], np.nan)
    else:
        block = np.full(att.shape[:-2], np.nan)
        spread = np.full(att.shape[:-2], np.nan)
    return {"vertical": vertical, "diagonal": diagonal, "block": block, "block_spread": spread}


def classify_scores(scores: Mapping[str, np.ndarray], thresholds: Mapping[str, float] | None = None) -> np.ndarray:
    """The pattern type of every score by the rules of the module docstring.

    :param scores: :func:`template_scores`' arrays (``block_spread`` optional: without it every block is broad).
    :param thresholds: overrides of :data:`THRESHOLDS`.
    :returns: strings from :data:`TYPES`, of the scores' shape.
    """
    t = {**THRESHOLDS, **(thresholds or {})}
    v, d = np.asarray(scores["vertical"], float), np.asarray(scores["diagonal"], float)
    b = np.asarray(scores["block"], float)
    out = np.full(v.shape, "heterogeneous", dtype=object)
    vd = (v >= t["part"]) & (d >= t["part"]) & (v + d >= t["most"])
    vert = ~vd & (v >= t["most"])
    diag = ~vd & ~vert & (d >= t["most"])
    spread = np.asarray(scores.get("block_spread", np.ones_like(b)), float)
    block = ~vd & ~vert & ~diag & (np.nan_to_num(b, nan=0.0) >= t["block"])
    block &= ~np.isnan(b) & (np.nan_to_num(spread, nan=0.0) >= t["spread"])
    out[diag], out[vert], out[vd], out[block] = "diagonal", "vertical", "vertical+diagonal", "block"
    return out


def type_proportions(table: pd.DataFrame, by: str | Sequence[str] = "layer") -> pd.DataFrame:
    """Share of each type per value of ``by``.

    :param table: a :func:`~bertology_utils.analyses.pattern_models.classify_items` table (a ``type`` column).
    :param by: the column(s) to group by.
    :returns: one row per value of ``by``, one column per type in :data:`TYPES` order; rows sum to 1.
    """
    counts = pd.crosstab([table[c] for c in ([by] if isinstance(by, str) else by)], table["type"], normalize="index")
    return counts.reindex(columns=list(TYPES), fill_value=0.0)


def head_types(table: pd.DataFrame, shape: tuple[int, int]) -> tuple[HeadMatrix, dict[str, HeadMatrix]]:
    """Each head's most frequent type and the share of its maps of each type.

    :param table: a :func:`~bertology_utils.analyses.pattern_models.classify_items` table (layer, head from 1).
    :param shape: (L, H).
    :returns: the most frequent type, (L, H) strings, ties to the first in :data:`TYPES`, "" for a head with no
        maps; and type -> its share of the head's maps, (L, H), nan for a head with no maps.
    """
    counts = np.zeros((*shape, len(TYPES)))
    code = pd.Categorical(table["type"], categories=list(TYPES)).codes
    keep = code >= 0
    np.add.at(counts, (table["layer"].to_numpy()[keep] - 1, table["head"].to_numpy()[keep] - 1, code[keep]), 1)
    total = counts.sum(-1, keepdims=True)
    shares = np.divide(counts, total, out=np.full(counts.shape, np.nan), where=total > 0)
    dominant = np.where(total[..., 0] > 0, np.asarray(TYPES, dtype=object)[counts.argmax(-1)], "")
    return dominant, {t: shares[..., i] for i, t in enumerate(TYPES)}


def f1_report(true: Sequence[str] | np.ndarray, predicted: Sequence[str] | np.ndarray) -> pd.DataFrame:
    """Precision, recall, F1 and support per type (Kovaleva et al. report the F1 of their classifier).

    :param true: the labels, strings from :data:`TYPES`, (N,).
    :param predicted: the predicted types, (N,).
    :returns: one row per type in :data:`TYPES` order and a ``macro`` row (the mean over types present in
        ``true``; its support the total).
    """
    true, predicted = np.asarray(true, dtype=object), np.asarray(predicted, dtype=object)
    rows = {}
    for t in TYPES:
        tp = int(((true == t) & (predicted == t)).sum())
        fp = int(((true != t) & (predicted == t)).sum())
        fn = int(((true == t) & (predicted != t)).sum())
        precision = tp / (tp + fp) if tp + fp else 0.0
        recall = tp / (tp + fn) if tp + fn else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        rows[t] = {"precision": precision, "recall": recall, "f1": f1, "support": tp + fn}
    report = pd.DataFrame(rows).T
    present = report[report["support"] > 0]
    report.loc["macro"] = [
        present["precision"].mean(),
        present["recall"].mean(),
        present["f1"].mean(),
        present["support"].sum(),
    ]
    return report


def load_labelled_maps(
    folder: str | Path | None = None,
) -> tuple[pd.DataFrame, dict[str, tuple[WordMap, WordValues, WordValues]]]:
    """The hand-labelled set: its table and its maps.

    The table is ``maps.csv`` (where each map comes from) joined with ``labels.csv`` (both annotators' labels
    and the final ``label``); maps whose final label is not a type (skipped) are left out.

    :param folder: the set's folder (default: :data:`LABELS_DIR`).
    :returns: the table, and ``map_id -> (attention (W, W), word_kinds (W,), segments (W,))``.
    :raises BertologyError: when the files cannot be read.
    """
    folder = Path(folder) if folder is not None else LABELS_DIR
    try:
        table = pd.read_csv(folder / "maps.csv").merge(
            pd.read_csv(folder / "labels.csv"), on="map_id", validate="one_to_one"
        )
        table = table[table["label"].isin(TYPES)].reset_index(drop=True)
        with np.load(folder / "maps.npz") as z:
            maps = {
                m: (z[f"{m}/attention"].astype(np.float32), z[f"{m}/word_kinds"], z[f"{m}/segments"])
                for m in table["map_id"]
            }
    except (OSError, KeyError, ValueError) as exc:
        raise BertologyError(f"cannot read the labelled maps in {folder}: {exc}") from exc
    return table, maps


def score_labelled(folder: str | Path | None = None, thresholds: Mapping[str, float] | None = None) -> pd.DataFrame:
    """The labelled table with the template scores and the rules' prediction of each map added.

    :param folder: the set's folder (default: :data:`LABELS_DIR`).
    :param thresholds: overrides of :data:`THRESHOLDS`.
    :returns: :func:`load_labelled_maps`' table with one column per score and ``predicted``.
    """
    table, maps = load_labelled_maps(folder)
    rows = []
    for m in table["map_id"]:
        s = template_scores(*maps[m])
        rows.append({k: float(v) for k, v in s.items()} | {"predicted": str(classify_scores(s, thresholds)[()])})
    return pd.concat([table, pd.DataFrame(rows)], axis=1)


#: The grid :func:`fit_thresholds` searches (small on purpose: few labelled maps).
THRESHOLD_GRID = {
    "most": (0.1, 0.15, 0.2, 0.3, 0.4, 0.5),
    "part": (0.05, 0.1, 0.15, 0.2),
    "block": (0.8, 0.9),
    "spread": (0.5, 0.8),
}


def split_labelled(table: pd.DataFrame, seed: int = 0, fraction: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """A seeded random split of the labelled table, to fit thresholds on one part and evaluate on the other.

    :param table: the labelled table.
    :param seed: the split's seed.
    :param fraction: the share of rows in the fit part.
    :returns: boolean masks over the rows: (fit, held out).
    """
    rng = np.random.default_rng(seed)
    fit = np.zeros(len(table), dtype=bool)
    fit[rng.permutation(len(table))[: int(round(fraction * len(table)))]] = True
    return fit, ~fit


def fit_thresholds(
    scored: pd.DataFrame, grid: Mapping[str, Iterable[float]] | None = None
) -> tuple[dict[str, float], float]:
    """Thresholds maximising macro F1 on ``scored`` (a :func:`score_labelled` table, e.g. its fit split only).

    Exhaustive over :data:`THRESHOLD_GRID`; ties go to the first combination in grid order. Evaluate
    the result on maps *not* used here.

    :param scored: a :func:`score_labelled` table.
    :param grid: overrides of :data:`THRESHOLD_GRID`'s ranges.
    :returns: the best thresholds and their macro F1.
    :raises ValueError: for an empty range, or a table with no labelled map.
    """
    import itertools

    grid = {**THRESHOLD_GRID, **(grid or {})}
    scores = {k: scored[k].to_numpy(float) for k in ("vertical", "diagonal", "block", "block_spread")}
    best: dict[str, float] | None = None
    best_f1 = -1.0
    for values in itertools.product(*grid.values()):
        t = dict(zip(grid, values))
        f1 = float(f1_report(scored["label"], classify_scores(scores, t)).loc["macro", "f1"])
        if f1 > best_f1:
            best, best_f1 = t, f1
    if best is None:  # an empty range in the grid, or no labelled map (a NaN F1)
        raise ValueError("no thresholds to choose: a grid entry has no values, or the table no labelled map")
    return best, best_f1
