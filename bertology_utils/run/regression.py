"""Compare a run's metrics with committed reference metrics, each under its own tolerance.

Reference folder
----------------
One JSON file per notebook, ``<stem>.json`` (``00_tour.json``)::

    {
      "_comment": "why the tolerances are what they are (any key starting with _ is kept as it is)",
      "parameters": {"n_sentences": 4},
      "versions": {"python": "3.11.7", "platform": "linux-x86_64", "torch": "2.13.0+cpu", ...},
      "default": {"abs": 1e-06, "rel": 0.0001},
      "metrics": {
        "tour.mean_attention_to_cls": {"value": 0.0412, "abs": 1e-06, "rel": 0.0001},
        "tour.model": {"value": "all-MiniLM-L6-v2"},
        "tour.n_sentences": {"value": 4},
        "tour.extract_seconds": {"value": 3.1, "ignore": "timing: depends on the machine"}
      }
    }

A number passes when ``|value - reference| <= max(abs, rel * |reference|)``; what a metric
does not state is 0, so strings, booleans, null, integers and floats without a tolerance
must be equal. Lists and objects are compared element by element under the metric's
tolerance (same length, same keys). ``ignore`` (the reason) records the value without
comparing it. ``note`` is free text. ``parameters`` are the notebook parameters the
reference was made with; ``versions`` what the run that made it was made with (its
``run.json`` versions: Python, platform, the libraries of ``core.LIBRARIES``; a file without
them reads as "versions unknown"); ``default`` is the tolerance a refresh gives to new metrics
holding floats (``DEFAULT_TOLERANCE`` without it).

A check compares the notebooks of a run (``run.json``) with their references: a metric
outside its tolerance is *regressed*, one missing from the run is *missing* (a failure too),
one not in the reference is *new* (reported, not a failure). References of notebooks the
run did not include are skipped. Versions that differ between the run and a reference are a
warning, not a failure: the diff starts with them. The result goes to ``<run dir>/check.json``::

    {"reference": "<dir>", "ok": true,
     "differences": [{"notebook": "00_tour", "metric": "tour.n_sentences", "reference": 4,
                      "value": 4, "tolerance": "exact", "status": "ok"}, ...],
     "versions": {"differences": [{"name": "transformers", "reference": "5.23.0", "value": "5.24.0",
                                   "notebooks": ["00_tour", ...]}, ...],
                  "compared": ["00_tour", ...], "unknown": ["05_clustering", ...]}}

``versions.compared`` and ``versions.unknown`` list the notebooks whose versions were compared
and those whose reference (or the run) records none.

A refresh (:mod:`bertology_utils.run.refresh`) rewrites the references from a run.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bertology_utils.core.errors import BertologyError, DataFormatError
from bertology_utils.core.files import atomic_write_text
from bertology_utils.papers.metrics import FLOORS, REGISTRY, Kind
from bertology_utils.run import results

__all__ = [
    "CHECK_FILE",
    "OK",
    "REGRESSED",
    "MISSING",
    "NEW",
    "FAILING",
    "Tolerance",
    "DEFAULT_TOLERANCE",
    "Reference",
    "read_reference",
    "read_references",
    "Difference",
    "VersionDifference",
    "VersionCheck",
    "CheckResult",
    "compare_versions",
    "compare_metrics",
    "kind_tolerance",
    "mismatches",
    "INCONCLUSIVE",
    "check_run",
    "write_check",
]

CHECK_FILE = "check.json"
OK, REGRESSED, MISSING, NEW = "ok", "regressed", "missing", "new"
FAILING = (REGRESSED, MISSING)

_FILE_KEYS = {"parameters", "versions", "environment", "perturbations", "status", "default", "metrics"}  # and "_..."
_METRIC_KEYS = {"value", "abs", "rel", "ignore", "note", "changes", "kind", "measured"}
_SHOWN_CHARS = 60  # a value's width in the text report


@dataclass(frozen=True)
class Tolerance:
    """How far a number may move: ``max(abs, rel * |reference|)``; ``changes``: how many elements of a list or
    object (a grid of heads) may lie outside that, for a value decided by maxima, where a near-tie flips one
    decision; ``ignore``: not compared (the reason)."""

    abs: float = 0.0
    rel: float = 0.0
    ignore: str | None = None
    changes: int = 0

    def allows(self, reference: float, value: float) -> bool:
        return abs(value - reference) <= max(self.abs, self.rel * abs(reference))

    def describe(self) -> str:
        if self.ignore is not None:
            return f"not compared ({self.ignore})"
        parts = ([f"abs {self.abs:g}"] if self.abs else []) + ([f"rel {self.rel:g}"] if self.rel else [])
        text = " or ".join(parts) or "exact"
        return text + (f", {self.changes} element{'s' * (self.changes != 1)} may differ" if self.changes else "")

    def widened(self, other: Tolerance) -> Tolerance:
        """The looser of the two on each count; not compared when either is not."""
        return Tolerance(
            max(self.abs, other.abs),
            max(self.rel, other.rel),
            self.ignore if self.ignore is not None else other.ignore,
            max(self.changes, other.changes),
        )


#: The tolerance a refresh gives a new metric holding floats when its file states no ``default`` and no
#: declaration gives it a kind: float32 forward passes summed in another order (thread count, CPU) move
#: results by ~1e-6 relative.
DEFAULT_TOLERANCE = Tolerance(abs=1e-6, rel=1e-4)


@dataclass
class Reference:
    """One notebook's reference metrics, as read from ``path``."""

    notebook: str
    path: Path
    metrics: dict[str, object]  # name -> reference value
    tolerances: dict[str, Tolerance]  # name -> its tolerance
    parameters: dict | None
    raw: dict  # the file as read (a refresh keeps its comments and notes)
    versions: dict | None = None  # what the run that made it was made with; None: unknown
    status: str = "ok"  # the notebook's status in the run that made it ("skipped": it computed nothing)

    def values_sha256(self) -> str:
        """A digest of the reference's values, not its tolerances: what a run kept as evidence (a device's,
        ``tests/references/devices/``) was checked against, so that a refresh that moved them is seen."""
        return hashlib.sha256(json.dumps(self.metrics, sort_keys=True).encode()).hexdigest()


