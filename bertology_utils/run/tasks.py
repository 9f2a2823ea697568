"""A notebook's fine-tuned classifier for one task, or the recorded reason it has none.

Notebooks 02, 06, 07 and 08 each need the same steps for a task parameter: resolve its data,
take the task's default budget with the notebook's overrides, fine-tune (cached, see
:func:`~bertology_utils.interventions.finetuning.fine_tune`), and, where the data is missing,
record the section as skipped (:func:`~bertology_utils.run.record.record_skipped`) and go on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tqdm.auto import tqdm

from bertology_utils.core.cache import busy_last
from bertology_utils.core.errors import BertologyError, DataNotFoundError
from bertology_utils.data import Task, resolve_task
from bertology_utils.interventions.finetuning import Budget, FineTuned, default_budget, fine_tune
from bertology_utils.run.record import StageTimes, record_skipped

if TYPE_CHECKING:
    from bertology_utils.core.models import LoadedModel

__all__ = ["DEFAULT", "TunedTask", "task_budget", "fine_tune_task", "fine_tune_tasks", "fine_tune_seeds"]

#: ``train_examples`` value that keeps the task's default budget (an int, or None for all, overrides it).
DEFAULT = "default"


@dataclass
class TunedTask:
    """A task's data, the budget it was fine-tuned with, and the fine-tuned classifier."""

    data: Task
    budget: Budget
    tuned: FineTuned

    @property
    def name(self) -> str:
        return self.data.name


def task_budget(
    task: str | Task,
    train_examples: int | str | None = DEFAULT,
    epochs: int | None = None,
    eval_examples: int | None = None,
) -> Budget:
    """The task's default budget with a notebook's overrides.

    ``train_examples`` replaces the default unless it is :data:`DEFAULT` (None: the whole train
    split); ``epochs`` replaces it unless None; ``eval_examples`` always does (None: the whole dev split).
    """
    changes: dict = {"eval_examples": eval_examples}
    if train_examples != DEFAULT:
        changes["train_examples"] = train_examples
    if epochs is not None:
        changes["epochs"] = epochs
    return dataclasses.replace(default_budget(task), **changes)


def fine_tune_task(
    task: str | os.PathLike | Task,
    model: str | os.PathLike | LoadedModel | None = None,
    *,
    section: str,
    train_examples: int | str | None = DEFAULT,
    epochs: int | None = None,
    eval_examples: int | None = None,
    seed: int = 0,
    init: str = "pretrained",
    precision: str | None = None,
    times: StageTimes | None = None,
    skip_failures: bool = False,
    output_dir: str | os.PathLike | None = None,
    progress: bool = True,
    wait: bool = True,
) -> TunedTask | None:
    """Fine-tune ``model`` on a task parameter (a GLUE name, task folder or Task), or record why not.

    The budget is :func:`task_budget`'s. Missing data (:class:`DataNotFoundError`) is recorded as the
    skipped ``section`` and gives None; so does any other failure to fine-tune when ``skip_failures``
    (e.g. an architecture without a classifier head). ``times`` adds the fine-tuning's seconds under
    ``(task name, "fine-tune")`` (``"fine-tune (<init> init)"`` for another init). Prints the run's
    one-line description. ``progress``: bars of the training steps and the dev predictions. ``wait``: see
    :func:`~bertology_utils.interventions.finetuning.fine_tune` (:class:`~bertology_utils.core.cache.EntryBusy`
    passes through).
    """
    try:
        data = task if isinstance(task, Task) else resolve_task(task)
    except DataNotFoundError as missing:
        record_skipped(section, missing.short(), output_dir)
        return None
    budget = task_budget(data, train_examples, epochs, eval_examples)
    stage = "fine-tune" if init == "pretrained" else f"fine-tune ({init} init)"
    try:
        with times.timed(data.name, stage) if times is not None else contextlib.nullcontext():
            tuned = fine_tune(
                data, model, budget=budget, seed=seed, init=init, precision=precision, progress=progress, wait=wait
            )
    except DataNotFoundError as missing:
        record_skipped(section, missing.short(), output_dir)
        return None
    except BertologyError as failure:
        if not skip_failures:
            raise
        record_skipped(section, f"fine-tuning failed, so nothing below uses it: {failure}", output_dir)
        return None
    print(tuned.describe())
    return TunedTask(data, budget, tuned)


def fine_tune_tasks(
    sources: Iterable[str | os.PathLike],
    model: str | os.PathLike | LoadedModel | None,
    *,
    section: str,
    progress: bool = True,
    **settings: Any,
) -> dict[str | os.PathLike, TunedTask | None]:
    """Fine-tune ``model`` on each task source, with a progress bar over the tasks.

    :param sources: task parameters (GLUE names or task folders), in order.
    :param model: the pre-trained model (None: the default).
    :param section: the prefix of each source's skipped section (``<section>.<source>``).
    :param progress: progress bars (the tasks', and each fine-tuning's).
    :param settings: the other keyword arguments of :func:`fine_tune_task` (budget, seed, skip_failures, ...).
    :returns: each source's classifier, None where it was skipped (and why is recorded).
    """

    def one(source: str | os.PathLike, wait: bool) -> TunedTask | None:
        return fine_tune_task(source, model, section=f"{section}.{source}", progress=progress, wait=wait, **settings)

    ordered = list(sources)
    found: dict[str | os.PathLike, TunedTask | None] = {}
    with tqdm(total=len(ordered), desc=f"{section}: tasks", unit="task", disable=not progress) as bar:
        for source, run in busy_last(ordered, one):  # a checkpoint another process is training: after the others
            found[source] = run
            bar.update()
    return {source: found[source] for source in ordered}


def fine_tune_seeds(
    task: str | os.PathLike | Task,
    model: str | os.PathLike | LoadedModel | None,
    seeds: Sequence[int],
    *,
    section: str,
    progress: bool = True,
    **settings: Any,
) -> dict[int, TunedTask]:
    """Fine-tune ``model`` on ``task`` once per seed, with a progress bar over the seeds.

    :param task: a GLUE name, task folder or Task.
    :param model: the pre-trained model (None: the default).
    :param seeds: the fine-tuning seeds, in order.
    :param section: the section recorded as skipped where the data is missing.
    :param progress: progress bars (the seeds', and each fine-tuning's).
    :param settings: the other keyword arguments of :func:`fine_tune_task` (budget, precision, output folder).
    :returns: each seed's classifier, in the order of ``seeds``; empty where the data is missing.
    """

    def one(run_seed: int, wait: bool) -> TunedTask | None:
        return fine_tune_task(task, model, section=section, seed=run_seed, progress=progress, wait=wait, **settings)

    found: dict[int, TunedTask] = {}
    with tqdm(total=len(seeds), desc=f"{section}: seeds", unit="seed", disable=not progress) as bar:
        for run_seed, run in busy_last(seeds, one):  # a checkpoint another process is training: after the others
            if run is None:  # the data is missing, for every seed alike
                return {}
            found[run_seed] = run
            bar.update()
    return {s: found[s] for s in seeds}
