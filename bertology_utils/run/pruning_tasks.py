"""Notebook 06's per-classifier steps, run over its fine-tuned tasks (and seeds) with a progress bar.

Kovaleva et al. (2019), *Revealing the Dark Secrets of BERT* (https://arxiv.org/abs/1908.08593), disabled
each head and layer of a fine-tuned classifier, compared its attention before and after fine-tuning, and set
it against a randomly initialised copy; Michel et al. (2019), *Are Sixteen Heads Really Better than One?*
(https://arxiv.org/abs/1905.10650), ranked heads by the gradient of a gate on their output and pruned them in
that order. Each function here takes the notebook's classifiers by task name, runs one of those steps on
every task, times it under ``(task, stage)`` in the notebook's :class:`~bertology_utils.run.record.StageTimes`,
and returns the results by task; :func:`seeded_pruning_inputs` runs them all on the other seeds' classifiers
and :func:`pruning_metrics` names what the notebook records.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
from tqdm.auto import tqdm

from bertology_utils.core.models import LoadedModel
from bertology_utils.core.typing import HeadMatrix
from bertology_utils.data import Corpus, Task
from bertology_utils.interventions.dev_sets import DevSet, dev_set
from bertology_utils.interventions.finetuning import FineTuned
from bertology_utils.interventions.finetuning_change import attention_change, layer_means
from bertology_utils.interventions.pruning import (
    AblationResult,
    PruningCurve,
    ablation_sweep,
    head_importance,
    importance_ablation_agreement,
    normalise_per_layer,
    pruning_curve,
    random_pruning_curves,
)
from bertology_utils.papers.pruning_claims import PruningInputs
from bertology_utils.run.record import StageTimes
from bertology_utils.run.tasks import fine_tune_task

__all__ = [
    "PruningClassifiers",
    "pruning_classifiers",
    "ablation_sweeps",
    "Importances",
    "head_importances",
    "Curves",
    "pruning_curves",
    "attention_changes",
    "seeded_pruning_inputs",
    "pruning_metrics",
]

#: (importance, harm) -> Spearman's (rho, p) of that importance with that harm of disabling each head alone.
Agreement = dict[tuple[str, str], tuple[float, float]]


class PruningClassifiers(NamedTuple):
    """Each task's classifiers, by task name: ``runs`` fine-tuned from the pre-trained weights, ``random_runs``
    from a random initialisation, ``devs`` the dev sets the steps share, ``dev_corpora`` the whole dev splits
    and ``task_data`` the tasks (for the other seeds)."""

    runs: dict[str, FineTuned]
    random_runs: dict[str, FineTuned]
    devs: dict[str, DevSet]
    dev_corpora: dict[str, Corpus]
    task_data: dict[str, Task]


def pruning_classifiers(
    tasks: Sequence[Any],
    model: str | os.PathLike | None,
    *,
    fine_tuning: Mapping[str, Any],
    random_init: bool,
    dev_examples: int,
    dev_tokens: int | None,
    batch_size: int,
    progress: bool = True,
) -> PruningClassifiers:
    """Fine-tune ``model`` on each task (and a randomly initialised copy), and take each task's dev set.

    A task whose data is missing is recorded as skipped by
    :func:`~bertology_utils.run.tasks.fine_tune_task` and left out. Prints each dev set's size.

    :param tasks: the notebook's task sources (GLUE names, folders, specs).
    :param model: the pre-trained model (None: the default).
    :param fine_tuning: keyword arguments of :func:`~bertology_utils.run.tasks.fine_tune_task` (budget, seed,
        precision, times, output folder, progress).
    :param random_init: also fine-tune a randomly initialised copy with the same recipe.
    :param dev_examples: the first dev examples the steps run on (at most), within ``dev_tokens`` tokens.
    :param dev_tokens: token budget of the dev set (None: none).
    :param batch_size: dev examples per batch.
    :param progress: a progress bar over the tasks.
    :returns: the classifiers and their dev sets by task name.
    """
    found = PruningClassifiers({}, {}, {}, {}, {})
    for source in tqdm(tasks, desc="classifiers", unit="task", disable=not progress):
        tuned = fine_tune_task(source, model, section=f"pruning.{source}", **fine_tuning)  # None: data missing
        if tuned is None:
            continue
        task, run = tuned.name, tuned.tuned
        found.runs[task], found.dev_corpora[task], found.task_data[task] = run, tuned.data.dev, tuned.data
        if random_init:
            random_run = fine_tune_task(tuned.data, model, section=f"pruning.{task}", init="random", **fine_tuning)
            assert random_run is not None  # the pre-trained run found the data
            found.random_runs[task] = random_run.tuned
        found.devs[task] = dev_set(
            run.loaded,
            tuned.data.dev[:dev_examples],
            task,
            max_tokens=tuned.budget.max_tokens,
            batch_size=batch_size,
            token_budget=dev_tokens,
        )
        print(f"{task}: ablations, importance and pruning on the first {len(found.devs[task])} dev examples")
    return found


def ablation_sweeps(
    runs: Mapping[str, FineTuned],
    devs: Mapping[str, DevSet],
    *,
    times: StageTimes,
    cache: bool = True,
    progress: bool = True,
) -> dict[str, AblationResult]:
    """Each classifier with each head alone, and each layer alone, disabled (Kovaleva et al., Fig. 6).

    :param runs: the classifiers by task.
    :param devs: their dev sets by task.
    :param times: where each task's seconds are added, under ``(task, "ablation sweep")``.
    :param cache: reuse stored logits.
    :param progress: progress bars.
    :returns: each task's :class:`~bertology_utils.interventions.pruning.AblationResult`.
    """
    ablations = {}
    for task, run in tqdm(runs.items(), desc="ablations", unit="task", disable=not progress):
        with times.timed(task, "ablation sweep"):
            ablations[task] = ablation_sweep(run.loaded, devs[task], cache=cache, progress=progress)
    return ablations


class Importances(NamedTuple):
    """Michel et al.'s importance by task: ``raw`` (L, H), ``normalised`` per layer (L, H), and its
    ``agreement`` with disabling each head alone."""

    raw: dict[str, HeadMatrix]
    normalised: dict[str, HeadMatrix]
    agreement: dict[str, Agreement]


def head_importances(
    runs: Mapping[str, FineTuned],
    devs: Mapping[str, DevSet],
    ablations: Mapping[str, AblationResult],
    *,
    times: StageTimes,
    cache: bool = True,
    progress: bool = True,
) -> Importances:
    """Each classifier's head importance (Michel et al.), and its rank agreement with the ablations.

    The agreement is Spearman's (rho, p) of the raw and of the normalised importance with the loss increase,
    and of the raw importance with the metric drop, when each head alone is disabled.

    :param runs: the classifiers by task.
    :param devs: their dev sets by task.
    :param ablations: their :func:`ablation_sweeps`, by task.
    :param times: where each task's seconds are added, under ``(task, "importance")``.
    :param cache: reuse stored importances.
    :param progress: progress bars.
    :returns: the importances and their agreement by task.
    """
    found = Importances({}, {}, {})
    for task, run in tqdm(runs.items(), desc="importance", unit="task", disable=not progress):
        with times.timed(task, "importance"):
            raw = head_importance(run.loaded, devs[task], normalise=False, cache=cache, progress=progress)
        found.raw[task], found.normalised[task] = raw, normalise_per_layer(raw)
        found.agreement[task] = {
            ("raw importance", "loss increase"): importance_ablation_agreement(raw, ablations[task]),
            ("normalised", "loss increase"): importance_ablation_agreement(found.normalised[task], ablations[task]),
            ("raw importance", "metric drop"): importance_ablation_agreement(raw, ablations[task], by="metric"),
        }
    return found


def _curves(
    loaded: LoadedModel,
    dev: DevSet,
    importance: HeadMatrix,
    *,
    step: float,
    random_seeds: Sequence[int],
    cache: bool,
    progress: bool,
) -> tuple[PruningCurve, list[PruningCurve]]:
    """One classifier's pruning curve by ``importance`` and its random-order curves."""
    curve = pruning_curve(loaded, dev, step=step, importance=importance, cache=cache, progress=progress)
    randoms = random_pruning_curves(loaded, dev, seeds=random_seeds, step=step, cache=cache, progress=progress)
    return curve, randoms


