"""Notebook 06's claims on each fine-tuned classifier, made on every seed's and joined over the seeds.

Kovaleva et al. (2019), *Revealing the Dark Secrets of BERT* (https://arxiv.org/abs/1908.08593): fine-tuning
changes the last layers most, single heads are dispensable, disabling a layer can help. Michel et al.
(2019), *Are Sixteen Heads Really Better than One?* (https://arxiv.org/abs/1905.10650): many heads can be
pruned, and their importance ranks heads as removing them does. :func:`pruning_claims_by_task` makes these on
each classifier (:class:`PruningInputs`), not testable on one that does not beat its majority class.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bertology_utils.core.typing import HeadMatrix
from bertology_utils.papers import kovaleva, michel
from bertology_utils.papers.claims import Claim, claims_by_task, on_classifier

if TYPE_CHECKING:
    from bertology_utils.interventions.pruning import AblationResult, PruningCurve

__all__ = ["PruningInputs", "pruning_claims_by_task"]


@dataclass
class PruningInputs:
    """What the claims on one classifier read: its dev ``score``, each head's attention ``cosine`` (L, H)
    before and after fine-tuning, its head and layer ``ablation``, the ``raw_importance`` (L, H), and its
    importance ``curve`` and ``random_curves``."""

    score: float
    cosine: HeadMatrix
    ablation: AblationResult
    raw_importance: HeadMatrix
    curve: PruningCurve
    random_curves: Sequence[PruningCurve]


def pruning_claims_by_task(
    first: Mapping[str, PruningInputs],
    seeded: Mapping[tuple[str, int], PruningInputs],
    majority: Mapping[str, float],
    *,
    keep: float,
    alpha: float,
) -> list[Claim]:
    """Kovaleva et al.'s three and Michel et al.'s two claims on each task's classifiers, joined over the seeds.

    :param first: the first seed's inputs, by task (the order of the claims).
    :param seeded: the other seeds' inputs, by ``(task, seed)``.
    :param majority: each task's majority-class dev score.
    :param keep: the share of the dev score that "prunable" keeps.
    :param alpha: significance level of the importance-ablation agreement.
    :returns: the claims, task by task.
    """

    def on_one(task: str, c: PruningInputs) -> list[Claim]:
        made = (
            kovaleva.last_layers_change_most(c.cosine, task),
            kovaleva.single_heads_dispensable(c.ablation, task=task),
            kovaleva.layer_ablation_improves(c.ablation, task=task),
            michel.heads_prunable(c.curve, c.random_curves, keep=keep, task=task),
            michel.importance_matches_ablation(c.raw_importance, c.ablation.harm("loss"), alpha=alpha, task=task),
        )
        return [on_classifier(claim, c.score, majority[task]) for claim in made]

    return claims_by_task(first, seeded, on_one)
