"""The head atlas: one row per (model, layer, head) joining every per-head quantity a run recorded.

Each notebook records its per-head results in its ``metrics.json`` as ``(layers, heads)`` arrays
(``pruning.SST-2.importance``, ``patterns.head.previous``...). :func:`build_atlas` reads one or
more finished runs and joins them, recomputing nothing but the small attention-pattern images of
the cards (from a store the run already wrote, ``00_tour``'s by default):

- :attr:`Atlas.table`, a tidy DataFrame (``run``, ``model``, ``layer``, ``head``, ``head_name``,
  then one column per quantity, one per task where a quantity is per task), every cell the
  recorded value;
- :attr:`Atlas.dictionary`, what each column means: its unit, notebook, paper and the paper's
  value, the metric it was read from, and for a column a run does not have, why (the notebook
  did not run, skipped the section, or predates the atlas) — never a column of zeros;
- :meth:`Atlas.query`, the filters the HTML page offers, with the same semantics;
- :meth:`Atlas.write`, ``atlas.parquet``, ``atlas.csv``, ``atlas_dictionary.csv`` and the
  offline page ``atlas.html`` beside the run.

Column descriptions live in :data:`COLUMNS`, one :class:`ColumnSpec` per recorded key pattern; a
``(layers, heads)`` metric no spec describes still becomes a column, named after its key.
"""

from __future__ import annotations

import base64
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from bertology_utils.analyses.patterns import STATISTICS, VIG_PATTERNS
from bertology_utils.core.errors import BertologyError
from bertology_utils.core.files import atomic_write_text
from bertology_utils.present.findings import model_of, notebook_record
from bertology_utils.run import harness

__all__ = [
    "ATLAS_VERSION",
    "TOPIC",
    "TABLE_FILE",
    "CSV_FILE",
    "DICTIONARY_FILE",
    "PAGE_FILE",
    "ID_COLUMNS",
    "OPERATORS",
    "ColumnSpec",
    "COLUMNS",
    "Filter",
    "parse_filter",
    "Atlas",
    "build_atlas",
    "read_atlas",
    "columns_markdown",
]

ATLAS_VERSION = 1
#: The metric topic of the atlas's own notebook (``atlas.n_columns``...): never read back as a source.
TOPIC = "atlas"
TABLE_FILE, CSV_FILE, DICTIONARY_FILE, PAGE_FILE = "atlas.parquet", "atlas.csv", "atlas_dictionary.csv", "atlas.html"
#: The columns that say which head a row is.
ID_COLUMNS = ("run", "model", "layer", "head", "head_name")
#: Filter operators: comparisons, equality (as text for categories and booleans), and top/bottom p percent per run.
OPERATORS = ("ge", "le", "gt", "lt", "eq", "ne", "top", "bottom")
#: Nearest heads listed per head (notebook 05's distances) and the pattern images' word positions.
MAP_POSITIONS = 12
_EXAMPLES = 2
_MAP_ITEMS = 64  # sentences averaged at most for a head's mean pattern: bounded, whatever the store holds


@dataclass(frozen=True)
class ColumnSpec:
    """How a recorded metric key becomes an atlas column.

    ``pattern`` is a regular expression matched against the whole metric key; its named groups
    fill the ``{}`` fields of ``name``, ``label``, ``meaning`` and the claim keys in ``claims``
    (claims recorded under those keys, or under keys starting with them and a dot, read the
    column). ``along`` names a sibling metric (a template like ``name``) whose values label the
    leading axis of a ``(n, layers, heads)`` metric: one column per value, filled in as ``{along}``.
    """

    pattern: str
    name: str
    label: str
    meaning: str
    unit: str
    notebook: str
    paper: str
    paper_value: str | None = None
    claims: tuple[str, ...] = ()
    along: str | None = None

    def match(self, key: str) -> dict[str, str] | None:
        found = re.fullmatch(self.pattern, key)
        return found.groupdict() if found else None


_TARGETS = {
    "cls": "[CLS]",
    "sep": "[SEP]",
    "punct": "punctuation",
    "period": '"."',
    "comma": '","',
    "self": "itself",
    "previous": "the previous token",
    "next": "the next token",
    "other": "ordinary tokens",
    "sep_to_sep": "[SEP] from [SEP]",
}
_CLARK = "Clark et al. 2019"
_SURFACE_CLAIMS = {
    "self": ("patterns.claims.current_token",),
    "previous": ("patterns.claims.previous_token_heads",),
    "next": ("patterns.claims.next_token_heads",),
    "sep": ("patterns.claims.sep_middle_layers", "tour.claims.sep_middle_layers", "sep.claims.sep_middle_layers"),
    "cls": ("patterns.claims.cls_early_layers", "tour.claims.cls_early_layers"),
    "period": ("patterns.claims.punctuation_last_layers",),
    "comma": ("patterns.claims.punctuation_last_layers",),
    "sep_to_sep": ("patterns.claims.sep_to_sep",),
}
_SURFACE_PAPER = {
    "self": "most heads put little attention on the current token",
    "previous": "some heads put > 50% on the previous token, in early layers",
    "next": "some heads put > 50% on the next token, in early layers",
    "sep": "> 50% in layers 6-10 (BERT-base)",
    "cls": "high in early layers",
    "period": "high in the last layers",
    "comma": "high in the last layers",
    "sep_to_sep": "[SEP] attends to [SEP]",
}


