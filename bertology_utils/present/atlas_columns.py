"""The atlas's columns: which declared metric each column reads, and what the atlas adds to it.

Every metric key a notebook records is declared once in :mod:`bertology_utils.papers.metrics`
(a template such as ``pruning.{task}.importance``, its kind, unit and meaning). A
:class:`ColumnSpec` names the declaration its column reads and adds what is the atlas's own: the
column's name and label, the paper and its value, the claims the column feeds; the unit (and the
meaning, unless the column states a fuller one) is the declaration's. :data:`COLUMNS` is the
registry :mod:`bertology_utils.present.atlas` joins runs with and the documentation lists.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property

from bertology_utils.analyses.patterns import STATISTICS, VIG_PATTERNS
from bertology_utils.core.errors import BertologyError
from bertology_utils.papers.metrics import REGISTRY, Metric

__all__ = ["ColumnSpec", "COLUMNS"]


@dataclass(frozen=True)
class ColumnSpec:
    """How a recorded metric key becomes an atlas column.

    ``metric`` is the template of the declaration the column reads (a ``Metric.key``): a recorded key
    feeds the column when that declaration is the key's own, the most specific match (so
    ``syntax.head.best_relation`` never feeds ``syntax.head.{relation}``'s column), and its
    placeholders' values agree with ``values``. ``values`` picks one value of a placeholder (one column
    per statistic of ``patterns.head.{statistic}``), or gives one the declaration's key fixes
    (``sep.head.sst2.gradient_norm``: objective ``sst2``). The placeholders' values and ``values`` fill
    the ``{}`` fields of ``name``, ``label``, ``meaning`` and the claim keys in ``claims`` (claims
    recorded under those keys, or under keys starting with them and a dot, read the column). ``along``
    names a sibling metric (a template like ``name``) whose values label the leading axis of a
    ``(n, layers, heads)`` metric: one column per value, filled in as ``{along}``.

    ``per_state`` marks a metric of the hidden states rather than the heads: a list of ``layers + 1``
    values (the embeddings first), or one key per state whose ``{layer}`` field counts from 0 for the
    embeddings. Every head of a layer shows the state its layer writes (its output), so such a column is
    constant along each layer; the embeddings have no heads and are left out.
    """

    metric: str
    name: str
    label: str
    notebook: str
    paper: str
    meaning: str | None = None  #: None: the declaration's
    paper_value: str | None = None
    claims: tuple[str, ...] = ()
    along: str | None = None
    values: Mapping[str, str] = field(default_factory=dict, hash=False)
    per_state: bool = False

    @cached_property
    def declaration(self) -> Metric:
        """The declaration the column reads; a BertologyError when ``metric`` is no declared template."""
        found = REGISTRY.template(self.metric)
        if found is None:
            raise BertologyError(
                f"atlas column {self.name!r} reads {self.metric!r}, which no Metric in papers/metrics/ declares"
            )
        return found

    @property
    def unit(self) -> str:
        """The declaration's unit."""
        return self.declaration.unit

    @property
    def description(self) -> str:
        """``meaning``, or the declaration's without its opening "per head (layers x heads), "."""
        return self.meaning or self.declaration.meaning.removeprefix(_PER_HEAD)

    @property
    def fields(self) -> set[str]:
        """The names the templates may use: the declaration's placeholders and ``values``."""
        return set(self.declaration.pattern.groupindex) | set(self.values)

    def metric_of(self, key: str) -> str:
        """The metric a column fed by ``key`` shows: ``key``, or for one key per state the keys' template."""
        groups = self.match(key)
        if not self.per_state or groups is None or "layer" not in groups:
            return key
        return self.metric.format_map({**groups, "layer": "{layer}"})

    def match(self, key: str) -> dict[str, str] | None:
        """The values of the column's fields when ``key`` feeds it, else None."""
        declared = REGISTRY.find(key)
        if declared is not self.declaration:
            return None
        found = declared.match(key) or {}
        if any(found.get(name, value) != value for name, value in self.values.items()):
            return None
        return {**found, **self.values}


def _also(spec: ColumnSpec, metric: str, **values: str) -> tuple[ColumnSpec, ColumnSpec]:
    """``spec``, and its twin: the same column for another declaration, whose key fixes ``values``."""
    return spec, replace(spec, metric=metric, values=values)


