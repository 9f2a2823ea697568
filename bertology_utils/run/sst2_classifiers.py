"""Notebook 02's SST-2 classifiers, one per fine-tuning seed, as losses whose gradients and ablations are read.

Clark et al. (2019), *What Does BERT Look At?* (https://arxiv.org/abs/1906.04341), Section 3.2: attention to
[SEP] may be a no-op. Notebook 02 asks it of a pre-trained model's own loss and of SST-2 classifiers'
(:func:`sst2_objectives`); a classifier that does not beat the majority class makes no claim, and each claim
is joined over the seeds' classifiers (:func:`sep_claims`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from bertology_utils.data import Corpus
from bertology_utils.interventions.ablations import ablation_curves, ablation_summary
from bertology_utils.interventions.finetuning import FineTuned
from bertology_utils.interventions.gradients import GradientStats, attention_gradients
from bertology_utils.interventions.objectives import ClassifierObjective, Objective
from bertology_utils.interventions.scoring import majority_baseline
from bertology_utils.papers import clark
from bertology_utils.papers.claims import Claim, claims_over_seeds, on_classifier
from bertology_utils.run.tasks import fine_tune_seeds

__all__ = ["SeedObjective", "sst2_objectives", "objective_gradients", "objective_ablations", "sep_claims"]

#: An objective and the items its loss is taken on, by key.
Objectives = Mapping[str, tuple[Objective, Sequence[Any]]]

#: (a classifier's dev score, its task's majority-class score); (None, None) for a loss of no classifier.
Floor = tuple[float | None, float | None]


@dataclass
class SeedObjective:
    """One seed's SST-2 classifier: the fine-tuned model, its loss on the first dev sentences (``dev``), and its
    ``floor``."""

    tuned: FineTuned
    dev: Corpus
    objective: ClassifierObjective
    floor: Floor


def sst2_objectives(
    model: str | os.PathLike | None,
    seeds: Sequence[int],
    *,
    n_dev: int,
    train_examples: int | str | None,
    epochs: int | None,
    eval_examples: int | None,
    precision: str | None = None,
    output_dir: str | os.PathLike | None = None,
    progress: bool = True,
) -> dict[int, SeedObjective]:
    """Fine-tune ``model`` on SST-2 with each seed and take each classifier's loss as an objective.

    Prints each classifier's dev score beside the majority class. Missing SST-2 data is recorded as the
    skipped section ``sep.sst2`` and gives no classifier.

    :param model: the pre-trained model (None: the default).
    :param seeds: the fine-tuning seeds, the first one's the classifier the figures show.
    :param n_dev: dev sentences the loss is taken on.
    :param train_examples: the fine-tuning budget's training examples (``"default"``: the task's).
    :param epochs: its epochs (None: the task's).
    :param eval_examples: dev examples scored after fine-tuning (None: all).
    :param precision: the fine-tuning's and dev scores' precision (:func:`~bertology_utils.core.models.resolve_precision`;
        None: fp32). The losses, their gradients and the ablations read the float32 weights in float32.
    :param output_dir: where a skipped section is recorded.
    :param progress: progress bars.
    :returns: the classifiers by seed (empty without the data).
    """
    tuned = fine_tune_seeds(
        "SST-2",
        model,
        seeds,
        section="sep.sst2",
        train_examples=train_examples,
        epochs=epochs,
        eval_examples=eval_examples,
        precision=precision,
        output_dir=output_dir,
        progress=progress,
    )
    found: dict[int, SeedObjective] = {}
    for run_seed, sst2 in tuned.items():
        run, dev = sst2.tuned, sst2.data.dev[:n_dev]
        labels = sst2.data.dev.labels
        assert labels is not None  # a task's dev split is labelled
        floor = (run.metrics["score"], majority_baseline("SST-2", labels))
        print(f"SST-2 classifier, seed {run_seed}: dev score {floor[0]:.3f}, majority class {floor[1]:.3f}")
        description = f"SST-2 classifier loss (fine-tuned {run.base_name})"
        objective = ClassifierObjective(run.loaded, dev.labels, task="SST-2", description=description)
        found[run_seed] = SeedObjective(run, dev, objective, floor)
    return found


def objective_gradients(
    objectives: Objectives,
    classifiers: Mapping[int, SeedObjective],
    first: int,
    *,
    batch_size: int,
    progress: bool = True,
) -> tuple[dict[str, GradientStats], dict[int, GradientStats]]:
    """Each objective's attention gradients, and the other seeds' classifiers' on the first one's dev items.

    :param objectives: each objective and its items, by key.
    :param classifiers: the SST-2 classifiers by seed (:func:`sst2_objectives`).
    :param first: the seed whose classifier is among ``objectives``; the others are for the claims.
    :param batch_size: items per batch.
    :param progress: progress bars.
    :returns: the gradients by objective key, and the other seeds' by seed.
    """
    stats = {
        key: attention_gradients(items, objective, batch_size=batch_size, progress=progress)
        for key, (objective, items) in objectives.items()
    }
    seeded = {
        s: attention_gradients(classifiers[first].dev, c.objective, batch_size=batch_size, progress=progress)
        for s, c in classifiers.items()
        if s != first
    }
    return stats, seeded


def objective_ablations(
    objectives: Objectives,
    classifiers: Mapping[int, SeedObjective],
    first: int,
    *,
    n_items: int,
    seed: int,
    batch_size: int,
    cache: bool = True,
    progress: bool = True,
) -> tuple[dict[str, pd.DataFrame], dict[int, pd.DataFrame]]:
    """Each objective's ablation curves on its first ``n_items`` items, and the other seeds' classifiers'.

    :param objectives: each objective and its items, by key.
    :param classifiers: the SST-2 classifiers by seed (:func:`sst2_objectives`).
    :param first: the seed whose classifier is among ``objectives``; the others are for the claims.
    :param n_items: items per objective.
    :param seed: seed of the ablations' control tokens.
    :param batch_size: items per batch.
    :param cache: reuse stored curves.
    :param progress: progress bars.
    :returns: the curves by objective key, and the other seeds' by seed.
    """
    settings: dict[str, Any] = dict(seed=seed, batch_size=batch_size, progress=progress, cache=cache)
    curves = {
        key: ablation_curves(items[:n_items], objective, **settings) for key, (objective, items) in objectives.items()
    }
    seeded = {
        s: ablation_curves(classifiers[first].dev[:n_items], c.objective, **settings)
        for s, c in classifiers.items()
        if s != first
    }
    return curves, seeded


def sep_claims(
    stats: Mapping[str, GradientStats],
    curves: Mapping[str, pd.DataFrame],
    floors: Mapping[str, Floor],
    seeded: Sequence[tuple[GradientStats, pd.DataFrame, Floor]] = (),
    seeded_key: str = "sst2",
) -> list[Claim]:
    """Clark et al.'s claims on each objective: its gradients and its ablation curves.

    A classifier's claims are not testable when it does not beat the majority class
    (:func:`~bertology_utils.papers.claims.on_classifier`); ``seeded_key``'s are made on every seed's
    classifier and joined over them.

    :param stats: each objective's attention gradients, by key.
    :param curves: each objective's ablation curves, by key.
    :param floors: each objective's (dev score, majority class), by key.
    :param seeded: the other seeds' (gradients, ablation curves, floor) for ``seeded_key``.
    :param seeded_key: the objective made on every seed.
    :returns: the claims, objective by objective.
    """
    claims: list[Claim] = []
    for key in stats:
        made = [(stats[key], curves[key], floors[key]), *(seeded if key == seeded_key else ())]
        claims += claims_over_seeds(
            [on_classifier(claim, *floor) for claim in clark.objective_claims(grads, ablation_summary(curve), key)]
            for grads, curve, floor in made
        )
    return claims
