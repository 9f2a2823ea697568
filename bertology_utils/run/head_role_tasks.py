"""Notebook 07's per-classifier steps, run over its fine-tuned tasks (and seeds) with a progress bar.

Voita et al. (2019), *Analyzing Multi-Head Self-Attention: Specialized Heads Do the Heavy Lifting, the
Rest Can Be Pruned* (https://arxiv.org/abs/1905.09418), ranked a classifier's heads by relevance, set
it against their confidence and roles, and pruned them with L0-penalised gates; Kovaleva et al. (2019),
*Revealing the Dark Secrets of BERT* (https://arxiv.org/abs/1908.08593, Fig. 5) read the attention on
[CLS], [SEP] and punctuation per fine-tuned task. Each function here takes the notebook's fine-tuned
tasks (:class:`~bertology_utils.run.tasks.TunedTask` by task name), runs one of those steps on every
task, times it under ``(task, stage)`` in the notebook's :class:`~bertology_utils.run.record.StageTimes`,
and returns the results by task; :func:`classifier_claims` turns them into the paper's claims.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from tqdm.auto import tqdm

from bertology_utils.analyses.head_roles import HeadRoles, find_roles, head_confidence
from bertology_utils.analyses.patterns import surface_statistics
from bertology_utils.attention import attention_for
from bertology_utils.core.models import LoadedModel
from bertology_utils.core.typing import HeadMatrix
from bertology_utils.core.uncertainty import Draws
from bertology_utils.data import Corpus
from bertology_utils.interventions import head_relevance, l0, pruning
from bertology_utils.interventions.dev_sets import DevSet, dev_set
from bertology_utils.interventions.head_relevance import GateGradient, HeadAttribution
from bertology_utils.interventions.l0 import L0Sweep
from bertology_utils.interventions.pruning import PruningCurve
from bertology_utils.papers import voita
from bertology_utils.papers.claims import Claim, claims_by_task, on_classifier
from bertology_utils.papers.voita import SurvivalTest
from bertology_utils.run.record import StageTimes, record_skipped
from bertology_utils.run.tasks import TunedTask, fine_tune_task

__all__ = [
    "ClassifierHeads",
    "classifier_heads",
    "L0Pruning",
    "l0_pruning",
    "TaskShares",
    "special_token_shares",
    "ClaimInputs",
    "claim_inputs",
    "seeded_claim_inputs",
    "classifier_claims",
]


@dataclass
class ClassifierHeads:
    """One fine-tuned classifier's heads on its dev set.

    ``relevance`` (L, H): integrated gradients over the head gates (``attribution``), with
    ``gate_gradient`` as the one-step check; ``confidence`` (L, H): Voita's mean maximum attention;
    ``importance`` (L, H): Michel et al.'s; ``roles``: the classifier's heads' roles on the treebank.
    """

    dev: DevSet
    attribution: HeadAttribution
    gate_gradient: GateGradient
    relevance: HeadMatrix
    confidence: HeadMatrix
    importance: HeadMatrix
    roles: HeadRoles


def _dev_attention(tuned: TunedTask, loaded: LoadedModel, n: int, batch_size: int) -> list:
    """Word-level attention of the first ``n`` dev examples (those scored), within the task's token budget."""
    return attention_for(
        tuned.data.dev[:n],
        loaded,
        too_long="skip",
        batch_size=batch_size,
        max_tokens=min(tuned.budget.max_tokens, loaded.max_tokens),
    )