_PER_HEAD = "per head (layers x heads), "
#: Clark et al.'s surface statistics (``analyses.patterns.STATISTICS``) the atlas shows: what the head
#: attends to, the paper's value and the claims reading the column
_SURFACE: dict[str, tuple[str, str | None, tuple[str, ...]]] = {
    "cls": ("[CLS]", "high in early layers", ("patterns.claims.cls_early_layers", "tour.claims.cls_early_layers")),
    "sep": (
        "[SEP]",
        "> 50% in layers 6-10 (BERT-base)",
        ("patterns.claims.sep_middle_layers", "tour.claims.sep_middle_layers", "sep.claims.sep_middle_layers"),
    ),
    "punct": ("punctuation", None, ()),
    "period": ('"."', "high in the last layers", ("patterns.claims.punctuation_last_layers",)),
    "comma": ('","', "high in the last layers", ("patterns.claims.punctuation_last_layers",)),
    "self": ("itself", "most heads put little attention on the current token", ("patterns.claims.current_token",)),
    "previous": (
        "the previous token",
        "some heads put > 50% on the previous token, in early layers",
        ("patterns.claims.previous_token_heads",),
    ),
    "next": (
        "the next token",
        "some heads put > 50% on the next token, in early layers",
        ("patterns.claims.next_token_heads",),
    ),
    "other": ("ordinary tokens", None, ()),
    "sep_to_sep": ("[SEP] from [SEP]", "[SEP] attends to [SEP]", ("patterns.claims.sep_to_sep",)),
}
_CLARK = "Clark et al. 2019"
_KOVALEVA = "Kovaleva et al. 2019"
_MICHEL = "Michel et al. 2019"
_VOITA = "Voita et al. 2019"
#: both read the full-rank distance probe's test UUAS per layer
_STRUCTURAL_CLAIMS = ("probes.claims.structural.peak_in_middle", "probes.claims.structural.vectors_beat_maps")