def _surface_specs() -> list[ColumnSpec]:
    specs = [
        ColumnSpec(
            rf"patterns\.head\.{stat}",
            f"to_{stat}",
            f"attention to {_TARGETS[stat]}",
            f"{STATISTICS[stat]}; mean over the rows of the treebank pairs, token level",
            "share of attention (0-1)",
            "01_patterns",
            _CLARK,
            _SURFACE_PAPER.get(stat),
            _SURFACE_CLAIMS.get(stat, ()),
        )
        for stat in _TARGETS
        if stat in STATISTICS
    ]
    specs += [
        ColumnSpec(
            r"patterns\.head\.entropy",
            "entropy",
            "entropy",
            f"{STATISTICS['entropy']}; mean over the treebank pairs' rows, token level",
            "nats",
            "01_patterns",
            _CLARK,
            "early layers attend broadly (near bag-of-words)",
            ("patterns.claims.early_layers_broad", "tour.claims.early_layers_broad"),
        ),
        ColumnSpec(
            r"patterns\.head\.cls_entropy",
            "cls_entropy",
            "[CLS] entropy",
            f"{STATISTICS['cls_entropy']}; mean over the treebank pairs, token level",
            "nats",
            "01_patterns",
            _CLARK,
            "last layer: about 3.89 nats (BERT-base)",
            ("patterns.claims.cls_entropy_last_layer",),
        ),
    ]
    return specs


