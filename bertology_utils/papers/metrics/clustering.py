"""Notebook 05 (notebooks/05_clustering.ipynb): heads compared by the distance between their attention, and clustered."""

from bertology_utils.papers.metrics.base import Kind, Metric

METRICS = (
    # what was run on what
    Metric("clustering.model", Kind.EXACT, "model name", "the model the notebook loaded"),
    Metric("clustering.data", Kind.TEXT, "description", "which treebank sentences were read, and from where"),
    Metric("clustering.n_sentences", Kind.EXACT, "count", "sentences read"),
    Metric("clustering.n_items", Kind.EXACT, "count", "sentences whose attention entered the distances"),
    Metric("clustering.n_rows", Kind.EXACT, "count", "attending words summed over in the distances"),
    Metric("clustering.n_heads", Kind.EXACT, "count", "heads compared (layers x heads)"),
    Metric("clustering.smoothing", Kind.EXACT, "share", "weight of the uniform distribution mixed into each row"),
    Metric("clustering.distance_seconds", Kind.TIMING, "seconds", "time taken by the head distances"),
    Metric("clustering.n_permutations", Kind.EXACT, "count", "label permutations of each permutation test"),
    # distances between heads
    Metric(
        "clustering.mean_distance",
        Kind.FLOAT,
        "summed JS divergence (nats)",
        "mean distance between two different heads",
    ),
    Metric(
        "clustering.same_layer_mean",
        Kind.FLOAT,
        "summed JS divergence (nats)",
        "mean distance between two heads of the same layer",
    ),
    Metric(
        "clustering.other_layer_mean",
        Kind.FLOAT,
        "summed JS divergence (nats)",
        "mean distance between two heads of different layers",
    ),
    Metric(
        "clustering.same_other_ratio",
        Kind.FLOAT,
        "ratio",
        "same-layer mean distance over the other-layer mean",
    ),
    Metric(
        "clustering.permutation_p",
        Kind.MAXIMUM,
        "p-value",
        "share of layer-label permutations whose statistic reaches the observed one (one-sided)",
        items="clustering.n_permutations",
    ),
    # heads grouped by their dominant behaviour (a target holding more than half of the attention)
    Metric(
        "clustering.dominant_behaviour_counts",
        Kind.MAXIMUM,
        "count per behaviour",
        "heads per dominant behaviour (the target with more than half of the attention, if any)",
    ),
    Metric(
        "clustering.behaviour_same_mean",
        Kind.MAXIMUM,
        "summed JS divergence (nats)",
        "mean distance between two heads of the same dominant behaviour",
    ),
    Metric(
        "clustering.behaviour_other_mean",
        Kind.MAXIMUM,
        "summed JS divergence (nats)",
        "mean distance between two heads of different dominant behaviours",
    ),
    Metric(
        "clustering.behaviour_permutation_p",
        Kind.MAXIMUM,
        "p-value",
        "share of behaviour-label permutations whose statistic reaches the observed one (one-sided)",
        items="clustering.n_permutations",
    ),
    # the MDS embedding (an iterative fit)
    Metric("clustering.mds_stress", Kind.TRAINED, "stress-1", "how badly the 2-d MDS embedding keeps the distances"),
    # per head (layers x heads)
    Metric(
        "clustering.head.x",
        Kind.TRAINED,
        "MDS coordinate",
        "per head (layers x heads), its first coordinate in the 2-d MDS embedding",
    ),
    Metric(
        "clustering.head.y",
        Kind.TRAINED,
        "MDS coordinate",
        "per head (layers x heads), its second coordinate in the 2-d MDS embedding",
    ),
    Metric(
        "clustering.head.dominant",
        Kind.MAXIMUM,
        "behaviour",
        "per head (layers x heads), the target holding more than half of its attention, or none",
    ),
    Metric(
        "clustering.head.nearest",
        Kind.MAXIMUM,
        "heads (layer-head, from 1)",
        "per head (layers x heads), the k heads nearest it, nearest first",
    ),
    Metric(
        "clustering.head.nearest_distance",
        Kind.FLOAT,
        "summed JS divergence (nats)",
        "per head (layers x heads), the distances to its k nearest heads, nearest first",
    ),
    # a second model (second_model: a checkpoint, or "random-init"), embedded jointly with the first
    Metric("clustering.second_model", Kind.EXACT, "model name", "the second model of the joint view"),
    Metric("clustering.joint.n_items", Kind.EXACT, "count", "sentences neither model skipped"),
    Metric(
        "clustering.joint.same_model_mean",
        Kind.TRAINED,
        "summed JS divergence (nats)",
        "mean distance between two heads of the same model",
    ),
    Metric(
        "clustering.joint.other_model_mean",
        Kind.TRAINED,
        "summed JS divergence (nats)",
        "mean distance between a head of one model and a head of the other",
    ),
    Metric(
        "clustering.joint.model_separation_p",
        Kind.TRAINED,
        "p-value",
        "share of model-label permutations whose statistic reaches the observed one (one-sided)",
        items="clustering.n_permutations",
    ),
    Metric(
        "clustering.joint.mds_stress",
        Kind.TRAINED,
        "stress-1",
        "how badly the joint 2-d MDS embedding of both models' heads keeps the distances",
    ),
    Metric(
        "clustering.joint.counterpart_mean",
        Kind.TRAINED,
        "summed JS divergence (nats)",
        "mean distance of a head to the head in the same place of the other model (models of one shape)",
    ),
    # claims (Clark et al., Section 6)
    Metric(
        "clustering.claims.{claim}.p_value",
        Kind.MAXIMUM,
        "p-value",
        "the permutation test's one-sided p-value",
        items="clustering.n_permutations",
    ),
    Metric(
        "clustering.claims.same_layer_close.ratio",
        Kind.FLOAT,
        "ratio",
        "same-layer mean distance over the other-layer mean",
    ),
    Metric(
        "clustering.claims.behaviour_clusters.ratio",
        Kind.MAXIMUM,
        "ratio",
        "same-behaviour mean distance over the other-behaviour mean",
    ),
)
