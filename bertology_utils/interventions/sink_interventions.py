"""Interventions on the heads that park their attention: remove them, or let every head give up small weights.

Two perturbations of a frozen model, each against the model as it is, measured per sentence on a loss
(:class:`~bertology_utils.interventions.objectives.Objective`) and on the hidden states' largest activations
(:func:`~bertology_utils.interventions.sinks.peak_ratio`, per layer output):

* **removing the sink heads** (:func:`sink_heads`, :func:`removable_heads`): each is gated to zero
  (:func:`~bertology_utils.interventions.editing.gate_heads`), against as many heads that are not sinks, drawn from
  the same layers where they can be (:func:`control_heads`; Clark et al.'s no-op reading predicts the sink heads
  matter less);
* **clipped softmax at inference** (:func:`clipped_softmax`): Bondarenko et al.'s (2023, `Quantizable Transformers
  <https://arxiv.org/abs/2306.12929>`_) clip((zeta - gamma) p + gamma, 0, 1), which lets a head give a token exactly
  zero. The paper trains with it; here it is applied to the trained weights as a measured perturbation, not a fix.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from bertology_utils.core.errors import BertologyError
from bertology_utils.core.models import evaluating
from bertology_utils.core.typing import AttentionMaps
from bertology_utils.interventions.editing import edit_attention, gate_heads, record_layer_outputs
from bertology_utils.interventions.mixing.base import first_output
from bertology_utils.interventions.objectives import Objective, token_batches
from bertology_utils.interventions.sinks import SinkStatistics, peak_ratio

__all__ = [
    "SINK_THRESHOLD",
    "clipped_softmax",
    "sink_heads",
    "removable_heads",
    "control_heads",
    "SinkInterventions",
    "sink_interventions",
]

#: A head is a sink head when, on average, at least this share of its attention goes to [CLS], [SEP] and punctuation.
SINK_THRESHOLD = 0.5


def clipped_softmax(gamma: float, zeta: float = 1.0) -> Callable[[int, AttentionMaps], AttentionMaps]:
    """An attention edit that turns each layer's softmax output p into clip((zeta - gamma) p + gamma, 0, 1).

    Weights below -gamma / (zeta - gamma) become exactly 0; with zeta > 1, those above (1 - gamma) / (zeta - gamma)
    become 1. Rows no longer sum to 1: a head may give everything less than its whole.

    :param gamma: the stretch's lower end, below 0.
    :param zeta: its upper end, at least 1.
    :returns: an edit for :func:`~bertology_utils.interventions.editing.edit_attention`.
    """
    if not gamma < 0 or not zeta >= 1:
        raise ValueError(f"clipped softmax needs gamma < 0 and zeta >= 1, not gamma={gamma}, zeta={zeta}")

    def edit(_layer: int, probs: AttentionMaps) -> AttentionMaps:
        return ((zeta - gamma) * probs + gamma).clamp(0, 1)

    return edit


def sink_heads(stats: SinkStatistics, threshold: float = SINK_THRESHOLD) -> np.ndarray:
    """The heads whose mean attention on [CLS], [SEP] and punctuation together is at least ``threshold``.

    :param stats: :func:`~bertology_utils.interventions.sinks.sink_statistics`' measures.
    :param threshold: the share of attention.
    :returns: (L, H) bool.
    """
    return stats.sink_mass.mean(0) >= threshold


def removable_heads(stats: SinkStatistics, heads: np.ndarray) -> np.ndarray:
    """The sink heads a control can match head for head: all of them, or, where they outnumber the other heads, as
    many as those, the ones that park the most.

    :param stats: the measures.
    :param heads: (L, H) bool, the sink heads (:func:`sink_heads`).
    :returns: (L, H) bool, a subset of ``heads``.
    """
    others = int((~heads).sum())
    if heads.sum() <= others:
        return heads.copy()
    mass = np.where(heads, stats.sink_mass.mean(0), -np.inf).ravel()
    kept = np.zeros(heads.size, dtype=bool)
    kept[np.argsort(-mass, kind="stable")[:others]] = True
    return kept.reshape(heads.shape)


def control_heads(chosen: np.ndarray, pool: np.ndarray, n_sets: int = 3, seed: int = 0) -> list[np.ndarray]:
    """Sets of heads to remove in place of ``chosen``, drawn from ``pool``: as many per layer from the layer's pool;
    where a layer's pool is too small, the rest from other layers' pools. Seeded.

    :param chosen: (L, H) bool, the heads a control stands in for.
    :param pool: (L, H) bool, the heads a control may remove (the heads that are not sink heads).
    :param n_sets: how many sets.
    :param seed: the draws' seed.
    :returns: up to ``n_sets`` distinct (L, H) bool masks, each as many heads as ``chosen`` (fewer sets where the
        draws coincide); none when nothing is chosen or the pool is smaller than ``chosen``.
    """
    if not chosen.any() or pool.sum() < chosen.sum():
        return []
    rng = np.random.default_rng(seed)
    sets: list[np.ndarray] = []
    for _ in range(n_sets):
        mask = np.zeros_like(chosen)
        short = 0
        for layer in range(chosen.shape[0]):
            free = np.flatnonzero(pool[layer])
            want = int(chosen[layer].sum())
            mask[layer, rng.choice(free, size=min(want, len(free)), replace=False)] = True
            short += want - min(want, len(free))
        rest = np.flatnonzero((pool & ~mask).ravel())
        mask.ravel()[rng.choice(rest, size=short, replace=False)] = True
        if not any((mask == earlier).all() for earlier in sets):  # a small pool: the draws may coincide
            sets.append(mask)
    return sets


@dataclass
class SinkInterventions:
    """Per-sentence results of :func:`sink_interventions`: for each condition (``none``, ``sink heads``,
    ``control <k>``, ``clipped softmax``), ``losses[condition]`` (n,) and ``ratios[condition]`` (n, L) the largest
    activation of each layer's output over its median magnitude."""

    objective: str
    items: np.ndarray
    losses: Mapping[str, np.ndarray]
    ratios: Mapping[str, np.ndarray]
    n_heads_removed: int
    n_skipped: int = 0

    @property
    def controls(self) -> list[str]:
        """The control conditions' names."""
        return [c for c in self.losses if c.startswith("control")]

    def summary(self) -> pd.DataFrame:
        """One row per intervention (the controls averaged): the mean loss change and log10 ratio change.

        :returns: index ``intervention``; columns ``loss_change`` and ``ratio_change``.
        """
        names = [c for c in self.losses if c != "none" and c not in self.controls]
        names += ["controls"] if self.controls else []
        return pd.DataFrame(
            {
                "loss_change": [self.loss_change(n).mean() for n in names],
                "ratio_change": [self.ratio_change(n).mean() for n in names],
            },
            index=pd.Index(names, name="intervention"),
        )

    def metrics(self, prefix: str = "sinks") -> dict:
        """What notebook 10 records of the interventions (declared in ``papers/metrics/sinks.py``).

        :param prefix: the metric names' prefix.
        :returns: metric name -> number.
        """
        out = {f"{prefix}.objective": self.objective, f"{prefix}.n_heads_removed": self.n_heads_removed}
        out[f"{prefix}.n_control_sets"] = len(self.controls)
        for name, row in self.summary().iterrows():
            key = f"{prefix}.intervention.{str(name).replace(' ', '_')}"
            out |= {f"{key}.loss_change": float(row["loss_change"]), f"{key}.ratio_change": float(row["ratio_change"])}
        return out

    def loss_change(self, condition: str) -> np.ndarray:
        """(n,) each sentence's loss under ``condition`` minus its loss as it is; ``controls`` averages the controls.

        :param condition: a condition, or ``controls``.
        :returns: the changes.
        """
        if condition == "controls":
            return np.mean([self.loss_change(c) for c in self.controls], axis=0)
        return self.losses[condition] - self.losses["none"]

    def ratio_change(self, condition: str) -> np.ndarray:
        """(n,) log10 of the largest activation ratio over the layers under ``condition`` over that as it is.

        :param condition: a condition, or ``controls`` (their mean).
        :returns: the changes (0: unchanged; -1: a tenth).
        """
        if condition == "controls":
            return np.mean([self.ratio_change(c) for c in self.controls], axis=0)
        return np.log10(self.ratios[condition].max(1) / self.ratios["none"].max(1))