COLUMNS: tuple[ColumnSpec, ...] = (
    *_surface_specs(),
    *(
        ColumnSpec(
            rf"patterns\.head\.vig\.{pattern}",
            f"vig.{pattern}",
            f"Vig: {pattern.replace('_', ' ')}",
            f"{meaning}; pooled over every data set of notebook 01",
            "nats ratio (0-1)" if pattern == "bag_of_words" else "share of attention (0-1)",
            "01_patterns",
            "Vig 2019",
        )
        for pattern, meaning in VIG_PATTERNS.items()
    ),
    ColumnSpec(
        r"patterns\.head\.type",
        "pattern_type",
        "pattern type",
        "Kovaleva et al.'s pattern type the head's maps take most often (every data set pooled)",
        "type",
        "01_patterns",
        "Kovaleva et al. 2019",
        "heterogeneous maps are 32% (MRPC) to 61% (QQP) of all maps",
        ("patterns.claims.heterogeneous_share", "patterns.claims.pattern_types_recognisable"),
    ),
    ColumnSpec(
        r"patterns\.head\.type_share\.(?P<type>.+)",
        "type_share.{type}",
        "share of {type} maps",
        "the fraction of the head's classified maps of Kovaleva et al.'s type {type}",
        "share of maps (0-1)",
        "01_patterns",
        "Kovaleva et al. 2019",
    ),
    ColumnSpec(
        r"sep\.head\.(?P<objective>[^.]+)\.normalised_gradient_(?P<kind>[^.]+)",
        "gradient.{kind}.{objective}",
        "gradient on {kind} ({objective})",
        "the mean |d loss / d attention weight| of the head's weights on {kind} under the {objective} objective, "
        "over the mean |gradient| of all the model's weights (1: average)",
        "ratio",
        "02_sep_noop",
        _CLARK,
        "small where attention to [SEP] is large: attending to [SEP] is a no-op",
        ("sep.claims.sep_gradient_small.{objective}", "sep.claims.cls_gradient_small.{objective}"),
    ),
    ColumnSpec(
        r"sep\.head\.(?P<objective>[^.]+)\.attention_to_(?P<kind>[^.]+)",
        "attention_to.{kind}.{objective}",
        "attention to {kind} ({objective} inputs)",
        "the head's mean share of attention on {kind} over the inputs of the {objective} objective",
        "share of attention (0-1)",
        "02_sep_noop",
        _CLARK,
    ),
    ColumnSpec(
        r"sep\.head\.(?P<objective>[^.]+)\.gradient_norm",
        "gradient_norm.{objective}",
        "attention gradient norm ({objective})",
        "the mean Frobenius norm of d loss / d attention over the head's map, {objective} objective",
        "gradient norm",
        "02_sep_noop",
        _CLARK,
        "gradients shrink with depth",
        ("sep.claims.gradients_shrink.{objective}",),
    ),
    ColumnSpec(
        r"syntax\.head\.best_relation",
        "syntax.best_relation",
        "best dependency relation",
        "the dependency relation (of the paper's Table 1) whose head word this head finds most often",
        "relation",
        "03_syntax_coref",
        _CLARK,
        "some heads find a relation's head word far better than a fixed offset",
        ("syntax.claims.table1",),
    ),
    ColumnSpec(
        r"syntax\.head\.best_relation_accuracy",
        "syntax.best_relation_accuracy",
        "best relation: accuracy",
        "how often the head's most-attended word is the gold head (or dependent) of its best relation",
        "accuracy (0-1)",
        "03_syntax_coref",
        _CLARK,
        None,
        ("syntax.claims.table1",),
    ),
    ColumnSpec(
        r"syntax\.head\.(?P<relation>[^.]+)",
        "syntax.{relation}",
        "syntax: {relation}",
        "how often the head's most-attended word is the gold head of a {relation} dependent (or the "
        "dependent, the better direction)",
        "accuracy (0-1)",
        "03_syntax_coref",
        _CLARK,
        "Table 1: the best head per relation",
        ("syntax.claims.table1",),
    ),
    ColumnSpec(
        r"coref\.head\.accuracy",
        "coref.accuracy",
        "coreference accuracy",
        "how often a pronoun's most-attended candidate is its antecedent (GAP)",
        "accuracy (0-1)",
        "03_syntax_coref",
        _CLARK,
        "the best head: 65% antecedent selection",
        ("coref.claims",),
    ),
    ColumnSpec(
        r"clustering\.head\.(?P<axis>x|y)",
        "mds.{axis}",
        "MDS {axis}",
        "the head's {axis} coordinate in the 2-D multidimensional scaling of the heads' Jensen-Shannon distances",
        "coordinate",
        "05_clustering",
        _CLARK,
        None,
        ("clustering.claims",),
    ),
    ColumnSpec(
        r"clustering\.head\.dominant",
        "behaviour",
        "dominant behaviour",
        "where the head puts the largest share of its attention (notebook 05's behaviour groups)",
        "behaviour",
        "05_clustering",
        _CLARK,
        "heads cluster by behaviour",
        ("clustering.claims.behaviour_clusters",),
    ),
    ColumnSpec(
        r"pruning\.(?P<task>[^.]+)\.importance",
        "importance.{task}",
        "importance ({task})",
        "Michel et al.'s importance on {task}: the mean |dL/dgate| of the head, L2-normalised per layer",
        "normalised score",
        "06_pruning",
        "Michel et al. 2019",
        "a few heads carry most of the importance; many can be pruned",
        ("pruning.claims.heads_prunable.{task}", "pruning.claims.importance_matches_ablation.{task}"),
    ),
    ColumnSpec(
        r"pruning\.(?P<task>[^.]+)\.importance_raw",
        "importance_raw.{task}",
        "importance, raw ({task})",
        "Michel et al.'s importance on {task} before normalising per layer",
        "|dL/dgate|",
        "06_pruning",
        "Michel et al. 2019",
        None,
        ("pruning.claims.importance_matches_ablation.{task}",),
    ),
    ColumnSpec(
        r"pruning\.(?P<task>[^.]+)\.head_deltas",
        "disabled_change.{task}",
        "disabled: score change ({task})",
        "the {task} dev score with this head alone disabled minus the full model's (negative: worse)",
        "score difference",
        "06_pruning",
        "Kovaleva et al. 2019",
        "disabling one head often does not hurt, sometimes improves",
        ("pruning.claims.single_heads_dispensable.{task}",),
    ),
    ColumnSpec(
        r"pruning\.(?P<task>[^.]+)\.head_loss_deltas",
        "disabled_loss_change.{task}",
        "disabled: loss change ({task})",
        "the mean {task} dev loss with this head alone disabled minus the full model's (positive: worse)",
        "loss difference",
        "06_pruning",
        "Michel et al. 2019",
        None,
        ("pruning.claims.importance_matches_ablation.{task}",),
    ),
    ColumnSpec(
        r"pruning\.(?P<task>[^.]+)\.attention_cosine",
        "finetune_cosine.{task}",
        "fine-tuning: map cosine ({task})",
        "cosine similarity of the head's attention before and after fine-tuning on {task} (1: unchanged)",
        "cosine (0-1)",
        "06_pruning",
        "Kovaleva et al. 2019",
        "the last two layers change most",
        ("pruning.claims.last_layers_change_most.{task}",),
    ),
    ColumnSpec(
        r"head_roles\.confidence",
        "confidence",
        "confidence",
        "Voita et al.'s confidence on the treebank: the mean over words of the row's largest weight",
        "weight (0-1)",
        "07_head_roles",
        "Voita et al. 2019",
        "the most relevant heads are the most confident",
    ),
    ColumnSpec(
        r"head_roles\.(?P<task>[^.]+)\.confidence",
        "confidence.{task}",
        "confidence ({task})",
        "Voita et al.'s confidence on {task}'s dev examples",
        "weight (0-1)",
        "07_head_roles",
        "Voita et al. 2019",
        "the most relevant heads are the most confident",
        ("head_roles.claims.relevance_tracks_confidence.{task}",),
    ),
    ColumnSpec(
        r"head_roles\.(?P<task>[^.]+)\.relevance",
        "relevance.{task}",
        "relevance ({task})",
        "the head's mean |attribution| to the {task} classifier's logit (integrated gradients over head gates), "
        "divided by its layer's sum",
        "share of its layer (0-1)",
        "07_head_roles",
        "Voita et al. 2019",
        "specialised heads are among the most relevant",
        (
            "head_roles.claims.relevance_tracks_confidence.{task}",
            "head_roles.claims.specialised_heads_relevant.{task}",
        ),
    ),
    ColumnSpec(
        r"head_roles\.specialised",
        "specialised",
        "specialised",
        "the head has a positional, syntactic or rare-word role (Voita et al.'s tests, on the treebank)",
        "yes/no",
        "07_head_roles",
        "Voita et al. 2019",
        None,
        ("head_roles.claims.roles_found",),
    ),
    ColumnSpec(
        r"head_roles\.(?P<task>[^.]+)\.specialised",
        "specialised.{task}",
        "specialised ({task})",
        "the head has a positional, syntactic or rare-word role on {task}'s examples",
        "yes/no",
        "07_head_roles",
        "Voita et al. 2019",
        None,
        (
            "head_roles.claims.specialised_heads_relevant.{task}",
            "head_roles.claims.specialised_heads_survive.{task}",
        ),
    ),
    ColumnSpec(
        r"head_roles\.roles\.(?P<role>[^.]+)",
        "role.{role}",
        "role: {role}",
        "the head passes Voita et al.'s {role} test",
        "yes/no",
        "07_head_roles",
        "Voita et al. 2019",
        "positional, syntactic and rare-word heads exist",
        ("head_roles.claims.roles_found",),
    ),
    ColumnSpec(
        r"head_roles\.syntactic_relations",
        "role.syntactic_relations",
        "syntactic for",
        "the relations the head is syntactic for (Voita et al.'s test), joined by +",
        "relations",
        "07_head_roles",
        "Voita et al. 2019",
    ),
    ColumnSpec(
        r"head_roles\.positional_offset",
        "positional_offset",
        "positional offset",
        "the relative position the head's maximum most often points at (-1: previous word)",
        "words",
        "07_head_roles",
        "Voita et al. 2019",
    ),
    ColumnSpec(
        r"head_roles\.positional_share",
        "positional_share",
        "positional share",
        "how often the head's maximum points at its modal offset",
        "share of rows (0-1)",
        "07_head_roles",
        "Voita et al. 2019",
        "positional heads: > 90%",
    ),
    ColumnSpec(
        r"head_roles\.rare_rate",
        "rare_rate",
        "rare-word rate",
        "how often the head's maximum is on the sentence's least frequent word",
        "share of rows (0-1)",
        "07_head_roles",
        "Voita et al. 2019",
    ),
    ColumnSpec(
        r"head_roles\.qk_dimensions_mean",
        "qk_dimensions",
        "query-key dimensions",
        "the mean fraction of the head's query-key dimensions that decide its largest weights",
        "fraction of head size",
        "07_head_roles",
        "Vig 2019",
        "heads on [SEP] or spread attention need few dimensions",
        ("head_roles.claims.qk_dimensions_by_pattern",),
    ),
    ColumnSpec(
        r"head_roles\.(?P<task>[^.]+)\.l0_masks",
        "l0_kept.{task}.lambda={along}",
        "L0: kept on {task} at lambda {along}",
        "the head's L0 gate stays open after training on {task} with penalty lambda = {along}",
        "yes/no",
        "07_head_roles",
        "Voita et al. 2019",
        "most heads can be pruned; specialised heads are the last pruned",
        ("head_roles.claims.l0_prunes_most_heads.{task}", "head_roles.claims.specialised_heads_survive.{task}"),
        along=r"head_roles.{task}.l0_lambdas",
    ),
    ColumnSpec(
        r"mixing\.head\.(?P<kind>[^.]+)\.(?P<weighting>raw|norm)",
        "mixing.{kind}.{weighting}",
        "{kind} share, {weighting}",
        "the head's share of attention on {kind}, weighted by attention alone (raw) or by |alpha f(x)| (norm)",
        "share (0-1)",
        "08_context_mixing",
        "Kobayashi et al. 2020",
        "norm weighting gives special tokens far less than raw weights",
        ("mixing.claims.norm_discounts_special_tokens",),
    ),
)

