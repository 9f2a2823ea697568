"""Hewitt and Manning's claims (papers.hewitt) on per-sentence counts whose answer is known, and the UUAS counts
they read: the attention probe's predicted heads as undirected edges, by hand."""

import numpy as np
import pandas as pd
import pytest

from bertology_utils.analyses.probes import ProbeEvaluation, StructuralLayers
from bertology_utils.papers.claims import Verdict
from bertology_utils.papers.hewitt import middle_layers, peak_in_middle, structural_claims, vectors_beat_maps

N_SENTENCES = 60


def layers_with(rates: dict[int, float], seed: int = 0, n: int = N_SENTENCES) -> StructuralLayers:
    """Each layer finds about ``rates[layer]`` of every sentence's 10 gold edges (binomial noise per sentence)."""
    rng = np.random.default_rng(seed)
    edges = pd.DataFrame(
        [
            {"layer": layer, "rank": 8, "sentence": k, "found": int(rng.binomial(10, rate)), "edges": 10}
            for layer, rate in rates.items()
            for k in range(n)
        ],
        columns=["layer", "rank", "sentence", "found", "edges"],
    )
    return StructuralLayers(pd.DataFrame(), edges, "test")


def attention_with(rate: float, seed: int = 1, n: int = N_SENTENCES) -> ProbeEvaluation:
    """Sentences of 11 words in a chain (word i's head is i + 1, the last word the root): 10 edges each, about
    ``rate`` of them predicted, the rest pointed at the root."""
    rng = np.random.default_rng(seed)
    words = 11
    gold = np.tile(np.r_[np.arange(2, words + 1), 0], n)
    predicted = np.where(rng.random(len(gold)) < rate, gold, 0)
    return ProbeEvaluation(
        "Attn",
        np.repeat(np.arange(n), words),
        np.tile(np.arange(words), n),
        gold,
        predicted,
        np.array(["dep"] * len(gold), dtype=object),
        np.ones(len(gold), dtype=bool),
    )


def test_the_middle_half_scales_with_depth():
    assert middle_layers(6) == [2, 3, 4]
    assert middle_layers(12) == list(range(3, 10))
    assert middle_layers(24) == list(range(6, 19))


def test_a_peak_in_the_middle_holds_and_one_at_the_ends_differs():
    curve = layers_with({0: 0.3, 1: 0.4, 2: 0.6, 3: 0.8, 4: 0.6, 5: 0.5, 6: 0.4})
    sums = curve.edges.groupby("layer")[["found", "edges"]].sum()
    uuas = 100 * sums["found"] / sums["edges"]
    middle = peak_in_middle(curve, 6)
    assert middle.verdict is Verdict.HOLDS and middle.values["best_layer"] == 3
    assert middle.values["best_uuas"] == pytest.approx(uuas.max())
    assert middle.values["middle_minus_others"] == pytest.approx(uuas[[2, 3, 4]].max() - uuas[[0, 1, 5, 6]].max())
    assert middle.interval.low > 0 and "bootstrap over 60 test sentences" in middle.interval.method
    late = peak_in_middle(layers_with({0: 0.3, 2: 0.5, 3: 0.5, 6: 0.9}), 6)
    assert late.verdict is Verdict.DIFFERS and late.values["best_layer"] == 6 and late.interval.high <= 0
    close = peak_in_middle(layers_with({1: 0.60, 3: 0.61}, n=20), 6)
    assert close.verdict is Verdict.INCONCLUSIVE and close.interval.low < 0 < close.interval.high


def test_a_curve_without_both_sides_is_not_testable():
    assert peak_in_middle(layers_with({2: 0.5, 3: 0.6}), 6).verdict is Verdict.NOT_TESTABLE
    assert peak_in_middle(layers_with({}), 6).verdict is Verdict.NOT_TESTABLE


def test_edges_of_predicted_heads_count_either_direction():
    # gold 1 <- 2 -> 3 -> 4, word 5 punctuation attached to 2: edges (1,2), (2,3), (3,4); the punctuation's not counted
    gold = np.array([2, 0, 2, 3, 2])
    predicted = np.array([2, 1, 4, 3, 4])  # (1,2) found both ways, (2,3) missed, (3,4) found reversed
    evaluation = ProbeEvaluation(
        "Attn",
        np.zeros(5, dtype=int),
        np.arange(5),
        gold,
        predicted,
        np.array(["dep", "root", "dep", "dep", "punct"], dtype=object),
        np.array([True, True, True, True, False]),
    )
    index, found, edges = evaluation.edges_by_sentence()
    assert index.tolist() == [0] and found.tolist() == [2] and edges.tolist() == [3]


def test_vectors_against_maps_read_the_same_sentences():
    layers = layers_with({0: 0.3, 3: 0.9, 6: 0.5})
    better = vectors_beat_maps(layers, attention_with(0.5))
    assert better.verdict is Verdict.HOLDS and better.values["best_layer"] == 3
    assert better.values["maps_uuas"] == pytest.approx(50, abs=5)
    assert better.values["layer_0_minus_maps"] < 0 < better.values["layer_3_minus_maps"]
    worse = vectors_beat_maps(layers, attention_with(0.97))
    assert worse.verdict is Verdict.DIFFERS
    # sentences the attention probe did not score are left out of both sides
    few = vectors_beat_maps(layers, attention_with(0.5, n=2))
    assert few.verdict is Verdict.NOT_TESTABLE
    assert [c.id for c in structural_claims(layers, None, 6)] == ["structural.peak_in_middle"]