def classifier_heads(
    tuned: Mapping[str, TunedTask],
    tasks: Sequence[str],
    trees: Corpus,
    frequencies: Counter[str],
    *,
    dev_examples: int,
    dev_tokens: int | None,
    ig_steps: int,
    ig_tolerance: float | None,
    batch_size: int,
    role_settings: Mapping[str, Any],
    times: StageTimes,
    cache: bool = True,
    progress: bool = True,
) -> dict[str, ClassifierHeads]:
    """Relevance, confidence, importance and roles of every head of each task's classifier (Voita et al.).

    :param tuned: the fine-tuned tasks by name.
    :param tasks: the names to run, in order.
    :param trees: the treebank the roles are found on.
    :param frequencies: word-form counts for the rare-word role.
    :param dev_examples: dev examples scored (at most), within ``dev_tokens`` tokens.
    :param dev_tokens: token budget of the dev set (None: none).
    :param ig_steps: Gauss-Legendre nodes per panel of integrated gradients.
    :param ig_tolerance: the panels' error tolerance (None: one fixed rule).
    :param batch_size: examples per batch.
    :param role_settings: keyword arguments of :func:`~bertology_utils.analyses.head_roles.find_roles`.
    :param times: where each stage's seconds are added, under ``(task, stage)``.
    :param cache: reuse stored attributions and importances.
    :param progress: progress bars.
    :returns: each task's :class:`ClassifierHeads`, by name.
    """
    found = {}
    for task in tqdm(tasks, desc="classifiers", unit="task", disable=not progress):
        run, loaded = tuned[task], tuned[task].tuned.loaded
        dev = dev_set(
            loaded,
            run.data.dev[:dev_examples],
            task,
            batch_size=batch_size,
            max_tokens=run.budget.max_tokens,
            token_budget=dev_tokens,
        )
        with times.timed(task, "relevance"):
            attribution = head_relevance.head_attribution(
                loaded, dev, steps=ig_steps, tolerance=ig_tolerance, cache=cache, progress=progress
            )
            gate_gradient = head_relevance.gate_times_gradient(loaded, dev, cache=cache, progress=progress)
        relevance = attribution.relevance()
        with times.timed(task, "confidence"):
            confidence = head_confidence(_dev_attention(run, loaded, len(dev), batch_size))
        with times.timed(task, "importance"):
            importance = pruning.head_importance(loaded, dev, cache=cache, progress=progress)
        with times.timed(task, "head roles"):
            roles = find_roles(trees, loaded, frequencies, **role_settings)[0]
        found[task] = ClassifierHeads(dev, attribution, gate_gradient, relevance, confidence, importance, roles)
    return found


@dataclass
class L0Pruning:
    """One classifier's L0 gate sweep, its pruning curves, and whether the specialised heads survive.

    ``equal_counts``: the dev score of importance and random orders pruned to each lambda's head count.
    """

    sweep: L0Sweep
    curve: PruningCurve
    random_curves: list[PruningCurve]
    equal_counts: pd.DataFrame
    survival: SurvivalTest


def l0_pruning(
    tuned: Mapping[str, TunedTask],
    heads: Mapping[str, ClassifierHeads],
    *,
    lambdas: Sequence[float],
    gate_steps: int,
    step: float,
    random_seeds: Sequence[int],
    n_permutations: int,
    seed: int,
    batch_size: int,
    times: StageTimes,
    cache: bool = True,
    progress: bool = True,
) -> dict[str, L0Pruning]:
    """Voita et al.'s L0-penalised Hard Concrete gates for each task in ``heads``, against Michel's orders.

    Trains one set of gates per lambda (:func:`~bertology_utils.interventions.l0.l0_sweep`), draws the
    importance and random pruning curves, scores both orders at the gates' head counts, and tests
    whether the specialised heads are kept more often than random ones
    (:func:`~bertology_utils.papers.voita.specialised_survival`). Prints a degenerate sweep's reason.

    :param tuned: the fine-tuned tasks by name.
    :param heads: each task's heads (:func:`classifier_heads`): its dev set, importance and roles.
    :param lambdas: L0 penalty weights, one gate training each.
    :param gate_steps: Adam steps per lambda.
    :param step: share of heads per step of the pruning curves.
    :param random_seeds: the random pruning orders.
    :param n_permutations: relabellings of the survival test.
    :param seed: seed of the gates' training set and training, and of the survival test.
    :param batch_size: examples per batch.
    :param times: where each stage's seconds are added, under ``(task, stage)``.
    :param cache: reuse stored gates and curves.
    :param progress: progress bars.
    :returns: each task's :class:`L0Pruning`, by name.
    """
    parts = {}
    for task, h in tqdm(heads.items(), desc="L0 pruning", unit="task", disable=not progress):
        run, loaded = tuned[task], tuned[task].tuned.loaded
        with times.timed(task, "L0 gates"):
            train = l0.training_set(loaded, run.data, budget=run.budget, seed=seed, batch_size=batch_size)
            sweep = l0.l0_sweep(
                loaded, train, h.dev, lambdas, steps=gate_steps, seed=seed, cache=cache, progress=progress
            )
        if sweep.degenerate:
            print(f"{task}: {sweep.degenerate}")
        with times.timed(task, "pruning curves"):
            curve = pruning.pruning_curve(
                loaded, h.dev, step=step, importance=h.importance, cache=cache, progress=progress
            )
            random_curves = pruning.random_pruning_curves(
                loaded, h.dev, seeds=random_seeds, step=step, cache=cache, progress=progress
            )
            equal_counts = l0.orders_at_l0_counts(loaded, h.dev, sweep, curve, random_curves, cache=cache)
        parts[task] = (sweep, curve, random_curves, equal_counts)
    return {
        task: L0Pruning(
            *p,
            voita.specialised_survival(
                p[0].masks, heads[task].roles.specialised, n_permutations=n_permutations, seed=seed
            ),
        )
        for task, p in parts.items()
    }