def read_reference(path: str | os.PathLike) -> Reference:
    """Read and validate one reference file; a malformed one raises DataFormatError naming it."""
    path = Path(path)
    if not path.is_file():
        raise BertologyError(f"no reference file {path}")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataFormatError(f"not valid JSON ({exc})", path) from None
    except UnicodeDecodeError as exc:
        raise DataFormatError(f"not UTF-8 text ({exc})", path) from None
    if not isinstance(raw, dict):
        raise DataFormatError("a reference file holds a JSON object", path)
    unknown = sorted(k for k in raw if k not in _FILE_KEYS and not k.startswith("_"))
    if unknown:
        raise DataFormatError(
            f"unknown keys {unknown}; expected {sorted(_FILE_KEYS)} (and comments starting with _)", path
        )
    metrics = raw.get("metrics")
    if not isinstance(metrics, dict):
        raise DataFormatError(
            "'metrics' must be an object: metric name -> {'value': ..., 'abs': ..., 'rel': ...}", path
        )
    parameters = raw.get("parameters")
    if parameters is not None and not isinstance(parameters, dict):
        raise DataFormatError("'parameters' must be an object or null", path)
    versions = raw.get("versions")
    if versions is not None and not (
        isinstance(versions, dict) and all(v is None or isinstance(v, str) for v in versions.values())
    ):
        raise DataFormatError("'versions' must be an object, name -> version string (or null), or null", path)
    if "default" in raw:
        _tolerance(raw["default"], "'default'", path, allowed={"abs", "rel"})
    if "status" in raw and raw["status"] not in ("ok", "skipped"):
        raise DataFormatError("'status' must be 'ok' or 'skipped'", path)
    values, tolerances = {}, {}
    for name, entry in metrics.items():
        if not isinstance(entry, dict) or "value" not in entry:
            raise DataFormatError(f"metric {name!r}: expected an object with a 'value', got {_shorten(entry)}", path)
        if not _finite(entry["value"]):
            raise DataFormatError(f"metric {name!r}: NaN and infinities cannot be compared; record them as null", path)
        values[name] = entry["value"]
        tolerances[name] = _tolerance(entry, f"metric {name!r}", path, allowed=_METRIC_KEYS)
    return Reference(path.stem, path, values, tolerances, parameters, raw, versions, raw.get("status", "ok"))


