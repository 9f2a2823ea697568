"""Hewitt and Manning (2019): the structural probes' claims, checked on notebook 04's numbers.

`A Structural Probe for Finding Syntax in Word Representations <https://aclanthology.org/N19-1419/>`_
(NAACL). The distance probe's UUAS per layer (:func:`~bertology_utils.analyses.probes.structural_probe_layers`,
each layer's highest rank) decides two claims, each by a 95% bootstrap interval over the scored sentences:
a sentence's gold edges are resampled together, in every layer (and in the attention probe) at once.

* :func:`peak_in_middle`: the paper's layer curve, "the best layers are in the middle of the model". The
  middle is the middle half of the hidden states 0 (the embeddings) to L (:func:`middle_layers`), so the rule
  scales with the model's depth; the statistic is the best middle layer's UUAS minus the best other layer's.
* :func:`vectors_beat_maps`: notebook 04's question, "is syntax in the maps or in the vectors?". At its best
  layer, does a linear map of one layer's hidden states find more of the gold tree's edges than Clark et
  al.'s attention probe over every head's map? Both are counted as UUAS, on the same sentences and edges:
  the attention probe's predicted heads as undirected edges
  (:meth:`~bertology_utils.analyses.probes.ProbeEvaluation.edges_by_sentence`). Hewitt and Manning's
  BERT-large probe reached 80 UUAS on the PTB; Clark et al.'s Table 3 quotes it beside their attention
  probes' UAS (61 for "Attn", 77 for "Attn + GloVe") and calls them not directly comparable.

The best layer is picked within each resample, so the intervals carry the choice of the layer.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from bertology_utils.core.uncertainty import Draws, bootstrap_weights
from bertology_utils.papers.claims import Claim, Verdict

if TYPE_CHECKING:
    from bertology_utils.analyses.probes import ProbeEvaluation, StructuralLayers

__all__ = ["PAPER", "middle_layers", "peak_in_middle", "vectors_beat_maps", "structural_claims"]

PAPER = "Hewitt & Manning 2019"
#: The UUAS of the paper's BERT-large distance probe, as Clark et al.'s Table 3 quotes it.
PAPER_UUAS = 80


def middle_layers(num_layers: int) -> list[int]:
    """The middle half of a model's hidden states 0 .. ``num_layers``: layers L/4 to 3L/4, ends included.

    :param num_layers: the model's layers L.
    :returns: the layers, ascending (``[2, 3, 4]`` for 6 layers, ``[3, ..., 9]`` for 12).
    """
    return list(range(math.ceil(num_layers / 4), math.floor(3 * num_layers / 4) + 1))


def _layer_counts(layers: StructuralLayers) -> tuple[list[int], np.ndarray, np.ndarray, np.ndarray]:
    """The full-rank distance probes' layers, and per sentence (rows) and layer (columns) the edges found and the
    gold edges, over the sentences every layer scored."""
    edges = layers.edges
    if edges.empty:
        return [], np.zeros(0, dtype=np.int64), np.zeros((0, 0)), np.zeros((0, 0))
    full = edges[edges["rank"] == edges.groupby("layer")["rank"].transform("max")]
    found = full.pivot_table(index="sentence", columns="layer", values="found", aggfunc="sum").dropna()
    total = full.pivot_table(index="sentence", columns="layer", values="edges", aggfunc="sum").loc[found.index]
    return [int(k) for k in found.columns], found.index.to_numpy(), found.to_numpy(float), total.to_numpy(float)


def _uuas(found: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """UUAS points: ``found`` and ``edges`` are sums over sentences (per layer, per resample)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return 100 * found / edges


def _draws(*per_sentence: np.ndarray, seed: int) -> tuple[list[np.ndarray], list[np.ndarray], Draws]:
    """Each ``(sentences, ...)`` count summed over the sentences, and over each of 2000 bootstrap resamples of
    them (the same resamples for every count: :func:`~bertology_utils.core.uncertainty.bootstrap_weights`)."""
    n = len(per_sentence[0])
    weights = bootstrap_weights(n, seed=seed)
    return [a.sum(0) for a in per_sentence], [weights @ a for a in per_sentence], Draws({}, f"{n} test sentences")


