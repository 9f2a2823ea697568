"""Voita et al. (2019)'s head pruning: a Hard Concrete gate per head, trained with a relaxed L0 penalty.

Voita et al. 2019, `Analyzing Multi-Head Self-Attention <https://arxiv.org/abs/1905.09418>`_: each head's output is
multiplied by a stochastic gate ``z`` with a Hard Concrete distribution (Louizos, Welling & Kingma 2018,
`Learning Sparse Neural Networks through L0 Regularization <https://arxiv.org/abs/1712.01312>`_): ``u ~ U(0, 1)``,
``s = sigmoid((log u - log(1 - u) + log_alpha) / beta)``,
``z = clamp(s (r - l) + l, 0, 1)``. The stretch to ``(l, r)`` and the clamp give ``z`` a real
probability of being exactly 0 or exactly 1, and the expected number of open gates,
``sum_h P(z_h != 0) = sum_h sigmoid(log_alpha_h - beta log(-l / r))``, is differentiable in
``log_alpha``. Training minimises the mean task loss under sampled gates plus ``lambda`` times that
expected L0 (Voita's ``L_C``); a larger ``lambda`` keeps fewer heads.

* :class:`~bertology_utils.interventions.hard_concrete.HardConcreteGates` — one ``log_alpha`` per head, the
  sampler and the closed forms;
* :func:`train_gates` — the gates of one ``lambda``, the model's weights frozen;
* :func:`l0_sweep` — several ``lambda`` s: keep masks, heads kept and the dev score with binary
  gates (kept 1, pruned 0), as a curve on :class:`~bertology_utils.interventions.pruning.PruningCurve`'s axes;
* :func:`training_set` — the training examples :func:`~bertology_utils.interventions.finetuning.fine_tune`
  drew, encoded once as a :class:`~bertology_utils.interventions.dev_sets.DevSet`.

Gates sit at the attention edit point (:mod:`bertology_utils.interventions.editing`), per example
(:func:`~bertology_utils.interventions.head_gates.gate_edit`), so they work for every registered
architecture; a keep mask applied as binary gates computes what
:func:`~bertology_utils.interventions.head_removal.prune_heads` computes after removing the other heads
(BERT, RoBERTa, ELECTRA, DistilBERT; MPNet's heads can only be gated).

The scale of ``lambda``: the task loss is the mean per-example loss, so ``lambda`` is what keeping
one head must be worth in mean loss (the findings, docs/findings.md, give the heads kept at measured lambdas). Heads
that do not matter to the loss feel no force at small ``lambda`` and drift at random, so even
``lambda = 0`` may lose a few of them; :meth:`L0Sweep.convergence` says which runs had not settled.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from bertology_utils.core.batching import to_device
from bertology_utils.core.models import LoadedModel, frozen
from bertology_utils.core.typing import HeadMatrix, HeadSamples, SampleValues
from bertology_utils.data import Corpus, Task, load_glue
from bertology_utils.interventions.dev_sets import DevSet, dev_set
from bertology_utils.interventions.editing import classifier_inference, edit_attention
from bertology_utils.interventions.finetuning import Budget, default_budget, subsample
from bertology_utils.interventions.gated_logits import gate_shape, scores_for_gates
from bertology_utils.interventions.hard_concrete import HardConcreteGates
from bertology_utils.interventions.head_gates import example_losses, gate_edit, require_loaded
from bertology_utils.interventions.pruning import PruningCurve, plot_pruning_curves
from bertology_utils.interventions.results_cache import cached_result
from bertology_utils.interventions.scoring import task_spec

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "GateTraining",
    "train_gates",
    "L0Sweep",
    "l0_sweep",
    "training_set",
    "DEFAULT_STEPS",
    "DEFAULT_LR",
    "L0_VERSION",
    "orders_at_l0_counts",
    "plot_l0_pruning",
]

#: Optimiser steps per lambda (one batch of the training set each): 500 batches of 32 are 8 epochs
#: of 2,000 examples (docs/benchmarks.md times a sweep).
DEFAULT_STEPS = 500
#: Adam's learning rate on log_alpha. Adam moves a log_alpha by up to about this much per step, so a
#: head nobody needs crosses from the init (3) to the keep threshold (-1.6) in about 50 steps; a larger
#: rate lets heads that do not matter to the loss wander further at random.
DEFAULT_LR = 0.1
#: Bump when gate training changes what it computes: cached log_alpha stop matching.
L0_VERSION = 1


# --------------------------------------------------------------------------- training one lambda


@dataclass
class GateTraining:
    """The gates trained with one ``lam``, and how training went (what :func:`train_gates` returns).

    :param lam: the L0 penalty's weight.
    :param gates: the trained gates.
    :param steps: training steps.
    :param lr: Adam's learning rate.
    :param seed: the training's seed.
    :param task_loss: ``(steps,)`` the mean task loss of each step's batch under its sampled gates.
    :param expected_l0_history: ``(steps,)`` the expected L0 at each step.
    :param seconds: wall-clock seconds of the training.
    :param from_cache: whether the gates were read from the results cache.
    """

    lam: float
    gates: HardConcreteGates = field(repr=False)
    steps: int
    lr: float
    seed: int
    #: Per step: the mean task loss of the batch under its sampled gates, and the expected L0.
    task_loss: np.ndarray = field(repr=False)
    expected_l0_history: np.ndarray = field(repr=False)
    #: Wall-clock seconds of the training: lambdas trained together (:func:`l0_sweep`) share theirs.
    seconds: float
    from_cache: bool = False

    @property
    def objective(self) -> np.ndarray:
        """Per step, what was minimised: task loss + lam x expected L0."""
        return self.task_loss + self.lam * self.expected_l0_history

    @property
    def log_alpha(self) -> HeadMatrix:
        """``(L, H)`` the trained ``log_alpha`` (a copy)."""
        return self.gates.log_alpha.detach().cpu().numpy().copy()

    def open_probability(self) -> HeadMatrix:
        """``(L, H)`` ``P(z != 0)`` of the trained gates."""
        with torch.no_grad():
            return self.gates.open_probability().cpu().numpy()

    def keep_mask(self) -> HeadMatrix:
        """``(L, H)`` bool: the heads kept (:meth:`HardConcreteGates.keep_mask`)."""
        return self.gates.keep_mask().cpu().numpy()

    @property
    def kept(self) -> int:
        """How many heads are kept."""
        return int(self.keep_mask().sum())

    @property
    def expected_l0(self) -> float:
        """The trained gates' expected number of open gates."""
        return float(self.open_probability().sum())

    def l0_change(self, last: float = 0.2) -> float:
        """How much the expected L0 moved over the ``last`` share of the steps: near 0 once training settled.

        :param last: the share of the steps looked at.
        :returns: the change (last minus first).
        """
        tail = self.expected_l0_history[-max(2, int(round(last * self.steps))) :]
        return float(tail[-1] - tail[0])

    def undecided(self, margin: float = 0.1) -> int:
        """Heads whose ``P(z != 0)`` is still between ``margin`` and ``1 - margin``: few once training settled.

        :param margin: how far from 0 and 1 counts as decided.
        :returns: how many heads.
        """
        p = self.open_probability()
        return int(((p > margin) & (p < 1 - margin)).sum())


