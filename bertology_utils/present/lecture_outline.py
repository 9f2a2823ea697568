"""The lecture's outline: its topics in the order of a talk, each naming the claims it shows and its figure.

The words are the papers' findings as prose; every number the lecture shows comes from the run
(:mod:`bertology_utils.present.lecture`).
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

__all__ = ["Topic", "LECTURE", "claim_id", "home_notebook"]


@dataclass(frozen=True)
class Topic:
    """One slide of the lecture: a question, the paper's answer, the claims that test it and the figure that shows it.

    ``claims`` are shell-style patterns over claim ids (a claim's key after ``<prefix>.claims.``, e.g.
    ``table1.det`` or ``ablation.sst2.cls.zero``). ``figure`` is ``(notebook stem, figure name pattern)``;
    when several figures match (one per task), the one named by the first claim's task or objective is shown.
    """

    title: str
    paper: str
    lead: str
    claims: tuple[str, ...]
    figure: tuple[str, str]


#: The talk, in order. The words are the papers' findings as prose; every number comes from the run.
LECTURE: tuple[Topic, ...] = (
    Topic(
        "Where do heads look?",
        "Clark et al. 2019",
        "Most heads look at other tokens; a few look at the previous or the next one.",
        ("current_token", "previous_token_heads", "next_token_heads"),
        ("01_patterns", "relative_position_by_layer"),
    ),
    Topic(
        "[CLS], [SEP] and punctuation draw attention",
        "Clark et al. 2019",
        "Much attention goes to [CLS] early, to [SEP] in the middle layers, to punctuation late.",
        ("sep_middle_layers", "cls_early_layers", "punctuation_last_layers", "sep_to_sep"),
        ("01_patterns", "special_tokens_by_layer"),
    ),
    Topic(
        "Broad or focused?",
        "Clark et al. 2019",
        "Early layers spread their attention widely; the last layer's [CLS] is broad too.",
        ("early_layers_broad", "cls_entropy_last_layer"),
        ("01_patterns", "entropy_by_layer"),
    ),
    Topic(
        "Is attention to [SEP] a no-op? Gradients",
        "Clark et al. 2019",
        "Where heads attend most to [SEP], moving that attention hardly changes the loss.",
        ("sep_gradient_small.*", "cls_gradient_small.*", "gradients_shrink.*"),
        ("02_sep_noop", "attention_and_gradient"),
    ),
    Topic(
        "Is attention to [SEP] a no-op? Removing it",
        "Clark et al. 2019",
        "Taking the attention off [CLS] or [SEP] changes the output less than taking it off a word.",
        ("ablation.*",),
        ("02_sep_noop", "ablation_*"),
    ),
    Topic(
        "Heads that follow syntax",
        "Clark et al. 2019",
        "For many dependency relations one head finds the head word better than a fixed offset does.",
        ("table1.*",),
        ("03_syntax_coref", "best_head_vs_baseline"),
    ),
    Topic(
        "A coreference head",
        "Clark et al. 2019",
        "One head links a mention to its antecedent well above a nearest-mention baseline.",
        ("coref_*",),
        ("03_syntax_coref", "coreference_head"),
    ),
    Topic(
        "Whole trees from attention",
        "Clark et al. 2019",
        "A probe reading only attention recovers much of the parse; word vectors add more.",
        ("table3.*",),
        ("04_probes", "uas_by_relation"),
    ),
    Topic(
        "Syntax in the maps or in the vectors?",
        "Hewitt & Manning 2019",
        "A linear map of one layer's hidden states recovers the tree's distances, best in the middle layers.",
        ("structural.*",),
        ("04_probes", "structural_probes"),
    ),
    Topic(
        "Heads cluster",
        "Clark et al. 2019",
        "Heads in one layer behave alike, and heads group by what they do.",
        ("same_layer_close", "behaviour_clusters"),
        ("05_clustering", "mds_behaviours"),
    ),
    Topic(
        "Five pattern types",
        "Kovaleva et al. 2019",
        "Attention maps fall into five types; the mixed (heterogeneous) type is a minority.",
        ("heterogeneous_share", "pattern_types_recognisable"),
        ("01_patterns", "pattern_types_by_layer"),
    ),
    Topic(
        "[CLS] early, [SEP] late, on every task",
        "Kovaleva et al. 2019",
        "Fine-tuned models attend to [CLS] in early layers and to [SEP] in later ones.",
        ("cls_early_sep_late", "sst2_largest_sep"),
        ("07_head_roles", "special_token_shares_by_task"),
    ),
    Topic(
        "What fine-tuning changes",
        "Kovaleva et al. 2019",
        "Fine-tuning changes the last layers' attention most.",
        ("last_layers_change_most.*",),
        ("06_pruning", "attention_change_*"),
    ),
    Topic(
        "Disabling heads and layers",
        "Kovaleva et al. 2019",
        "Turning off one head, or a whole layer, often costs nothing and sometimes helps.",
        ("single_heads_dispensable.*", "layer_ablation_improves.*"),
        ("06_pruning", "head_ablation_*"),
    ),
    Topic(
        "Does pre-training matter?",
        "Kovaleva et al. 2019",
        "The pre-trained model fine-tunes better than the same architecture from random weights.",
        ("pretrained_beats_random_init",),
        ("06_pruning", "pretrained_vs_random_init"),
    ),
    Topic(
        "Are sixteen heads better than one?",
        "Michel et al. 2019",
        "Most heads can be pruned with little loss, and importance scores choose them better than chance.",
        ("heads_prunable.*",),
        ("06_pruning", "pruning_curve_*"),
    ),
    Topic(
        "Importance scores",
        "Michel et al. 2019",
        "A head's importance (a first-order estimate) ranks heads as removing each one does.",
        ("importance_matches_ablation.*",),
        ("06_pruning", "importance_*"),
    ),
    Topic(
        "Heads have roles",
        "Voita et al. 2019",
        "Some heads are positional, some syntactic, some point at rare words.",
        ("roles_found",),
        ("07_head_roles", "head_roles"),
    ),
    Topic(
        "The heads that matter",
        "Voita et al. 2019",
        "The most relevant heads are confident ones, and the specialised heads are among them.",
        ("relevance_tracks_confidence.*", "specialised_heads_relevant.*"),
        ("07_head_roles", "relevance_*"),
    ),
    Topic(
        "Pruning with L0 gates",
        "Voita et al. 2019",
        "Gates trained with an L0 penalty close most heads; the specialised ones are the last to go.",
        ("l0_prunes_most_heads.*", "specialised_heads_survive.*"),
        ("07_head_roles", "l0_pruning_*"),
    ),
    Topic(
        "How many dimensions does a head need?",
        "Vig 2019",
        "Broad and [SEP] heads decide with few query-key dimensions; next-word heads need many.",
        ("qk_dimensions_by_pattern",),
        ("07_head_roles", "query_key_dimensions"),
    ),
    Topic(
        "Attention is not the whole story: norms",
        "Kobayashi et al. 2020",
        "Weighting attention by the norm of what is moved discounts [CLS], [SEP] and punctuation.",
        ("norm_discounts_special_tokens",),
        ("08_context_mixing", "special_token_shares"),
    ),
    Topic(
        "Which map explains the prediction?",
        "Abnar & Zuidema 2020; Mohebbi et al. 2023; Modarressi et al. 2023",
        "Rollout and flow agree with attribution methods better than raw attention; value zeroing and DecompX, "
        "better than the other maps.",
        ("rollout_flow_beat_raw.*", "value_zeroing_best.*", "decompx_best.*"),
        ("08_context_mixing", "faithfulness_by_layer"),
    ),
    Topic(
        "Sinks: heads that park on small vectors",
        "Kobayashi et al. 2020; Bondarenko et al. 2023",
        "Heads park on tokens that send little, so they barely change the residual stream: a no-op.",
        ("kobayashi.*", "bondarenko.sinks_do_little", "no_op.*"),
        ("10_sinks", "sink_heads"),
    ),
    Topic(
        "Massive activations and the outlier token",
        "Sun et al. 2024; Bondarenko et al. 2023",
        "A few activations, many times the median, sit on the first and delimiter tokens; heads park there.",
        ("sun.*", "bondarenko.sinks_on_outlier_token", "bondarenko.clipping_lowers_outliers"),
        ("10_sinks", "outliers_by_state"),
    ),
    Topic(
        "Every head on one page",
        "this project's atlas",
        "Each head's numbers from every notebook side by side: open atlas.html beside the run.",
        (),
        ("09_atlas", "atlas_grid"),
    ),
)


def claim_id(key: str) -> str:
    """A claim's id: its recorded key after ``<prefix>.claims.`` (``table1.det``), or the key when it has none."""
    return key.split(".claims.", 1)[1] if ".claims." in key else key


def home_notebook(claim: str) -> str | None:
    """The notebook of the topic that names the claim id ``claim`` (None: no topic does)."""
    return next((t.figure[0] for t in LECTURE if any(fnmatchcase(claim, p) for p in t.claims)), None)
