"""Structural probes trained together: one pass over the data for every layer and probe.

Hewitt and Manning (2019), `A Structural Probe for Finding Syntax in Word Representations
<https://aclanthology.org/N19-1419/>`_. Fitting a probe per layer one after another builds every batch,
and launches every small product, once per probe. :func:`fit_jointly` builds each batch once for all the
layers its probes read (one gather on their device), projects it with all probes of one kind and rank
in one batched product, and updates them with torch's fused Adam kernel, one call per learning rate.
:func:`train_jointly` trains any estimators that follow :class:`StructuralEstimator` (the probes of
:mod:`~bertology_utils.analyses.probes.structural`, whose ``fit_jointly`` fits them with it).

Each probe still trains exactly as it would alone: the same batches in the same order, Adam's update
(as ``torch.optim.Adam(fused=True)`` computes it) with the probe's own learning rate, its own
decay after an epoch whose dev loss is not lower (``ReduceLROnPlateau``'s rule, patience 0), its own
stop and its own kept epoch. So probes fitted together equal probes fitted one by one, up to the float
rounding of a batched product; a test holds them to that. A probe that stops leaves the stack, and the
later steps no longer compute it.

With ``precision`` "bf16" (or "auto" on a device with bfloat16 units) every matrix product of the training takes
bfloat16-rounded inputs inside the kernel (:func:`~bertology_utils.core.models.fast_fp32_products`), while ``B``,
the projected words, the gradients and Adam's state stay float32: the fits are bound by their full-rank
projections, which run several times faster that way, and no tensor is copied to another format and back.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from bertology_utils.analyses.probes.data import probe_device
from bertology_utils.analyses.probes.structural_data import StructuralBatch, StructuralData
from bertology_utils.core.errors import BertologyError
from bertology_utils.core.models import check_precision, fast_fp32_products
from bertology_utils.core.threads import torch_threads

__all__ = ["StructuralEstimator", "StructuralFit", "l1_losses", "train_jointly"]


class StructuralEstimator(Protocol):
    """What :func:`train_jointly` reads of a probe: its settings, and its loss from projected words."""

    layer: int | None
    rank: int | None
    lr: float
    lr_decay: float
    max_epochs: int
    patience: int
    batch_size: int
    seed: int
    n_jobs: int | None
    device: str | torch.device | None
    precision: str

    @classmethod
    def losses(cls, t: torch.Tensor, batch: StructuralBatch) -> torch.Tensor:
        """``(P,)``: the loss of each of ``P`` probes from their projected words ``t`` (``(P, B, W, rank)``)."""
        ...


@dataclass
class StructuralFit:
    """One probe's training: ``B`` of its kept epoch, its rank and layer, the per-epoch history, the kept epoch, the
    joint training's seconds and device."""

    B: np.ndarray
    rank: int
    layer: int
    history: list[dict[str, float]]
    best_epoch: int
    seconds: float
    device: torch.device


#: A probe's predictions from its projected words, and their vector-Jacobian product (``pullback(t, s, predicted)``).
_Outputs = Callable[[torch.Tensor], torch.Tensor]
_Pullback = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


class _L1Losses(torch.autograd.Function):
    """Per sentence, the weighted absolute error of predictions computed from ``t``, differentiated by the
    prediction's own gradient formula (its ``pullback``): autograd through the formula kept and walked back
    every intermediate of it, (P, B, W, rank) tensors that cost more than the formula's one small product."""

    @staticmethod
    def forward(
        ctx: Any,
        t: torch.Tensor,
        target: torch.Tensor,
        weights: torch.Tensor,
        outputs: _Outputs,
        pullback: _Pullback,
    ) -> torch.Tensor:
        predicted = outputs(t)
        error = predicted - target
        ctx.save_for_backward(t, error, predicted, weights)
        ctx.pullback = pullback
        return (error.abs() * weights).flatten(2).sum(2)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None, None]:
        t, error, predicted, weights = ctx.saved_tensors
        s = torch.sign(error) * weights * grad.view(*grad.shape, *[1] * (error.dim() - 2))
        return ctx.pullback(t, s, predicted), None, None, None, None


