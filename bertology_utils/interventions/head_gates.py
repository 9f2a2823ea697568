"""Per-example head gates on a classifier: what pruning, head relevance and L0 gates share.

Each example of a batch gets its own gate per head (:func:`gate_edit`, at the attention edit point
of :mod:`~bertology_utils.interventions.editing`; Michel et al. 2019's gate on a head's output,
`Are Sixteen Heads Really Better than One? <https://arxiv.org/abs/1905.10650>`_), so one forward pass scores
several gate configurations, and one backward pass of the summed per-example losses (:func:`example_losses`)
gives every example's gradient for every gate. :func:`require_loaded` refuses what is not a
:class:`~bertology_utils.core.models.LoadedModel` before any work.
"""

from __future__ import annotations

import torch
from torch import nn

from bertology_utils.core.models import LoadedModel
from bertology_utils.core.typing import AttentionMaps, ItemValues, Logits
from bertology_utils.interventions.editing import Edit

__all__ = ["gate_edit", "example_losses", "require_loaded"]


def gate_edit(gates: torch.Tensor, first: int = 0) -> Edit:
    """An edit multiplying head h of layer l of example b by ``gates[b, l, h]``.

    Layers below ``first`` are left alone (their gates must be 1): there the batch may not be
    repeated yet (see :func:`~bertology_utils.interventions.gated_logits.predict_with_gates`).

    :param gates: ``(B, L, H)`` one gate per example, layer and head (may require grad).
    :param first: the first layer (from 0) the gates apply to.
    :returns: the edit, for :func:`~bertology_utils.interventions.editing.edit_attention`; ValueError in the pass
        where a layer's gates do not match its ``(B, H)``.
    """

    def edit(layer: int, probs: AttentionMaps) -> AttentionMaps | None:
        if layer < first:
            return None
        g = gates[:, layer].to(device=probs.device, dtype=probs.dtype)
        if g.shape != probs.shape[:2]:
            raise ValueError(f"gates for layer {layer} have shape {tuple(g.shape)}, probabilities {tuple(probs.shape)}")
        return probs * g[:, :, None, None]

    return edit


def example_losses(logits: Logits, targets: ItemValues, regression: bool) -> ItemValues:
    """Per-example loss (summed by the caller so per-example gate gradients come out of one backward).

    :param logits: ``(B, C)`` a classifier's logits (``(B, 1)`` for a regression).
    :param targets: ``(B,)`` class ids, or scores for a regression.
    :param regression: squared error on the first logit instead of cross-entropy.
    :returns: ``(B,)`` float32, each example's loss.
    """
    if regression:
        return (logits.float().reshape(len(targets), -1)[:, 0] - targets.float()) ** 2
    return nn.functional.cross_entropy(logits.float(), targets.long(), reduction="none")


def require_loaded(model: object) -> LoadedModel:
    """``model``, which must be a LoadedModel (not a name, nor the FineTuned record that holds one).

    :param model: what a caller passed as the model.
    :returns: ``model`` itself; TypeError when it is not a
        :class:`~bertology_utils.core.models.LoadedModel`.
    """
    if not isinstance(model, LoadedModel):
        raise TypeError("pass a LoadedModel (e.g. FineTuned.loaded)")
    return model
