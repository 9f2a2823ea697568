"""Notebook 02 (notebooks/02_sep_noop.ipynb): is attention to [SEP] a no-op? Gradients and ablations."""

from bertology_utils.papers.metrics.base import Kind, Metric

METRICS = (
    # what was run on what
    Metric("sep.model", Kind.EXACT, "model name", "the model the notebook loaded"),
    Metric("sep.data", Kind.TEXT, "description", "which treebank sentences were read, and from where"),
    Metric("sep.n_pairs", Kind.EXACT, "count", "pairs of consecutive treebank sentences built"),
    Metric("sep.num_layers", Kind.EXACT, "count", "the model's layers"),
    Metric("sep.num_heads", Kind.EXACT, "count", "attention heads per layer"),
    Metric("sep.sst2_skipped", Kind.EXACT, "boolean", "whether the SST-2 classifier objective was left out"),
    # the SST-2 classifier fine-tuned for its objective
    Metric(
        "sep.sst2.dev_accuracy",
        Kind.TRAINED,
        "accuracy",
        "dev accuracy of the fine-tuned SST-2 classifier",
        items="sep.sst2.dev_examples",
    ),
    Metric("sep.sst2.dev_examples", Kind.EXACT, "count", "SST-2 dev examples the fine-tuned classifier was scored on"),
    Metric("sep.sst2.train_examples", Kind.EXACT, "count", "SST-2 training examples of the fine-tuning budget"),
    Metric("sep.sst2.epochs", Kind.EXACT, "count", "epochs of the SST-2 fine-tuning"),
    # each objective's gradients (masked_embedding, mlm: the pretrained model; sst2: the fine-tuned one)
    Metric("sep.{objective}.objective", Kind.EXACT, "description", "the loss whose gradients this objective measures"),
    Metric("sep.{objective}.n_items", Kind.EXACT, "count", "items the objective's gradients were averaged over"),
    Metric("sep.{objective}.mean_loss", Kind.FLOAT, "loss", "the objective's mean loss over its items"),
    Metric(
        "sep.{objective}.attention_to_{kind}_by_layer",
        Kind.FLOAT,
        "share of attention",
        "per layer, the mean share of attention on this token kind ([SEP], [CLS])",
    ),
    Metric(
        "sep.{objective}.{kind}_gradient_ratio_by_layer",
        Kind.FLOAT,
        "ratio",
        "per layer, the mean gradient for attention to this token kind over that to ordinary tokens",
    ),
    Metric(
        "sep.{objective}.gradient_norm_by_layer",
        Kind.FLOAT,
        "gradient norm",
        "per layer, the mean over items of the Frobenius norm of the loss's gradient for the attention",
    ),
    Metric("sep.sst2.mean_loss", Kind.TRAINED, "loss", "the fine-tuned SST-2 classifier's mean loss over its items"),
    Metric(
        "sep.sst2.attention_to_{kind}_by_layer",
        Kind.TRAINED,
        "share of attention",
        "per layer, the fine-tuned SST-2 classifier's mean share of attention on this token kind",
    ),
    Metric(
        "sep.sst2.{kind}_gradient_ratio_by_layer",
        Kind.TRAINED,
        "ratio",
        "per layer, the SST-2 loss's mean gradient for attention to this token kind over that to ordinary tokens",
    ),
    Metric(
        "sep.sst2.gradient_norm_by_layer",
        Kind.TRAINED,
        "gradient norm",
        "per layer, the mean Frobenius norm of the SST-2 loss's gradient for the fine-tuned model's attention",
    ),
    # per head (layers x heads)
    Metric(
        "sep.head.{objective}.attention_to_{kind}",
        Kind.FLOAT,
        "share of attention",
        "per head (layers x heads), the mean share of attention on this token kind",
    ),
    Metric(
        "sep.head.{objective}.normalised_gradient_{kind}",
        Kind.FLOAT,
        "ratio",
        "per head (layers x heads), the mean gradient for attention to this token kind over the model's mean",
    ),
    Metric(
        "sep.head.{objective}.gradient_norm",
        Kind.FLOAT,
        "gradient norm",
        "per head (layers x heads), the mean norm of the loss's gradient for its attention",
    ),
    Metric(
        "sep.head.sst2.attention_to_{kind}",
        Kind.TRAINED,
        "share of attention",
        "per head (layers x heads) of the fine-tuned SST-2 classifier, the mean share of attention on this token kind",
    ),
    Metric(
        "sep.head.sst2.normalised_gradient_{kind}",
        Kind.TRAINED,
        "ratio",
        "per head (layers x heads), the SST-2 loss's mean gradient for attention to this token kind over its mean",
    ),
    Metric(
        "sep.head.sst2.gradient_norm",
        Kind.TRAINED,
        "gradient norm",
        "per head (layers x heads), the mean norm of the SST-2 loss's gradient for the fine-tuned model's attention",
    ),
    # ablations: the attention on a token moved away, against a matched random-token control
    Metric(
        "sep.ablation.{objective}.{target}.{mode}.ratio",
        Kind.FLOAT,
        "ratio",
        "hidden-state change from moving the attention off the target token over the matched control's change",
    ),
    Metric(
        "sep.ablation.{objective}.{target}.{mode}.target_change",
        Kind.FLOAT,
        "hidden-state change",
        "mean change of the hidden states when the attention on the target token is moved away",
    ),
    Metric(
        "sep.ablation.{objective}.{target}.{mode}.control_change",
        Kind.FLOAT,
        "hidden-state change",
        "mean change of the hidden states when the same mass is moved off a random ordinary token",
    ),
    Metric(
        "sep.ablation.{objective}.{target}.{mode}.mass",
        Kind.FLOAT,
        "share of attention",
        "mean attention mass moved off the target token",
    ),
    Metric(
        "sep.ablation.sst2.{target}.{mode}.ratio",
        Kind.TRAINED,
        "ratio",
        "on the fine-tuned SST-2 classifier, hidden-state change of the ablation over the matched control's",
    ),
    Metric(
        "sep.ablation.sst2.{target}.{mode}.target_change",
        Kind.TRAINED,
        "hidden-state change",
        "on the fine-tuned SST-2 classifier, mean change of the hidden states when the target's attention is moved",
    ),
    Metric(
        "sep.ablation.sst2.{target}.{mode}.control_change",
        Kind.TRAINED,
        "hidden-state change",
        "on the fine-tuned SST-2 classifier, mean change of the hidden states for the matched random-token control",
    ),
    Metric(
        "sep.ablation.sst2.{target}.{mode}.mass",
        Kind.TRAINED,
        "share of attention",
        "on the fine-tuned SST-2 classifier, mean attention mass moved off the target token",
    ),
    Metric(
        "sep.ablation.null_change",
        Kind.FLOAT,
        "hidden-state change",
        "largest hidden-state change from an ablation that moves nothing (a check of the machinery; about 0)",
    ),
    # claims (Clark et al., and what a no-op predicts)
    Metric(
        "sep.claims.sep_middle_layers.sep_share",
        Kind.FLOAT,
        "share of attention",
        "mean share on [SEP] over the heads of the depth-scaled layers 6-10 (the first objective's inputs)",
    ),
    Metric(
        "sep.claims.{kind}_gradient_small.{objective}.high_ratio",
        Kind.FLOAT,
        "ratio",
        "gradient ratio to ordinary tokens in the half of the layers with most attention to the token",
    ),
    Metric(
        "sep.claims.{kind}_gradient_small.{objective}.low_ratio",
        Kind.FLOAT,
        "ratio",
        "gradient ratio to ordinary tokens in the other half of the layers",
    ),
    Metric(
        "sep.claims.gradients_shrink.{objective}.spearman_with_depth",
        Kind.FLOAT,
        "Spearman rho",
        "rank correlation of the layers' gradient norm with depth",
    ),
    Metric(
        "sep.claims.ablation.{objective}.{target}.{mode}.ratio",
        Kind.FLOAT,
        "ratio",
        "hidden-state change from moving the attention off the token over the matched control's change",
    ),
    Metric(
        "sep.claims.{kind}_gradient_small.sst2.high_ratio",
        Kind.TRAINED,
        "ratio",
        "on the fine-tuned SST-2 classifier, the gradient ratio in the half of the layers with most attention",
    ),
    Metric(
        "sep.claims.{kind}_gradient_small.sst2.low_ratio",
        Kind.TRAINED,
        "ratio",
        "on the fine-tuned SST-2 classifier, the gradient ratio in the other half of the layers",
    ),
    Metric(
        "sep.claims.gradients_shrink.sst2.spearman_with_depth",
        Kind.TRAINED,
        "Spearman rho",
        "on the fine-tuned SST-2 classifier, rank correlation of the layers' gradient norm with depth",
    ),
    Metric(
        "sep.claims.ablation.sst2.{target}.{mode}.ratio",
        Kind.TRAINED,
        "ratio",
        "on the fine-tuned SST-2 classifier, hidden-state change of the ablation over the matched control's",
    ),
)