@dataclass
class TaskShares:
    """Kovaleva et al.'s Fig. 5 inputs by task: per layer, the share of attention on each token kind.

    ``fine_tuned`` and ``pretrained``: (L, kinds) frames, the classifier's and the pre-trained model's on
    the same dev examples; ``draws``: the classifier's statistics on resampled examples (the claims'
    intervals).
    """

    fine_tuned: dict[str, pd.DataFrame]
    pretrained: dict[str, pd.DataFrame]
    draws: dict[str, Draws]


def special_token_shares(
    tuned: Mapping[str, TunedTask],
    tasks: Sequence[str],
    base: LoadedModel,
    kinds: Sequence[str],
    *,
    n_examples: int,
    batch_size: int,
    times: StageTimes,
    output_dir: str | os.PathLike | None = None,
    progress: bool = True,
) -> TaskShares:
    """Each task's per-layer attention shares on ``kinds`` (Kovaleva et al., Fig. 5), fine-tuned and pre-trained.

    A task whose first ``n_examples`` dev examples are all longer than its token budget is recorded as
    the skipped section ``head_roles.fig5.<task>`` and left out.

    :param tuned: the fine-tuned tasks by name.
    :param tasks: the names to run, in order.
    :param base: the pre-trained model.
    :param kinds: statistics of :func:`~bertology_utils.analyses.patterns.surface_statistics` (``"cls"``, ...).
    :param n_examples: dev examples per task.
    :param batch_size: examples per batch.
    :param times: where each task's seconds are added, under ``(task, "Fig. 5 shares")``.
    :param output_dir: where a skipped task is recorded.
    :param progress: a progress bar over the tasks.
    :returns: the shares by task.
    """
    shares = TaskShares({}, {}, {})
    for task in tqdm(tasks, desc="Fig. 5 shares", unit="task", disable=not progress):
        items = tuned[task].data.dev[:n_examples]
        max_tokens = min(tuned[task].budget.max_tokens, base.max_tokens)
        with times.timed(task, "Fig. 5 shares"):
            tuned_items, base_items = [
                attention_for(items, m, too_long="skip", max_tokens=max_tokens, batch_size=batch_size)
                for m in (tuned[task].tuned.loaded, base)
            ]
        if not tuned_items:  # every example is longer than the task's budget
            message = f"all {len(items)} dev examples are longer than {max_tokens} tokens"
            record_skipped(f"head_roles.fig5.{task}", message, output_dir)
            continue
        tuned_stats = surface_statistics(tuned_items)
        shares.fine_tuned[task] = tuned_stats.per_layer()[list(kinds)]
        shares.draws[task] = tuned_stats.bootstrap()
        shares.pretrained[task] = surface_statistics(base_items).per_layer()[list(kinds)]
    return shares


@dataclass
class ClaimInputs:
    """What the claims on one classifier read: its dev ``score``, ``relevance`` and ``confidence`` (L, H), the
    integrated gradients' largest relative completeness ``gap``, its ``specialised`` heads (L, H) bool, its
    L0 ``sweep`` and the specialised heads' ``survived`` test."""

    score: float
    relevance: HeadMatrix
    confidence: HeadMatrix
    gap: float
    specialised: HeadMatrix
    sweep: L0Sweep
    survived: SurvivalTest


def claim_inputs(score: float, heads: ClassifierHeads, pruned: L0Pruning) -> ClaimInputs:
    """The claims' inputs from one classifier's :func:`classifier_heads` and :func:`l0_pruning` results."""
    return ClaimInputs(
        score,
        heads.relevance,
        heads.confidence,
        float(heads.attribution.relative_gap.max()),
        heads.roles.specialised,
        pruned.sweep,
        pruned.survival,
    )