_NEAREST = "clustering.head.nearest"
_NEAREST_DISTANCE = "clustering.head.nearest_distance"
_SHAPE_KEYS = (re.compile(r"^[A-Za-z0-9_]+\.(?:num_)?layers$"), re.compile(r"^[A-Za-z0-9_]+\.(?:num_)?heads$"))


@dataclass(frozen=True)
class Filter:
    """One condition of an atlas query: ``column``, an operator of :data:`OPERATORS`, a value."""

    column: str
    op: str
    value: str | float

    def __post_init__(self):
        if self.op not in OPERATORS:
            raise BertologyError(f"unknown filter operator {self.op!r}: use one of {', '.join(OPERATORS)}")

    def __str__(self) -> str:
        return f"{self.column}~{self.op}~{self.value}"


def parse_filter(text: str) -> Filter:
    """``"importance.SST-2~top~10"`` -> Filter (the form the page's URL and the command line use)."""
    parts = text.rsplit("~", 2)
    if len(parts) != 3 or not all(parts):
        raise BertologyError(f"a filter is COLUMN~OP~VALUE (e.g. importance.SST-2~top~10), not {text!r}")
    return Filter(*parts)


@dataclass
class _Run:
    """What one run folder holds for the atlas."""

    id: str
    name: str
    folder: Path
    model: str
    layers: int
    heads: int
    columns: dict[str, np.ndarray] = field(default_factory=dict)
    sources: dict[str, tuple[ColumnSpec | None, str, str]] = field(default_factory=dict)  # spec, key, notebook
    missing: dict[str, str] = field(default_factory=dict)
    claims: list[dict] = field(default_factory=list)
    nearest: dict[str, list] = field(default_factory=dict)
    store: Path | None = None


def _flatten(metrics: Mapping, prefix: str = "") -> Iterable[tuple[str, object]]:
    for key, value in metrics.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from _flatten(value, f"{name}.")
        else:
            yield name, value


def _shape_of(metrics: dict[str, dict]) -> tuple[int, int] | None:
    """(layers, heads) as the notebooks recorded them; None when none did; an error when they disagree."""
    found = set()
    for values in metrics.values():
        layers = [v for k, v in values.items() if _SHAPE_KEYS[0].match(k) and isinstance(v, int)]
        heads = [v for k, v in values.items() if _SHAPE_KEYS[1].match(k) and isinstance(v, int)]
        if layers and heads:
            found.add((layers[0], heads[0]))
    if len(found) > 1:
        raise BertologyError(f"the notebooks of this run recorded models of different shapes: {sorted(found)}")
    return found.pop() if found else None


def _shape_of_store(path: Path | None) -> tuple[int, int] | None:
    """(layers, heads) from a store's metadata: for a run whose notebooks did not record the shape."""
    if path is None:
        return None
    from bertology_utils.attention.store import AttentionStore  # zarr: only when needed

    try:
        model = AttentionStore.open(path).metadata["model"]
        return int(model["num_layers"]), int(model["num_heads"])
    except (OSError, KeyError, TypeError, ValueError, BertologyError):
        return None


def _as_grid(value, shape: tuple[int, ...]) -> np.ndarray | None:
    """``value`` as an array of ``shape`` (None values -> NaN / None), or None when it is not one."""
    if not isinstance(value, list):
        return None
    try:
        array = np.array(value, dtype=object)
    except ValueError:  # ragged
        return None
    if array.shape != shape:
        return None
    flat = [v for v in array.ravel() if v is not None]
    if flat and all(isinstance(v, bool) for v in flat):
        return array
    if flat and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in flat):
        return np.array([np.nan if v is None else v for v in array.ravel()], dtype=np.float64).reshape(shape)
    if flat and all(isinstance(v, str) for v in flat):
        return array
    return None if flat else np.full(shape, np.nan)


