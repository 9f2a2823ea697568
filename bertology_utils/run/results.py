"""Where a run's results go, and the readers of a run's files.

Results layout
--------------
::

    results/<run-name>/run.json                what ran: parameters, status, timings, versions
    results/<run-name>/check.json              metrics against references (--check; see regression)
    results/<run-name>/<stem>/<stem>.ipynb     the executed notebook (partial when it failed)
    results/<run-name>/<stem>/metrics.json     written by record_metrics (and record_claims)
    results/<run-name>/<stem>/claims.json      written by record_claims: the "paper vs ours" claims
    results/<run-name>/<stem>/skipped.json     written by record_skipped: sections not computed, and why
    results/<run-name>/<stem>/figures/         written by save_figure

The results root is ``results/`` in the project, or ``$BERTOLOGY_RESULTS_DIR``; a notebook run by hand
(outside :mod:`bertology_utils.run.harness`) writes to ``results/interactive/``. The writers are in
:mod:`bertology_utils.run.record`.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bertology_utils.core import settings
from bertology_utils.core.errors import BertologyError, DataFormatError

if TYPE_CHECKING:
    from bertology_utils.papers.claims import Claim

__all__ = [
    "RESULTS_DIR_ENV",
    "INTERACTIVE_DIR",
    "METRICS_FILE",
    "CLAIMS_FILE",
    "RUN_FILE",
    "SKIPPED_FILE",
    "STATUSES",
    "UNLISTED",
    "default_run_name",
    "results_dir",
    "find_run",
    "run_entries",
    "run_versions",
    "run_environment",
    "load_metrics",
    "load_claims",
    "load_skipped",
    "read_json",
]

#: Environment variable overriding the results root.
RESULTS_DIR_ENV = "BERTOLOGY_RESULTS_DIR"
#: Folder (under the results root) used when a notebook runs outside the harness.
INTERACTIVE_DIR = "interactive"
METRICS_FILE = "metrics.json"
CLAIMS_FILE = "claims.json"
RUN_FILE = "run.json"
SKIPPED_FILE = "skipped.json"
#: A notebook's status in a run: it ran; it ran but its data was missing for all of it; it raised.
STATUSES = ("ok", "skipped", "failed")
#: Status of a notebook folder with results that run.json does not list (a run without run.json, a copied folder).
UNLISTED = "not in run.json"


def default_run_name() -> str:
    """A run name from the local time, e.g. ``20261121-235959``."""
    return dt.datetime.now().strftime("%Y%m%d-%H%M%S")


def results_dir() -> Path:
    """The results root: ``$BERTOLOGY_RESULTS_DIR``, else ``results/`` in the project."""
    value = os.environ.get(RESULTS_DIR_ENV)
    return Path(value).expanduser() if value else settings.PROJECT_ROOT / "results"


def find_run(run_dir: str | os.PathLike) -> Path:
    """A run's folder: ``run_dir`` itself, or a run name under results_dir()."""
    folder = Path(run_dir).expanduser()
    if not folder.is_dir() and (results_dir() / folder).is_dir():
        folder = results_dir() / folder
    if not folder.is_dir():
        raise BertologyError(f"no run folder {run_dir} (looked in {Path.cwd()} and {results_dir()})")
    return folder


def run_entries(run_dir: str | os.PathLike) -> list[dict]:
    """The notebooks of a run, sorted by name: run.json's entries (name, status, parameters, error...),
    plus each notebook folder with results that run.json does not list, with status :data:`UNLISTED`."""
    folder = find_run(run_dir)
    path = folder / RUN_FILE
    entries = read_json(path).get("notebooks", []) if path.is_file() else []
    if not isinstance(entries, list) or not all(isinstance(nb, dict) and "name" in nb for nb in entries):
        raise DataFormatError("'notebooks' must be a list of objects with a 'name'", path)
    entries = [dict(nb) for nb in entries]
    listed = {nb["name"] for nb in entries}
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and p.name not in listed):
        if (sub / f"{sub.name}.ipynb").is_file() or (sub / METRICS_FILE).is_file():
            entries.append({"name": sub.name, "status": UNLISTED})
    return sorted(entries, key=lambda nb: nb["name"])


def run_versions(run_dir: str | os.PathLike) -> dict | None:
    """What a run was made with (``library_versions()`` as run.json records it); None without run.json."""
    path = find_run(run_dir) / RUN_FILE
    versions = read_json(path).get("versions") if path.is_file() else None
    if versions is not None and not isinstance(versions, dict):
        raise DataFormatError("'versions' must be an object: library -> version", path)
    return versions


def run_environment(run_dir: str | os.PathLike) -> dict | None:
    """The machine a run ran on (run.json's ``environment``); None for a run that did not record it."""
    path = find_run(run_dir) / RUN_FILE
    environment = read_json(path).get("environment") if path.is_file() else None
    return environment if isinstance(environment, dict) and environment else None


def load_metrics(run_dir: str | os.PathLike) -> dict[str, dict]:
    """Metrics of a run, notebook stem -> metrics; ``run_dir`` is a folder or a run name under results_dir()."""
    return {p.parent.name: read_json(p) for p in sorted(find_run(run_dir).glob(f"*/{METRICS_FILE}"))}


def load_claims(notebook_dir: str | os.PathLike) -> list[Claim]:
    """The claims a notebook recorded in ``<notebook_dir>/claims.json`` (none without the file)."""
    from bertology_utils.papers.claims import Claim

    path = Path(notebook_dir) / CLAIMS_FILE
    if not path.is_file():
        return []
    entries = read_json(path).get("claims")
    if not isinstance(entries, list) or not all(isinstance(e, dict) and "key" in e for e in entries):
        raise DataFormatError("'claims' must be a list of objects with a 'key'", path)
    try:
        return [Claim.from_dict(entry) for entry in entries]
    except (TypeError, ValueError) as exc:
        raise DataFormatError(f"not a claim ({exc})", path) from None


def load_skipped(notebook_dir: str | os.PathLike) -> dict:
    """What a notebook recorded with :func:`~bertology_utils.run.record.record_skipped`:
    ``{"everything": bool, "sections": [...]}``."""
    path = Path(notebook_dir) / SKIPPED_FILE
    if not path.is_file():
        return {"everything": False, "sections": []}
    data = read_json(path)
    sections = data.get("sections")
    if not isinstance(sections, list) or not all(
        isinstance(s, dict) and {"section", "reason"} <= set(s) for s in sections
    ):
        raise DataFormatError("'sections' must be a list of objects with a 'section' and a 'reason'", path)
    return {"everything": bool(data.get("everything")), "sections": sections}


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from ``path``; anything else raises DataFormatError naming the file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataFormatError(f"not valid JSON ({exc})", path) from None
    if not isinstance(data, dict):
        raise DataFormatError("expected a JSON object", path)
    return data
