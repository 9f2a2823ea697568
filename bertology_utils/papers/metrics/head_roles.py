"""Notebook 07 (head roles): Voita et al.'s roles, relevance and L0 pruning, Kovaleva's Fig. 5, Vig's q·k dimensions."""

from bertology_utils.papers.metrics.base import Kind, Metric

_CLAIMS = "head_roles.claims"
_SHARES = _CLAIMS + ".cls_early_sep_late"
_QK = _CLAIMS + ".qk_dimensions_by_pattern"

METRICS = (
    # the run
    Metric("head_roles.model", Kind.EXACT, "model name", "the pre-trained model whose heads are studied"),
    Metric("head_roles.num_layers", Kind.EXACT, "count", "the model's layers"),
    Metric("head_roles.num_heads", Kind.EXACT, "count", "attention heads per layer"),
    Metric("head_roles.treebank", Kind.EXACT, "corpus name", "the treebank (and its slice) the roles are found on"),
    Metric(
        "head_roles.frequency_corpus",
        Kind.EXACT,
        "corpus name",
        "the corpus the word frequencies of the rare-word test are counted on",
    ),
    Metric(
        "head_roles.tasks",
        Kind.EXACT,
        "task names",
        "the tasks whose classifier was tuned and studied for relevance and L0 pruning",
    ),
    Metric("head_roles.seconds_total", Kind.TIMING, "seconds", "wall-clock time of the timed stages in this run"),
    Metric("head_roles.seconds", Kind.TIMING, "seconds per stage", "wall-clock time of each (task: stage) in this run"),
    # roles of the pre-trained model on the treebank
    Metric(
        "head_roles.summary",
        Kind.MAXIMUM,
        "counts of heads",
        "heads in all, per role (None when untested), per syntactic relation, specialised and with several roles",
    ),
    Metric(
        "head_roles.roles.{role}",
        Kind.MAXIMUM,
        "yes/no per head",
        "per head (layers x heads), whether it passes Voita et al.'s test for the role",
    ),
    Metric(
        "head_roles.specialised",
        Kind.MAXIMUM,
        "yes/no per head",
        "per head (layers x heads), whether it has at least one role (positional, syntactic or rare-word)",
    ),
    Metric(
        "head_roles.positional_offset",
        Kind.MAXIMUM,
        "words",
        "per head (layers x heads), the relative position its maximum most often points at (-1: previous word)",
    ),
    Metric(
        "head_roles.positional_share",
        Kind.MAXIMUM,
        "share of rows",
        "per head (layers x heads), how often its maximum points at its modal offset",
    ),
    Metric(
        "head_roles.rare_rate",
        Kind.MAXIMUM,
        "share of rows",
        "per head (layers x heads), how often its maximum is on the sentence's least frequent word",
    ),
    Metric(
        "head_roles.syntactic_relations",
        Kind.MAXIMUM,
        "relations",
        "per head (layers x heads), the dependency relations it is syntactic for, joined by +",
    ),
    Metric(
        "head_roles.confidence",
        Kind.FLOAT,
        "weight (0-1)",
        "per head (layers x heads), Voita et al.'s confidence on the treebank: mean of each word row's largest weight",
    ),
    Metric(
        "head_roles.qk_dimensions_mean",
        Kind.MAXIMUM,
        "fraction of head size",
        "per head (layers x heads), the mean fraction of query-key dimensions needed for a share of the winning margin",
    ),
    # Kovaleva et al.'s Fig. 5, per task
    Metric(
        "head_roles.fig5.{task}",
        Kind.TRAINED,
        "share of attention",
        "per layer, the fine-tuned classifier's share of attention on [CLS], [SEP] and punctuation on the dev examples",
    ),
    Metric(
        "head_roles.fig5_pretrained.{task}",
        Kind.FLOAT,
        "share of attention",
        "per layer, the pre-trained model's share of attention on [CLS], [SEP] and punctuation on the same examples",
    ),
    # per task: the classifier, relevance and L0 gates
    Metric("head_roles.{task}.dev_score", Kind.TRAINED, "GLUE score", "the fine-tuned classifier's dev score"),
    Metric(
        "head_roles.{task}.majority_class_score",
        Kind.FLOAT,
        "GLUE score",
        "the dev score of always predicting the most frequent class (nan for a regression task)",
    ),
    Metric(
        "head_roles.{task}.relevance",
        Kind.TRAINED,
        "share of its layer",
        "per head (layers x heads), mean |attribution| of its gate to the classifier's logit (integrated gradients), "
        "divided by its layer's sum",
    ),
    Metric(
        "head_roles.{task}.confidence",
        Kind.TRAINED,
        "weight (0-1)",
        "per head (layers x heads), the fine-tuned classifier's confidence on the dev examples",
    ),
    Metric(
        "head_roles.{task}.specialised",
        Kind.TRAINED,
        "yes/no per head",
        "per head (layers x heads), whether the fine-tuned classifier's head has a role on the treebank",
    ),
    Metric(
        "head_roles.{task}.ig_gap_max",
        Kind.TRAINED,
        "share of the output change",
        "the largest relative completeness gap of the integrated gradients over the dev examples",
    ),
    Metric(
        "head_roles.{task}.ig_panels_mean",
        Kind.TRAINED,
        "panels",
        "the mean number of panels the adaptive integrated-gradients rule cut each example's integral into",
    ),
    Metric(
        "head_roles.{task}.gate_gradient_gap_mean",
        Kind.TRAINED,
        "share of the output change",
        "the mean relative completeness gap of gate x gradient over the dev examples",
    ),
    Metric(
        "head_roles.{task}.l0_lambdas",
        Kind.EXACT,
        "lambda",
        "the L0 penalty weights, one gate training each (a parameter)",
    ),
    Metric(
        "head_roles.{task}.l0_kept", Kind.TRAINED, "count", "per lambda, the heads whose trained L0 gate stays open"
    ),
    Metric(
        "head_roles.{task}.l0_masks",
        Kind.TRAINED,
        "yes/no per head",
        "per lambda (lambdas x layers x heads), whether the head's trained L0 gate stays open",
    ),
    Metric(
        "head_roles.{task}.l0_scores",
        Kind.TRAINED,
        "GLUE score",
        "per lambda, the dev score with its keep mask as binary gates",
    ),
    Metric(
        "head_roles.{task}.l0_base",
        Kind.TRAINED,
        "GLUE score",
        "the dev score with every gate open, on the examples the L0 masks are scored on",
    ),
    Metric(
        "head_roles.{task}.l0_degenerate",
        Kind.TRAINED,
        "text",
        "why the L0 sweep says nothing about pruning order (every lambda kept all heads or none), empty when it does",
    ),
    Metric(
        "head_roles.{task}.importance_order_at_l0_counts",
        Kind.TRAINED,
        "GLUE score",
        "per lambda, the dev score pruning by importance to the number of heads its L0 gates kept",
    ),
    Metric(
        "head_roles.{task}.random_order_at_l0_counts",
        Kind.TRAINED,
        "GLUE score",
        "per lambda, the dev score pruning in random orders (mean over seeds) to the number of heads its L0 gates kept",
    ),
    Metric(
        "head_roles.{task}.seconds",
        Kind.TIMING,
        "seconds per stage",
        "wall-clock time of each of the task's stages",
    ),
    # claims' numbers: Voita et al.
    Metric(
        _CLAIMS + ".roles_found.{role}_heads",
        Kind.MAXIMUM,
        "count",
        "heads of the pre-trained model that pass the role's test",
    ),
    Metric(
        _CLAIMS + ".relevance_tracks_confidence.{task}.spearman",
        Kind.TRAINED,
        "Spearman rho",
        "rank correlation over heads of the classifier's relevance with its confidence",
    ),
    Metric(
        _CLAIMS + ".relevance_tracks_confidence.{task}.p_value",
        Kind.TRAINED,
        "p-value",
        "the p-value of that rank correlation",
    ),
    Metric(
        _CLAIMS + ".relevance_tracks_confidence.{task}.heads",
        Kind.EXACT,
        "count",
        "heads with a finite relevance and confidence, over which the correlation runs",
    ),
    Metric(
        _CLAIMS + ".specialised_heads_relevant.{task}.median_specialised",
        Kind.TRAINED,
        "share of its layer",
        "the median relevance of the classifier's specialised heads",
    ),
    Metric(
        _CLAIMS + ".specialised_heads_relevant.{task}.median_other",
        Kind.TRAINED,
        "share of its layer",
        "the median relevance of the classifier's other heads",
    ),
    Metric(
        _CLAIMS + ".specialised_heads_relevant.{task}.p_value",
        Kind.TRAINED,
        "p-value",
        "one-sided Mann-Whitney p-value of specialised heads being more relevant than the others",
    ),
    Metric(
        _CLAIMS + ".specialised_heads_relevant.{task}.specialised",
        Kind.TRAINED,
        "count",
        "the classifier's specialised heads with a finite relevance",
    ),
    Metric(
        _CLAIMS + ".l0_prunes_most_heads.{task}.prunable",
        Kind.TRAINED,
        "share of heads",
        "the largest share of heads L0 gates pruned at a lambda keeping the dev score at or above keep x the base",
    ),
    Metric(
        _CLAIMS + ".l0_prunes_most_heads.{task}.base",
        Kind.TRAINED,
        "GLUE score",
        "the dev score with every gate open",
    ),
    Metric(
        _CLAIMS + ".specialised_heads_survive.{task}.overall_share",
        Kind.TRAINED,
        "share of heads",
        "the share of the classifier's heads that are specialised",
    ),
    Metric(
        _CLAIMS + ".specialised_heads_survive.{task}.kept_specialised",
        Kind.TRAINED,
        "count",
        "specialised heads kept by the L0 gates, summed over the informative lambdas",
    ),
    Metric(
        _CLAIMS + ".specialised_heads_survive.{task}.expected_at_random",
        Kind.TRAINED,
        "count",
        "the same sum expected if the specialised heads were drawn at random (permutation mean)",
    ),
    Metric(
        _CLAIMS + ".specialised_heads_survive.{task}.p_value",
        Kind.TRAINED,
        "p-value",
        "one-sided permutation p-value of specialised heads being kept more often than random heads",
    ),
    Metric(
        _CLAIMS + ".specialised_heads_survive.{task}.informative_lambdas",
        Kind.TRAINED,
        "count",
        "lambdas whose gates kept some but not all heads",
    ),
    # claims' numbers: Kovaleva et al.'s Fig. 5 (task parts in lower-case letters and digits: "sst2")
    Metric(
        _SHARES + ".tasks",
        Kind.TRAINED,
        "count",
        "tasks whose per-layer shares were compared: those whose classifier beats the majority class",
    ),
    Metric(_SHARES + ".layers", Kind.EXACT, "count", "layers cut in thirds (the fewest of the tasks' models)"),
    Metric(
        _SHARES + ".{task}.{share}",
        Kind.TRAINED,
        "share of attention",
        "the fine-tuned classifier's mean share of attention on [CLS], [SEP] or punctuation over the first or last "
        "third of the layers",
    ),
    Metric(
        _SHARES + ".{task}.pretrained_{share}",
        Kind.FLOAT,
        "share of attention",
        "the pre-trained model's mean share of attention on [CLS] or [SEP] over the first or last third of the layers, "
        "on the task's examples",
    ),
    Metric(
        _SHARES + ".tasks_both",
        Kind.TRAINED,
        "count",
        "tasks whose classifier attends more to [CLS] early and more to [SEP] late",
    ),
    Metric(
        _SHARES + ".tasks_cls_early",
        Kind.TRAINED,
        "count",
        "tasks whose classifier attends more to [CLS] in the first third of the layers than in the last",
    ),
    Metric(
        _SHARES + ".tasks_sep_late",
        Kind.TRAINED,
        "count",
        "tasks whose classifier attends more to [SEP] in the last third of the layers than in the first",
    ),
    Metric(
        _CLAIMS + ".sst2_largest_sep.sep_mean.{task}",
        Kind.TRAINED,
        "share of attention",
        "the fine-tuned classifier's share of attention on [SEP], averaged over layers",
    ),
    Metric(
        _CLAIMS + ".sst2_largest_sep.pretrained_sep_mean.{task}",
        Kind.FLOAT,
        "share of attention",
        "the pre-trained model's share of attention on [SEP] on the task's examples, averaged over layers",
    ),
    Metric(
        _CLAIMS + ".sst2_largest_sep.sst2_rank",
        Kind.TRAINED,
        "rank (from 1)",
        "SST-2's rank among the tasks by the classifiers' mean [SEP] share (1: largest)",
    ),
    Metric(
        _CLAIMS + ".sst2_largest_sep.tasks",
        Kind.TRAINED,
        "count",
        "tasks whose mean [SEP] shares were compared: those whose classifier beats the majority class",
    ),
    # claims' numbers: Vig's query-key dimensions
    Metric(
        _QK + ".{group}_heads",
        Kind.MAXIMUM,
        "count",
        "heads of the group ([SEP]/broad or next-word, by share thresholds) with a finite dimension count, in one only",
    ),
    Metric(
        _QK + ".heads_in_both",
        Kind.MAXIMUM,
        "count",
        "heads in both groups ([SEP]/broad and next-word), left out of the test",
    ),
    Metric(
        _QK + ".median_dims_{group}",
        Kind.MAXIMUM,
        "fraction of head size",
        "the median fraction of query-key dimensions the group's heads need",
    ),
    Metric(
        _QK + ".u_statistic",
        Kind.MAXIMUM,
        "Mann-Whitney U",
        "one-sided Mann-Whitney U of next-word heads needing more dimensions than [SEP]/broad heads",
    ),
    Metric(_QK + ".p_value", Kind.MAXIMUM, "p-value", "the p-value of that one-sided Mann-Whitney test"),
)