def seeded_claim_inputs(
    tuned: Mapping[str, TunedTask],
    heads: Mapping[str, ClassifierHeads],
    run_seeds: Sequence[int],
    trees: Corpus,
    frequencies: Counter[str],
    *,
    model: str | os.PathLike | None,
    fine_tuning: Mapping[str, Any],
    role_settings: Mapping[str, Any],
    ig_steps: int,
    ig_tolerance: float | None,
    lambdas: Sequence[float],
    gate_steps: int,
    n_permutations: int,
    seed: int,
    batch_size: int,
    times: StageTimes,
    output_dir: str | os.PathLike | None = None,
    cache: bool = True,
    progress: bool = True,
) -> dict[tuple[str, int], ClaimInputs]:
    """The claims' inputs of each task in ``heads`` fine-tuned again with each of ``run_seeds``.

    Each classifier gets what the first one got: relevance and confidence on the same dev set, its own
    roles on the treebank, an L0 sweep (gates trained with its seed) and the survival test (``seed``).

    :param tuned: the first seed's fine-tuned tasks by name (their data and budget).
    :param heads: the first seed's :func:`classifier_heads`, by task (their dev sets).
    :param run_seeds: the other fine-tuning seeds.
    :param trees: the treebank the roles are found on.
    :param frequencies: word-form counts for the rare-word role.
    :param model: the pre-trained model fine-tuned.
    :param fine_tuning: keyword arguments of :func:`~bertology_utils.run.tasks.fine_tune_task` (budget, precision).
    :param role_settings: keyword arguments of :func:`~bertology_utils.analyses.head_roles.find_roles`.
    :param ig_steps: Gauss-Legendre nodes per panel of integrated gradients.
    :param ig_tolerance: the panels' error tolerance.
    :param lambdas: L0 penalty weights.
    :param gate_steps: Adam steps per lambda.
    :param n_permutations: relabellings of the survival test.
    :param seed: the survival test's seed.
    :param batch_size: examples per batch.
    :param times: where each classifier's seconds are added, under ``(task, "seed <s>")``.
    :param output_dir: where the fine-tuning is recorded.
    :param cache: reuse stored attributions and gates.
    :param progress: progress bars.
    :returns: the inputs by ``(task, seed)``.
    """
    seeded = {}
    runs = [(s, task) for s in run_seeds for task in heads]
    for run_seed, task in tqdm(runs, desc="other seeds", unit="classifier", disable=not progress):
        data, budget, dev = tuned[task].data, tuned[task].budget, heads[task].dev
        run = fine_tune_task(
            data,
            model,
            section=f"head_roles.{task}",
            seed=run_seed,
            times=times,
            output_dir=output_dir,
            progress=progress,
            **fine_tuning,
        )
        assert run is not None  # the first seed's data and budget were found
        loaded = run.tuned.loaded
        with times.timed(task, f"seed {run_seed}"):
            attribution = head_relevance.head_attribution(
                loaded, dev, steps=ig_steps, tolerance=ig_tolerance, cache=cache, progress=progress
            )
            items = _dev_attention(tuned[task], loaded, len(dev), batch_size)
            specialised = find_roles(trees, loaded, frequencies, **role_settings)[0].specialised
            train = l0.training_set(loaded, data, budget=budget, seed=run_seed, batch_size=batch_size)
            sweep = l0.l0_sweep(
                loaded, train, dev, lambdas, steps=gate_steps, seed=run_seed, cache=cache, progress=progress
            )
            survived = voita.specialised_survival(sweep.masks, specialised, n_permutations=n_permutations, seed=seed)
        score = run.tuned.metrics["score"]
        seeded[task, run_seed] = ClaimInputs(
            score,
            attribution.relevance(),
            head_confidence(items),
            float(attribution.relative_gap.max()),
            specialised,
            sweep,
            survived,
        )
        print(f"{task}, seed {run_seed}: dev score {score:.3f}")
    return seeded


def classifier_claims(
    first: Mapping[str, ClaimInputs],
    seeded: Mapping[tuple[str, int], ClaimInputs],
    majority: Mapping[str, float],
    *,
    alpha: float,
    keep: float,
) -> list[Claim]:
    """Voita et al.'s four claims on each task's classifiers, each joined over the seeds it was made on.

    Relevance tracks confidence, the specialised heads are relevant, L0 prunes most heads, and the
    specialised heads survive; a classifier that does not beat its task's majority class makes none
    (:func:`~bertology_utils.papers.claims.on_classifier`).

    :param first: the first seed's inputs, by task (the order of the claims).
    :param seeded: the other seeds' inputs, by ``(task, seed)`` (:func:`seeded_claim_inputs`).
    :param majority: each task's majority-class dev score.
    :param alpha: significance level of the tests.
    :param keep: the share of the dev score that "prunable" keeps.
    :returns: the claims, task by task.
    """

    def on_one(task: str, c: ClaimInputs) -> list[Claim]:
        made = (
            voita.relevance_tracks_confidence(c.relevance, c.confidence, alpha=alpha, task=task, gap=c.gap),
            voita.specialised_heads_relevant(c.relevance, c.specialised, alpha=alpha, task=task, gap=c.gap),
            voita.l0_prunes_most_heads(  # it reads the sweep's arrays as the sequences it annotates
                c.sweep.kept,  # type: ignore[arg-type]
                c.sweep.scores,  # type: ignore[arg-type]
                c.sweep.base,
                c.sweep.n_heads,
                keep=keep,
                task=task,
            ),
            voita.specialised_heads_survive(c.survived, alpha=alpha, task=task),
        )
        return [on_classifier(claim, c.score, majority[task]) for claim in made]

    return claims_by_task(first, seeded, on_one)