def _tolerance(entry: Any, where: str, path: Path, allowed: set[str]) -> Tolerance:
    if not isinstance(entry, dict):
        raise DataFormatError(f"{where}: expected an object, got {_shorten(entry)}", path)
    unknown = sorted(set(entry) - allowed)
    if unknown:
        raise DataFormatError(f"{where}: unknown keys {unknown}; allowed: {sorted(allowed)}", path)
    for key in ("abs", "rel"):
        bound = entry.get(key, 0.0)
        if not _is_number(bound) or not math.isfinite(bound) or bound < 0:
            raise DataFormatError(f"{where}: {key!r} must be a number >= 0, got {_shorten(bound)}", path)
    for key in ("ignore", "note"):
        if key in entry and not (isinstance(entry[key], str) and entry[key].strip()):
            raise DataFormatError(f"{where}: {key!r} must be a non-empty string (the reason)", path)
    changes = entry.get("changes", 0)
    if not isinstance(changes, int) or isinstance(changes, bool) or changes < 0:
        raise DataFormatError(f"{where}: 'changes' must be a whole number >= 0, got {_shorten(changes)}", path)
    if "kind" in entry and entry["kind"] not in {k.value for k in Kind}:
        raise DataFormatError(f"{where}: 'kind' must be one of {[k.value for k in Kind]}", path)
    return Tolerance(float(entry.get("abs", 0.0)), float(entry.get("rel", 0.0)), entry.get("ignore"), changes)


def read_references(folder: str | os.PathLike, allow_empty: bool = False) -> dict[str, Reference]:
    """Every ``<stem>.json`` of a reference folder, by notebook stem.

    A missing folder or one without references is an error unless ``allow_empty`` (a refresh
    may start one).
    """
    folder = Path(folder)
    if not folder.is_dir() and not (allow_empty and not folder.exists()):
        raise BertologyError(f"no reference folder {folder}")
    references = {p.stem: read_reference(p) for p in sorted(folder.glob("*.json"))}
    if not references and not allow_empty:
        raise BertologyError(f"no reference files (<notebook>.json) in {folder}")
    return references


# --------------------------------------------------------------------------- comparing


@dataclass
class Difference:
    """One metric of one notebook compared: a row of check.json, plus ``detail`` (by how much) for the text."""

    notebook: str
    metric: str
    reference: object
    value: object
    tolerance: str
    status: str
    detail: str = ""
    kind: str | None = None  #: the metric's declared kind (:class:`~bertology_utils.papers.metrics.Kind`)

    def to_dict(self) -> dict:
        return {
            "notebook": self.notebook,
            "metric": self.metric,
            "kind": self.kind,
            "reference": self.reference,
            "value": self.value,
            "tolerance": self.tolerance,
            "status": self.status,
            **({"detail": self.detail} if self.detail else {}),
        }

    @property
    def is_verdict(self) -> bool:
        return self.kind == Kind.VERDICT.value


@dataclass
class VersionDifference:
    """A version (a library's, Python's, the platform) that differs between a run and the references of ``notebooks``."""

    name: str
    reference: str | None
    value: str | None
    notebooks: list[str]

    def to_dict(self) -> dict:
        return {"name": self.name, "reference": self.reference, "value": self.value, "notebooks": self.notebooks}


