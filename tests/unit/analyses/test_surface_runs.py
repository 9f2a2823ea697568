"""Notebook 01's runs over data sets: the corpora gathered, the statistics stacked, Vig's scores pooled."""

import numpy as np
import pandas as pd
import pytest

from bertology_utils.analyses import surface_runs
from bertology_utils.analyses.patterns import VIG_PATTERNS, PatternScores
from bertology_utils.analyses.surface_runs import pattern_corpora, pooled_vig_patterns, statistics_table, top_heads
from bertology_utils.data import resolve_corpus


def test_a_missing_pair_set_is_replaced_by_the_sample_pairs_once(capsys):
    sentences = resolve_corpus("sample", kind="sentences")
    datasets = pattern_corpora(sentences, ["no/such-set", "nor/this"], n_sentences=3, n_pairs=2, n_glue=2)
    assert list(datasets) == ["single", "treebank pairs", "sample pairs"]
    assert len(datasets["single"]) == 3 and len(datasets["treebank pairs"]) == 2 and len(datasets["sample pairs"]) == 2
    assert capsys.readouterr().out.count("using the project's sample pairs instead") == 2


def test_statistics_of_every_data_set_and_level_stack_in_one_table():
    class Stats:
        def __init__(self, value: float):
            self.value = value

        def table(self) -> pd.DataFrame:
            return pd.DataFrame({"layer": [1, 1], "head": [1, 2], "cls": [self.value, self.value]})

    long = statistics_table({("single", "word"): Stats(0.1), ("pairs", "token"): Stats(0.2)})
    assert list(long["data"]) == ["single", "single", "pairs", "pairs"]
    assert list(long["level"]) == ["word", "word", "token", "token"] and list(long.index) == [0, 1, 2, 3]


def test_pooled_scores_weigh_each_data_set_by_its_rows(monkeypatch):
    scores = {
        "a": PatternScores({p: np.full((1, 2), 1.0) for p in VIG_PATTERNS}, {p: 1 for p in VIG_PATTERNS}),
        "b": PatternScores({p: np.full((1, 2), 4.0) for p in VIG_PATTERNS}, {p: 3 for p in VIG_PATTERNS}),
    }
    scores["b"].rows["same_word_pieces"] = 0  # not measurable on b: a alone
    scores["a"].rows["delimiter"] = scores["b"].rows["delimiter"] = 0  # on neither: NaN
    monkeypatch.setattr(surface_runs, "vig_patterns", lambda store: scores[store])
    pooled = pooled_vig_patterns({"a": "a", "b": "b"}, (1, 2))  # type: ignore[dict-item]
    assert pooled["previous_word"] == pytest.approx(np.full((1, 2), 13 / 4))
    assert pooled["same_word_pieces"] == pytest.approx(np.ones((1, 2)))
    assert np.isnan(pooled["delimiter"]).all() and list(pooled) == list(VIG_PATTERNS)


def test_top_heads_rank_each_pattern_without_nan():
    top = top_heads({"next_word": np.array([[0.1, 0.9], [np.nan, 0.5]]), "delimiter": np.full((2, 2), np.nan)}, k=2)
    assert list(top["pattern"]) == ["next_word", "next_word"] and list(top["rank"]) == [1, 2]
    assert [str(h) for h in top["head"]] == ["1-2", "2-2"] and list(top["score"]) == [0.9, 0.5]


def test_every_store_is_classified_under_its_name(monkeypatch):
    def classify_items(store, dataset, method):
        return pd.DataFrame({"dataset": [dataset] * len(store), "type": [method] * len(store)})

    monkeypatch.setattr(surface_runs, "classify_items", classify_items)
    kinds = surface_runs.classify_stores({"a": [1, 2], "b": [3]}, "template")  # type: ignore[dict-item]
    assert kinds["dataset"].tolist() == ["a", "a", "b"] and set(kinds["type"]) == {"template"}
    assert kinds.index.tolist() == [0, 1, 2]