def l1_losses(
    t: torch.Tensor, target: torch.Tensor, weights: torch.Tensor, outputs: _Outputs, pullback: _Pullback
) -> torch.Tensor:
    """Each sentence's weighted L1 error, for ``P`` probes, of predictions computed from projected words.

    :param t: ``(P, B, W, rank)``: the words projected by each probe.
    :param target: the gold values, ``(B, W)`` or ``(B, W, W)``, as the predictions.
    :param weights: each gold value's weight (0 on padding), shaped as ``target``.
    :param outputs: the predictions from ``t``: ``(P, *target.shape)``.
    :param pullback: ``pullback(t, s, predicted)``, the gradient at ``t`` of ``sum(s * outputs(t))``.
    :returns: ``(P, B)``: ``sum(|outputs(t) - target| * weights)`` per sentence, with its gradient for ``t``.
    """
    return _L1Losses.apply(t, target, weights, outputs, pullback)


#: Stop when the dev loss has not improved by more than this for ``patience`` epochs (the authors' code).
MIN_IMPROVEMENT = 1e-4
#: ``torch.optim.Adam``'s defaults, which the authors' code uses.
_BETAS, _EPS = (0.9, 0.999), 1e-8
#: ``ReduceLROnPlateau``'s defaults: a relative threshold, and no change smaller than eps.
_PLATEAU_THRESHOLD, _PLATEAU_EPS = 1e-4, 1e-8
#: What every probe fitted together must share: the batches, their order, the device, the threads and the precision.
_SHARED = ("batch_size", "seed", "device", "n_jobs", "precision")


@dataclass
class _Track:
    """One probe's training state."""

    probe: StructuralEstimator
    layer: int
    rank: int
    lr: float
    best: float = math.inf
    best_B: torch.Tensor | None = None
    best_epoch: int = 0
    stale: int = 0
    plateau_best: float = math.inf
    history: list[dict[str, float]] = field(default_factory=list)
    done: bool = False


class _Stack:
    """The probes of one kind and rank, their ``B`` stacked and transposed, ``(P, hidden, rank)``, with Adam's moments.

    Kept transposed, ``B`` is the right factor of the projection as it is: its gradient comes out of the product in
    ``B``'s own layout, where ``(P, rank, hidden)`` took a transposing copy of it at every step.
    """

    def __init__(self, tracks: list[_Track], starts: list[torch.Tensor]) -> None:
        self.tracks = tracks
        self.kind = type(tracks[0].probe)
        self.B = torch.stack([start.T for start in starts]).requires_grad_(True)
        self.m = torch.zeros_like(self.B)
        self.v = torch.zeros_like(self.B)
        self.steps = self.B.new_zeros(())  # Adam's step count, on the device as torch's fused Adam keeps it
        self.by_lr: dict[float, list[int]] = {}
        self.at: torch.Tensor | None = None

    def start_epoch(self, positions: dict[int, int]) -> None:
        """The probes grouped by their learning rate for the epoch (the fused Adam's calls), and where each one's layer
        is among the batches' layers (``positions``), as a tensor on the device: nothing is copied there at every
        step."""
        self.by_lr = {}
        for p, track in enumerate(self.tracks):
            self.by_lr.setdefault(track.lr, []).append(p)
        at = [positions[t.layer] for t in self.tracks]
        identity = at == list(range(len(positions)))
        self.at = None if identity else torch.tensor(at, dtype=torch.long, device=self.B.device)

    def project(self, batch: StructuralBatch) -> torch.Tensor:
        """``(P, B, W, rank)``: each probe's ``B`` applied to its layer's words."""
        k, b, w, d = batch.vectors.shape
        words = batch.vectors.view(k, b * w, d)
        words = words if self.at is None else words[self.at]
        return torch.bmm(words, self.B).view(len(self.tracks), b, w, -1)

    def losses(self, batch: StructuralBatch) -> torch.Tensor:
        """``(P,)``: each probe's loss on the batch."""
        return self.kind.losses(self.project(batch), batch)

    @torch.no_grad()
    def adam_step(self) -> None:
        """Adam's update by torch's fused kernel (what ``torch.optim.Adam(fused=True)`` calls), each probe at its own
        learning rate: one pass over ``B``, its gradient and moments, where the formula op by op took nine."""
        g = self.B.grad
        assert g is not None
        self.steps.add_(1)
        (beta1, beta2) = _BETAS
        for lr, members in self.by_lr.items():
            B, grads, m, v = ([tensor[p] for p in members] for tensor in (self.B, g, self.m, self.v))
            torch._fused_adam_(
                B,
                grads,
                m,
                v,
                [],
                [self.steps] * len(members),
                lr=lr,
                beta1=beta1,
                beta2=beta2,
                weight_decay=0.0,
                eps=_EPS,
                amsgrad=False,
                maximize=False,
            )
        self.B.grad = None

    def keep(self, kept: list[int]) -> None:
        """Only the probes at ``kept`` go on."""
        if len(kept) == len(self.tracks):
            return
        at = torch.tensor(kept, dtype=torch.long, device=self.B.device)
        self.tracks = [self.tracks[k] for k in kept]
        self.B = self.B.detach()[at].requires_grad_(True)
        self.m, self.v = self.m[at], self.v[at]