def peak_in_middle(layers: StructuralLayers, num_layers: int, *, seed: int = 0) -> Claim:
    """The distance probe's UUAS peaks in the middle half of the model's layers (:func:`middle_layers`).

    Holds when the 95% bootstrap interval over sentences of (best middle layer's UUAS - best other layer's) lies
    above 0, differs at or below 0, inconclusive when it straddles 0; not testable without a fitted layer on
    each side.

    :param layers: :func:`~bertology_utils.analyses.probes.structural_probe_layers`'s result.
    :param num_layers: the model's layers.
    :param seed: the bootstrap's seed.
    :returns: the claim.
    """
    fitted, _, found, edges = _layer_counts(layers)
    middle = middle_layers(num_layers)
    inside = np.isin(fitted, middle)
    rule = (
        f"holds: the 95% bootstrap interval over sentences of the best UUAS among layers {middle[0]}-{middle[-1]} "
        f"(the middle half of 0-{num_layers}) minus the best among the others lies above 0; differs: at or below 0; "
        "inconclusive: it straddles 0"
    )
    testable = bool(inside.any() and (~inside).any() and len(found) >= 3)
    if not testable:
        return Claim(
            "structural.peak_in_middle",
            "the structural probe's best layers are in the middle of the model",
            PAPER,
            "the middle layers score highest (BERT-base, BERT-large, ELMo)",
            "not testable: fit layers both inside and outside the middle half",
            Verdict.NOT_TESTABLE,
            rule,
        )

    def gap(found: np.ndarray, edges: np.ndarray) -> np.ndarray:
        points = _uuas(found, edges)
        return points[..., inside].max(-1) - points[..., ~inside].max(-1)

    (found_sum, edges_sum), (found_drawn, edges_drawn), draws = _draws(found, edges, seed=seed)
    interval = draws.interval(gap(found_drawn, edges_drawn))
    uuas, observed = _uuas(found_sum, edges_sum), float(gap(found_sum, edges_sum))
    best = fitted[int(np.nanargmax(uuas))]
    return Claim(
        "structural.peak_in_middle",
        "the structural probe's best layers are in the middle of the model",
        PAPER,
        "the middle layers score highest (BERT-base, BERT-large, ELMo)",
        f"best layer {best} of 0-{num_layers} ({np.nanmax(uuas):.1f} UUAS); middle minus others {observed:+.1f} points",
        Verdict.by_interval(interval),
        rule,
        {"best_layer": best, "best_uuas": float(np.nanmax(uuas)), "middle_minus_others": observed},
        interval=interval,
    )


def vectors_beat_maps(layers: StructuralLayers, attention: ProbeEvaluation, *, seed: int = 0) -> Claim:
    """At its best layer, the distance probe finds more gold edges (UUAS) than an attention probe's heads.

    Holds when the 95% bootstrap interval over the sentences both scored of (best layer's UUAS - the attention
    probe's UUAS) lies above 0, differs at or below 0, inconclusive when it straddles 0.

    :param layers: :func:`~bertology_utils.analyses.probes.structural_probe_layers`'s result, on the split
        ``attention`` was evaluated on.
    :param attention: the attention probe's evaluation (Clark et al.'s "Attn").
    :param seed: the bootstrap's seed.
    :returns: the claim, with each layer's UUAS minus the attention probe's among its values.
    """
    fitted, sentences, found, edges = _layer_counts(layers)
    index, attn_found, attn_edges = attention.edges_by_sentence()
    shared, rows, at = np.intersect1d(sentences, index, return_indices=True)
    found, edges = found[rows], edges[rows]
    attn_found, attn_edges = attn_found[at].astype(float), attn_edges[at].astype(float)
    rule = (
        f"holds: the 95% bootstrap interval over sentences of the best layer's UUAS minus the {attention.name} "
        "probe's (its predicted heads as undirected edges) lies above 0; differs: at or below 0; inconclusive: it "
        "straddles 0"
    )
    if len(shared) < 3 or not attn_edges.sum():
        return Claim(
            "structural.vectors_beat_maps",
            "one layer's hidden states hold more of the tree than every attention map",
            PAPER,
            f"{PAPER_UUAS} UUAS on BERT-large's vectors (Clark et al.'s Table 3 quotes it beside 61 UAS for Attn)",
            "not testable: too few sentences scored by both probes",
            Verdict.NOT_TESTABLE,
            rule,
        )
    sums, drawn, draws = _draws(found, edges, attn_found, attn_edges, seed=seed)

    def gap(found: np.ndarray, edges: np.ndarray, attn_found: np.ndarray, attn_edges: np.ndarray) -> np.ndarray:
        return np.nanmax(_uuas(found, edges), -1) - _uuas(attn_found, attn_edges)

    interval = draws.interval(gap(*drawn))
    uuas, maps = _uuas(sums[0], sums[1]), float(_uuas(sums[2], sums[3]))
    best = fitted[int(np.nanargmax(uuas))]
    return Claim(
        "structural.vectors_beat_maps",
        "one layer's hidden states hold more of the tree than every attention map",
        PAPER,
        f"{PAPER_UUAS} UUAS on BERT-large's vectors (Clark et al.'s Table 3 quotes it beside 61 UAS for Attn)",
        f"layer {best}: {np.nanmax(uuas):.1f} UUAS vs {maps:.1f} for {attention.name}'s heads",
        Verdict.by_interval(interval),
        rule,
        {
            "best_layer": best,
            "maps_uuas": maps,
            **{f"layer_{k}_minus_maps": float(u - maps) for k, u in zip(fitted, uuas)},
        },
        interval=interval,
    )


def structural_claims(
    layers: StructuralLayers, attention: ProbeEvaluation | None, num_layers: int, *, seed: int = 0
) -> list[Claim]:
    """:func:`peak_in_middle`, and :func:`vectors_beat_maps` where an attention probe was evaluated.

    :param layers: :func:`~bertology_utils.analyses.probes.structural_probe_layers`'s result.
    :param attention: the attention probe's evaluation on the same split, or None.
    :param num_layers: the model's layers.
    :param seed: the bootstraps' seed.
    :returns: the claims.
    """
    claims = [peak_in_middle(layers, num_layers, seed=seed)]
    if attention is not None:
        claims.append(vectors_beat_maps(layers, attention, seed=seed))
    return claims
