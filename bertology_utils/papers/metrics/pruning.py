"""Notebook 06 (pruning): fine-tuned classifiers, single-head and layer ablations, importance and pruning curves."""

from bertology_utils.papers.metrics.base import Kind, Metric

_CLAIMS = "pruning.claims"
_DEV = "pruning.{task}.dev_examples"  # the dev examples every ablation, importance and curve is scored on

METRICS = (
    # the run
    Metric("pruning.model", Kind.EXACT, "model name", "the pre-trained model the classifiers were fine-tuned from"),
    Metric("pruning.num_layers", Kind.EXACT, "count", "the model's layers"),
    Metric("pruning.num_heads", Kind.EXACT, "count", "attention heads per layer"),
    Metric("pruning.tasks", Kind.EXACT, "task names", "the tasks whose data was found and whose classifier was tuned"),
    Metric("pruning.seconds_total", Kind.TIMING, "seconds", "wall-clock time of the timed stages in this run"),
    Metric("pruning.seconds", Kind.TIMING, "seconds per stage", "wall-clock time of each (task: stage) in this run"),
    # per task: the classifiers
    Metric(
        "pruning.{task}.dev_metrics",
        Kind.TRAINED,
        "GLUE metrics",
        "the fine-tuned classifier's GLUE metrics on the task's dev split (score, accuracy..., n examples)",
    ),
    Metric(
        "pruning.{task}.random_init_dev_metrics",
        Kind.TRAINED,
        "GLUE metrics",
        "the dev metrics of the same architecture fine-tuned from a random initialisation, same recipe",
    ),
    Metric(
        "pruning.{task}.majority_class_score",
        Kind.FLOAT,
        "GLUE score",
        "the dev score of always predicting the most frequent class (nan for a regression task)",
    ),
    Metric("pruning.{task}.train_seconds", Kind.TIMING, "seconds", "time fine-tuning the pre-trained classifier took"),
    Metric(
        "pruning.{task}.random_init_train_seconds",
        Kind.TIMING,
        "seconds",
        "time fine-tuning the randomly initialised classifier took",
    ),
    Metric("pruning.{task}.seconds", Kind.TIMING, "seconds per stage", "wall-clock time of each of the task's stages"),
    Metric(
        _DEV,
        Kind.EXACT,
        "count",
        "dev examples (the first ones, within the token budget) the ablations, importance and curves are scored on",
    ),
    # per task: ablations (Kovaleva et al. Fig. 6)
    Metric(
        "pruning.{task}.base_score",
        Kind.TRAINED,
        "GLUE score",
        "the classifier's dev score with every head on",
        items=_DEV,
    ),
    Metric("pruning.{task}.base_loss", Kind.TRAINED, "loss", "the classifier's mean dev loss with every head on"),
    Metric(
        "pruning.{task}.head_deltas",
        Kind.TRAINED,
        "GLUE score change",
        "per head (layers x heads), the dev score's change when that head alone is disabled",
        items=_DEV,
    ),
    Metric(
        "pruning.{task}.layer_deltas",
        Kind.TRAINED,
        "GLUE score change",
        "per layer, the dev score's change when all its heads are disabled",
        items=_DEV,
    ),
    Metric(
        "pruning.{task}.head_loss_deltas",
        Kind.TRAINED,
        "loss change",
        "per head (layers x heads), the mean dev loss's change when that head alone is disabled",
    ),
    Metric(
        "pruning.{task}.layer_loss_deltas",
        Kind.TRAINED,
        "loss change",
        "per layer, the mean dev loss's change when all its heads are disabled",
    ),
    Metric(
        "pruning.{task}.best_head_delta",
        Kind.TRAINED,
        "GLUE score change",
        "the largest dev score change from disabling one head",
        items=_DEV,
    ),
    Metric(
        "pruning.{task}.worst_head_delta",
        Kind.TRAINED,
        "GLUE score change",
        "the smallest (most negative) dev score change from disabling one head",
        items=_DEV,
    ),
    Metric(
        "pruning.{task}.best_layer_delta",
        Kind.TRAINED,
        "GLUE score change",
        "the largest dev score change from disabling one layer",
        items=_DEV,
    ),
    Metric(
        "pruning.{task}.worst_layer_delta",
        Kind.TRAINED,
        "GLUE score change",
        "the smallest (most negative) dev score change from disabling one layer",
        items=_DEV,
    ),
    Metric(
        "pruning.{task}.worst_head_loss_delta",
        Kind.TRAINED,
        "loss change",
        "the largest increase of the mean dev loss from disabling one head",
    ),
    Metric(
        "pruning.{task}.share_heads_improve",
        Kind.TRAINED,
        "share of heads",
        "share of heads whose removal alone raises the dev score",
    ),
    Metric(
        "pruning.{task}.share_heads_not_hurting",
        Kind.TRAINED,
        "share of heads",
        "share of heads whose removal alone does not lower the dev score",
    ),
    Metric(
        "pruning.{task}.share_heads_lower_loss",
        Kind.TRAINED,
        "share of heads",
        "share of heads whose removal alone lowers the mean dev loss",
    ),
    # per task: importance (Michel et al.)
    Metric(
        "pruning.{task}.importance",
        Kind.TRAINED,
        "importance (L2-normalised per layer)",
        "per head (layers x heads), Michel et al.'s importance E|dL/dgate| on the dev examples, normalised per layer",
    ),
    Metric(
        "pruning.{task}.importance_raw",
        Kind.TRAINED,
        "importance",
        "per head (layers x heads), Michel et al.'s importance E|dL/dgate| on the dev examples, not normalised",
    ),
    Metric(
        "pruning.{task}.spearman_importance_vs_loss",
        Kind.TRAINED,
        "Spearman rho",
        "rank correlation over heads of the raw importance with the dev loss increase when each head alone is disabled",
    ),
    Metric(
        "pruning.{task}.spearman_importance_vs_loss_p",
        Kind.TRAINED,
        "p-value",
        "the p-value of that rank correlation (raw importance vs dev loss increase)",
    ),
    Metric(
        "pruning.{task}.spearman_normalised_importance_vs_loss",
        Kind.TRAINED,
        "Spearman rho",
        "rank correlation over heads of the per-layer normalised importance with the dev loss increase",
    ),
    Metric(
        "pruning.{task}.spearman_importance_vs_drop",
        Kind.TRAINED,
        "Spearman rho",
        "rank correlation over heads of the raw importance with the dev score drop when each head alone is disabled",
    ),
    # per task: pruning curves
    Metric(
        "pruning.{task}.curve_fractions",
        Kind.EXACT,
        "share of heads",
        "the shares of all heads pruned at the pruning curves' steps (set by the step parameter and the model's shape)",
    ),
    Metric(
        "pruning.{task}.importance_curve",
        Kind.TRAINED,
        "GLUE score",
        "the dev score after pruning each step's share of heads, least important first",
        items=_DEV,
    ),
    Metric(
        "pruning.{task}.random_curves",
        Kind.TRAINED,
        "GLUE score",
        "the dev score after pruning each step's share of heads in random orders, one row per seed",
        items=_DEV,
    ),
    Metric(
        "pruning.{task}.prunable_by_importance",
        Kind.TRAINED,
        "share of heads",
        "the largest share of heads pruned by importance before the dev score falls below keep x the original",
    ),
    Metric(
        "pruning.{task}.prunable_random_mean",
        Kind.TRAINED,
        "share of heads",
        "the same prunable share for random pruning orders, averaged over the seeds",
    ),
    # per task: attention before vs after fine-tuning
    Metric(
        "pruning.{task}.attention_cosine",
        Kind.TRAINED,
        "cosine",
        "per head (layers x heads), the mean cosine of its attention maps before and after fine-tuning",
    ),
    Metric(
        "pruning.{task}.attention_cosine_by_layer",
        Kind.TRAINED,
        "cosine",
        "per layer, the mean over its heads of the cosine of the maps before and after fine-tuning",
    ),
    # claims' numbers
    Metric(
        _CLAIMS + ".last_layers_change_most.{task}.least_similar_layer",
        Kind.TRAINED,
        "layer (from 1)",
        "the layer whose attention changed most in fine-tuning (lowest mean cosine before vs after)",
    ),
    Metric(
        _CLAIMS + ".single_heads_dispensable.{task}.share_not_hurting",
        Kind.TRAINED,
        "share of heads",
        "share of heads whose removal alone does not lower the dev score",
    ),
    Metric(
        _CLAIMS + ".single_heads_dispensable.{task}.share_improve",
        Kind.TRAINED,
        "share of heads",
        "share of heads whose removal alone raises the dev score",
    ),
    Metric(
        _CLAIMS + ".layer_ablation_improves.{task}.best_layer",
        Kind.TRAINED,
        "layer (from 1)",
        "the layer whose removal changes the dev score most favourably",
    ),
    Metric(
        _CLAIMS + ".layer_ablation_improves.{task}.best_layer_delta",
        Kind.TRAINED,
        "GLUE score change",
        "the dev score change from disabling that layer",
        items=_DEV,
    ),
    Metric(
        _CLAIMS + ".heads_prunable.{task}.prunable",
        Kind.TRAINED,
        "share of heads",
        "the largest share of heads pruned by importance keeping the dev score at or above keep x the original",
    ),
    Metric(
        _CLAIMS + ".heads_prunable.{task}.prunable_random_mean",
        Kind.TRAINED,
        "share of heads",
        "the same share for random pruning orders, averaged over the seeds",
    ),
    Metric(
        _CLAIMS + ".importance_matches_ablation.{task}.spearman",
        Kind.TRAINED,
        "Spearman rho",
        "rank correlation over heads of raw importance with the dev loss increase when each head alone is disabled",
    ),
    Metric(
        _CLAIMS + ".importance_matches_ablation.{task}.p_value",
        Kind.TRAINED,
        "p-value",
        "the p-value of that rank correlation",
    ),
    Metric(
        _CLAIMS + ".pretrained_beats_random_init.wins",
        Kind.TRAINED,
        "count",
        "tasks where the pre-trained classifier beats the random-init one (of those above the majority class)",
    ),
    Metric(
        _CLAIMS + ".pretrained_beats_random_init.losses",
        Kind.TRAINED,
        "count",
        "tasks where the random-init classifier scores at least as well (of those above the majority class)",
    ),
    Metric(
        _CLAIMS + ".pretrained_beats_random_init.tasks",
        Kind.EXACT,
        "count",
        "tasks compared, pre-trained against random init",
    ),
)
