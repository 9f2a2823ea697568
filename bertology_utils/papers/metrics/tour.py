"""Notebook 00 (the tour): what one extraction of a few sentences shows."""

from bertology_utils.papers.metrics.base import Kind, Metric

METRICS = (
    Metric("tour.model", Kind.EXACT, "model name", "the model the notebook loaded"),
    Metric("tour.num_layers", Kind.EXACT, "count", "the model's layers"),
    Metric("tour.num_heads", Kind.EXACT, "count", "attention heads per layer"),
    Metric("tour.n_sentences", Kind.EXACT, "count", "sentences asked for"),
    Metric("tour.n_extracted", Kind.EXACT, "count", "sentences whose attention was extracted"),
    Metric("tour.data", Kind.TEXT, "description", "which sentences of which corpus, and from where"),
    Metric(
        "tour.max_row_sum_error",
        Kind.FLOAT,
        "share of attention",
        "largest distance of a word-level attention row's sum from 1 (a check of the conversion)",
    ),
    Metric("tour.mean_attention_to_cls", Kind.FLOAT, "share of attention", "mean attention to [CLS] over all heads"),
    Metric("tour.mean_attention_to_sep", Kind.FLOAT, "share of attention", "mean attention to [SEP] over all heads"),
    Metric("tour.mean_entropy_layer1", Kind.FLOAT, "nats", "mean entropy of the first layer's attention rows"),
    Metric("tour.uniform_entropy", Kind.FLOAT, "nats", "entropy of a uniform row over the sentences' lengths"),
    Metric(
        "tour.claims.cls_early_layers.early", Kind.FLOAT, "share of attention", "attention to [CLS] in early layers"
    ),
    Metric(
        "tour.claims.cls_early_layers.later", Kind.FLOAT, "share of attention", "attention to [CLS] in later layers"
    ),
    Metric("tour.claims.early_layers_broad.early_entropy", Kind.FLOAT, "nats", "mean row entropy of early layers"),
    Metric(
        "tour.claims.early_layers_broad.early_ratio_to_uniform",
        Kind.FLOAT,
        "ratio",
        "early layers' mean row entropy over a uniform row's",
    ),
    Metric("tour.claims.early_layers_broad.last_entropy", Kind.FLOAT, "nats", "mean row entropy of the last layer"),
    Metric(
        "tour.claims.sep_middle_layers.sep_share",
        Kind.FLOAT,
        "share of attention",
        "attention to [SEP] in the layers matching the paper's 6-10",
    ),
)