def _pieces(train: DevSet, batch_size: int | None) -> list[tuple[dict, np.ndarray]]:
    """The training batches, each cut into parts of at most ``batch_size`` rows (padding trimmed to the longest)."""
    out = []
    for batch, rows in zip(train.batches, train.rows):
        size = len(rows) if batch_size is None else batch_size
        for lo in range(0, len(rows), size):
            if lo == 0 and size >= len(rows):
                out.append((batch, np.asarray(rows)))
                continue
            part = {k: v[lo : lo + size] for k, v in batch.items()}
            width = int(part["attention_mask"].sum(1).max())  # right padding: real tokens come first
            out.append(({k: v[:, :width] for k, v in part.items()}, np.asarray(rows[lo : lo + size])))
    return out


def train_gates(
    loaded: LoadedModel,
    train: DevSet,
    lam: float,
    *,
    steps: int = DEFAULT_STEPS,
    lr: float = DEFAULT_LR,
    seed: int = 0,
    batch_size: int | None = None,
    init: float = HardConcreteGates.INIT,
    cache: bool = False,
    progress: bool = True,
) -> GateTraining:
    """Train one Hard Concrete gate per head with ``lam``: mean task loss under sampled gates + lam x expected L0.

    Only ``log_alpha`` is trained (Adam, ``lr``); the model's weights stay frozen. Voita et al.
    fine-tuned the whole model with the gates; freezing keeps one ``lambda`` to a few CPU minutes
    (no weight gradients are computed) and means the heads kept are heads *of the same fine-tuned
    weights* the importance and random pruning curves (notebook 06) prune, so the curves compare
    pruning orders, not models. The model runs in eval mode (no dropout: the gates are the only noise).

    Each step takes one batch of ``train`` (its batches in a seeded random order, epoch after
    epoch; ``batch_size`` cuts larger ones) and samples a gate per head *per example*. Everything
    random comes from one generator seeded with ``seed``, so a seed gives the same ``log_alpha``.
    ``cache``: reuse the gates stored by an earlier identical training (key: model weights,
    ``train``'s fingerprint, lam, steps, lr, seed, batch_size, init, :data:`L0_VERSION`). ``progress``:
    a bar of the steps (none when the gates come from the cache). :func:`l0_sweep` trains several
    lambdas at once, each as this would alone.

    :param loaded: a fine-tuned classifier.
    :param train: the training examples (:func:`training_set`).
    :param lam: the L0 penalty's weight (non-negative).
    :param steps: training steps.
    :param lr: Adam's learning rate.
    :param seed: the batches' order and the gates' draws.
    :param batch_size: the most examples per step (None: ``train``'s batches as they are).
    :param init: every gate's initial ``log_alpha``.
    :param cache: read and store the gates in the results cache.
    :param progress: show a progress bar of the steps.
    :returns: the trained gates and their history.
    """
    return _trainings(
        loaded,
        train,
        [lam],
        steps=steps,
        lr=lr,
        seed=seed,
        batch_size=batch_size,
        init=init,
        cache=cache,
        progress=progress,
    )[0]


