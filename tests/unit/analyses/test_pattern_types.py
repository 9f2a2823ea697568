"""Kovaleva's pattern types on synthetic maps whose answer is known, and the labelled set's format."""

import numpy as np
import pandas as pd
import pytest

from bertology_utils.analyses.pattern_models import classify_items, classify_map
from bertology_utils.analyses.pattern_types import (
    LABELS_DIR,
    TYPES,
    f1_report,
    fit_thresholds,
    head_types,
    load_labelled_maps,
    template_scores,
    type_proportions,
)
from bertology_utils.attention.alignment import LEADING_SPECIAL, SEPARATOR, WORD
from bertology_utils.attention.word_attention import ItemAttention


def single(n_words):
    kinds = np.array([LEADING_SPECIAL] + [WORD] * n_words + [SEPARATOR], np.int8)
    return kinds, np.zeros(n_words + 2, np.int8)


def pair(a, b):
    kinds = np.array([LEADING_SPECIAL] + [WORD] * a + [SEPARATOR] + [WORD] * b + [SEPARATOR], np.int8)
    segments = np.array([0] * (a + 2) + [1] * (b + 1), np.int8)
    return kinds, segments


def test_pure_diagonal_is_diagonal():
    kinds, seg = single(10)
    assert classify_map(np.eye(12), kinds, seg, method="template") == "diagonal"
    prev = np.eye(12, k=-1)
    prev[0, 0] = 1
    assert classify_map(prev, kinds, seg, method="template") == "diagonal"


def test_sep_column_is_vertical():
    kinds, seg = single(10)
    m = np.zeros((12, 12))
    m[:, -1] = 1
    assert classify_map(m, kinds, seg, method="template") == "vertical"
    scores = template_scores(m, kinds, seg)
    assert scores["vertical"] == pytest.approx(1.0) and np.isnan(scores["block"])


def test_a_pair_of_one_word_sentences_has_no_spread_and_says_nothing(recwarn):
    kinds, seg = pair(1, 1)  # every word alone in its segment: no spread to measure
    scores = template_scores(np.full((2, 5, 5), 0.2), kinds, seg)
    assert np.isnan(scores["block_spread"]).all() and scores["block"] == pytest.approx([1 / 2, 1 / 2])
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]  # a notebook would show it


def test_vertical_plus_diagonal():
    kinds, seg = single(10)
    m = 0.5 * np.eye(12)
    m[:, 0] += 0.5
    assert classify_map(m, kinds, seg, method="template") == "vertical+diagonal"


def test_block_diagonal_pair_is_block_and_single_never_is():
    kinds, seg = pair(6, 5)
    n = len(kinds)
    m = np.zeros((n, n))
    for s in (0, 1):
        inside = (seg == s) & (kinds == WORD)
        m[np.ix_(seg == s, inside)] = 1.0
    m /= m.sum(-1, keepdims=True)
    assert classify_map(m, kinds, seg, method="template") == "block"
    kinds1, seg1 = single(n - 2)
    assert classify_map(np.full((n, n), 1 / n), kinds1, seg1, method="template") == "heterogeneous"


def test_uniform_is_heterogeneous_and_items_table():
    kinds, seg = pair(8, 8)
    n = len(kinds)
    assert classify_map(np.full((n, n), 1 / n), kinds, seg, method="template") == "heterogeneous"
    maps = np.stack([np.full((n, n), 1 / n), np.eye(n)])[None].repeat(2, 0)  # (2 layers, 2 heads)
    it = ItemAttention(0, "x", tuple("w" * n), kinds, seg, maps, n)
    table = classify_items([it], dataset="toy", method="template")
    assert len(table) == 4 and set(table["type"]) == {"heterogeneous", "diagonal"}
    props = type_proportions(table, "layer")
    assert list(props.columns) == list(TYPES) and np.allclose(props.sum(axis=1), 1)


def test_head_types_count_each_heads_maps_and_break_ties_in_types_order():
    rows = [(1, 1, "diagonal"), (1, 1, "diagonal"), (1, 1, "block"), (1, 2, "block"), (1, 2, "vertical")]
    rows += [(2, 1, "heterogeneous")]  # head 2-2 has no maps
    table = pd.DataFrame(rows, columns=["layer", "head", "type"])
    dominant, shares = head_types(table, (2, 2))
    assert dominant.tolist() == [["diagonal", "vertical"], ["heterogeneous", ""]]  # 1-2: a tie, vertical first
    assert list(shares) == list(TYPES)
    np.testing.assert_allclose(shares["diagonal"], [[2 / 3, 0], [0, np.nan]])
    np.testing.assert_allclose(shares["block"], [[1 / 3, 0.5], [0, np.nan]])
    np.testing.assert_allclose(sum(shares.values())[:, 0], 1.0)


def test_f1_report():
    report = f1_report(["vertical", "diagonal", "block"], ["vertical", "block", "block"])
    assert report.loc["vertical", "f1"] == 1.0 and report.loc["diagonal", "f1"] == 0.0
    assert report.loc["block", "f1"] == pytest.approx(2 / 3)
    assert report.loc["macro", "f1"] == pytest.approx((1 + 0 + 2 / 3) / 3)


@pytest.mark.skipif(not (LABELS_DIR / "labels.csv").is_file(), reason="labelled set not present")
def test_labelled_set_is_complete():
    table, maps = load_labelled_maps()
    assert len(table) >= 400 and table["map_id"].is_unique and set(maps) == set(table["map_id"])
    assert set(table["label"]) <= set(TYPES) and set(table["label_a"]) | set(table["label_b"]) <= set(TYPES)
    agreed = table["label_a"] == table["label_b"]
    assert (table.loc[agreed, "label"] == table.loc[agreed, "label_a"]).all()
    assert (table.loc[~agreed, "resolution"].str.startswith("adjudicated")).all()
    assert table["dataset"].nunique() >= 3 and table["model"].nunique() >= 2
    for _m, (att, kinds, seg) in maps.items():
        assert att.shape == (len(kinds), len(kinds)) == (len(seg), len(seg))
        assert np.allclose(att.sum(-1), 1, atol=5e-3)


def test_fit_thresholds_refuses_a_grid_with_nothing_to_try():
    scored = pd.DataFrame(
        {"vertical": [0.9], "diagonal": [0.0], "block": [np.nan], "block_spread": [np.nan], "label": ["vertical"]}
    )
    assert fit_thresholds(scored)[1] == 1.0
    with pytest.raises(ValueError, match="no thresholds to choose"):
        fit_thresholds(scored, {"most": ()})