def _kind(values: np.ndarray) -> str:
    if values.dtype != object:
        return "number"
    present = [v for v in values.ravel() if v is not None]
    return "bool" if present and all(isinstance(v, bool) for v in present) else "category"


def _format(template: str, groups: Mapping[str, str]) -> str:
    return template.format(**groups) if groups else template


def _along_label(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _is_atlas_record(folder: Path) -> bool:
    """Whether a notebook folder holds the atlas's own record (notebook 09's): not a source of columns."""
    metrics_path, skipped = folder / harness.METRICS_FILE, harness.load_skipped(folder)["sections"]
    keys = list(harness.read_json(metrics_path)) if metrics_path.is_file() else []
    topics = {k.split(".")[0] for k in keys} | {s["section"].split(".")[0] for s in skipped}
    return topics == {TOPIC}


def _read_run(folder: Path, run_id: str) -> _Run:
    entries = [e for e in harness.run_entries(folder) if not _is_atlas_record(folder / e["name"])]
    if not entries:
        raise BertologyError(f"run {folder} has no notebook results: run the notebooks first (bertology run)")
    metrics = {
        e["name"]: harness.read_json(folder / e["name"] / harness.METRICS_FILE)
        for e in entries
        if (folder / e["name"] / harness.METRICS_FILE).is_file()
    }
    shape = _shape_of(metrics) or _shape_of_store(_pattern_store(folder))
    models = {name: model_of(values) for name, values in metrics.items()}
    named = sorted({m for m in models.values() if m})
    if shape is None:
        raise BertologyError(f"run {folder}: no notebook recorded the model's shape (layers, heads)")
    if len(named) > 1:  # the atlas is one model's: the first notebook's model wins, the others are left out
        keep = next(m for m in models.values() if m)
        for name, model in models.items():
            if model and model != keep:
                metrics.pop(name)
        left = ", ".join(f"{n} ({m})" for n, m in models.items() if m and m != keep)
        run = _Run(run_id, folder.name, folder, keep, *shape, missing={"other models": f"left out: {left}"})
    else:
        run = _Run(run_id, folder.name, folder, named[0] if named else "unknown model", *shape)
    layers, heads = shape
    for entry in entries:
        record = notebook_record(folder, entry)
        run.claims += [dict(c, notebook=entry["name"]) for c in record["claims"]]
        if record["status"] not in ("ok", harness.UNLISTED):
            run.missing[entry["name"]] = f"the notebook's status is {record['status']!r}"
        for section in record["skipped"]:
            run.missing[section["section"]] = section["reason"]
    for notebook, values in metrics.items():
        flat = dict(_flatten(values))
        for key, value in flat.items():
            if key == _NEAREST:
                names = np.array(value, dtype=object) if isinstance(value, list) else None
                distances = _as_grid(flat.get(_NEAREST_DISTANCE), names.shape) if names is not None else None
                if names is not None and names.ndim == 3 and names.shape[:2] == shape and distances is not None:
                    run.nearest = {
                        f"{layer + 1}-{head + 1}": [
                            [str(n), float(d)] for n, d in zip(names[layer, head], distances[layer, head])
                        ]
                        for layer in range(layers)
                        for head in range(heads)
                    }
                continue
            if key == _NEAREST_DISTANCE:
                continue
            _add_column(run, notebook, key, value, flat)
    run.store = _pattern_store(folder)
    return run


def _add_column(run: _Run, notebook: str, key: str, value, flat: Mapping) -> None:
    shape = (run.layers, run.heads)
    for spec in COLUMNS:
        groups = spec.match(key)
        if groups is None:
            continue
        if spec.along is not None:
            labels = flat.get(_format(spec.along, groups))
            grid = _as_grid(value, (len(labels), *shape)) if isinstance(labels, list) else None
            if grid is None or not isinstance(labels, list):
                return
            for label, plane in zip(labels, grid):
                name = _format(spec.name, {**groups, "along": _along_label(label)})
                run.columns[name] = plane
                run.sources[name] = (spec, key, notebook)
            return
        grid = _as_grid(value, shape)
        if grid is not None:
            name = _format(spec.name, groups)
            run.columns[name] = grid
            run.sources[name] = (spec, key, notebook)
        return
    grid = _as_grid(value, shape)  # a per-head metric the registry does not describe: kept under its key
    if grid is not None:
        run.columns[key] = grid
        run.sources[key] = (None, key, notebook)


def _pattern_store(folder: Path) -> Path | None:
    """The store the cards' pattern images come from: the tour's, else any store the run wrote."""
    stores = sorted(folder.glob("00_*/*.zarr")) + sorted(folder.glob("*/*.zarr"))
    return stores[0] if stores else None


def _resample(attention: np.ndarray, size: int) -> np.ndarray:
    """(L, H, n, n) word maps -> (L, H, size, size): the first and last pseudo-words keep their own
    row and column, the words between are binned by relative position (rows averaged within a bin,
    columns summed, so each row still sums to what it summed to)."""
    n = attention.shape[-1]
    inner = np.minimum(((np.arange(1, n - 1) - 1) * (size - 2)) // max(n - 2, 1), size - 3) + 1
    bins = np.concatenate([[0], inner, [size - 1]])
    member = np.zeros((n, size))
    member[np.arange(n), bins] = 1.0
    counts = member.sum(0)
    summed = np.einsum("ia,lhij,jb->lhab", member, attention, member)
    return summed / np.where(counts > 0, counts, 1.0)[:, None]


def _encode(maps: np.ndarray) -> str:
    return base64.b64encode(np.clip(np.rint(maps * 255), 0, 255).astype(np.uint8).tobytes()).decode("ascii")


def _pattern_maps(run: _Run) -> tuple[dict | None, str]:
    """The cards' images: the mean word map over up to ``_MAP_ITEMS`` stored sentences, resampled onto
    ``MAP_POSITIONS`` positions, and ``_EXAMPLES`` short sentences' own maps; or None and why."""
    if run.store is None:
        return None, "no attention store in this run (notebook 00 writes one): no pattern images"
    from bertology_utils.attention.store import AttentionStore  # zarr: only when images are made

    try:
        store = AttentionStore.open(run.store)
        done = np.flatnonzero(store.status() == 0)
        items = [store.get(int(i)) for i in done[:_MAP_ITEMS]]
    except (OSError, ValueError, KeyError, BertologyError) as exc:
        return None, f"the store {run.store.name} could not be read ({exc}): no pattern images"
    items = [it for it in items if it.attention.shape[:2] == (run.layers, run.heads)]
    long_enough = [it for it in items if it.n_words >= MAP_POSITIONS]
    if not long_enough:
        return None, f"no stored sentence has {MAP_POSITIONS} or more words: no pattern images"
    mean = np.mean([_resample(it.attention.astype(np.float64), MAP_POSITIONS) for it in long_enough], axis=0)
    first, last = long_enough[0].words[0], long_enough[0].words[-1]
    labels = [first, *(f"w{i}" for i in range(1, MAP_POSITIONS - 1)), last]
    shortest = sorted(items, key=lambda it: (abs(it.n_words - MAP_POSITIONS), it.index))[:_EXAMPLES]
    return {
        "note": f"mean of {len(long_enough)} sentences of {run.store.parent.name}'s store, each resampled onto "
        f"{MAP_POSITIONS} relative word positions",
        "mean": {"size": MAP_POSITIONS, "labels": labels, "data": _encode(mean)},
        "examples": [{"words": list(it.words), "data": _encode(it.attention.astype(np.float64))} for it in shortest],
    }, ""


def _match_heads(first: _Run, second: _Run) -> tuple[dict, str]:
    """For each head of ``first``, the head of ``second`` with the closest attention (Jensen-Shannon
    distance summed over the sentences both stores hold), or {} and why not."""
    if first.store is None or second.store is None:
        return {}, "a run has no attention store to compare heads on"
    from bertology_utils.analyses.clustering import head_distances
    from bertology_utils.attention.store import AttentionStore

    a, b = AttentionStore.open(first.store), AttentionStore.open(second.store)
    if a.metadata["corpus"].get("sha256") != b.metadata["corpus"].get("sha256"):
        return {}, "the runs' stores hold different sentences: no head-to-head match"
    both = np.flatnonzero((a.status() == 0) & (b.status() == 0))
    try:
        distances = head_distances(a, b, indices=both.tolist())
    except ValueError as exc:  # the words of an item differ between the two models
        return {}, f"the runs' stores cannot be compared ({exc})"
    cross = distances.block(0, 1)
    best = cross.argmin(1)
    heads = second.heads
    return {
        f"{i // first.heads + 1}-{i % first.heads + 1}": [f"{j // heads + 1}-{j % heads + 1}", float(cross[i, j])]
        for i, j in enumerate(best)
    }, ""


def _value(v):
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, np.generic):
        return v.item()
    return v


class Atlas:
    """The joined per-head results of one or more runs (see the module docstring)."""

    def __init__(self, runs: Sequence[_Run], *, maps: bool = True, compare: bool = True):
        self.runs = list(runs)
        self._maps = {run.id: _pattern_maps(run) if maps else (None, "pattern images not made") for run in self.runs}
        self.match: dict[str, dict[str, dict]] = {}
        self.match_notes: dict[str, str] = {}
        if compare:
            for first in self.runs:
                for second in self.runs:
                    if first is second:
                        continue
                    found, why = _match_heads(first, second)
                    if found:
                        self.match.setdefault(first.id, {})[second.id] = found
                    else:
                        self.match_notes[f"{first.name} -> {second.name}"] = why
        self.table = self._table()
        self.dictionary = self._dictionary()

    @classmethod
    def from_run(cls, *runs: str | os.PathLike, **options) -> Atlas:
        """The atlas of one or more run folders (or run names under ``results/``)."""
        return build_atlas(*runs, **options)

    @property
    def columns(self) -> list[str]:
        """The value columns, in registry order (then undescribed metrics by key)."""
        return [c for c in self.table.columns if c not in ID_COLUMNS]

    def _table(self) -> pd.DataFrame:
        frames = []
        for run in self.runs:
            layer, head = np.divmod(np.arange(run.layers * run.heads), run.heads)
            frame = {
                "run": run.name,
                "model": run.model,
                "layer": layer + 1,
                "head": head + 1,
                "head_name": [f"{a + 1}-{b + 1}" for a, b in zip(layer, head)],
            }
            for name, grid in run.columns.items():
                frame[name] = _typed(grid)
            frames.append(pd.DataFrame(frame))
        table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(ID_COLUMNS))
        rank: dict[ColumnSpec | None, int] = {spec: i for i, spec in enumerate(COLUMNS)}  # undescribed: last
        specs = {name: src[0] for run in self.runs for name, src in run.sources.items()}
        values = sorted(
            (c for c in table.columns if c not in ID_COLUMNS),
            key=lambda c: (rank.get(specs[c], len(rank)), c),
        )
        return table[list(ID_COLUMNS) + values]

    def _dictionary(self) -> pd.DataFrame:
        rows = {}
        for run in self.runs:
            for name, (spec, key, notebook) in run.sources.items():
                if name in rows:
                    continue
                groups = spec.match(key) if spec else {}
                along = name.rsplit("=", 1)[-1] if spec and spec.along else None
                fill = {**(groups or {}), **({"along": along} if along else {})}
                rows[name] = {
                    "column": name,
                    "label": _format(spec.label, fill) if spec else key,
                    "meaning": _format(spec.meaning, fill) if spec else f"recorded by {notebook} as {key}",
                    "unit": spec.unit if spec else "as recorded",
                    "kind": _kind(run.columns[name]),
                    "notebook": notebook,
                    "paper": spec.paper if spec else "",
                    "paper_value": spec.paper_value or "" if spec else "",
                    "metric": key,
                    "status": "recorded",
                    "reason": "",
                }
        for spec in COLUMNS:
            if any(r["metric"] and spec.match(r["metric"]) is not None for r in rows.values()):
                continue
            placeholder = _placeholders(spec.name)
            rows[placeholder] = {
                "column": placeholder,
                "label": _placeholders(spec.label),
                "meaning": _placeholders(spec.meaning),
                "unit": spec.unit,
                "kind": "",
                "notebook": spec.notebook,
                "paper": spec.paper,
                "paper_value": spec.paper_value or "",
                "metric": "",
                "status": "absent",
                "reason": self._why_absent(spec),
            }
        return pd.DataFrame(list(rows.values()))

    def _why_absent(self, spec: ColumnSpec) -> str:
        reasons = []
        for run in self.runs:
            topic = spec.pattern.split("\\.", 1)[0]
            skipped = [f"{s}: {r}" for s, r in run.missing.items() if s == spec.notebook or s.split(".")[0] == topic]
            if skipped:
                reasons.append(f"{run.name}: " + "; ".join(skipped))
            elif not (run.folder / spec.notebook / harness.METRICS_FILE).is_file():
                reasons.append(f"{run.name}: {spec.notebook} did not run")
            else:
                reasons.append(
                    f"{run.name}: {spec.notebook} recorded no such metric (an older run, or a section it "
                    f"does not compute for this model): run it again"
                )
        return " | ".join(reasons)

    def query(self, filters: Iterable[Filter | str]) -> pd.Series:
        """Which rows match every filter (AND), as a boolean Series over :attr:`table`'s rows.

        ``top``/``bottom`` ``p``: within each run, of the n heads with a value, the k = ceil(p/100 n)
        largest (smallest), ties at the k-th value included. A missing value never matches.
        """
        mask = pd.Series(True, index=self.table.index)
        for f in filters:
            mask &= self._matches(f if isinstance(f, Filter) else parse_filter(f))
        return mask

    def _matches(self, f: Filter) -> pd.Series:
        if f.column not in self.table.columns or f.column in ID_COLUMNS:
            raise BertologyError(f"no column {f.column!r} in this atlas: see its dictionary")
        column = self.table[f.column]
        present = column.notna()
        if f.op in ("eq", "ne"):
            if pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column):
                equal = column.astype(float) == float(f.value)
            else:
                text = column.map(lambda v: str(v).lower() if isinstance(v, (bool, np.bool_)) else str(v))
                equal = text == str(f.value)
            return (present & (equal if f.op == "eq" else ~equal)).fillna(False).astype(bool)
        if not pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
            raise BertologyError(f"{f.op} needs a number column; {f.column!r} is not one (use eq or ne)")
        values, threshold = column.astype(float), float(f.value)
        if f.op in ("ge", "le", "gt", "lt"):
            compare = {
                "ge": values >= threshold,
                "le": values <= threshold,
                "gt": values > threshold,
                "lt": values < threshold,
            }[f.op]
            return (present & compare).astype(bool)
        if not 0 < threshold <= 100:
            raise BertologyError(f"{f.op} takes a percentage in (0, 100], not {f.value}")
        out = pd.Series(False, index=self.table.index)
        for _, rows in values.groupby(self.table["run"], sort=False):
            kept = rows.dropna().sort_values(ascending=f.op == "bottom")
            if kept.empty:
                continue
            cut = kept.iloc[math.ceil(threshold / 100 * len(kept)) - 1]
            out[kept.index] = kept >= cut if f.op == "top" else kept <= cut
        return out

    def card(self, run: str, layer: int, head: int) -> dict:
        """Everything the atlas has on one head (layer and head from 1): values, nearest heads, matches, claims."""
        rows = self.table[(self.table["run"] == run) & (self.table["layer"] == layer) & (self.table["head"] == head)]
        if rows.empty:
            raise BertologyError(f"no head {layer}-{head} in run {run!r}")
        found = next(r for r in self.runs if r.name == run)
        name = f"{layer}-{head}"
        return {
            "values": {c: _value(rows.iloc[0][c]) for c in self.columns if pd.notna(rows.iloc[0][c])},
            "nearest": found.nearest.get(name, []),
            "match": {other: m[name] for other, m in self.match.get(found.id, {}).items()},
        }

    def payload(self) -> dict:
        """What the HTML page reads (its schema: :mod:`bertology_utils.present.atlas_page`)."""
        from matplotlib import colormaps
        from matplotlib.colors import to_hex

        names = {run.name for run in self.runs}
        by_name = self.dictionary.set_index("column")
        claims_of = {
            c: [
                {**{k: claim.get(k, "") for k in ("key", "claim", "verdict", "paper_value", "ours")}, "run": run.id}
                for run in self.runs
                for claim in run.claims
                if c in run.sources and _reads(run.sources[c], claim["key"])
            ]
            for c in self.columns
        }
        run_ids = {run.name: run.id for run in self.runs}
        return {
            "version": ATLAS_VERSION,
            "title": "Head atlas: " + " vs ".join(sorted({r.model.rsplit("/", 1)[-1] for r in self.runs}) or names),
            "runs": [
                {
                    "id": run.id,
                    "name": run.name,
                    "model": run.model,
                    "layers": run.layers,
                    "heads": run.heads,
                    "missing": dict(run.missing),
                    "maps": self._maps[run.id][0],
                    "maps_note": self._maps[run.id][1],
                }
                for run in self.runs
            ],
            "columns": [
                {
                    "name": c,
                    **{k: str(by_name.loc[c, k]) for k in ("label", "meaning", "unit", "notebook", "paper")},
                    "paper_value": by_name.loc[c, "paper_value"] or None,
                    "kind": by_name.loc[c, "kind"],
                    "claims": claims_of[c],
                }
                for c in self.columns
            ],
            "rows": {
                "run": [run_ids[r] for r in self.table["run"]],
                "layer": [int(v) for v in self.table["layer"]],
                "head": [int(v) for v in self.table["head"]],
                "values": {c: [_value(v) if pd.notna(v) else None for v in self.table[c]] for c in self.columns},
            },
            "nearest": {run.id: run.nearest for run in self.runs if run.nearest},
            "match": self.match,
            "colormap": [to_hex(rgba) for rgba in colormaps["viridis"](np.linspace(0, 1, 256))],
        }

    def write(self, out: str | os.PathLike | None = None, *, page: bool = True) -> dict[str, Path]:
        """Write the table (Parquet and CSV), the dictionary (CSV) and the page into ``out``
        (default: the first run's folder); returns the paths by kind."""
        folder = Path(out) if out is not None else self.runs[0].folder
        folder.mkdir(parents=True, exist_ok=True)
        paths = {"table": folder / TABLE_FILE, "csv": folder / CSV_FILE, "dictionary": folder / DICTIONARY_FILE}
        self.table.to_parquet(paths["table"], index=False)
        atomic_write_text(paths["csv"], self.table.to_csv(index=False))
        atomic_write_text(paths["dictionary"], self.dictionary.to_csv(index=False))
        if page:
            from bertology_utils.present.atlas_page import render_atlas_page

            paths["page"] = folder / PAGE_FILE
            atomic_write_text(paths["page"], render_atlas_page(self.payload()))
        return paths

    def show(self):
        """The atlas as a JupyterLab widget: the grid, the column menu and a head's card."""
        from bertology_utils.present.atlas_view import atlas_widget

        return atlas_widget(self)

    def summary(self) -> str:
        """A few lines: runs, heads, columns recorded and absent."""
        absent = self.dictionary[self.dictionary["status"] == "absent"]
        lines = [
            f"{run.name}: {run.model}, {run.layers} layers x {run.heads} heads, {len(run.columns)} columns"
            + (f"; not in this run: {', '.join(run.missing)}" if run.missing else "")
            for run in self.runs
        ]
        lines.append(
            f"{len(self.columns)} columns; {len(absent)} absent ({', '.join(absent['column'])})"
            if len(absent)
            else f"{len(self.columns)} columns, none absent"
        )
        return "\n".join(lines)


