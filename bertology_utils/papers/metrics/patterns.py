"""Notebook 01 (notebooks/01_patterns.ipynb): Clark's surface statistics, Kovaleva's pattern types, Vig's patterns."""

from bertology_utils.papers.metrics.base import Kind, Metric

METRICS = (
    # what was run on what
    Metric("patterns.model", Kind.EXACT, "model name", "the model the notebook loaded"),
    Metric("patterns.data", Kind.TEXT, "description", "which treebank sentences were read, and from where"),
    Metric("patterns.layers", Kind.EXACT, "count", "the model's layers"),
    Metric("patterns.heads", Kind.EXACT, "count", "attention heads per layer"),
    Metric(
        "patterns.items",
        Kind.EXACT,
        "count per data set",
        "items whose attention was summarised, per data set (single sentences, treebank pairs, each pair set)",
    ),
    Metric("patterns.statistics_seconds", Kind.TIMING, "seconds", "time taken by the surface statistics"),
    # Clark's surface statistics
    Metric(
        "patterns.per_layer_means",
        Kind.FLOAT,
        "share of attention (entropies: nats)",
        "per data set and level (word/token), each surface statistic averaged over the heads of each layer",
    ),
    Metric(
        "patterns.uniform_entropy",
        Kind.FLOAT,
        "nats",
        "entropy a uniform attention row would have on each data set and level (word/token)",
    ),
    Metric(
        "patterns.head.{statistic}",
        Kind.FLOAT,
        "share of attention",
        "per head (layers x heads), the mean share of a row on this target (treebank pairs, token level)",
    ),
    Metric(
        "patterns.head.entropy",
        Kind.FLOAT,
        "nats",
        "per head (layers x heads), the mean entropy of its attention rows (treebank pairs, token level)",
    ),
    Metric(
        "patterns.head.cls_entropy",
        Kind.FLOAT,
        "nats",
        "per head (layers x heads), the mean entropy of the [CLS] row (treebank pairs, token level)",
    ),
    # Vig's patterns
    Metric(
        "patterns.head.vig.{pattern}",
        Kind.FLOAT,
        "share of attention",
        "per head (layers x heads), Vig's score for this pattern pooled over every data set",
    ),
    Metric(
        "patterns.head.vig.bag_of_words",
        Kind.FLOAT,
        "ratio to uniform entropy",
        "per head (layers x heads), a word row's entropy over the real words over log(#words), pooled over data sets",
    ),
    Metric(
        "patterns.top_heads",
        Kind.MAXIMUM,
        "heads (layer-head, from 1)",
        "per Vig pattern, the top-k heads by pooled score, best first",
    ),
    Metric(
        "patterns.top_scores",
        Kind.MAXIMUM,
        "score (rounded to 4 decimals)",
        "per Vig pattern, the pooled scores of the top-k heads, best first",
    ),
    # Kovaleva's pattern types (a fitted classifier)
    Metric("patterns.classifier", Kind.EXACT, "method name", "the pattern-type classifier used on every map"),
    Metric(
        "patterns.pattern_type_proportions",
        Kind.TRAINED,
        "share of maps",
        "per data set, each pattern type's share of the maps of each layer, by the fitted classifier",
    ),
    Metric(
        "patterns.pattern_type_proportions_overall",
        Kind.TRAINED,
        "share of maps",
        "per data set, each pattern type's share of all its maps, by the fitted classifier",
    ),
    Metric(
        "patterns.head.type",
        Kind.TRAINED,
        "pattern type",
        "per head (layers x heads), its most frequent type by the fitted classifier, every data set pooled",
    ),
    Metric(
        "patterns.head.type_share.{type}",
        Kind.TRAINED,
        "share of maps",
        "per head (layers x heads), the share of its maps the fitted classifier gives this type",
    ),
    Metric("patterns.labelled_maps", Kind.EXACT, "count", "hand-labelled attention maps the classifiers are scored on"),
    Metric(
        "patterns.annotator_kappa",
        Kind.FLOAT,
        "Cohen's kappa",
        "agreement of the two labelling passes of the hand-labelled maps",
    ),
    Metric(
        "patterns.classifier_cv",
        Kind.TRAINED,
        "macro F1 and others",
        "cross-validated scores of each pattern-type classifier fitted in this run, on the labelled maps",
    ),
    Metric(
        "patterns.classifier_heldout_macro_f1",
        Kind.TRAINED,
        "macro F1 (and thresholds)",
        "held-out macro F1 of the template rules with a-priori and with fitted thresholds, and the fitted thresholds",
    ),
    # claims (Clark et al., Kovaleva et al.)
    Metric(
        "patterns.claims.current_token.median_self_share",
        Kind.FLOAT,
        "share of attention",
        "median over heads of the share a row puts on its own position",
    ),
    Metric(
        "patterns.claims.{position}_token_heads.heads",
        Kind.MAXIMUM,
        "count",
        "heads putting more than half of their attention on the previous / next token",
    ),
    Metric(
        "patterns.claims.{position}_token_heads.last_early_layer",
        Kind.EXACT,
        "layer (from 1)",
        "the last layer counted as early (the paper's layers 1-6, scaled to the model's depth)",
    ),
    Metric(
        "patterns.claims.sep_middle_layers.sep_share",
        Kind.FLOAT,
        "share of attention",
        "mean share on [SEP] over the heads of the depth-scaled layers 6-10",
    ),
    Metric(
        "patterns.claims.cls_early_layers.early",
        Kind.FLOAT,
        "share of attention",
        "mean share on [CLS] in the depth-scaled layers 1-4",
    ),
    Metric(
        "patterns.claims.cls_early_layers.later",
        Kind.FLOAT,
        "share of attention",
        "mean share on [CLS] in the depth-scaled layers 5-12",
    ),
    Metric(
        "patterns.claims.punctuation_last_layers.last",
        Kind.FLOAT,
        "share of attention",
        'mean share on "." and "," in the depth-scaled layers 11-12',
    ),
    Metric(
        "patterns.claims.punctuation_last_layers.earlier",
        Kind.FLOAT,
        "share of attention",
        'mean share on "." and "," in the depth-scaled layers 1-10',
    ),
    Metric(
        "patterns.claims.sep_to_sep.sep_to_sep",
        Kind.FLOAT,
        "share of attention",
        "mean share of separator rows on separators in the depth-scaled layers 6-10",
    ),
    Metric(
        "patterns.claims.early_layers_broad.early_entropy",
        Kind.FLOAT,
        "nats",
        "mean entropy of the attention rows in the depth-scaled layers 1-2",
    ),
    Metric(
        "patterns.claims.early_layers_broad.last_entropy",
        Kind.FLOAT,
        "nats",
        "mean entropy of the attention rows in the last layer",
    ),
    Metric(
        "patterns.claims.early_layers_broad.early_ratio_to_uniform",
        Kind.FLOAT,
        "ratio",
        "early layers' mean entropy over a uniform row's",
    ),
    Metric(
        "patterns.claims.cls_entropy_last_layer.entropy",
        Kind.FLOAT,
        "nats",
        "mean entropy of the [CLS] row in the last layer",
    ),
    Metric(
        "patterns.claims.cls_entropy_last_layer.ratio_to_uniform",
        Kind.FLOAT,
        "ratio",
        "the last layer's [CLS] entropy over a uniform row's",
    ),
    Metric(
        "patterns.claims.heterogeneous_share.mrpc_share",
        Kind.TRAINED,
        "share of maps",
        "share of MRPC's maps the fitted classifier calls heterogeneous",
    ),
    Metric(
        "patterns.claims.pattern_types_recognisable.macro_f1",
        Kind.TRAINED,
        "macro F1",
        "cross-validated macro F1 of the chosen pattern-type classifier on the labelled maps",
    ),
    Metric(
        "patterns.claims.pattern_types_recognisable.method",
        Kind.EXACT,
        "method name",
        "the classifier whose macro F1 the claim reads",
    ),
)
