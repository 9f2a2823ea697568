"""Notebook 10 (notebooks/10_sinks.ipynb): attention sinks, no-op heads and outlier dimensions."""

from bertology_utils.papers.metrics.base import Kind, Metric

_CLAIMS = "sinks.claims"

METRICS = (
    # what was run on what
    Metric("sinks.model", Kind.EXACT, "model name", "the model the notebook loaded"),
    Metric("sinks.data", Kind.TEXT, "description", "which sentences were read, and from where"),
    Metric("sinks.n_sentences", Kind.EXACT, "count", "sentences measured"),
    Metric("sinks.n_skipped", Kind.EXACT, "count", "sentences skipped as longer than max_tokens"),
    Metric("sinks.num_layers", Kind.EXACT, "count", "the model's layers"),
    Metric("sinks.num_heads", Kind.EXACT, "count", "attention heads per layer"),
    Metric(
        "sinks.outlier_multiple",
        Kind.EXACT,
        "multiple of the median",
        "an activation above this multiple of its sentence's median magnitude counts as an outlier",
    ),
    Metric("sinks.sink_threshold", Kind.EXACT, "share of attention", "a head at or above it on sinks is a sink head"),
    Metric("sinks.objective", Kind.EXACT, "description", "the loss the interventions measure"),
    # per head (layers x heads), means over sentences
    Metric(
        "sinks.head.mass_{kind}",
        Kind.FLOAT,
        "share of attention",
        "per head (layers x heads), the share of attention on this kind of token ([CLS], [SEP], punctuation)",
    ),
    Metric(
        "sinks.head.sink_mass",
        Kind.FLOAT,
        "share of attention",
        "per head (layers x heads), the share of attention on [CLS], [SEP] and punctuation together",
    ),
    Metric(
        "sinks.head.norm_sink_share",
        Kind.FLOAT,
        "share of norm-weighted attention",
        "per head (layers x heads), the sinks' share of the head's attention weighted by ||f(x)|| (Kobayashi et al.)",
    ),
    Metric(
        "sinks.head.value_ratio",
        Kind.FLOAT,
        "ratio of norms",
        "per head (layers x heads), the attention-weighted ||f(x)|| of the sink tokens over that of the other tokens",
    ),
    Metric(
        "sinks.head.update",
        Kind.FLOAT,
        "vector norm",
        "per head (layers x heads), the mean norm of the head's output sum_j alpha_ij f(x_j)",
    ),
    Metric(
        "sinks.head.peak_mass",
        Kind.FLOAT,
        "share of attention",
        "per head (layers x heads), the share of attention on the token carrying the layer input's largest activation",
    ),
    Metric(
        "sinks.head.is_sink",
        Kind.MAXIMUM,
        "boolean",
        "per head (layers x heads), whether its attention on sinks reaches the sink threshold",
    ),
    # per layer (1..L) and per hidden state (0..L)
    Metric(
        "sinks.layer_norm_share_{kind}_by_layer",
        Kind.FLOAT,
        "share of norm-weighted attention",
        "per layer, this kind of token's share of the layer's norm-weighted attention, all heads together",
    ),
    Metric(
        "sinks.ratio_by_state",
        Kind.FLOAT,
        "multiple of the median",
        "per hidden state (0: embeddings), the largest activation over the median magnitude, geometric mean",
    ),
    Metric("sinks.kurtosis_by_state", Kind.FLOAT, "kurtosis", "per hidden state, the tokens' mean kurtosis"),
    Metric("sinks.inf_norm_by_state", Kind.FLOAT, "magnitude", "per hidden state, the mean largest magnitude"),
    Metric(
        "sinks.outliers_by_state",
        Kind.MAXIMUM,
        "count per sentence",
        "per hidden state, outlier activations per sentence (above the outlier multiple of the median)",
    ),
    Metric(
        "sinks.peak_dim_by_state",
        Kind.MAXIMUM,
        "dimension (from 0)",
        "per hidden state, the dimension that holds the largest activation most often",
    ),
    Metric(
        "sinks.peak_dim_share_by_state",
        Kind.MAXIMUM,
        "share of sentences",
        "per hidden state, how often that dimension holds the largest activation",
    ),
    Metric(
        "sinks.peak_on_sinks_by_state",
        Kind.MAXIMUM,
        "share of sentences",
        "per hidden state, how often the largest activation sits on [CLS], [SEP] or punctuation",
    ),
    # the interventions
    Metric("sinks.n_sink_heads", Kind.MAXIMUM, "count", "sink heads found (mean attention on sinks at the threshold)"),
    Metric(
        "sinks.n_heads_removed",
        Kind.MAXIMUM,
        "count",
        "sink heads removed: all of them, or the most parking ones, as many as the other heads",
    ),
    Metric("sinks.n_control_sets", Kind.MAXIMUM, "count", "distinct sets of other heads removed in their place"),
    Metric(
        "sinks.intervention.{condition}.loss_change",
        Kind.FLOAT,
        "loss",
        "mean over sentences of the loss under the intervention minus the loss as the model is",
    ),
    Metric(
        "sinks.intervention.{condition}.ratio_change",
        Kind.FLOAT,
        "log10 factor",
        "mean over sentences of log10 of the largest activation ratio over the layers, intervened over as is",
    ),
    Metric("sinks.clip_gamma", Kind.EXACT, "gamma", "clipped softmax's lower end"),
    Metric("sinks.clip_zeta", Kind.EXACT, "zeta", "clipped softmax's upper end"),
    # claims' numbers
    Metric(_CLAIMS + ".kobayashi.small_sink_vectors.norm_ratio", Kind.FLOAT, "ratio of norms", "sinks' over others'"),
    Metric(
        _CLAIMS + ".kobayashi.small_sink_vectors.log_norm_ratio",
        Kind.FLOAT,
        "log ratio",
        "sink-mass-weighted mean over heads of log(sink tokens' ||f(x)|| / other tokens')",
    ),
    Metric(_CLAIMS + ".{claim*}.rho", Kind.FLOAT, "Spearman rho", "the rank correlation over heads the claim reads"),
    Metric(_CLAIMS + ".{claim*}.heads", Kind.EXACT, "count", "heads the rank correlation is over"),
    Metric(
        _CLAIMS + ".sun.massive_activations.peak_state",
        Kind.MAXIMUM,
        "hidden state",
        "the hidden state whose largest activation is the most above its median",
    ),
    Metric(_CLAIMS + ".sun.massive_activations.ratio", Kind.FLOAT, "multiple of the median", "that state's ratio"),
    Metric(_CLAIMS + ".sun.massive_activations.multiple", Kind.EXACT, "multiple of the median", "the outlier multiple"),
    Metric(
        _CLAIMS + ".sun.peaks_on_sinks.share",
        Kind.MAXIMUM,
        "share",
        "share of the largest activations (per sentence and hidden state) on [CLS], [SEP] or punctuation",
    ),
    Metric(_CLAIMS + ".sun.peaks_on_sinks.chance", Kind.EXACT, "share", "those tokens' share of all tokens"),
    Metric(_CLAIMS + ".{claim*}.mean", Kind.FLOAT, "as the claim's statistic", "its mean over sentences"),
    Metric(
        _CLAIMS + ".no_op.removal_matters_less.sink_heads",
        Kind.FLOAT,
        "loss",
        "mean loss change without the sink heads",
    ),
    Metric(
        _CLAIMS + ".no_op.removal_matters_less.controls",
        Kind.FLOAT,
        "loss",
        "mean loss change without the control heads, averaged over the control sets",
    ),
    Metric(_CLAIMS + ".no_op.removal_matters_less.heads", Kind.MAXIMUM, "count", "heads removed"),
    Metric(
        _CLAIMS + ".bondarenko.clipping_lowers_outliers.factor",
        Kind.FLOAT,
        "factor",
        "the largest activation ratio's geometric-mean factor under clipped softmax",
    ),
    Metric(
        _CLAIMS + ".bondarenko.clipping_lowers_outliers.loss_change",
        Kind.FLOAT,
        "loss",
        "mean loss change under clipped softmax",
    ),
)
