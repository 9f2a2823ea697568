"""Abnar & Zuidema's test of a context-mixing map: does its input attribution rank the words as behavioural
and gradient references do (:mod:`bertology_utils.interventions.attribution`)?"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from bertology_utils.attention.alignment import LEADING_SPECIAL, WORD
from bertology_utils.attention.word_attention import ItemAttention
from bertology_utils.core.errors import BertologyError

__all__ = ["input_attribution", "faithfulness", "faithfulness_summary"]


def input_attribution(item: ItemAttention, row: int | None = None) -> np.ndarray:
    """What each layer's map of ``item`` says about the input words, as Abnar & Zuidema read rollout and flow
    (`Quantifying Attention Flow in Transformers <https://arxiv.org/abs/2005.00928>`_).

    :param item: the item's word-level maps.
    :param row: the row read (default: the leading special token, [CLS] or <s>).
    :returns: (L, W), averaged over heads.
    """
    if row is None:
        leading = np.flatnonzero(np.asarray(item.word_kinds) == LEADING_SPECIAL)
        if not len(leading):
            raise BertologyError(f"item {item.item_id} has no leading special token; pass the row to read")
        row = int(leading[0])
    return np.asarray(item.attention, dtype=np.float64)[:, :, row, :].mean(1)


def faithfulness(
    maps: dict[str, Sequence[ItemAttention]], references: dict[str, Sequence[np.ndarray]], *, absolute: bool = True
) -> pd.DataFrame:
    """Spearman correlation of each method's input attribution with each reference, per item and layer, as
    Abnar & Zuidema's Table 3 (`Quantifying Attention Flow in Transformers <https://arxiv.org/abs/2005.00928>`_).

    ``maps``: method -> ItemAttention per item (word level); ``references``: name -> (W,) scores per item
    (blank-out, input x gradient...), the same items in the same order. Only ordinary words count
    (special tokens have no blank-out score); items with fewer than three words or a constant ranking
    are left out (rho undefined). ``absolute`` ranks references by magnitude (a gradient's sign says
    which way a word pushes, not how much it matters). One row per (method, reference, layer, item).

    :param maps: method -> word-level maps per item.
    :param references: reference -> (W,) scores per item, the same items.
    :param absolute: rank the references by magnitude.
    :returns: columns method, reference, layer (from 1), item, spearman.
    """
    rows = []
    for method, items in maps.items():
        for name, scores in references.items():
            if len(scores) != len(items):
                raise ValueError(f"{name} has {len(scores)} items, {method} {len(items)}")
            for k, (item, score) in enumerate(zip(items, scores)):
                words = np.asarray(item.word_kinds) == WORD
                score = np.asarray(score, dtype=np.float64)[: len(words)][words]
                score = np.abs(score) if absolute else score
                attribution = input_attribution(item)[:, words]
                if words.sum() < 3 or np.ptp(score) == 0:
                    continue
                for layer, values in enumerate(attribution):
                    rho = stats.spearmanr(values, score).statistic if np.ptp(values) > 0 else np.nan
                    rows.append((method, name, layer + 1, k, float(rho)))
    return pd.DataFrame(rows, columns=["method", "reference", "layer", "item", "spearman"])


def faithfulness_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Mean, standard deviation and count of rho per (method, reference, layer).

    :param table: :func:`faithfulness`'s rows.
    :returns: columns method, reference, layer, mean, std, count.
    """
    grouped = table.dropna(subset=["spearman"]).groupby(["method", "reference", "layer"], sort=False)["spearman"]
    return grouped.agg(["mean", "std", "count"]).reset_index()