class _NotStored(Exception):
    """Raised instead of training, to learn whether the cache holds a lambda's gates."""


def _not_stored() -> np.ndarray:
    raise _NotStored


def _trainings(
    loaded: LoadedModel,
    train: DevSet,
    lams: Sequence[float],
    *,
    steps: int,
    lr: float,
    seed: int,
    batch_size: int | None,
    init: float,
    cache: bool,
    progress: bool,
) -> list[GateTraining]:
    """:func:`train_gates` for each of ``lams``: read from the cache where stored, the others trained together."""
    loaded = require_loaded(loaded)
    if steps < 1 or lr <= 0 or min(lams) < 0:
        raise ValueError("steps must be at least 1, lr positive and lam non-negative")
    shape = gate_shape(loaded)
    n_gates = shape[0] * shape[1]

    def stored(lam: float, compute: Callable[[], np.ndarray]) -> np.ndarray:
        fields = {
            "l0_lambda": float(lam),
            "steps": steps,
            "lr": lr,
            "seed": seed,
            "batch_size": batch_size,
            "init": init,
            "l0_version": L0_VERSION,
        }
        return cached_result("l0-gates", loaded, train, fields, compute, cache)

    found: dict[int, GateTraining] = {}
    for i, lam in enumerate(lams if cache else []):
        try:
            packed = stored(lam, _not_stored)
        except _NotStored:
            continue
        gates = HardConcreteGates(shape, init)
        with torch.no_grad():
            gates.log_alpha.copy_(torch.as_tensor(packed[:n_gates], dtype=torch.float32).reshape(shape))
        histories = packed[n_gates:-1].reshape(2, steps)
        found[i] = GateTraining(float(lam), gates, steps, lr, seed, histories[0], histories[1], float(packed[-1]), True)
    missing = [i for i in range(len(lams)) if i not in found]
    if missing:
        runs = _train(
            loaded, train, [float(lams[i]) for i in missing], shape, steps, lr, seed, batch_size, init, progress
        )
        for i, run in zip(missing, runs):
            if cache:  # one array for the results cache: log_alpha, the two histories, the seconds
                packed = np.concatenate([run.log_alpha.ravel(), run.task_loss, run.expected_l0_history, [run.seconds]])
                stored(run.lam, functools.partial(np.asarray, packed))
            found[i] = run
    return [found[i] for i in range(len(lams))]