class Curves(NamedTuple):
    """Each task's pruning curve by importance (``by_importance``) and its random-order curves (``random``)."""

    by_importance: dict[str, PruningCurve]
    random: dict[str, list[PruningCurve]]


def pruning_curves(
    runs: Mapping[str, FineTuned],
    devs: Mapping[str, DevSet],
    importances: Mapping[str, HeadMatrix],
    *,
    step: float,
    random_seeds: Sequence[int],
    times: StageTimes,
    cache: bool = True,
    progress: bool = True,
) -> Curves:
    """Each classifier's heads pruned in steps by importance, recomputed after each step (Michel et al.), and
    in random orders.

    :param runs: the classifiers by task.
    :param devs: their dev sets by task.
    :param importances: each task's per-layer normalised importance (L, H).
    :param step: share of all heads pruned per step.
    :param random_seeds: the random orders' seeds.
    :param times: where each task's seconds are added, under ``(task, "pruning curves")``.
    :param cache: reuse stored curves.
    :param progress: progress bars.
    :returns: the curves by task.
    """
    found = Curves({}, {})
    for task, run in tqdm(runs.items(), desc="pruning curves", unit="task", disable=not progress):
        with times.timed(task, "pruning curves"):
            found.by_importance[task], found.random[task] = _curves(
                run.loaded,
                devs[task],
                importances[task],
                step=step,
                random_seeds=random_seeds,
                cache=cache,
                progress=progress,
            )
    return found