def _check(probes: Sequence[StructuralEstimator], X: object, dev: object) -> list[_Track]:
    """The probes' training states, after checking that they can be trained together on ``X``."""
    if not probes:
        raise ValueError("no probe to fit")
    for data in (X, dev):
        if data is not None and not isinstance(data, StructuralData):
            raise TypeError(f"X and dev must be StructuralData, not {type(data).__name__}")
    assert isinstance(X, StructuralData)
    first = probes[0]
    check_precision(first.precision)
    for probe in probes:
        for name in _SHARED:
            if str(getattr(probe, name)) != str(getattr(first, name)):
                raise BertologyError(
                    f"probes fitted together share {name}: {getattr(probe, name)} vs {getattr(first, name)}"
                )
    tracks = []
    for probe in probes:
        layer = X.check_layer(probe.layer)
        if isinstance(dev, StructuralData):
            dev.check_layer(layer)
        rank = X.hidden_size if probe.rank is None else int(probe.rank)
        if rank < 1:
            raise ValueError(f"rank must be at least 1, not {probe.rank}")
        if int(probe.max_epochs) < 1:
            raise ValueError(f"max_epochs must be at least 1, not {probe.max_epochs}")
        tracks.append(_Track(probe, layer, rank, float(probe.lr)))
    return tracks


def _mean_losses(
    stacks: list[_Stack], X: StructuralData, layers: list[int], device: torch.device, batch_size: int
) -> list[torch.Tensor]:
    """Each stack's ``(P,)`` losses averaged over ``X``'s sentences (each batch's mean weighted by its sentences), on
    batches of the epoch's ``layers``."""
    totals = [torch.zeros(len(s.tracks), dtype=torch.float64, device=device) for s in stacks]
    with torch.no_grad():
        for rows, batch in X.batches(layers, batch_size, device=device):
            for total, stack in zip(totals, stacks):
                total += stack.losses(batch).double() * len(rows)
    return [total / len(X) for total in totals]