@dataclass
class VersionCheck:
    """A run's versions against its references': never a failure, a reason to read a regression with care."""

    differences: list[VersionDifference] = field(default_factory=list)
    compared: list[str] = field(default_factory=list)  # notebooks whose reference and run record versions
    unknown: list[str] = field(default_factory=list)  # notebooks whose reference or run records none

    def to_dict(self) -> dict:
        return {
            "differences": [v.to_dict() for v in self.differences],
            "compared": self.compared,
            "unknown": self.unknown,
        }

    def warning(self) -> list[str]:
        """Lines for the top of a diff, one per version that differs; none when all agree."""
        lines = ["WARNING: versions differ from those the references were made with (not a failure):"]
        for v in self.differences:
            which = "" if v.notebooks == self.compared else f" ({', '.join(v.notebooks)})"
            lines.append(f"  {v.name} {v.value or 'not installed'}, reference {v.reference or 'not installed'}{which}")
        return lines if self.differences else []


@dataclass
class CheckResult:
    """A run's metrics against a reference folder."""

    reference_dir: Path
    differences: list[Difference]
    skipped: list[str] = field(default_factory=list)  # references of notebooks the run did not include
    notes: list[str] = field(default_factory=list)  # failed notebooks, parameters that differ, no reference
    versions: VersionCheck = field(default_factory=VersionCheck)

    @property
    def ok(self) -> bool:
        return not any(d.status in FAILING for d in self.differences)

    def count(self, status: str) -> int:
        return sum(d.status == status for d in self.differences)

    def to_dict(self) -> dict:
        """The check.json object."""
        return {
            "reference": str(self.reference_dir),
            "ok": self.ok,
            "differences": [d.to_dict() for d in self.differences],
            "versions": self.versions.to_dict(),
        }

    def report(self, heading: str = "check against") -> str:
        """A readable diff: versions that differ (a warning), the verdict and counts, one line per metric
        that is not ok, then the notes (versions unknown among them)."""
        counts = ", ".join(f"{self.count(s)} {s}" for s in (REGRESSED, MISSING, NEW, OK))
        lines = self.versions.warning()
        lines.append(f"{heading} {self.reference_dir}: {'ok' if self.ok else 'FAILED'} ({counts})")
        verdicts = [d for d in self.differences if d.is_verdict]
        changed = [d for d in verdicts if d.status != OK]
        lines.append(
            f"verdicts: {len(verdicts) - len(changed)} of {len(verdicts)} as in the reference"
            + "".join(f"\n  {d.status:9}  {d.notebook}  {d.metric}: {d.reference} -> {d.value}" for d in changed)
        )
        rows = [d for d in self.differences if d.status != OK and not d.is_verdict]
        nb_width = max((len(d.notebook) for d in rows), default=0)
        for d in rows:
            if d.status == REGRESSED:
                what = (
                    f"reference {_shorten(d.reference)}, value {_shorten(d.value)}: {d.detail}; tolerance {d.tolerance}"
                )
            elif d.status == MISSING:
                what = f"reference {_shorten(d.reference)}, not recorded by this run"
            else:
                what = f"value {_shorten(d.value)}, not in the reference"
            kind = f" [{d.kind}]" if d.kind else ""
            lines.append(f"  {d.status:9}  {d.notebook:{nb_width}}  {d.metric}{kind}: {what}")
        lines += [f"  note: {note}" for note in self.notes]
        if self.versions.unknown:
            lines.append(
                f"  note: versions unknown for {', '.join(self.versions.unknown)}: the reference or the run records none"
            )
        lines += [f"  skipped: {stem} (not in this run; its reference is not compared)" for stem in self.skipped]
        return "\n".join(lines)


