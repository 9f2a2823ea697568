"""Clustering attention heads by behaviour: Jensen–Shannon distances between heads, MDS, dendrograms.

Clark et al. (2019, `What Does BERT Look At? <https://arxiv.org/abs/1906.04341>`_, Section 6) measure
how differently two heads behave as the Jensen–Shannon divergence between their attention
distributions, summed over every attending token of the data, embed the heads in 2-D with
multidimensional scaling, and note that heads in the same layer tend to be close. Modules, lowest
first: ``distances`` (:func:`head_distances`, the definition in its docstring), ``embedding``
(:func:`embed_heads`, :func:`nearest_heads`, :func:`head_linkage`), ``same_layer``
(:func:`same_layer_statistic`, the permutation test), ``figures`` (pictures and the behaviour they
colour heads by).
"""

from bertology_utils.core.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "distances": ["REDUCTIONS", "JSAccumulator", "HeadDistances", "head_distances", "distance_matrix"],
        "embedding": ["Embedding", "embed_heads", "nearest_heads", "head_linkage"],
        "same_layer": ["SameLayerTest", "same_layer_statistic"],
        "figures": ["plot_dendrogram", "neighbour_attention", "plot_embedding", "plot_two_models"],
    },
)
