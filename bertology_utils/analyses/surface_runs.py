"""Surface statistics and Vig's patterns over several data sets at once, as notebook 01 reads them.

Clark et al. (2019), *What Does BERT Look At?* (https://arxiv.org/abs/1906.04341), measured where heads
attend on single sentences and on pairs; Vig & Belinkov (2019), *Analyzing the Structure of Attention
in a Transformer Language Model* (https://arxiv.org/abs/1906.04284), scored each head's patterns. The
functions here gather the data sets (:func:`pattern_corpora`), extract their attention
(:func:`extract_stores`), compute the statistics of every data set and level
(:func:`statistics_by_dataset`, :func:`statistics_table`) and pool Vig's scores over the data sets
(:func:`pooled_vig_patterns`, :func:`top_heads`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from bertology_utils.analyses.pattern_models import classify_items
from bertology_utils.analyses.patterns import VIG_PATTERNS, SurfaceStats, surface_statistics, vig_patterns
from bertology_utils.attention.extraction import extract_cached
from bertology_utils.attention.store import AttentionStore
from bertology_utils.core.errors import DataNotFoundError
from bertology_utils.core.heads import all_heads
from bertology_utils.core.typing import HeadMatrix
from bertology_utils.data import Corpus, consecutive_pairs, resolve_corpus

__all__ = [
    "pattern_corpora",
    "extract_stores",
    "statistics_by_dataset",
    "statistics_table",
    "classify_stores",
    "pooled_vig_patterns",
    "top_heads",
]

#: What a pair set that cannot be found is replaced by.
SAMPLE_PAIRS = "sample-pairs"


def pattern_corpora(
    sentences: Corpus, pair_sets: Sequence[str], *, n_sentences: int, n_pairs: int, n_glue: int
) -> dict[str, Corpus]:
    """Clark et al.'s inputs: single sentences, pairs of consecutive sentences, and sentence-pair sets.

    A pair set that cannot be found is replaced by the project's sample pairs (said in a printed
    line), once: a second missing set adds nothing.

    :param sentences: the treebank's sentences.
    :param pair_sets: sentence-pair data parameters (registered names, pair files, ``"hf:FOLDER"``).
    :param n_sentences: single sentences: the first of ``sentences``.
    :param n_pairs: pairs of consecutive sentences ([CLS] a [SEP] b [SEP]).
    :param n_glue: the first pairs of each pair set.
    :returns: the corpora by name: ``"single"``, ``"treebank pairs"``, then each pair set's (``glue/``
        left out of a GLUE name).
    """
    datasets = {
        "single": sentences[:n_sentences],
        "treebank pairs": consecutive_pairs(sentences[: 2 * n_pairs] if len(sentences) >= 2 else sentences),
    }
    for source in pair_sets:
        try:
            pair_data = resolve_corpus(source, kind="pairs")
        except DataNotFoundError as missing:
            print(f"{source} not available ({missing.short()}); using the project's sample pairs instead")
            source, pair_data = "sample pairs", resolve_corpus(SAMPLE_PAIRS, kind="pairs")
        datasets.setdefault(str(source).removeprefix("glue/"), pair_data[:n_glue])
    return datasets


def extract_stores(
    datasets: Mapping[str, Corpus], model: Any, *, progress: bool = True, **kwargs: Any
) -> dict[str, AttentionStore]:
    """Each corpus's attention store (:func:`~bertology_utils.attention.extraction.extract_cached`: shared
    with the other notebooks), and a printed line per store of what was extracted and skipped.

    :param datasets: corpora by name.
    :param model: a loaded model (or what :func:`~bertology_utils.core.models.load_model` takes).
    :param progress: progress bars of the extractions.
    :param kwargs: extraction settings (``keep_tokens=True`` for token-level statistics).
    :returns: the stores by name.
    """
    stores = {name: extract_cached(corpus, model, progress=progress, **kwargs) for name, corpus in datasets.items()}
    for name, corpus in datasets.items():
        s = stores[name].summary()
        print(f"{name:15s} {s['extracted']:5d} items extracted, {s['skipped']} skipped  ({corpus.description})")
    return stores


def statistics_by_dataset(
    stores: Mapping[str, AttentionStore],
    levels: Sequence[str] = ("word", "token"),
    *,
    punctuation: Collection[str] | None = None,
    progress: bool = True,
) -> dict[tuple[str, str], SurfaceStats]:
    """:func:`~bertology_utils.analyses.patterns.surface_statistics` of every store at every level.

    :param stores: attention stores by data set name.
    :param levels: ``"word"`` and/or ``"token"``.
    :param punctuation: the word forms counted as punctuation (None: Unicode's).
    :param progress: a progress bar over the stores and levels.
    :returns: the statistics by ``(data set, level)``.
    """
    runs = [(name, level) for name in stores for level in levels]
    return {
        (name, level): surface_statistics(stores[name], level, punctuation=punctuation)
        for name, level in tqdm(runs, desc="surface statistics", unit="store", disable=not progress)
    }


def statistics_table(stats: Mapping[tuple[str, str], SurfaceStats]) -> pd.DataFrame:
    """One row per data set, level and head: every statistic, with ``data`` and ``level`` columns.

    :param stats: statistics by ``(data set, level)`` (:func:`statistics_by_dataset`).
    :returns: the rows of each ``SurfaceStats.table()`` stacked.
    """
    return pd.concat(
        [s.table().assign(data=name, level=level) for (name, level), s in stats.items()], ignore_index=True
    )


def classify_stores(stores: Mapping[str, AttentionStore], method: str | None = None) -> pd.DataFrame:
    """Every map of every store classified by ``method``
    (:func:`~bertology_utils.analyses.pattern_models.classify_items`), in one table.

    :param stores: attention stores by data set name (the rows' ``dataset``).
    :param method: the classifier (None: the default).
    :returns: one row per (data set, item, layer, head).
    """
    tables = [classify_items(store, dataset=name, method=method) for name, store in stores.items()]
    return pd.concat(tables, ignore_index=True)


def pooled_vig_patterns(stores: Mapping[str, AttentionStore], shape: tuple[int, int]) -> dict[str, HeadMatrix]:
    """Vig & Belinkov's pattern scores pooled over data sets, each weighted by the rows it was averaged over.

    :param stores: attention stores by data set name.
    :param shape: (L, H), for a pattern no data set can measure.
    :returns: pattern -> (L, H) pooled score (NaN where no row measured it).
    """
    vig = [vig_patterns(store) for store in stores.values()]
    pooled = {}
    for p in VIG_PATTERNS:
        rows = sum(v.rows[p] for v in vig)
        if not rows:
            pooled[p] = np.full(shape, np.nan)
            continue
        pooled[p] = np.nansum([v.values[p] * v.rows[p] for v in vig if v.rows[p]], axis=0) / rows
    return pooled


def top_heads(scores: Mapping[str, HeadMatrix], k: int) -> pd.DataFrame:
    """The ``k`` heads with the highest score for each pattern.

    :param scores: pattern -> (L, H) score (:func:`pooled_vig_patterns`).
    :param k: heads per pattern.
    :returns: columns ``head``, ``score``, ``pattern`` and ``rank`` (from 1), patterns in the order given.
    """
    frames = []
    for p, grid in scores.items():
        layers, heads = np.shape(grid)
        table = pd.DataFrame({"head": all_heads(layers, heads), "score": np.ravel(grid)}).dropna()
        best = table.sort_values("score", ascending=False).head(k)
        frames.append(best.assign(pattern=p, rank=np.arange(1, len(best) + 1)))
    return pd.concat(frames)
