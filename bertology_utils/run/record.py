"""What a notebook calls to record what it found: metrics, claims, skipped sections, figures, stage times.

A notebook reports with::

    from bertology_utils.run import record_claims, record_metrics, record_skipped, save_figure
    record_metrics({"tour.max_cls_attention": value}, output_dir=output_dir)
    record_claims(claims, "tour.claims", output_dir=output_dir)   # papers.claims.Claim objects
    save_figure(fig, "cls_attention", output_dir=output_dir)
    record_skipped("coref", "GAP not found; ...", output_dir=output_dir)  # a section without its data

A notebook whose data is missing does not fail: each section it cannot compute is recorded with
:func:`record_skipped` (one printed line, the metric ``<topic>.skipped``, and ``skipped.json``),
and the rest runs (:func:`bertology_utils.run.tasks.fine_tune_task` does so for a task parameter
whose data is missing). A notebook that can compute nothing records ``everything=True`` and
finishes; its status is then ``skipped``.

Metric names are flat, dotted strings, ``"<topic>.<quantity>"``, unique across notebooks;
values are numbers or strings (arrays become lists). Run by hand in JupyterLab, ``output_dir``
stays None and every function here writes to ``results/interactive/``. Where each file goes:
:mod:`bertology_utils.run.results`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import os
import re
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

from bertology_utils.core.errors import BertologyError
from bertology_utils.core.files import atomic_write_text
from bertology_utils.papers.metrics import REGISTRY, MetricRegistry
from bertology_utils.run.results import (
    CLAIMS_FILE,
    INTERACTIVE_DIR,
    METRICS_FILE,
    SKIPPED_FILE,
    load_skipped,
    read_json,
    results_dir,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from bertology_utils.papers.claims import Claim

__all__ = [
    "FIGURE_FORMATS",
    "StageTimes",
    "record_metrics",
    "record_claims",
    "record_skipped",
    "save_figure",
]

#: What :func:`save_figure` writes by default: each figure costs about twice the time of a PNG alone.
FIGURE_FORMATS = ("png", "svg")

_UNSAFE_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")


class StageTimes(dict[tuple[str, str], float]):
    """Wall-clock seconds a notebook spends per ``(task, stage)``, added up over every ``with`` block::

        seconds = StageTimes()
        with seconds.timed("SST-2", "fine-tune"):
            ...
        seconds.of("SST-2")   # {"fine-tune": 47.1}
        seconds.total()

    A dict of ``(task, stage) -> seconds``, so it records as metrics like any mapping.
    """

    @contextlib.contextmanager
    def timed(self, task: str, stage: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self[(task, stage)] = self.get((task, stage), 0.0) + time.perf_counter() - start

    def of(self, task: str) -> dict[str, float]:
        """Seconds per stage of one task, in the order the stages first ran."""
        return {stage: s for (t, stage), s in self.items() if t == task}

    def total(self) -> float:
        return float(sum(self.values()))

    def flat(self) -> dict[str, float]:
        """``{"task: stage": seconds}``, in the order the stages first ran: one mapping for a table or a metric."""
        return {f"{task}: {stage}": s for (task, stage), s in self.items()}


def record_metrics(
    metrics: Mapping | None = None,
    output_dir: str | os.PathLike | None = None,
    *,
    declared: MetricRegistry | None = REGISTRY,
    **more: Any,
) -> dict:
    """Merge metrics into ``<output_dir>/metrics.json`` and return everything recorded there.

    Existing keys are kept unless given again. numpy and torch values, pandas objects and
    paths become plain JSON; NaN and infinities become null. ``output_dir=None`` writes to
    ``results/interactive/`` (a notebook run by hand). Every key must be declared in ``declared``
    (:data:`bertology_utils.papers.metrics.REGISTRY`: its kind decides how a regression check compares
    it); an undeclared one raises UndeclaredMetricError before anything is written. ``declared=None``
    records without that check (a notebook of your own, whose keys no check reads).
    """
    new = {**(metrics or {}), **more}
    bad_keys = [k for k in new if not isinstance(k, str)]
    if bad_keys:
        raise TypeError(f"metric names must be strings, got {bad_keys!r}")
    if declared is not None:
        declared.check(new)
    path = _output_folder(output_dir) / METRICS_FILE
    recorded = read_json(path) if path.exists() else {}
    recorded.update(_to_json(new))
    atomic_write_text(path, json.dumps(recorded, indent=2, sort_keys=True, allow_nan=False) + "\n")
    return recorded


def record_claims(
    claims: Iterable[Claim],
    prefix: str,
    output_dir: str | os.PathLike | None = None,
    *,
    declared: MetricRegistry | None = REGISTRY,
) -> list[Claim]:
    """Record checked claims: into ``<output_dir>/claims.json`` and, as metrics, :meth:`Claim.to_metrics`.

    ``prefix`` names the metrics (``"tour.claims"`` gives ``tour.claims.<id>.verdict``) and keys each
    claim in the file, so a claim recorded again under the same prefix and id replaces the old
    one. Returns every claim recorded in the folder, in order.
    """
    from bertology_utils.papers.claims import Claim

    claims = list(claims)
    keys = [f"{prefix}.{c.id}" for c in claims]
    if len(set(keys)) != len(keys):
        raise BertologyError(
            f"claims recorded under {prefix!r} share an id: {sorted(k for k in keys if keys.count(k) > 1)}"
        )
    values = {k: v for c in claims for k, v in c.to_metrics(prefix).items()}
    if declared is not None:
        declared.check(values)  # before claims.json is written, so that it never holds a claim metrics.json lacks
    path = _output_folder(output_dir) / CLAIMS_FILE
    recorded = {entry["key"]: entry for entry in (read_json(path).get("claims", []) if path.exists() else [])}
    recorded.update({key: {"key": key, **_to_json(c.to_dict())} for key, c in zip(keys, claims)})
    atomic_write_text(path, json.dumps({"claims": list(recorded.values())}, indent=2, allow_nan=False) + "\n")
    record_metrics(values, output_dir=output_dir, declared=None)
    return [Claim.from_dict(entry) for entry in recorded.values()]


def record_skipped(
    section: str, reason: str, output_dir: str | os.PathLike | None = None, *, everything: bool = False
) -> dict:
    """Record that ``section`` of a notebook is not computed, and why (its data is missing...).

    ``section`` is dotted like a metric (``"pruning.RTE"``, ``"coref"``); its first part names the
    metric ``<topic>.skipped``, the list of the topic's skipped sections. ``everything=True``
    says the notebook computed nothing, so the harness gives it the status ``skipped``. Prints
    the one line a reader sees and returns what ``skipped.json`` now holds.
    """
    if not section or not reason:
        raise BertologyError("record_skipped needs a section name and a reason")
    print(f"skipped {section}: {reason}")
    folder = _output_folder(output_dir)
    recorded = load_skipped(folder)
    sections = [s for s in recorded["sections"] if s["section"] != section] + [{"section": section, "reason": reason}]
    recorded = {"everything": recorded["everything"] or everything, "sections": sections}
    atomic_write_text(folder / SKIPPED_FILE, json.dumps(recorded, indent=2) + "\n")
    topic = section.split(".")[0]
    names = [s["section"] for s in sections if s["section"].split(".")[0] == topic]
    record_metrics({f"{topic}.skipped": names}, output_dir=folder)
    return recorded


def save_figure(
    fig: Figure,
    name: str,
    output_dir: str | os.PathLike | None = None,
    formats: Iterable[str] | str = FIGURE_FORMATS,
    dpi: int = 150,
) -> list[Path]:
    """Save a matplotlib figure as ``<output_dir>/figures/<name>.<format>`` for each format (png, svg, pdf).

    By default a PNG (for the report and the decks) and an SVG beside it, with its text as text (for
    ``bertology slides --figures``). ``name`` is reduced to letters, digits, ``_``, ``.`` and ``-``;
    ``output_dir=None`` as in ``record_metrics``. Returns the written paths.
    """
    from bertology_utils.core.figure_text import fitted_for_slide  # matplotlib: not for the command line's start
    from bertology_utils.core.figures import save_image

    stem = _UNSAFE_CHARS.sub("_", name).strip(".")
    if not stem:
        raise BertologyError(f"figure name {name!r} has no usable characters")
    folder = _output_folder(output_dir) / "figures"
    folder.mkdir(parents=True, exist_ok=True)
    formats = [formats] if isinstance(formats, str) else formats
    with fitted_for_slide(fig):  # fitted and laid out once for every format
        return [save_image(fig, folder / f"{stem}.{fmt.lstrip('.')}", dpi=dpi, fit=False) for fmt in formats]


def _output_folder(output_dir: str | os.PathLike | None) -> Path:
    folder = Path(output_dir).expanduser() if output_dir is not None else results_dir() / INTERACTIVE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _to_json(value: Any) -> Any:
    """A plain-JSON copy of ``value``."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_json(v) for v in value]
    if hasattr(value, "to_dict"):  # pandas Series and DataFrame: keep the index
        return _to_json(value.to_dict())
    if hasattr(value, "tolist"):  # numpy and torch arrays and scalars
        return _to_json(value.tolist())
    raise TypeError(f"cannot record a {type(value).__name__} as a metric; use numbers, strings, lists or dicts")