def _reads(source: tuple[ColumnSpec | None, str, str], claim_key: str) -> bool:
    spec, key, _ = source
    if spec is None:
        return False
    groups = spec.match(key) or {}
    for template in spec.claims:
        prefix = _format(template, groups)
        if claim_key == prefix or claim_key.startswith(prefix + "."):
            return True
    return False


def _typed(grid: np.ndarray):
    """A column for the table: floats as float64, booleans as pandas' nullable boolean, text as strings."""
    flat = grid.ravel()
    if grid.dtype != object:
        return flat.astype(np.float64)
    if _kind(grid) == "bool":
        return pd.array(list(flat), dtype="boolean")
    return pd.array([None if v is None else str(v) for v in flat], dtype="string")


def build_atlas(*runs: str | os.PathLike, maps: bool = True, compare: bool = True) -> Atlas:
    """The atlas of one or more runs (folders or run names under ``results/``).

    ``maps=False`` leaves out the cards' pattern images (no store is read); ``compare=False`` the
    head-to-head matches between runs. A run with only some notebooks gives a partial atlas whose
    dictionary says what is absent and why; a run folder that does not exist, or holds no
    notebook results, raises BertologyError.
    """
    if not runs:
        raise BertologyError("build_atlas needs at least one run")
    folders = [harness.find_run(run) for run in runs]
    names = [f.name for f in folders]
    if len(set(names)) != len(names):
        names = [f"{f.parent.name}/{f.name}" for f in folders]
    found = []
    for i, (folder, name) in enumerate(zip(folders, names)):
        run = _read_run(folder, f"r{i}")
        run.name = name
        found.append(run)
    return Atlas(found, maps=maps, compare=compare)


def _placeholders(text: str) -> str:
    """A template's fields as ``<field>`` (``importance.{task}`` -> ``importance.<task>``)."""
    return re.sub(r"\{(\w+)\}", r"<\1>", text)


def columns_markdown() -> str:
    """The registry as a Markdown table (the documentation's list of atlas columns)."""
    lines = ["| column | meaning | unit | notebook | paper |", "|---|---|---|---|---|"]
    for spec in COLUMNS:
        meaning = _placeholders(spec.meaning).replace("<", "&lt;").replace(">", "&gt;")  # not HTML tags
        cells = (f"`{_placeholders(spec.name)}`", meaning, spec.unit, spec.notebook, spec.paper)
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def read_atlas(path: str | os.PathLike) -> pd.DataFrame:
    """An atlas table written by :meth:`Atlas.write` (``atlas.parquet``, or the run folder holding it)."""
    path = Path(path)
    if path.is_dir():
        path = path / TABLE_FILE
    if not path.is_file():
        raise BertologyError(f"no atlas table {path}: build it with `bertology atlas RUN`")
    return pd.read_parquet(path)