def _end_epoch(track: _Track, row: dict[str, float], Bt: torch.Tensor, epoch: int) -> None:
    """The epoch's row, the learning rate's decay and the stop, for one probe whose ``B`` is ``Bt.T`` (its row of the
    stack)."""
    probe = track.probe
    track.history.append(row)
    watched = row["dev_loss" if "dev_loss" in row else "train_loss"]
    # ReduceLROnPlateau(mode="min", patience=0): any epoch not below its best by the relative threshold decays
    if watched < track.plateau_best * (1 - _PLATEAU_THRESHOLD):
        track.plateau_best = watched
    else:
        lower = track.lr * float(probe.lr_decay)
        if track.lr - lower > _PLATEAU_EPS:
            track.lr = lower
    if watched < track.best - MIN_IMPROVEMENT:
        track.best, track.best_B, track.best_epoch, track.stale = (
            watched,
            Bt.detach().T.clone(memory_format=torch.contiguous_format),
            epoch + 1,
            0,
        )
    else:
        track.stale += 1
        track.done = track.stale >= int(probe.patience)
    track.done = track.done or epoch + 1 >= int(probe.max_epochs)


def train_jointly(
    probes: Sequence[StructuralEstimator], X: StructuralData, dev: StructuralData | None = None
) -> list[StructuralFit]:
    """Train structural probes of any layers, kinds and ranks in one pass over ``X`` per epoch.

    Each probe trains as it would alone (see the module's docstring).

    :param probes: the estimators, sharing ``batch_size``, ``seed``, ``device``, ``n_jobs`` and ``precision``; each
        reads its own ``layer`` of ``X``.
    :param X: the training data, holding every layer the probes read.
    :param dev: the data whose loss steers each probe's training; without it, the training loss does.
    :returns: each probe's training, in order; ``seconds`` and each history row's ``seconds`` are the whole joint
        training's.
    """
    tracks = _check(probes, X, dev)
    started = time.perf_counter()
    first = probes[0]
    device = probe_device(first.device)
    batch_size, seed = int(first.batch_size), int(first.seed)
    grouped: dict[tuple[type, int], list[_Track]] = {}
    for track in tracks:
        grouped.setdefault((type(track.probe), track.rank), []).append(track)
    stacks = []
    for (_, rank), members in grouped.items():
        generator = torch.Generator().manual_seed(seed)  # drawn on the CPU: one start on every device
        start = torch.rand((rank, X.hidden_size), generator=generator) * 0.1 - 0.05
        stacks.append(_Stack(members, [start.to(device)] * len(members)))
    with torch_threads(first.n_jobs), fast_fp32_products(first.precision, device):
        for epoch in range(max(int(p.max_epochs) for p in probes)):
            stacks = [s for s in stacks if s.tracks]
            if not stacks:
                break
            tick = time.perf_counter()
            layers = sorted({t.layer for s in stacks for t in s.tracks})
            positions = {layer: k for k, layer in enumerate(layers)}
            totals = [torch.zeros(len(s.tracks), dtype=torch.float64, device=device) for s in stacks]
            for stack in stacks:
                stack.start_epoch(positions)
            order = seed * 1_000_003 + epoch
            for rows, batch in X.batches(layers, batch_size, shuffle=True, seed=order, device=device):
                losses = [stack.losses(batch) for stack in stacks]
                torch.stack([loss.sum() for loss in losses]).sum().backward()
                for stack, loss, total in zip(stacks, losses, totals):
                    stack.adam_step()
                    total += loss.detach().double() * len(rows)
            dev_losses = None if dev is None else _mean_losses(stacks, dev, layers, device, batch_size)
            seconds = time.perf_counter() - tick
            for k, stack in enumerate(stacks):
                train = (totals[k] / len(X)).tolist()
                held = None if dev_losses is None else dev_losses[k].tolist()
                for p, track in enumerate(stack.tracks):
                    row = {"epoch": epoch + 1, "train_loss": train[p], "lr": track.lr}
                    if held is not None:
                        row["dev_loss"] = held[p]
                    _end_epoch(track, {**row, "seconds": seconds}, stack.B[p], epoch)
                stack.keep([p for p, track in enumerate(stack.tracks) if not track.done])
    elapsed = time.perf_counter() - started
    fits = []
    for track in tracks:
        assert track.best_B is not None  # the first epoch always improves on an infinite best
        B = track.best_B.cpu().numpy()
        fits.append(StructuralFit(B, track.rank, track.layer, track.history, track.best_epoch, elapsed, device))
    return fits