@torch.no_grad()
def sink_interventions(
    objective: Objective,
    items: Iterable,
    heads: np.ndarray,
    controls: list[np.ndarray],
    *,
    gamma: float,
    zeta: float = 1.0,
    batch_size: int = 8,
    max_tokens: int | None = 128,
    progress: bool = False,
) -> SinkInterventions:
    """Each sentence's loss and largest activations as the model is, without ``heads``, without each control set,
    and under clipped softmax.

    :param objective: the loss (its ``prepare`` runs once per batch, outside every edit).
    :param items: sentences.
    :param heads: (L, H) bool, the heads to remove (:func:`sink_heads`); none: that condition is left out.
    :param controls: (L, H) bool masks removed in their place (:func:`control_heads`).
    :param gamma: clipped softmax's lower end (:func:`clipped_softmax`).
    :param zeta: its upper end.
    :param batch_size: sentences per pass.
    :param max_tokens: longer sentences are skipped and counted.
    :param progress: a progress bar.
    :returns: the per-sentence results; BertologyError when no sentence is short enough.
    """
    loaded = objective.loaded
    batches, skipped = token_batches(loaded, items, batch_size=batch_size, max_tokens=max_tokens)
    if not batches:
        raise BertologyError(f"no sentence to perturb ({len(skipped)} skipped as longer than {max_tokens} tokens)")

    def gated(mask: np.ndarray) -> Callable[[], contextlib.AbstractContextManager]:
        return lambda: gate_heads(loaded.model, torch.as_tensor(~mask, dtype=torch.float32))

    makers: dict[str, Callable[[], contextlib.AbstractContextManager]] = {"none": contextlib.nullcontext}
    if heads.any():
        makers["sink heads"] = gated(heads)
    makers |= {f"control {k + 1}": gated(mask) for k, mask in enumerate(controls)}
    makers["clipped softmax"] = lambda: edit_attention(loaded.model, clipped_softmax(gamma, zeta))
    losses: dict[str, list[np.ndarray]] = {name: [] for name in makers}
    ratios: dict[str, list[np.ndarray]] = {name: [] for name in makers}
    indices: list[int] = []
    with evaluating(loaded.model):
        for batch in tqdm(batches, desc="sink interventions", unit="batch", disable=not progress):
            batch = objective.prepare(batch)
            indices += [item.index for item in batch.items]
            for name, make in makers.items():
                with make(), record_layer_outputs(loaded.model) as outputs:
                    output = objective.forward(batch)
                states = [first_output(outputs[k]) for k in sorted(outputs)]
                losses[name].append(output.losses.double().cpu().numpy())
                ratios[name].append(peak_ratio(states, batch.real).double().cpu().numpy())
    order = np.argsort(indices, kind="stable")
    return SinkInterventions(
        objective=objective.name,
        items=np.asarray(indices)[order],
        losses={name: np.concatenate(v)[order] for name, v in losses.items()},
        ratios={name: np.concatenate(v)[order] for name, v in ratios.items()},
        n_heads_removed=int(heads.sum()),
        n_skipped=len(skipped),
    )
