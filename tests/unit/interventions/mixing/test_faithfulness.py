"""Faithfulness of a method's ranking of words against a reference's."""

import numpy as np
import pytest

from bertology_utils.attention.alignment import LEADING_SPECIAL, WORD
from bertology_utils.attention.word_attention import ItemAttention
from bertology_utils.interventions import mixing


def synthetic_item(attribution_by_layer, kinds):
    layers, words = len(attribution_by_layer), len(kinds)
    attention = np.zeros((layers, 2, words, words), dtype=np.float32)
    attention[:, :, 0, :] = np.asarray(attribution_by_layer)[:, None, :]
    return ItemAttention(
        0, "s", tuple(f"w{i}" for i in range(words)), np.asarray(kinds), np.zeros(words), attention, words
    )


def test_faithfulness_ranks_words_by_the_leading_token_row():
    kinds = [LEADING_SPECIAL, WORD, WORD, WORD, WORD, 2]
    reference = np.array([np.nan, 0.1, -0.4, 0.3, 0.2, np.nan])  # |.|: 0.1 < 0.2 < 0.3 < 0.4
    same = [0, 1, 4, 3, 2, 9]
    reverse = [0, 4, 1, 2, 3, 9]
    item = synthetic_item([same, reverse], kinds)
    table = mixing.faithfulness({"m": [item]}, {"ref": [reference]})
    assert table.spearman.tolist() == pytest.approx([1.0, -1.0])
    summary = mixing.faithfulness_summary(table)
    assert summary["count"].tolist() == [1, 1] and summary.layer.tolist() == [1, 2]
    signed = mixing.faithfulness({"m": [item]}, {"ref": [reference]}, absolute=False)
    assert signed.spearman.iloc[0] == pytest.approx(-0.2)
