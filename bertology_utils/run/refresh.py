"""Refresh a reference folder from a run: values are data, tolerances are decisions.

:func:`update_references` rewrites each notebook's reference file (its format:
:mod:`bertology_utils.run.regression`) from a run, keeping each kept metric's tolerance, note and the
file's comments; given runs of the same notebooks under perturbations (:mod:`bertology_utils.run.perturb`),
it sets each metric's tolerance from what those runs measured.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bertology_utils.core.files import atomic_write_text
from bertology_utils.papers.metrics import Kind
from bertology_utils.run import results
from bertology_utils.run.regression import (
    DEFAULT_TOLERANCE,
    CheckResult,
    Reference,
    Tolerance,
    compare_metrics,
    compare_versions,
    kind_tolerance,
    mismatches,
    read_references,
)

__all__ = ["SAFETY_FACTOR", "CHANGES_FACTOR", "Refresh", "update_references"]

#: A refresh under perturbations sets a number's tolerance to this many times the largest move it measured
#: (never below its kind's floor): the CPUs, GPUs and seeds it did not try may move it further.
SAFETY_FACTOR = 10.0
#: ... and allows this many times the number of decisions (elements of a grid) it saw flip.
CHANGES_FACTOR = 2
_TOLERANCE_KEYS = ("abs", "rel", "ignore", "note", "changes")  # what a refresh without perturbations keeps
_TIMING_WORD = "seconds"  # a refresh does not compare new timings


@dataclass
class Refresh:
    """What update_references did: the files written, the notebooks left alone, and the changes."""

    written: list[Path]
    not_written: list[str]  # notebooks that failed: their references stay as they were
    changes: CheckResult  # the run against the references as they were before
    #: what moved under the perturbations though its kind says it cannot (an exact count, a verdict), or whose
    #: shape changed: "notebook metric: how (perturbation)"; each is a finding to look into, not a tolerance
    unsettled: list[str] = field(default_factory=list)


def update_references(
    run_dir: str | os.PathLike,
    reference_dir: str | os.PathLike,
    perturbed: Mapping[str, str | os.PathLike] | None = None,
    verdicts_only: Collection[str] = (),
) -> Refresh:
    """Rewrite ``<reference_dir>/<stem>.json`` for each notebook of the run that ran.

    Values, parameters, versions and the machine (run.json's) come from the run. Each metric records its
    declared kind. ``perturbed`` maps a perturbation's name to a run of the same notebooks and parameters
    under it (another CPU instruction set, another thread count: :mod:`bertology_utils.run.perturb`); with
    it, every compared metric's tolerance is set from what it measured: :data:`SAFETY_FACTOR` times the
    largest move of a number, :data:`CHANGES_FACTOR` times the elements that flipped, never below the kind's
    floor (:func:`kind_tolerance`), nor below a stated tolerance that gives its reason (a ``note``: what was
    measured on machines the refresh cannot try). The perturbations named in ``verdicts_only`` set no
    tolerance: only a verdict that moved under them is reported (``unsettled``). Without it, a metric already in the reference keeps
    its tolerance and note, and a new one gets its kind's floor (undeclared: the file's ``default``, else
    DEFAULT_TOLERANCE, when it holds floats, not compared when its name says it is a time in seconds, else
    exact). Metrics the run no longer records are dropped. Failed notebooks are left alone. Every existing
    reference file is read first, so a malformed one stops the refresh.
    """
    folder = results.find_run(run_dir)
    reference_dir = Path(reference_dir)
    old = read_references(reference_dir, allow_empty=True)
    ran = results.run_entries(folder)
    metrics = results.load_metrics(folder)
    versions = results.run_versions(folder)
    others = {name: results.find_run(path) for name, path in (perturbed or {}).items()}
    other_metrics = {name: results.load_metrics(path) for name, path in others.items()}
    other_status = {
        name: {nb["name"]: nb.get("status") for nb in results.run_entries(path)} for name, path in others.items()
    }
    context = {
        "environment": results.run_environment(folder),
        "perturbations": [{"name": name, "environment": results.run_environment(path)} for name, path in others.items()]
        or None,
    }
    written, not_written, changes, replaced, unsettled = [], [], [], [], []
    for nb in ran:
        stem = nb["name"]
        if nb.get("status") == "failed":
            not_written.append(stem)
            continue
        changes += compare_metrics(stem, old.get(stem), metrics.get(stem, {}))
        replaced += [old[stem]] if stem in old else []
        measured = {
            name: found.get(stem, {})
            for name, found in other_metrics.items()
            if other_status[name].get(stem) == nb.get("status")
        }
        reference = _reference_object(
            old.get(stem),
            metrics.get(stem, {}),
            nb.get("parameters"),
            versions,
            measured,
            context,
            nb.get("status"),
            verdicts_only,
        )
        unsettled += [f"{stem} {line}" for line in reference.pop("_unsettled")]
        path = reference_dir / f"{stem}.json"
        atomic_write_text(path, _dumps(reference))
        written.append(path)
    changed = CheckResult(reference_dir, changes, versions=compare_versions(replaced, versions))
    return Refresh(written, not_written, changed, unsettled)


def _reference_object(
    old: Reference | None,
    metrics: dict,
    parameters: dict | None,
    versions: dict | None,
    measured: Mapping[str, dict] | None = None,
    context: Mapping[str, object] | None = None,
    status: str | None = None,
    verdicts_only: Collection[str] = (),
) -> dict:
    raw = old.raw if old is not None else {}
    default = raw.get("default", {"abs": DEFAULT_TOLERANCE.abs, "rel": DEFAULT_TOLERANCE.rel})
    entries, unsettled = {}, []
    for name, value in metrics.items():
        kind, floor = kind_tolerance(name, value, metrics)
        stated = raw["metrics"][name] if old is not None and name in old.metrics else None
        if kind is not None and measured:
            tolerance, seen, problems = _measured_tolerance(name, value, kind, floor, measured, verdicts_only)
            if old is not None and stated is not None and "note" in stated:
                # a tolerance with its reason was measured where this refresh cannot go (another machine): kept
                tolerance = tolerance.widened(old.tolerances[name])
            unsettled += problems
            kept = {**_tolerance_entry(tolerance), **({"measured": seen} if seen else {})}
            kept.update({"note": stated["note"]} if stated and "note" in stated else {})
        elif stated is not None:
            kept = {k: v for k, v in stated.items() if k in _TOLERANCE_KEYS}
        elif kind is not None:
            kept = _tolerance_entry(floor)
        elif _TIMING_WORD in name.rsplit(".", 1)[-1]:
            kept = {"ignore": "timing: depends on the machine and its load"}
        elif _holds_float(value):
            kept = dict(default)
        else:
            kept = {}
        entries[name] = {"value": value, **({"kind": kind} if kind is not None else {}), **kept}
    comments = {k: v for k, v in raw.items() if k.startswith("_")}
    made_with = {"versions": versions} if versions is not None else {}
    made_on = {key: value for key, value in (context or {}).items() if value}
    return {
        **comments,
        "parameters": parameters,
        **made_with,
        **made_on,
        **({"status": status} if status == "skipped" else {}),
        "default": default,
        "metrics": entries,
        "_unsettled": unsettled,
    }


def _tolerance_entry(tolerance: Tolerance) -> dict:
    """A tolerance as a reference file writes it: only what is not zero."""
    if tolerance.ignore is not None:
        return {"ignore": tolerance.ignore}
    entry = {"abs": tolerance.abs, "rel": tolerance.rel, "changes": tolerance.changes}
    return {key: value for key, value in entry.items() if value}


def _measured_tolerance(
    name: str, value: Any, kind: str, floor: Tolerance, runs: Mapping[str, dict], verdicts_only: Collection[str] = ()
) -> tuple[Tolerance, dict, list[str]]:
    """A metric's tolerance from how far it moved in the perturbed ``runs`` (name -> metrics), what was
    measured (largest move, flipped elements, the perturbations that moved it), and what moved that its kind
    says cannot; the runs named in ``verdicts_only`` are read for verdicts alone."""
    if floor.ignore is not None:
        return floor, {}, []
    largest, flips, moved, problems = 0.0, 0, [], []
    for perturbation, metrics in runs.items():
        if perturbation in verdicts_only and kind != Kind.VERDICT.value:
            continue
        if name not in metrics:
            problems.append(f"{name}: not recorded under {perturbation}")
            continue
        found = list(mismatches(value, metrics[name], Tolerance()))
        if not found:
            continue
        moved.append(perturbation)
        if any(structural for *_, structural in found):
            problems.append(f"{name}: its shape changed under {perturbation}")
            continue
        # a leaf outside the kind's floor is a decision that flipped (a maximum), or a label; within, float noise
        outside = {where for where, *_ in mismatches(value, metrics[name], floor)}
        decided = kind == Kind.MAXIMUM.value
        numbers = [size for where, size, *_ in found if size is not None and not (decided and where in outside)]
        largest = max([largest, *numbers])
        flips = max(flips, sum(1 for where, size, *_ in found if where in outside and (decided or size is None)))
        if kind in (Kind.EXACT.value, Kind.VERDICT.value):
            problems.append(
                f"{name}: a{'' if kind == Kind.EXACT.value else ' verdict'} {kind} value moved under {perturbation}"
            )
    tolerance = Tolerance(
        max(floor.abs, SAFETY_FACTOR * largest) if kind not in (Kind.EXACT.value, Kind.VERDICT.value) else 0.0,
        floor.rel,
        None,
        max(floor.changes, CHANGES_FACTOR * flips)
        if kind in (Kind.MAXIMUM.value, Kind.TRAINED.value)
        else floor.changes,
    )
    seen = {"abs": largest, "changes": flips, "under": moved} if moved else {}
    return tolerance, seen, problems


def _dumps(reference: dict) -> str:
    """The file's text: one line per metric, so that a changed metric is one changed line in a diff."""

    def dumps(value: Any, indent: int = 0) -> str:
        return json.dumps(value, indent=indent or None, allow_nan=False).replace("\n", "\n  ")

    parts = []
    for key, value in reference.items():
        if key == "metrics" and value:
            rows = ",\n".join(f"    {dumps(name)}: {dumps(entry)}" for name, entry in value.items())
            parts.append(f'  "metrics": {{\n{rows}\n  }}')
        else:
            parts.append(f"  {dumps(key)}: {dumps(value, indent=2)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def _holds_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        value = list(value.values())
    return isinstance(value, list) and any(_holds_float(v) for v in value)