def _train(
    loaded: LoadedModel,
    train: DevSet,
    lams: list[float],
    shape: tuple[int, int],
    steps: int,
    lr: float,
    seed: int,
    batch_size: int | None,
    init: float,
    progress: bool,
) -> list[GateTraining]:
    """One training per lambda, all in the same passes: each step's batch is repeated once per lambda, every
    lambda's gates drawn from the same uniform draws and stepped by one Adam, so each set of gates moves as it
    would trained alone with ``seed`` (to float rounding), in one forward and backward per step."""
    model = loaded.model
    regression = task_spec(train.task).is_regression
    sets = [HardConcreteGates(shape, init).to(loaded.device) for _ in lams]
    optimizer = torch.optim.Adam([g.log_alpha for g in sets], lr=lr)  # elementwise: no set sees another
    generator = torch.Generator().manual_seed(seed)
    pieces = _pieces(train, batch_size)
    targets = torch.as_tensor(train.labels).to(loaded.device)
    penalties = torch.as_tensor(lams, dtype=torch.float32, device=loaded.device)
    # the histories stay on the model's device until the end: no copy to the host inside the loop
    task_losses, l0s = (torch.zeros((len(lams), steps), device=loaded.device) for _ in range(2))
    order = torch.zeros(0, dtype=torch.long)
    shown = ("lambda " if len(lams) == 1 else "lambdas ") + ", ".join(f"{lam:g}" for lam in lams)
    start = time.perf_counter()
    with classifier_inference(loaded), frozen(loaded):
        for step in tqdm(range(steps), desc=f"L0 gates {train.task}, {shown}", unit="step", disable=not progress):
            if step % len(pieces) == 0:
                order = torch.randperm(len(pieces), generator=generator)
            batch, rows = pieces[int(order[step % len(pieces)])]
            u = sets[0].noise(len(rows), generator)
            z = torch.cat([g.from_noise(u) for g in sets])
            repeated = {k: v.repeat(len(sets), *([1] * (v.dim() - 1))) for k, v in batch.items()}
            with edit_attention(model, gate_edit(z)):
                logits = model(**repeated).logits
            wanted = targets[to_device(rows, targets.device)].repeat(len(sets))
            task = example_losses(logits, wanted, regression).reshape(len(sets), len(rows)).mean(1)
            l0 = torch.stack([g.expected_l0() for g in sets])
            optimizer.zero_grad(set_to_none=True)
            (task + penalties * l0).sum().backward()
            optimizer.step()
            task_losses[:, step], l0s[:, step] = task.detach(), l0.detach()
    histories = torch.stack([task_losses, l0s]).cpu().numpy().astype(np.float64)
    seconds = time.perf_counter() - start
    return [
        GateTraining(lam, gates, steps, lr, seed, histories[0, i], histories[1, i], seconds)
        for i, (lam, gates) in enumerate(zip(lams, sets))
    ]


# --------------------------------------------------------------------------- a sweep over lambda


