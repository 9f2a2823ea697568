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

Column descriptions live in :data:`~bertology_utils.present.atlas_columns.COLUMNS`, one
:class:`~bertology_utils.present.atlas_columns.ColumnSpec` per metric declaration it reads
(:mod:`bertology_utils.papers.metrics`); a ``(layers, heads)`` metric no spec describes still
becomes a column, named after its key. A few columns are a layer's rather than a head's (the structural
probes, the outlier activations): every head of a layer shows the hidden state its layer writes.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from pandas.api.extensions import ExtensionArray

from bertology_utils.core.errors import BertologyError
from bertology_utils.core.files import atomic_write_text
from bertology_utils.present.atlas_columns import COLUMNS, ColumnSpec
from bertology_utils.present.atlas_page import render_atlas_page
from bertology_utils.present.atlas_stores import match_heads, pattern_images, pattern_store, store_shape
from bertology_utils.present.atlas_view import atlas_widget
from bertology_utils.present.findings import claim_uncertainty, model_of, notebook_record
from bertology_utils.run import results

if TYPE_CHECKING:
    from ipywidgets import VBox

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
#: Nearest heads listed per head (notebook 05's distances).
_NEAREST = "clustering.head.nearest"
_NEAREST_DISTANCE = "clustering.head.nearest_distance"
#: the columns a scalar can feed: one key per hidden state
_STATE_COLUMNS = tuple(spec for spec in COLUMNS if spec.per_state)


@dataclass(frozen=True)
class Filter:
    """One condition of an atlas query: ``column``, an operator of :data:`OPERATORS`, a value."""

    column: str
    op: str
    value: str | float

    def __post_init__(self) -> None:
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


def _is_shape_key(key: str, axis: str) -> bool:
    """``patterns.layers``, ``pruning.num_layers``: a notebook's record of the model's shape."""
    topic, _, name = key.partition(".")
    return bool(topic) and name in (axis, f"num_{axis}")


def _shape_of(metrics: dict[str, dict]) -> tuple[int, int] | None:
    """(layers, heads) as the notebooks recorded them; None when none did; an error when they disagree."""
    found = set()
    for values in metrics.values():
        layers = [v for k, v in values.items() if _is_shape_key(k, "layers") and isinstance(v, int)]
        heads = [v for k, v in values.items() if _is_shape_key(k, "heads") and isinstance(v, int)]
        if layers and heads:
            found.add((layers[0], heads[0]))
    if len(found) > 1:
        raise BertologyError(f"the notebooks of this run recorded models of different shapes: {sorted(found)}")
    return found.pop() if found else None


def _as_grid(value: object, shape: tuple[int, ...]) -> np.ndarray | None:
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


def _readable(groups: Mapping[str, str]) -> dict[str, str]:
    """A key's parts as a label shows them: its objective and token kind by the names readers use."""
    from bertology_utils.interventions.objectives import readable_name

    return {k: readable_name(v) if k in ("objective", "kind") else v for k, v in groups.items()}


def _along_label(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _is_atlas_record(folder: Path) -> bool:
    """Whether a notebook folder holds the atlas's own record (notebook 09's): not a source of columns."""
    metrics_path, skipped = folder / results.METRICS_FILE, results.load_skipped(folder)["sections"]
    keys = list(results.read_json(metrics_path)) if metrics_path.is_file() else []
    topics = {k.split(".")[0] for k in keys} | {s["section"].split(".")[0] for s in skipped}
    return topics == {TOPIC}


def _read_run(folder: Path, run_id: str) -> _Run:
    entries = [e for e in results.run_entries(folder) if not _is_atlas_record(folder / e["name"])]
    if not entries:
        raise BertologyError(f"run {folder} has no notebook results: run the notebooks first (bertology run)")
    metrics = {
        e["name"]: results.read_json(folder / e["name"] / results.METRICS_FILE)
        for e in entries
        if (folder / e["name"] / results.METRICS_FILE).is_file()
    }
    shape = _shape_of(metrics) or store_shape(pattern_store(folder))
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
        if record["status"] not in ("ok", results.UNLISTED):
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
    run.store = pattern_store(folder)
    return run


def _add_state_column(
    run: _Run, spec: ColumnSpec, groups: Mapping[str, str], key: str, value: object, notebook: str
) -> None:
    """Spread a per-state metric over the heads of each layer (:attr:`ColumnSpec.per_state`)."""
    name = _format(spec.name, groups)
    if isinstance(value, list):
        states = _as_grid(value, (run.layers + 1,))
        if states is None or states.dtype == object:
            return
        run.columns[name] = np.repeat(states[1:, None], run.heads, axis=1)
    elif isinstance(value, (int, float)) and not isinstance(value, bool) and groups.get("layer", "").isdigit():
        state = int(groups["layer"])
        if not 1 <= state <= run.layers:  # the embeddings (0) have no heads
            return
        run.columns.setdefault(name, np.full((run.layers, run.heads), np.nan))[state - 1] = value
    else:
        return
    run.sources[name] = (spec, key, notebook)


def _add_column(run: _Run, notebook: str, key: str, value: object, flat: Mapping) -> None:
    shape = (run.layers, run.heads)
    # a grid is a list; a scalar can only feed a per-state column, and one regex tells whether it might before
    # the registry is searched for its declaration
    specs = COLUMNS if isinstance(value, list) else [s for s in _STATE_COLUMNS if s.declaration.match(key)]
    for spec in specs:
        groups = spec.match(key)
        if groups is None:
            continue
        if spec.per_state:
            _add_state_column(run, spec, groups, key, value, notebook)
            return
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


def _value(v: object) -> object:
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, np.generic):
        return v.item()
    return v