def _cosine(base: LoadedModel, run: FineTuned, corpus: Corpus, n_examples: int) -> HeadMatrix:
    """Each head's attention cosine (L, H) before and after fine-tuning on the first ``n_examples`` of ``corpus``."""
    return attention_change(base, run.loaded, corpus[:n_examples], max_tokens=run.budget.max_tokens)


def attention_changes(
    base: LoadedModel,
    runs: Mapping[str, FineTuned],
    dev_corpora: Mapping[str, Corpus],
    *,
    n_examples: int,
    times: StageTimes,
    progress: bool = True,
) -> dict[str, HeadMatrix]:
    """Each head's attention map before and after fine-tuning, compared by cosine (Kovaleva et al.).

    :param base: the pre-trained model.
    :param runs: the classifiers by task.
    :param dev_corpora: their dev splits by task.
    :param n_examples: the first dev examples compared.
    :param times: where each task's seconds are added, under ``(task, "attention change")``.
    :param progress: a progress bar over the tasks.
    :returns: each task's cosines (L, H).
    """
    cosines = {}
    for task, run in tqdm(runs.items(), desc="attention change", unit="task", disable=not progress):
        with times.timed(task, "attention change"):
            cosines[task] = _cosine(base, run, dev_corpora[task], n_examples)
    return cosines


def seeded_pruning_inputs(
    base: LoadedModel,
    model: str | os.PathLike | None,
    classifiers: PruningClassifiers,
    run_seeds: Sequence[int],
    *,
    fine_tuning: Mapping[str, Any],
    step: float,
    random_seeds: Sequence[int],
    cosine_examples: int,
    times: StageTimes,
    cache: bool = True,
    progress: bool = True,
) -> dict[tuple[str, int], PruningInputs]:
    """The claims' inputs of each task fine-tuned again with each of ``run_seeds``.

    Each classifier gets what the first one got, on the same dev examples: the ablations, the importance,
    the pruning curves and the change of attention. Prints each one's dev score.

    :param base: the pre-trained model.
    :param model: the pre-trained model's name or folder, fine-tuned again.
    :param classifiers: the first seed's :func:`pruning_classifiers` (their data and dev sets).
    :param run_seeds: the other fine-tuning seeds.
    :param fine_tuning: keyword arguments of :func:`~bertology_utils.run.tasks.fine_tune_task`; its seed is
        replaced by each of ``run_seeds``.
    :param step: share of all heads pruned per step.
    :param random_seeds: the random orders' seeds.
    :param cosine_examples: the first dev examples of the attention comparison.
    :param times: where each classifier's seconds are added, under ``(task, "seed <s>")``.
    :param cache: reuse stored logits, importances and curves.
    :param progress: progress bars.
    :returns: the inputs by ``(task, seed)``.
    """
    seeded = {}
    runs = [(s, task) for s in run_seeds for task in classifiers.runs]
    for run_seed, task in tqdm(runs, desc="other seeds", unit="classifier", disable=not progress):
        data, dev = classifiers.task_data[task], classifiers.devs[task]
        found = fine_tune_task(data, model, section=f"pruning.{task}", **{**fine_tuning, "seed": run_seed})
        assert found is not None  # the first seed's data was found
        run = found.tuned
        with times.timed(task, f"seed {run_seed}"):
            ablation = ablation_sweep(run.loaded, dev, cache=cache, progress=progress)
            raw_importance = head_importance(run.loaded, dev, normalise=False, cache=cache, progress=progress)
            curve, randoms = _curves(
                run.loaded,
                dev,
                normalise_per_layer(raw_importance),
                step=step,
                random_seeds=random_seeds,
                cache=cache,
                progress=progress,
            )
            cosine = _cosine(base, run, classifiers.dev_corpora[task], cosine_examples)
        seeded[task, run_seed] = PruningInputs(run.metrics["score"], cosine, ablation, raw_importance, curve, randoms)
        print(f"{task}, seed {run_seed}: dev score {run.metrics['score']:.3f}")
    return seeded