@dataclass
class L0Sweep:
    """Gates trained for each ``lambda`` and the dev score of their keep masks as binary gates.

    :param task: the task's name.
    :param metric: the dev metric scored.
    :param lambdas: ``(n,)`` the penalties' weights.
    :param trainings: each lambda's training.
    :param masks: ``(n, L, H)`` bool keep masks.
    :param scores: ``(n,)`` the dev score of each mask as binary gates.
    :param base: the dev score with every head.
    """

    task: str
    metric: str
    lambdas: np.ndarray
    trainings: list[GateTraining] = field(repr=False)
    #: Keep masks, ``(N, L, H)``, N the lambdas, bool.
    masks: HeadSamples = field(repr=False)
    #: Dev score with each mask as binary gates (kept 1, pruned 0).
    scores: np.ndarray
    #: Dev score with every head (all gates 1), from the same passes.
    base: float

    @property
    def kept(self) -> SampleValues:
        """``(N,)`` heads kept by each lambda."""
        return self.masks.reshape(len(self.masks), -1).sum(1)

    @property
    def n_heads(self) -> int:
        """The model's heads in all (L x H)."""
        return int(np.prod(self.masks.shape[1:]))

    def table(self) -> pd.DataFrame:
        """One row per lambda: heads kept, expected L0 after training and the dev score.

        :returns: columns ``lambda``, ``kept``, ``expected_l0``, ``score``.
        """
        return pd.DataFrame(
            {
                "lambda": self.lambdas,
                "kept": self.kept,
                "expected_l0": [t.expected_l0 for t in self.trainings],
                "score": self.scores,
            }
        )

    def convergence(self) -> pd.DataFrame:
        """One row per lambda: the expected L0's change over the last fifth of the steps and the heads still
        undecided (``P(z != 0)`` between 0.1 and 0.9). Large values: more ``steps`` before reading the masks.

        :returns: columns ``lambda``, ``l0_change_last_fifth``, ``undecided``.
        """
        return pd.DataFrame(
            {
                "lambda": self.lambdas,
                "l0_change_last_fifth": [t.l0_change() for t in self.trainings],
                "undecided": [t.undecided() for t in self.trainings],
            }
        )

    @property
    def degenerate(self) -> str:
        """Why the sweep says nothing about pruning order ("" when it does)."""
        lo, hi = float(self.lambdas.min()), float(self.lambdas.max())
        if (self.kept == self.n_heads).all():
            return f"every lambda ({lo:g} to {hi:g}) kept all {self.n_heads} heads: try larger lambdas"
        if (self.kept == 0).all():
            return f"every lambda ({lo:g} to {hi:g}) pruned every head: try smaller lambdas"
        if np.isin(self.kept, (0, self.n_heads)).all():
            return (
                f"each lambda kept all {self.n_heads} heads or none: try lambdas between the largest that "
                "kept all and the smallest that kept none"
            )
        return ""

    def curve(self) -> tuple[np.ndarray, np.ndarray]:
        """(share of heads pruned, dev score), sorted by share: the axes of a ``PruningCurve``.

        One point per lambda (its share is ``1 - kept / heads``); the unpruned model is not added
        (it is :attr:`base`).

        :returns: ``(n,)`` shares pruned and ``(n,)`` dev scores.
        """
        fractions = 1 - self.kept / self.n_heads
        order = np.argsort(fractions, kind="stable")
        return fractions[order], self.scores[order]


def l0_sweep(
    loaded: LoadedModel,
    train: DevSet,
    dev: DevSet,
    lambdas: Sequence[float],
    *,
    steps: int = DEFAULT_STEPS,
    lr: float = DEFAULT_LR,
    seed: int = 0,
    batch_size: int | None = None,
    init: float = HardConcreteGates.INIT,
    metric: str = "score",
    cache: bool = False,
    progress: bool = True,
) -> L0Sweep:
    """:func:`train_gates` on ``train`` for each of ``lambdas``; keep masks scored on ``dev`` as binary gates.

    The scores come from :func:`~bertology_utils.interventions.gated_logits.scores_for_gates` (all masks,
    and every head kept as the base, in shared passes). ``cache``: reuse trained gates and dev
    logits stored by an earlier identical sweep. ``progress``: a bar of each lambda's steps, then one
    of the passes scoring the masks.

    :param loaded: a fine-tuned classifier.
    :param train: the training examples (:func:`training_set`).
    :param dev: the dev examples the masks are scored on (the same task).
    :param lambdas: the penalties' weights.
    :param steps: training steps per lambda.
    :param lr: Adam's learning rate.
    :param seed: the batches' order and the gates' draws.
    :param batch_size: the most examples per step (None: ``train``'s batches as they are).
    :param init: every gate's initial ``log_alpha``.
    :param metric: the dev metric (``score`` or one of the task's).
    :param cache: read and store gates and dev logits in the results cache.
    :param progress: show progress bars.
    :returns: the sweep; ValueError for examples of two tasks, or no lambda.
    """
    loaded = require_loaded(loaded)
    if train.task != dev.task:
        raise ValueError(f"training examples are {train.task}, dev examples {dev.task}")
    lams = np.asarray(lambdas, dtype=np.float64).ravel()
    if len(lams) == 0:
        raise ValueError("give at least one lambda")
    trainings = _trainings(
        loaded,
        train,
        [float(lam) for lam in lams],
        steps=steps,
        lr=lr,
        seed=seed,
        batch_size=batch_size,
        init=init,
        cache=cache,
        progress=progress,
    )
    masks = np.stack([t.keep_mask() for t in trainings])
    stack = np.concatenate([np.ones((1, *masks.shape[1:])), masks.astype(np.float64)])
    scores = scores_for_gates(
        loaded, dev, stack, metric=metric, cache=cache, progress=progress, desc=f"L0 masks {dev.task}: scoring"
    )
    return L0Sweep(dev.task, metric, lams, trainings, masks, scores[1:], float(scores[0]))