class Atlas:
    """The joined per-head results of one or more runs (see the module docstring)."""

    def __init__(self, runs: Sequence[_Run], *, maps: bool = True, compare: bool = True):
        self.runs = list(runs)
        self._maps = {
            run.id: pattern_images(run.store, (run.layers, run.heads)) if maps else (None, "pattern images not made")
            for run in self.runs
        }
        self.match: dict[str, dict[str, dict]] = {}
        self.match_notes: dict[str, str] = {}
        if compare:
            for first in self.runs:
                for second in self.runs:
                    if first is second:
                        continue
                    found, why = match_heads(first.store, second.store, (first.heads, second.heads))
                    if found:
                        self.match.setdefault(first.id, {})[second.id] = found
                    else:
                        self.match_notes[f"{first.name} -> {second.name}"] = why
        self.table = self._table()
        self.dictionary = self._dictionary()

    @classmethod
    def from_run(cls, *runs: str | os.PathLike, **options: bool) -> Atlas:
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
        # registry order, a column's specs (a declaration and its twins, _also) together; undescribed: last
        rank = {spec.name: i for i, spec in reversed(list(enumerate(COLUMNS)))}
        specs = {name: src[0] for run in self.runs for name, src in run.sources.items()}
        values = sorted(
            (c for c in table.columns if c not in ID_COLUMNS),
            key=lambda c: (rank[spec.name] if (spec := specs[c]) else len(COLUMNS), c),
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
                    "label": _format(spec.label, _readable(fill)) if spec else key,
                    "meaning": _format(spec.description, _readable(fill))
                    if spec
                    else f"recorded by {notebook} as {key}",
                    "unit": spec.unit if spec else "as recorded",
                    "kind": _kind(run.columns[name]),
                    "notebook": notebook,
                    "paper": spec.paper if spec else "",
                    "paper_value": spec.paper_value or "" if spec else "",
                    "metric": spec.metric_of(key) if spec else key,
                    "status": "recorded",
                    "reason": "",
                }
        read = {source[0].name for run in self.runs for source in run.sources.values() if source[0]}
        for spec in _first_specs():
            if spec.name in read:
                continue
            placeholder = _placeholders(spec.name)
            rows[placeholder] = {
                "column": placeholder,
                "label": _placeholders(spec.label),
                "meaning": _placeholders(spec.description),
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
            topic = spec.metric.split(".", 1)[0]
            skipped = [f"{s}: {r}" for s, r in run.missing.items() if s == spec.notebook or s.split(".")[0] == topic]
            if skipped:
                reasons.append(f"{run.name}: " + "; ".join(skipped))
            elif not (run.folder / spec.notebook / results.METRICS_FILE).is_file():
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
                {
                    **{k: claim.get(k, "") for k in ("key", "claim", "verdict", "paper_value", "ours")},
                    "uncertainty": claim_uncertainty(claim),
                    "run": run.id,
                }
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
            paths["page"] = folder / PAGE_FILE
            atomic_write_text(paths["page"], render_atlas_page(self.payload()))
        return paths

    def show(self) -> VBox:
        """The atlas as a JupyterLab widget: the grid, the column menu and a head's card."""
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


def _typed(grid: np.ndarray) -> np.ndarray | ExtensionArray:
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
    folders = [results.find_run(run) for run in runs]
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


def _first_specs() -> list[ColumnSpec]:
    """One spec per column name: a column's twins (``clustering.head.x`` and ``.y``) go under the first."""
    return list({spec.name: spec for spec in reversed(COLUMNS)}.values())[::-1]


def columns_markdown() -> str:
    """The registry as a Markdown table (the documentation's list of atlas columns)."""
    lines = ["| column | meaning | unit | notebook | paper |", "|---|---|---|---|---|"]
    for spec in _first_specs():
        meaning = _placeholders(spec.description).replace("<", "&lt;").replace(">", "&gt;")  # not tags
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
