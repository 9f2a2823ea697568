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

import pandas as pd
from tqdm.auto import tqdm

from bertology_utils.data import Corpus
from bertology_utils.interventions.ablations import ablation_summary
from bertology_utils.interventions.finetuning import FineTuned
from bertology_utils.interventions.gradients import GradientStats
from bertology_utils.interventions.objectives import ClassifierObjective
from bertology_utils.interventions.scoring import majority_baseline
from bertology_utils.papers import clark
from bertology_utils.papers.claims import Claim, claims_over_seeds, on_classifier
from bertology_utils.run.tasks import fine_tune_task

__all__ = ["SeedObjective", "sst2_objectives", "sep_claims"]

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
    :param output_dir: where a skipped section is recorded.
    :param progress: progress bars.
    :returns: the classifiers by seed (empty without the data).
    """
    found: dict[int, SeedObjective] = {}
    for run_seed in tqdm(seeds, desc="SST-2 classifiers", unit="seed", disable=not progress):
        sst2 = fine_tune_task(
            "SST-2",
            model,
            section="sep.sst2",
            train_examples=train_examples,
            epochs=epochs,
            eval_examples=eval_examples,
            seed=run_seed,
            output_dir=output_dir,
            progress=progress,
        )
        if sst2 is None:  # the data is missing, for every seed alike
            break
        run, dev = sst2.tuned, sst2.data.dev[:n_dev]
        labels = sst2.data.dev.labels
        assert labels is not None  # a task's dev split is labelled
        floor = (run.metrics["score"], majority_baseline("SST-2", labels))
        print(f"SST-2 classifier, seed {run_seed}: dev score {floor[0]:.3f}, majority class {floor[1]:.3f}")
        description = f"SST-2 classifier loss (fine-tuned {run.base_name})"
        objective = ClassifierObjective(run.loaded, dev.labels, task="SST-2", description=description)
        found[run_seed] = SeedObjective(run, dev, objective, floor)
    return found


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