# --------------------------------------------------------------------------- the training examples


def training_set(
    loaded: LoadedModel,
    task: str | Task = "SST-2",
    *,
    budget: Budget | None = None,
    seed: int = 0,
    train: Corpus | None = None,
    batch_size: int = 32,
) -> DevSet:
    """The training examples ``fine_tune(task, budget=budget, seed=seed)`` drew, encoded once for ``loaded``.

    The same subsample (``budget.train_examples`` rows drawn with ``seed``) and truncation
    (``budget.max_tokens``) as fine-tuning, so gates are trained on what the classifier was
    trained on. ``train`` defaults to the task's training split.

    :param loaded: the classifier the examples are encoded for.
    :param task: the task.
    :param budget: the fine-tuning budget (None: the task's default).
    :param seed: the fine-tuning seed.
    :param train: the training corpus (None: the task's train split).
    :param batch_size: examples per batch.
    :returns: the examples, encoded.
    """
    spec = task_spec(task)
    budget = budget or default_budget(task)
    if train is None:
        train = task.train if isinstance(task, Task) else load_glue(spec.name, "train")
    if train.labels is None:
        raise ValueError(f"{train.name}: the training corpus needs labels")
    rows = subsample(len(train), budget.train_examples, seed)
    chosen = Corpus.from_items(
        [train[int(i)] for i in rows],
        f"{train.name}[{len(rows)} of {len(train)}]",
        [train.labels[int(i)] for i in rows],
    )
    return dev_set(loaded, chosen, spec.name, max_tokens=budget.max_tokens, batch_size=batch_size)


# --------------------------------------------------------------------------- L0 against the other orders
# (kept at the end of the module, with its own imports and __all__ entries, to keep merges easy)


def orders_at_l0_counts(
    loaded: LoadedModel,
    dev: DevSet,
    sweep: L0Sweep,
    curve: PruningCurve,
    random_curves: Sequence[PruningCurve],
    *,
    cache: bool = False,
) -> pd.DataFrame:
    """:meth:`L0Sweep.table` with the dev scores of the importance order (``curve``) and of the random orders'
    mean, each pruned to the same head counts as every lambda's keep mask.

    :param loaded: the classifier.
    :param dev: the dev examples.
    :param sweep: the L0 sweep.
    :param curve: the importance order's pruning curve.
    :param random_curves: random orders' pruning curves.
    :param cache: read and store dev logits in the results cache.
    :returns: one row per lambda, with ``importance order`` and ``random order`` scores.
    """
    shape = sweep.masks.shape[1:]
    by_importance = scores_for_gates(loaded, dev, curve.masks_keeping(sweep.kept, shape), cache=cache)
    by_random = np.mean(
        [scores_for_gates(loaded, dev, c.masks_keeping(sweep.kept, shape), cache=cache) for c in random_curves], axis=0
    )
    return sweep.table().assign(**{"importance order": by_importance, "random order": by_random})


def plot_l0_pruning(
    sweep: L0Sweep, curve: PruningCurve, random_curves: Sequence[PruningCurve], *, keep: float = 0.9, task: str = ""
) -> Figure:
    """:func:`~bertology_utils.interventions.pruning.plot_pruning_curves` with one point per lambda of the L0
    sweep (heads pruned, dev score), each labelled with its lambda.

    :param sweep: the L0 sweep.
    :param curve: the importance order's pruning curve.
    :param random_curves: random orders' pruning curves.
    :param keep: the share of the base score drawn as a line.
    :param task: the task's name, for the title.
    :returns: the figure.
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    plot_pruning_curves(curve, random_curves, keep=keep, task=task, ax=ax)
    fractions, scores = sweep.curve()
    ax.plot(fractions * 100, scores, "D", color="tab:red", ms=7, label="L0 gates (one point per λ)")
    for lam, kept, score in zip(sweep.lambdas, sweep.kept, sweep.scores):
        ax.annotate(
            f"λ={lam:g}",
            ((1 - kept / sweep.n_heads) * 100, score),
            fontsize=7,
            xytext=(4, 4),
            textcoords="offset points",
        )
    ax.set_title(f"{task}: L0 gates vs importance vs random" if task else "L0 gates vs importance vs random")
    ax.legend(fontsize=8)
    return fig
