"""analyses: what the heads do, read from word-level attention (a store or ItemAttention records).

``patterns`` and ``pattern_types`` (surface statistics, Kovaleva's types and template rules;
``pattern_models``, above ``pattern_types``: the classifiers trained on the hand-labelled maps, and
``classify_map``/``classify_items``), ``syntax`` (a package: scoring, result, figures) and
``coreference`` (heads that track them), ``clustering`` (a package: heads by Jensen-Shannon distance,
embedding, the same-layer test, figures), ``probes`` (a package) and ``word_vectors``, ``head_roles``
(Voita et al.'s positional, syntactic and rare-word heads, and head confidence). A sibling of
``interventions``: neither imports the other. Module-specific constants and paper tables stay in their
modules and subpackages (``syntax.PAPER_TABLE1``).
"""

from bertology_utils.core.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "patterns": [
            "STATISTICS",
            "SurfaceStats",
            "surface_statistics",
            "vig_patterns",
            "head_table",
            "VIG_PATTERNS",
        ],
        "pattern_types": [
            "TYPES",
            "classify_scores",
            "type_proportions",
            "fit_thresholds",
            "f1_report",
            "load_labelled_maps",
            "head_types",
            "score_labelled",
            "split_labelled",
        ],
        "pattern_maps": ["FEATURES", "map_features", "planted_maps"],
        "pattern_cnn": ["map_images", "CNNClassifier"],
        "pattern_models": [
            "FeatureClassifier",
            "TemplateClassifier",
            "CrossValidation",
            "cross_validate",
            "fit_classifiers",
            "load_classifier",
            "best_method",
            "classify_map",
            "classify_items",
            "MODELS_DIR",
        ],
        "syntax": ["SyntaxResult", "score_syntax"],
        "head_roles": [
            "PositionalRoles",
            "positional_heads",
            "SyntacticRoles",
            "syntactic_heads",
            "word_frequencies",
            "RareWordRoles",
            "rare_word_heads",
            "head_confidence",
            "HeadRoles",
            "head_roles",
            "plot_roles",
        ],
        "coreference": ["PreparedGap", "CorefResult", "prepare_gap", "score_coreference", "gap_words"],
        "clustering": [
            "HeadDistances",
            "head_distances",
            "embed_heads",
            "head_linkage",
            "neighbour_attention",
            "same_layer_statistic",
            "plot_dendrogram",
            "plot_embedding",
        ],
        "probes": [
            "ProbeData",
            "AttentionProbe",
            "AttentionWordsProbe",
            "DistanceWordsProbe",
            "RightBranching",
            "StructuralData",
            "DistanceProbe",
            "DepthProbe",
            "structural_probe_layers",
            "fit_jointly",
            "StructuralLayers",
        ],
        "surface_runs": [
            "pattern_corpora",
            "extract_stores",
            "statistics_by_dataset",
            "statistics_table",
            "classify_stores",
            "pooled_vig_patterns",
            "top_heads",
        ],
        "probe_runs": [
            "ProbeScores",
            "evaluate_probes",
            "weights_against_accuracy",
            "typical_sentence",
            "row_key",
            "row_metrics",
            "structural_row_metrics",
            "structural_layers_in",
        ],
        "word_vectors": ["WordVectors", "StaticVectors", "ModelEmbeddingVectors", "load_glove", "default_word_vectors"],
    },
)
