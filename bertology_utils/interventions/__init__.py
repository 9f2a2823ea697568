"""interventions: change the model and measure what changes.

``editing`` (edit attention, gate heads), ``objectives`` (token batches and the losses gradients are taken of),
``gradients`` (gradients w.r.t. attention: Clark et al. 2019's [SEP] no-op reading), ``ablations`` (attention moved
off [SEP] or [CLS], against a matched control), ``finetuning`` (cached GLUE classifiers), ``scoring`` (GLUE tasks'
targets and metrics), ``pruning`` (importance, ablation, pruning curves: Michel et al. 2019), ``head_removal``
(heads' weights removed), ``mixing`` (context mixing beyond raw weights: norms, rollout, flow, ALTI, value
zeroing; one file and one registered class per method),
``attribution`` (input gradients, integrated gradients, blank-out; references registered by name), ``lrp``
(AttnLRP and CP-LRP, opt-in references),
``head_relevance`` (integrated gradients over head gates: Hao et al. 2021), ``hard_concrete`` (Hard Concrete gates),
``l0`` (those gates trained with an L0 penalty: Voita et al. 2019) and ``query_key`` (queries and keys, and how many
of their dimensions decide where a head attends); ``dev_sets`` (a labelled corpus encoded once), ``gated_logits``
(the logits of gate configurations), ``head_gates`` (per-example head gates and losses), ``results_cache`` (stored
logits, importances, attributions) and ``quadrature`` (Gauss-Legendre and adaptive path integrals) hold what
several of them share. A sibling of ``analyses``: neither imports the other. Names are imported on first use (torch).
"""

from bertology_utils.core.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "editing": [
            "Edit",
            "edit_attention",
            "capture_attention",
            "AttentionCapture",
            "gate_heads",
        ],
        "objectives": [
            "objective_label",
            "Objective",
            "MaskedLMObjective",
            "MaskedEmbeddingObjective",
            "ClassifierObjective",
            "TokenBatch",
            "token_batches",
        ],
        "gradients": [
            "GradientStats",
            "attention_gradients",
            "batch_attention_gradients",
        ],
        "ablations": ["remove_attention_to", "ablate_tokens", "ablate_matched_random", "ablation_curves"],
        "scoring": ["TaskSpec", "task_spec"],
        "finetuning": [
            "Budget",
            "default_budget",
            "FineTuned",
            "fine_tune",
            "predict",
            "evaluate",
        ],
        "dev_sets": ["DevSet", "dev_set"],
        "gated_logits": ["gate_shape", "predict_with_gates", "scores_for_gates"],
        "pruning": ["head_importance", "ablation_sweep", "pruning_curve"],
        "head_removal": ["prune_heads", "pruned_heads"],
        "head_gates": ["gate_edit", "example_losses", "require_loaded"],
        "results_cache": ["RESULTS_VERSION", "cached_results", "cached_result"],
        "quadrature": ["gauss_legendre", "adaptive_integral"],
        "faithfulness_runs": ["SeedFaithfulness", "faithfulness_by_seed"],
        "attribution": [
            "input_x_gradient",
            "integrated_gradients",
            "IntegratedGradientsResult",
            "blank_out",
        ],
        "references": [
            "word_references",
            "WordReferences",
            "REFERENCES",
            "Reference",
            "ReferenceScores",
            "register_reference",
            "reference_title",
        ],
        "lrp": ["LRP_VARIANTS", "LRPRules", "lrp_rules", "lrp_relevance", "AttnLRP", "CPLRP"],
        "head_relevance": ["HeadAttribution", "GateGradient", "head_attribution", "gate_times_gradient"],
        "hard_concrete": ["HardConcreteGates"],
        "l0": ["GateTraining", "train_gates", "L0Sweep", "l0_sweep", "training_set"],
        "query_key": ["capture_query_key", "QueryKeyCapture", "query_key_dimensions", "QueryKeyDimensions"],
        "mixing": [
            "METHODS",
            "MixingMaps",
            "mixing_for",
            "mixing_maps",
            "trace",
            "attention_flow",
            "faithfulness",
            "faithfulness_summary",
            "MixingMethod",
            "LayerMethod",
            "AcrossLayers",
            "Rollout",
        ],
    },
)
