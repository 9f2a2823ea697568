"""What the lecture reads from a run: its folder, model, data, and each notebook's records (status, skipped
sections, claims), as :mod:`bertology_utils.present.lecture` and its slides use them."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from bertology_utils.core.errors import BertologyError
from bertology_utils.present.findings import model_of, notebook_record
from bertology_utils.present.lecture_outline import claim_id, home_notebook
from bertology_utils.run import results

__all__ = ["LectureRun", "read_lecture_run"]


@dataclass
class LectureRun:
    """What the lecture reads from one run: its folder, model, notebooks' records and data."""

    folder: Path
    name: str
    model: str
    notebooks: dict[str, dict] = field(default_factory=dict)
    data: list[str] = field(default_factory=list)
    finished: str | None = None

    @property
    def short_model(self) -> str:
        return self.model.rstrip("/").rsplit("/", 1)[-1]

    @cached_property
    def claims(self) -> list[tuple[str, dict]]:
        """Every recorded claim once, as (notebook, claim), in notebook order. A claim several notebooks check
        (the tour repeats two of 01's) is the copy of the notebook whose topic shows it."""
        copies: dict[str, list[tuple[str, dict]]] = {}
        for name, nb in self.notebooks.items():
            for claim in nb["claims"]:
                copies.setdefault(claim_id(claim["key"]), []).append((name, claim))
        return [next((c for c in found if c[0] == home_notebook(key)), found[0]) for key, found in copies.items()]


def read_lecture_run(run_dir: str | os.PathLike) -> LectureRun:
    """A run folder (or a run name under ``results/``) as the lecture reads it. A run with no results is
    still a run: its slides say what is missing."""
    folder = results.find_run(run_dir)
    run_file = folder / results.RUN_FILE
    run = results.read_json(run_file) if run_file.is_file() else {}
    notebooks, models, corpora, tasks = {}, set(), [], set()
    for entry in results.run_entries(folder):
        metrics_file = folder / entry["name"] / results.METRICS_FILE
        metrics = results.read_json(metrics_file) if metrics_file.is_file() else {}
        if model := model_of(metrics):
            models.add(model)
        corpora += _corpora(metrics)
        tasks |= _tasks(metrics)
        notebooks[entry["name"]] = notebook_record(folder, entry) | {"error": entry.get("error")}
    if len(models) > 1:
        raise BertologyError(f"run {folder} mixes models {sorted(models)}: a lecture shows one model per run")
    return LectureRun(
        folder=folder,
        name=str(run.get("run_name", folder.name)),
        model=models.pop() if models else "unknown model",
        notebooks=notebooks,
        data=list(dict.fromkeys(corpora)) + (["GLUE " + ", ".join(sorted(tasks))] if tasks else []),
        finished=run.get("finished"),
    )


_DATA_NAME = re.compile(r"\bof (.+?) — ")


def _corpora(metrics: dict) -> list[str]:
    """The corpus a notebook names in its ``<topic>.data`` line, for the title slide."""
    return [m.group(1) for k, v in metrics.items() if k.endswith(".data") and (m := _DATA_NAME.search(str(v)))]


def _tasks(metrics: dict) -> set[str]:
    """The fine-tuning tasks a notebook's metrics are keyed by."""
    from bertology_utils.interventions.scoring import TASKS

    return {part for key in metrics for part in key.split(".") if part in TASKS}