def pruning_metrics(
    base: LoadedModel,
    classifiers: PruningClassifiers,
    majority: Mapping[str, float],
    ablations: Mapping[str, AblationResult],
    importances: Importances,
    curves: Curves,
    cosines: Mapping[str, HeadMatrix],
    *,
    keep: float,
    times: StageTimes,
) -> dict[str, Any]:
    """The metrics notebook 06 records: the model, and each task's classifiers, ablations, importance, curves
    and attention change, under ``pruning.<task>.``.

    :param base: the pre-trained model.
    :param classifiers: the first seed's :func:`pruning_classifiers`.
    :param majority: each task's majority-class dev score.
    :param ablations: each task's :func:`ablation_sweeps`.
    :param importances: the :func:`head_importances`.
    :param curves: the :func:`pruning_curves`.
    :param cosines: each task's :func:`attention_changes` (L, H).
    :param keep: the share of the dev score that "prunable" keeps.
    :param times: the run's seconds per ``(task, stage)``.
    :returns: the metrics by name.
    """
    runs = classifiers.runs
    metrics: dict[str, Any] = {
        "pruning.model": base.name,
        "pruning.num_layers": base.num_layers,
        "pruning.num_heads": base.num_heads,
        "pruning.tasks": list(runs),
        "pruning.seconds_total": times.total(),
        "pruning.seconds": times.flat(),
    }
    for task, run in runs.items():
        key, harm = f"pruning.{task}", importances.agreement[task]
        metrics.update(
            {
                f"{key}.dev_metrics": run.metrics,
                f"{key}.dev_examples": len(classifiers.devs[task]),
                f"{key}.majority_class_score": majority[task],
                f"{key}.train_seconds": run.train_seconds,
                **ablations[task].metrics(key),
                f"{key}.importance": importances.normalised[task],
                f"{key}.importance_raw": importances.raw[task],
                f"{key}.spearman_importance_vs_loss": harm[("raw importance", "loss increase")][0],
                f"{key}.spearman_importance_vs_loss_p": harm[("raw importance", "loss increase")][1],
                f"{key}.spearman_normalised_importance_vs_loss": harm[("normalised", "loss increase")][0],
                f"{key}.spearman_importance_vs_drop": harm[("raw importance", "metric drop")][0],
                f"{key}.seconds": times.of(task),
            }
        )
    for task in runs:
        key, c, randoms = f"pruning.{task}", curves.by_importance[task], curves.random[task]
        metrics.update(
            {
                f"{key}.curve_fractions": c.fractions,
                f"{key}.importance_curve": c.scores,
                f"{key}.random_curves": np.stack([r.scores for r in randoms]),
                f"{key}.prunable_by_importance": c.prunable(keep),
                f"{key}.prunable_random_mean": float(np.mean([r.prunable(keep) for r in randoms])),
                f"{key}.attention_cosine": cosines[task],
                f"{key}.attention_cosine_by_layer": layer_means(cosines[task]),
            }
        )
        if task in classifiers.random_runs:
            random_run = classifiers.random_runs[task]
            metrics.update(
                {
                    f"{key}.random_init_dev_metrics": random_run.metrics,
                    f"{key}.random_init_train_seconds": random_run.train_seconds,
                }
            )
    return metrics
