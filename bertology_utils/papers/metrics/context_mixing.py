"""Notebook 08 (context mixing): norm-weighted shares, and how faithful each mixing map is to a classifier."""

from bertology_utils.papers.metrics.base import Kind, Metric

_ROLLOUT = "mixing.claims.rollout_flow_beat_raw.{reference}.layer{layer}.{task}"
_VZ = "mixing.claims.value_zeroing_best.{reference}.layer{layer}.{task}"
_DX = "mixing.claims.decompx_best.{reference}.layer{layer}.{task}"
_NORM = "mixing.claims.norm_discounts_special_tokens"

METRICS = (
    # the run and the pre-trained model's shares on the sentences
    Metric("mixing.model", Kind.EXACT, "model name", "the pre-trained model the notebook loaded"),
    Metric("mixing.num_layers", Kind.EXACT, "count", "the model's layers"),
    Metric("mixing.num_heads", Kind.EXACT, "count", "attention heads per layer"),
    Metric("mixing.data", Kind.TEXT, "description", "which sentences of which corpus, and from where"),
    Metric("mixing.n_sentences", Kind.EXACT, "count", "sentences whose attention was extracted (too long: skipped)"),
    Metric(
        "mixing.share.{kind}.{weighting}.layer{layer}",
        Kind.FLOAT,
        "share of attention",
        "the layer's mean share of attention on [CLS], [SEP] or punctuation, under raw weights or norm weighting",
    ),
    Metric(
        "mixing.head.{kind}.{weighting}",
        Kind.FLOAT,
        "share of attention",
        "per head (layers x heads), its share of attention on [CLS], [SEP] or punctuation, raw or norm-weighted",
    ),
    # faithfulness to the fine-tuned classifier
    Metric("mixing.task", Kind.EXACT, "task name", "the task whose classifier the maps are judged on"),
    Metric(
        "mixing.dev_accuracy",
        Kind.TRAINED,
        "accuracy",
        "the fine-tuned classifier's dev accuracy (None for a regression task)",
    ),
    Metric("mixing.n_examples", Kind.EXACT, "count", "dev examples kept for faithfulness (not longer than max_tokens)"),
    Metric("mixing.n_skipped", Kind.EXACT, "count", "dev examples skipped as longer than max_tokens"),
    Metric(
        "mixing.ig_relative_gap",
        Kind.TRAINED,
        "share of the output change",
        "the largest relative completeness gap of the integrated-gradients reference over the examples",
    ),
    Metric(
        "mixing.ig_panels_mean",
        Kind.TRAINED,
        "panels",
        "the mean number of panels the adaptive integrated-gradients rule cut each example's integral into",
    ),
    Metric(
        "mixing.rho.{reference}.{method}.layer{layer}",
        Kind.TRAINED,
        "Spearman rho",
        "mean over examples of the rank correlation of the method's map at the layer with the reference attribution",
    ),
    # claims' numbers: Kobayashi et al. (the pre-trained model)
    Metric(
        _NORM + ".raw_share",
        Kind.FLOAT,
        "share of attention",
        "share of attention on [CLS], [SEP] and punctuation together under raw weights, mean over layers",
    ),
    Metric(
        _NORM + ".norm_share",
        Kind.FLOAT,
        "share of attention",
        "share of attention on [CLS], [SEP] and punctuation together under norm weighting, mean over layers",
    ),
    Metric(
        _NORM + ".relative_drop",
        Kind.FLOAT,
        "share of the raw share",
        "how much lower the norm-weighted share is than the raw one, relative to the raw one",
    ),
    Metric(
        _NORM + ".layers_lower",
        Kind.MAXIMUM,
        "share of layers",
        "share of layers where the norm-weighted share is below the raw one",
    ),
    # claims' numbers: Abnar & Zuidema, Mohebbi et al. (the fine-tuned classifier)
    Metric(
        _ROLLOUT + ".raw",
        Kind.TRAINED,
        "Spearman rho",
        "mean per-example rank correlation of raw attention with the reference at the layer",
    ),
    Metric(
        _ROLLOUT + ".rollout",
        Kind.TRAINED,
        "Spearman rho",
        "mean per-example rank correlation of attention rollout with the reference at the layer",
    ),
    Metric(
        _ROLLOUT + ".flow",
        Kind.TRAINED,
        "Spearman rho",
        "mean per-example rank correlation of attention flow with the reference at the layer",
    ),
    Metric(
        _ROLLOUT + ".p_rollout_vs_raw",
        Kind.TRAINED,
        "p-value",
        "paired Wilcoxon p-value of rollout against raw attention",
    ),
    Metric(
        _ROLLOUT + ".p_flow_vs_rollout",
        Kind.TRAINED,
        "p-value",
        "paired Wilcoxon p-value of flow against rollout",
    ),
    Metric(
        _ROLLOUT + ".flow_vs_rollout_low",
        Kind.TRAINED,
        "Spearman rho difference",
        "lower end of the bootstrap interval over examples of the mean rho difference flow - rollout",
    ),
    Metric(
        _ROLLOUT + ".flow_vs_rollout_high",
        Kind.TRAINED,
        "Spearman rho difference",
        "upper end of that interval: above 0, flow is not clearly below rollout",
    ),
    Metric(_ROLLOUT + ".n_items", Kind.EXACT, "count", "examples having all three maps, paired in the tests"),
    Metric(
        _VZ + ".rho.{method}",
        Kind.TRAINED,
        "Spearman rho",
        "mean per-example rank correlation of the method's map with the reference at the layer",
    ),
    Metric(
        _VZ + ".beaten",
        Kind.TRAINED,
        "count",
        "rival maps value zeroing beats (bootstrap interval over examples of the mean rho difference above 0)",
    ),
    Metric(_VZ + ".n_items", Kind.EXACT, "count", "examples having every compared map, paired in the tests"),
    # claims' numbers: Modarressi et al. 2023 (the fine-tuned classifier)
    Metric(
        _DX + ".rho.{method}",
        Kind.TRAINED,
        "Spearman rho",
        "mean per-example rank correlation of the method's map (DecompX, GlobEnc, ALTI) with the reference at the layer",
    ),
    Metric(
        _DX + ".beaten",
        Kind.TRAINED,
        "count",
        "rival maps DecompX beats (bootstrap interval over examples of the mean rho difference above 0)",
    ),
    Metric(_DX + ".n_items", Kind.EXACT, "count", "examples having every compared map, paired in the tests"),
)