def compare_metrics(notebook: str, reference: Reference | None, metrics: dict) -> list[Difference]:
    """One notebook's metrics against its reference: every reference metric, then the new ones.

    Each metric is compared under its stated tolerance widened to its declared kind's floor
    (:func:`kind_tolerance`). A verdict that changed is a regression unless either side is inconclusive.
    """
    rows = []
    known = reference.metrics if reference is not None else {}
    tolerances = reference.tolerances if reference is not None else {}
    for name, expected in known.items():
        kind, floor = kind_tolerance(name, expected, {**known, **metrics})
        kind = kind or _stored_kind(reference, name)
        tolerance = tolerances[name].widened(floor)
        text = tolerance.describe()
        if name not in metrics:
            rows.append(Difference(notebook, name, expected, None, text, MISSING, kind=kind))
            continue
        value = metrics[name]
        if kind == Kind.VERDICT.value and INCONCLUSIVE in (expected, value) and expected != value:
            rows.append(Difference(notebook, name, expected, value, text, OK, f"{INCONCLUSIVE} on one side", kind))
            continue
        found = [] if tolerance.ignore is not None else list(mismatches(expected, value, tolerance))
        structural = [m for m in found if m[3]]
        within = not structural and len(found) <= tolerance.changes
        detail = _describe_mismatches(found) + (f" (within {tolerance.changes} allowed)" if found and within else "")
        rows.append(Difference(notebook, name, expected, value, text, OK if within else REGRESSED, detail, kind))
    rows += [
        Difference(notebook, name, None, value, "", NEW, kind=_declared_kind(name))
        for name, value in metrics.items()
        if name not in known
    ]
    return rows


#: The verdict of a claim whose interval straddles its rule's threshold: no change to or from it is a regression.
INCONCLUSIVE = "inconclusive"


def kind_tolerance(name: str, reference_value: Any, metrics: dict) -> tuple[str | None, Tolerance]:
    """The declared kind of metric ``name`` and the least tolerance it gives ``reference_value``.

    The kind's floor (:data:`~bertology_utils.papers.metrics.FLOORS`); its ``changes`` only for a list
    or an object; one item's worth (``1 / count``, or 100 / count in percent) for a value its
    declaration says was decided item by item, the count read from ``metrics``. An undeclared name:
    (None, exact), so a reference's stated tolerance alone applies.
    """
    metric = REGISTRY.find(name)
    if metric is None:
        return None, Tolerance()
    floor = FLOORS[metric.kind]
    count = REGISTRY.items_count(name, metrics)
    step = ((100.0 if metric.unit.startswith("percent") else 1.0) / count) if count else 0.0
    changes = floor.changes if isinstance(reference_value, (list, dict)) else 0
    return metric.kind.value, Tolerance(max(floor.abs, step), floor.rel, floor.ignore, changes)


def _declared_kind(name: str) -> str | None:
    metric = REGISTRY.find(name)
    return metric.kind.value if metric is not None else None


def _stored_kind(reference: Reference | None, name: str) -> str | None:
    entry = reference.raw.get("metrics", {}).get(name, {}) if reference is not None else {}
    return entry.get("kind")


def compare_versions(references: list[Reference], versions: dict | None) -> VersionCheck:
    """The run's ``versions`` (its run.json's) against each reference's; a name only one side records is not compared."""
    check = VersionCheck()
    notebooks: dict[tuple[str, str | None, str | None], list[str]] = {}
    for reference in references:
        if reference.versions is None or versions is None:
            check.unknown.append(reference.notebook)
            continue
        check.compared.append(reference.notebook)
        for name, expected in reference.versions.items():
            if name in versions and versions[name] != expected:
                notebooks.setdefault((name, expected, versions[name]), []).append(reference.notebook)
    check.differences = [VersionDifference(*key, stems) for key, stems in notebooks.items()]
    return check