COLUMNS: tuple[ColumnSpec, ...] = (
    *(
        ColumnSpec(
            "patterns.head.{statistic}",
            f"to_{stat}",
            f"attention to {target}",
            "01_patterns",
            _CLARK,
            f"{STATISTICS[stat]}; mean over the rows of the treebank pairs, token level",
            paper_value,
            claims,
            values={"statistic": stat},
        )
        for stat, (target, paper_value, claims) in _SURFACE.items()
        if stat in STATISTICS
    ),
    ColumnSpec(
        "patterns.head.entropy",
        "entropy",
        "entropy",
        "01_patterns",
        _CLARK,
        f"{STATISTICS['entropy']}; mean over the treebank pairs' rows, token level",
        "early layers attend broadly (near bag-of-words)",
        ("patterns.claims.early_layers_broad", "tour.claims.early_layers_broad"),
    ),
    ColumnSpec(
        "patterns.head.cls_entropy",
        "cls_entropy",
        "[CLS] entropy",
        "01_patterns",
        _CLARK,
        f"{STATISTICS['cls_entropy']}; mean over the treebank pairs, token level",
        "last layer: about 3.89 nats (BERT-base)",
        ("patterns.claims.cls_entropy_last_layer",),
    ),
    *(
        ColumnSpec(
            # bag of words has a declaration (and a unit) of its own
            "patterns.head.vig.bag_of_words" if pattern == "bag_of_words" else "patterns.head.vig.{pattern}",
            f"vig.{pattern}",
            f"Vig: {pattern.replace('_', ' ')}",
            "01_patterns",
            "Vig 2019",
            f"{meaning}; pooled over every data set of notebook 01",
            values={"pattern": pattern},
        )
        for pattern, meaning in VIG_PATTERNS.items()
    ),
    ColumnSpec(
        "patterns.head.type",
        "pattern_type",
        "pattern type",
        "01_patterns",
        _KOVALEVA,
        "Kovaleva et al.'s pattern type the head's maps take most often (every data set pooled)",
        "heterogeneous maps are 32% (MRPC) to 61% (QQP) of all maps",
        ("patterns.claims.heterogeneous_share", "patterns.claims.pattern_types_recognisable"),
    ),
    ColumnSpec(
        "patterns.head.type_share.{type}",
        "type_share.{type}",
        "share of {type} maps",
        "01_patterns",
        _KOVALEVA,
        "the fraction of the head's classified maps of Kovaleva et al.'s type {type}",
    ),
    # twins: the fine-tuned SST-2 classifier's metrics have declarations of their own (another kind)
    *_also(
        ColumnSpec(
            "sep.head.{objective}.normalised_gradient_{kind}",
            "gradient.{kind}.{objective}",
            "gradient on {kind} ({objective})",
            "02_sep_noop",
            _CLARK,
            "the mean |d loss / d attention weight| of the head's weights on {kind} under the {objective} objective, "
            "over the mean |gradient| of all the model's weights (1: average)",
            "small where attention to [SEP] is large: attending to [SEP] is a no-op",
            ("sep.claims.sep_gradient_small.{objective}", "sep.claims.cls_gradient_small.{objective}"),
        ),
        "sep.head.sst2.normalised_gradient_{kind}",
        objective="sst2",
    ),
    *_also(
        ColumnSpec(
            "sep.head.{objective}.attention_to_{kind}",
            "attention_to.{kind}.{objective}",
            "attention to {kind} ({objective} inputs)",
            "02_sep_noop",
            _CLARK,
            "the head's mean share of attention on {kind} over the inputs of the {objective} objective",
        ),
        "sep.head.sst2.attention_to_{kind}",
        objective="sst2",
    ),
    *_also(
        ColumnSpec(
            "sep.head.{objective}.gradient_norm",
            "gradient_norm.{objective}",
            "attention gradient norm ({objective})",
            "02_sep_noop",
            _CLARK,
            "the mean Frobenius norm of d loss / d attention over the head's map, {objective} objective",
            "gradients shrink with depth",
            ("sep.claims.gradients_shrink.{objective}",),
        ),
        "sep.head.sst2.gradient_norm",
        objective="sst2",
    ),
    ColumnSpec(
        "syntax.head.best_relation",
        "syntax.best_relation",
        "best dependency relation",
        "03_syntax_coref",
        _CLARK,
        "the dependency relation (of the paper's Table 1) whose head word this head finds most often",
        "some heads find a relation's head word far better than a fixed offset",
        ("syntax.claims.table1",),
    ),
    ColumnSpec(
        "syntax.head.best_relation_accuracy",
        "syntax.best_relation_accuracy",
        "best relation: accuracy",
        "03_syntax_coref",
        _CLARK,
        "how often the head's most-attended word is the gold head (or dependent) of its best relation",
        claims=("syntax.claims.table1",),
    ),
    ColumnSpec(
        "syntax.head.{relation}",
        "syntax.{relation}",
        "syntax: {relation}",
        "03_syntax_coref",
        _CLARK,
        "how often the head's most-attended word is the gold head of a {relation} dependent (or the "
        "dependent, the better direction)",
        "Table 1: the best head per relation",
        ("syntax.claims.table1",),
    ),
    ColumnSpec(
        "coref.head.accuracy",
        "coref.accuracy",
        "coreference accuracy",
        "03_syntax_coref",
        _CLARK,
        "how often a pronoun's most-attended candidate is its antecedent (GAP)",
        "the best head: 65% antecedent selection",
        ("coref.claims",),
    ),
    *_also(  # one declaration per axis
        ColumnSpec(
            "clustering.head.x",
            "mds.{axis}",
            "MDS {axis}",
            "05_clustering",
            _CLARK,
            "the head's {axis} coordinate in the 2-D multidimensional scaling of the heads' Jensen-Shannon distances",
            claims=("clustering.claims",),
            values={"axis": "x"},
        ),
        "clustering.head.y",
        axis="y",
    ),
    ColumnSpec(
        "clustering.head.dominant",
        "behaviour",
        "dominant behaviour",
        "05_clustering",
        _CLARK,
        paper_value="heads cluster by behaviour",
        claims=("clustering.claims.behaviour_clusters",),
    ),
    ColumnSpec(
        "pruning.{task}.importance",
        "importance.{task}",
        "importance ({task})",
        "06_pruning",
        _MICHEL,
        "Michel et al.'s importance on {task}: the mean |dL/dgate| of the head, L2-normalised per layer",
        "a few heads carry most of the importance; many can be pruned",
        ("pruning.claims.heads_prunable.{task}", "pruning.claims.importance_matches_ablation.{task}"),
    ),
    ColumnSpec(
        "pruning.{task}.importance_raw",
        "importance_raw.{task}",
        "importance, raw ({task})",
        "06_pruning",
        _MICHEL,
        "Michel et al.'s importance on {task} before normalising per layer",
        claims=("pruning.claims.importance_matches_ablation.{task}",),
    ),
    ColumnSpec(
        "pruning.{task}.head_deltas",
        "disabled_change.{task}",
        "disabled: score change ({task})",
        "06_pruning",
        _KOVALEVA,
        "the {task} dev score with this head alone disabled minus the full model's (negative: worse)",
        "disabling one head often does not hurt, sometimes improves",
        ("pruning.claims.single_heads_dispensable.{task}",),
    ),
    ColumnSpec(
        "pruning.{task}.head_loss_deltas",
        "disabled_loss_change.{task}",
        "disabled: loss change ({task})",
        "06_pruning",
        _MICHEL,
        "the mean {task} dev loss with this head alone disabled minus the full model's (positive: worse)",
        claims=("pruning.claims.importance_matches_ablation.{task}",),
    ),
    ColumnSpec(
        "pruning.{task}.attention_cosine",
        "finetune_cosine.{task}",
        "fine-tuning: map cosine ({task})",
        "06_pruning",
        _KOVALEVA,
        "cosine similarity of the head's attention before and after fine-tuning on {task} (1: unchanged)",
        "the last two layers change most",
        ("pruning.claims.last_layers_change_most.{task}",),
    ),
    ColumnSpec(
        "head_roles.confidence",
        "confidence",
        "confidence",
        "07_head_roles",
        _VOITA,
        paper_value="the most relevant heads are the most confident",
    ),
    ColumnSpec(
        "head_roles.{task}.confidence",
        "confidence.{task}",
        "confidence ({task})",
        "07_head_roles",
        _VOITA,
        "Voita et al.'s confidence on {task}'s dev examples",
        "the most relevant heads are the most confident",
        ("head_roles.claims.relevance_tracks_confidence.{task}",),
    ),
    ColumnSpec(
        "head_roles.{task}.relevance",
        "relevance.{task}",
        "relevance ({task})",
        "07_head_roles",
        _VOITA,
        "the head's mean |attribution| to the {task} classifier's logit (integrated gradients over head gates), "
        "divided by its layer's sum",
        "specialised heads are among the most relevant",
        (
            "head_roles.claims.relevance_tracks_confidence.{task}",
            "head_roles.claims.specialised_heads_relevant.{task}",
        ),
    ),
    ColumnSpec(
        "head_roles.specialised",
        "specialised",
        "specialised",
        "07_head_roles",
        _VOITA,
        "the head has a positional, syntactic or rare-word role (Voita et al.'s tests, on the treebank)",
        claims=("head_roles.claims.roles_found",),
    ),
    ColumnSpec(
        "head_roles.{task}.specialised",
        "specialised.{task}",
        "specialised ({task})",
        "07_head_roles",
        _VOITA,
        "the head has a positional, syntactic or rare-word role on {task}'s examples",
        claims=(
            "head_roles.claims.specialised_heads_relevant.{task}",
            "head_roles.claims.specialised_heads_survive.{task}",
        ),
    ),
    ColumnSpec(
        "head_roles.roles.{role}",
        "role.{role}",
        "role: {role}",
        "07_head_roles",
        _VOITA,
        "the head passes Voita et al.'s {role} test",
        "positional, syntactic and rare-word heads exist",
        ("head_roles.claims.roles_found",),
    ),
    ColumnSpec("head_roles.syntactic_relations", "role.syntactic_relations", "syntactic for", "07_head_roles", _VOITA),
    ColumnSpec("head_roles.positional_offset", "positional_offset", "positional offset", "07_head_roles", _VOITA),
    ColumnSpec(
        "head_roles.positional_share",
        "positional_share",
        "positional share",
        "07_head_roles",
        _VOITA,
        paper_value="positional heads: > 90%",
    ),
    ColumnSpec("head_roles.rare_rate", "rare_rate", "rare-word rate", "07_head_roles", _VOITA),
    ColumnSpec(
        "head_roles.qk_dimensions_mean",
        "qk_dimensions",
        "query-key dimensions",
        "07_head_roles",
        "Vig 2019",
        paper_value="heads on [SEP] or spread attention need few dimensions",
        claims=("head_roles.claims.qk_dimensions_by_pattern",),
    ),
    ColumnSpec(
        "head_roles.{task}.l0_masks",
        "l0_kept.{task}.lambda={along}",
        "L0: kept on {task} at lambda {along}",
        "07_head_roles",
        _VOITA,
        "the head's L0 gate stays open after training on {task} with penalty lambda = {along}",
        "most heads can be pruned; specialised heads are the last pruned",
        ("head_roles.claims.l0_prunes_most_heads.{task}", "head_roles.claims.specialised_heads_survive.{task}"),
        along="head_roles.{task}.l0_lambdas",
    ),
    ColumnSpec(
        "mixing.head.{kind}.{weighting}",
        "mixing.{kind}.{weighting}",
        "{kind} share, {weighting}",
        "08_context_mixing",
        "Kobayashi et al. 2020",
        "the head's share of attention on {kind}, weighted by attention alone (raw) or by |alpha f(x)| (norm)",
        "norm weighting gives special tokens far less than raw weights",
        ("mixing.claims.norm_discounts_special_tokens",),
    ),
    ColumnSpec(
        "sinks.head.sink_mass",
        "sinks.mass",
        "attention on sinks",
        "10_sinks",
        "Bondarenko et al. 2023",
        paper_value="no-op heads put their mass on delimiter tokens",
        claims=("sinks.claims.bondarenko.sinks_do_little", "sinks.claims.no_op.removal_matters_less"),
    ),
    ColumnSpec(
        "sinks.head.value_ratio",
        "sinks.value_ratio",
        "sinks' ||f(x)|| vs others'",
        "10_sinks",
        "Kobayashi et al. 2020",
        paper_value="the tokens heads park on send small vectors",
        claims=("sinks.claims.kobayashi.small_sink_vectors", "sinks.claims.kobayashi.mass_against_norm"),
    ),
    ColumnSpec(
        "sinks.head.update",
        "sinks.update",
        "norm of the head's output",
        "10_sinks",
        "Bondarenko et al. 2023",
        paper_value="a no-op head leaves the residual stream nearly unchanged",
        claims=("sinks.claims.bondarenko.sinks_do_little",),
    ),
    ColumnSpec(
        "sinks.head.peak_mass",
        "sinks.peak_mass",
        "attention on the outlier token",
        "10_sinks",
        "Sun et al. 2024",
        paper_value="attention concentrates on the tokens with massive activations",
        claims=("sinks.claims.bondarenko.sinks_on_outlier_token",),
    ),
    ColumnSpec(
        "sinks.head.is_sink",
        "sinks.is_sink",
        "sink head",
        "10_sinks",
        "Clark et al. 2019",
        paper_value="heads that park their attention on [SEP], [CLS] or punctuation",
        claims=("sinks.claims.no_op.removal_matters_less",),
    ),
    *(
        ColumnSpec(
            f"sinks.{metric}_by_state",
            f"sinks.{metric}_out",
            label,
            "10_sinks",
            "Bondarenko et al. 2023",
            f"{meaning} in the hidden state the head's layer writes (all its heads together)",
            "outliers in a few dimensions, on the delimiter tokens",
            ("sinks.claims.bondarenko.sinks_on_outlier_token",),
            per_state=True,
        )
        for metric, label, meaning in (
            ("outliers", "outliers in the layer's output", "outlier activations per sentence"),
            ("ratio", "largest activation in the layer's output", "the largest activation over the median magnitude"),
        )
    ),
    *(
        ColumnSpec(
            f"probes.structural.{probe}.layer_{{layer}}.{{split}}_{metric}",
            f"structural.{metric}",
            f"{what} in the layer's output ({name})",
            "04_probes",
            "Hewitt & Manning 2019",
            f"{name} of the {probe} probe fitted on the hidden state the head's layer writes (all its heads "
            "together), on the test split",
            "highest in the middle layers",
            claims,
            values={"split": "test"},
            per_state=True,
        )
        for probe, metric, name, what, claims in (
            ("distance", "uuas", "UUAS", "tree distances", _STRUCTURAL_CLAIMS),
            ("distance", "dspr", "DSpr", "tree distances", ()),
            ("depth", "root_acc", "root%", "tree depths", ()),
            ("depth", "nspr", "NSpr", "tree depths", ()),
        )
    ),
)
