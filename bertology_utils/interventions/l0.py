"""Voita et al. (2019)'s head pruning: a Hard Concrete gate per head, trained with a relaxed L0 penalty.

Each head's output is multiplied by a stochastic gate ``z`` with a Hard Concrete distribution
(Louizos, Welling & Kingma 2018): ``u ~ U(0, 1)``, ``s = sigmoid((log u - log(1 - u) + log_alpha) / beta)``,
``z = clamp(s (r - l) + l, 0, 1)``. The stretch to ``(l, r)`` and the clamp give ``z`` a real
probability of being exactly 0 or exactly 1, and the expected number of open gates,
``sum_h P(z_h != 0) = sum_h sigmoid(log_alpha_h - beta log(-l / r))``, is differentiable in
``log_alpha``. Training minimises the mean task loss under sampled gates plus ``lambda`` times that
expected L0 (Voita's ``L_C``); a larger ``lambda`` keeps fewer heads.

* :class:`HardConcreteGates` — one ``log_alpha`` per head, the sampler and the closed forms;
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

import contextlib
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from torch import nn
from tqdm.auto import tqdm

from bertology_utils.core.models import LoadedModel
from bertology_utils.data import Corpus, Task, load_glue
from bertology_utils.interventions.dev_sets import DevSet, dev_set
from bertology_utils.interventions.editing import classifier_inference, edit_attention
from bertology_utils.interventions.finetuning import Budget, default_budget, subsample
from bertology_utils.interventions.gated_logits import gate_shape, scores_for_gates
from bertology_utils.interventions.head_gates import example_losses, gate_edit, require_loaded
from bertology_utils.interventions.pruning import PruningCurve, plot_pruning_curves
from bertology_utils.interventions.results_cache import cached_result
from bertology_utils.interventions.scoring import task_spec

__all__ = [
    "HardConcreteGates",
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


# --------------------------------------------------------------------------- the gates


class HardConcreteGates(nn.Module):
    """Hard Concrete gates, one per head: ``log_alpha`` of shape (layers, heads).

    ``BETA`` (the temperature) and ``LIMITS`` (the stretch ``(l, r)``) are Louizos et al.'s values,
    which Voita et al. used. ``INIT`` = 3 starts every gate almost surely open,
    ``P(z != 0) = sigmoid(3 + (2/3) log 11) = 0.990`` (fully open, ``P(z = 1)``, 0.80; the
    deterministic gate is exactly 1), so training starts from the model as it is. Not higher: a
    gate clamped at 1 gets no gradient from the task loss, and a ``log_alpha`` must travel from the
    init to the threshold (about -1.6) before its head is pruned; from 5 (``P(z != 0)`` 0.9986),
    SST-2 gates were still drifting after 500 steps at lambdas where these had settled.
    """

    #: Temperature of the concrete distribution.
    BETA: float = 2 / 3
    #: The stretch (l, r): s in (0, 1) is mapped to (l, r) and clamped to [0, 1].
    LIMITS: tuple[float, float] = (-0.1, 1.1)
    #: Initial log_alpha of every gate.
    INIT: float = 3.0
    #: u is kept this far from 0 and 1, so its logit stays finite.
    _EPS = 1e-6

    def __init__(self, shape: tuple[int, int], init: float = INIT):
        super().__init__()
        self.log_alpha = nn.Parameter(torch.full(tuple(shape), float(init)))

    @classmethod
    def for_model(cls, loaded: LoadedModel, init: float = INIT) -> HardConcreteGates:
        """Gates shaped like the model's heads (:func:`~bertology_utils.interventions.gated_logits.gate_shape`)."""
        return cls(gate_shape(loaded), init)

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.log_alpha.shape)  # type: ignore[return-value]

    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """``n`` independent draws of every gate, (n, layers, heads); differentiable in ``log_alpha``."""
        return self.from_noise(self.noise(n, generator))

    def noise(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """The uniform draws behind :meth:`sample`, (n, layers, heads), kept inside (0, 1)."""
        la = self.log_alpha
        device = la.device if generator is None else generator.device  # the generator's own device draws
        u = torch.rand((n, *la.shape), generator=generator, dtype=la.dtype, device=device).to(la.device)
        return u.clamp(self._EPS, 1 - self._EPS)

    def from_noise(self, u: torch.Tensor) -> torch.Tensor:
        """The gates that uniform draws ``u`` (from :meth:`noise`) give: gates of several ``log_alpha`` can share
        one draw, as trainings with one seed would draw it."""
        s = torch.sigmoid((torch.log(u) - torch.log1p(-u) + self.log_alpha) / self.BETA)
        low, high = self.LIMITS
        return (s * (high - low) + low).clamp(0.0, 1.0)

    def open_probability(self) -> torch.Tensor:
        """``P(z != 0)`` per head, (layers, heads): ``sigmoid(log_alpha - beta log(-l / r))``."""
        low, high = self.LIMITS
        return torch.sigmoid(self.log_alpha - self.BETA * math.log(-low / high))

    def full_probability(self) -> torch.Tensor:
        """``P(z = 1)`` per head: ``1 - sigmoid(beta log((1 - l) / (r - 1)) - log_alpha)``."""
        low, high = self.LIMITS
        return torch.sigmoid(self.log_alpha - self.BETA * math.log((1 - low) / (high - 1)))

    def expected_l0(self) -> torch.Tensor:
        """The expected number of open gates (a scalar), differentiable: Voita's ``L_C``."""
        return self.open_probability().sum()

    def deterministic(self) -> torch.Tensor:
        """Louizos' test-time gate, ``clamp(sigmoid(log_alpha) (r - l) + l, 0, 1)``, (layers, heads)."""
        low, high = self.LIMITS
        return (torch.sigmoid(self.log_alpha) * (high - low) + low).clamp(0.0, 1.0)

    @torch.no_grad()
    def keep_mask(self) -> torch.Tensor:
        """Heads kept, (layers, heads) bool: those whose gate is more likely open than closed.

        ``P(z != 0) > 0.5``, i.e. ``log_alpha > beta log(-l / r)`` (about -1.6): the head is kept
        when the trained model more often uses it than not. After training most gates are far
        from the threshold, so this and ``deterministic() > 0`` rarely differ.
        """
        return self.open_probability() > 0.5


# --------------------------------------------------------------------------- training one lambda


@dataclass
class GateTraining:
    """The gates trained with one ``lam``, and how training went."""

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
    def log_alpha(self) -> np.ndarray:
        return self.gates.log_alpha.detach().cpu().numpy().copy()

    def open_probability(self) -> np.ndarray:
        with torch.no_grad():
            return self.gates.open_probability().cpu().numpy()

    def keep_mask(self) -> np.ndarray:
        return self.gates.keep_mask().cpu().numpy()

    @property
    def kept(self) -> int:
        return int(self.keep_mask().sum())

    @property
    def expected_l0(self) -> float:
        return float(self.open_probability().sum())

    def l0_change(self, last: float = 0.2) -> float:
        """How much the expected L0 moved over the ``last`` share of the steps: near 0 once training settled."""
        tail = self.expected_l0_history[-max(2, int(round(last * self.steps))) :]
        return float(tail[-1] - tail[0])

    def undecided(self, margin: float = 0.1) -> int:
        """Heads whose ``P(z != 0)`` is still between ``margin`` and ``1 - margin``: few once training settled."""
        p = self.open_probability()
        return int(((p > margin) & (p < 1 - margin)).sum())


@contextlib.contextmanager
def _frozen(model: nn.Module) -> Iterator[None]:
    """No gradients for the model's weights inside the block (backward then computes only what the gates need)."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    for p in trainable:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p in trainable:
            p.requires_grad_(True)


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

    def stored(lam: float, compute) -> np.ndarray:
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
                stored(run.lam, lambda packed=packed: packed)
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
    with classifier_inference(loaded), _frozen(model):
        for step in tqdm(range(steps), desc=f"L0 gates {train.task}, {shown}", unit="step", disable=not progress):
            if step % len(pieces) == 0:
                order = torch.randperm(len(pieces), generator=generator)
            batch, rows = pieces[int(order[step % len(pieces)])]
            u = sets[0].noise(len(rows), generator)
            z = torch.cat([g.from_noise(u) for g in sets])
            repeated = {k: v.repeat(len(sets), *([1] * (v.dim() - 1))) for k, v in batch.items()}
            with edit_attention(model, gate_edit(z)):
                logits = model(**repeated).logits
            wanted = targets[torch.as_tensor(rows, device=targets.device)].repeat(len(sets))
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
    """Gates trained for each ``lambda`` and the dev score of their keep masks as binary gates."""

    task: str
    metric: str
    lambdas: np.ndarray
    trainings: list[GateTraining] = field(repr=False)
    #: Keep masks, (n_lambdas, layers, heads) bool.
    masks: np.ndarray = field(repr=False)
    #: Dev score with each mask as binary gates (kept 1, pruned 0).
    scores: np.ndarray
    #: Dev score with every head (all gates 1), from the same passes.
    base: float

    @property
    def kept(self) -> np.ndarray:
        return self.masks.reshape(len(self.masks), -1).sum(1)

    @property
    def n_heads(self) -> int:
        return int(np.prod(self.masks.shape[1:]))

    def table(self) -> pd.DataFrame:
        """One row per lambda: heads kept, expected L0 after training and the dev score."""
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
        undecided (``P(z != 0)`` between 0.1 and 0.9). Large values: more ``steps`` before reading the masks."""
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
    mean, each pruned to the same head counts as every lambda's keep mask."""
    shape = sweep.masks.shape[1:]
    by_importance = scores_for_gates(loaded, dev, curve.masks_keeping(sweep.kept, shape), cache=cache)
    by_random = np.mean(
        [scores_for_gates(loaded, dev, c.masks_keeping(sweep.kept, shape), cache=cache) for c in random_curves], axis=0
    )
    return sweep.table().assign(**{"importance order": by_importance, "random order": by_random})


def plot_l0_pruning(
    sweep: L0Sweep, curve: PruningCurve, random_curves: Sequence[PruningCurve], *, keep: float = 0.9, task: str = ""
):
    """:func:`~bertology_utils.interventions.pruning.plot_pruning_curves` with one point per lambda of the L0
    sweep (heads pruned, dev score), each labelled with its lambda. Returns the figure."""
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