def mismatches(
    expected: Any, value: Any, tolerance: Tolerance, where: str = ""
) -> Iterator[tuple[str, float | None, str, bool]]:
    """(where, size, how, structural) for each part of ``value`` outside ``tolerance`` of ``expected``; size
    orders numbers; structural: lengths, keys or types differ (never one of the allowed ``changes``)."""
    if _is_number(expected) and _is_number(value):
        if not tolerance.allows(expected, value):
            change = value - expected
            relative = f" ({100 * change / expected:+.3g}%)" if expected else ""
            yield where, abs(change), f"off by {change:+.6g}{relative}", False
    elif isinstance(expected, dict) and isinstance(value, dict):
        missing, new = [k for k in expected if k not in value], [k for k in value if k not in expected]
        if missing or new:
            yield (
                where,
                None,
                "keys differ: "
                + "; ".join(
                    f"{label} {', '.join(map(repr, keys))}"
                    for label, keys in (("missing", missing), ("new", new))
                    if keys
                ),
                True,
            )
        for key in expected:
            if key in value:
                yield from mismatches(expected[key], value[key], tolerance, f"{where}[{key!r}]")
    elif isinstance(expected, list) and isinstance(value, list):
        if len(expected) != len(value):
            yield where, None, f"length {len(value)}, reference {len(expected)}", True
        else:
            for i, (a, b) in enumerate(zip(expected, value)):
                yield from mismatches(a, b, tolerance, f"{where}[{i}]")
    elif type(expected) is not type(value) and not (_is_number(expected) and _is_number(value)):
        yield where, None, f"{_kind(value)}, reference {_kind(expected)}", True
    elif expected != value:
        yield where, None, "differs" if where else "not equal", False


def _describe_mismatches(found: list[tuple[str, float | None, str, bool]]) -> str:
    """The largest numeric mismatch (else the first), where it is, and how many more there are."""
    if not found:
        return ""
    where, _, how, _ = max(found, key=lambda m: -1.0 if m[1] is None else m[1])
    text = f"at {where}: {how}" if where else how
    return text + (f"; {len(found) - 1} more off" if len(found) > 1 else "")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        value = list(value.values())
    return not isinstance(value, list) or all(map(_finite, value))


def _kind(value: Any) -> str:
    return {type(None): "null", bool: "a boolean", str: "a string", list: "a list", dict: "an object"}.get(
        type(value), "a number"
    )


def _shorten(value: Any) -> str:
    text = f"{value:.8g}" if isinstance(value, float) else json.dumps(value, default=str)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


# --------------------------------------------------------------------------- runs


def check_run(
    run_dir: str | os.PathLike, reference_dir: str | os.PathLike, references: dict[str, Reference] | None = None
) -> CheckResult:
    """Compare the notebooks of ``run_dir`` with the references in ``reference_dir``.

    ``references`` (from read_references) saves reading the folder again.
    """
    folder = results.find_run(run_dir)
    references = read_references(reference_dir) if references is None else references
    ran = results.run_entries(folder)
    metrics = results.load_metrics(folder)
    differences, notes, compared, not_compared = [], [], [], []
    for nb in ran:
        stem = nb["name"]
        reference = references.get(stem)
        if reference is not None:
            compared.append(reference)
        if reference is None:
            notes.append(f"{stem} has no reference in {reference_dir}: its metrics are new")
        elif nb.get("status") == "failed":
            notes.append(f"{stem} failed: the reference metrics it did not record are missing")
        elif nb.get("status") == "skipped" and reference.status != "skipped":
            # it computed nothing here (09_atlas run without the notebooks it reads, or no data): what it would
            # have recorded is not missing; the run's status says it skipped
            not_compared.append(stem)
            notes.append(f"{stem} skipped everything in this run; its reference (made where it ran) is not compared")
            continue
        elif reference.parameters is not None and "parameters" in nb and nb["parameters"] != reference.parameters:
            notes.append(
                f"{stem} ran with parameters {json.dumps(nb['parameters'], sort_keys=True)}; "
                f"its reference was made with {json.dumps(reference.parameters, sort_keys=True)}"
            )
        differences += compare_metrics(stem, reference, metrics.get(stem, {}))
    skipped = [stem for stem in references if stem not in {nb["name"] for nb in ran}] + not_compared
    versions = compare_versions(compared, results.run_versions(folder))
    return CheckResult(Path(reference_dir), differences, skipped, notes, versions)


def write_check(result: CheckResult, run_dir: str | os.PathLike) -> Path:
    """Write ``<run dir>/check.json``; returns its path."""
    path = results.find_run(run_dir) / CHECK_FILE
    atomic_write_text(path, json.dumps(result.to_dict(), indent=2, allow_nan=False) + "\n")
    return path
