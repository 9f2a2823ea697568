"""Rollout: per-layer mixing maps multiplied through the layers (Abnar & Zuidema 2020, `Quantifying Attention
Flow in Transformers <https://arxiv.org/abs/2005.00928>`_), as one wrapper over any per-layer method.

``rollout``  their attention rollout: A_l = 0.5 mean_h(alpha_l) + 0.5 I, rows renormalised, multiplied
             through the layers. Per-head maps lack the residual stream, so the wrapper adds it
             (``residual``); per-layer maps that model it already (ALTI, value zeroing) go in as they are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from bertology_utils.core.typing import AttentionMaps, MixingMatrix, TokenMask
from bertology_utils.interventions.mixing.base import AcrossLayers

__all__ = ["residual_attention", "aggregate", "Rollout"]


def residual_attention(probs: AttentionMaps, real: TokenMask, residual: float = 0.5) -> MixingMatrix:
    """Abnar & Zuidema's residual-mixed attention A = (1 - r) mean_h(alpha) + r I over real tokens, rows
    renormalised (`Quantifying Attention Flow in Transformers <https://arxiv.org/abs/2005.00928>`_).

    :param probs: (B, H, T, T) attention weights.
    :param real: (B, T) token mask.
    :param residual: r, the weight of the residual stream.
    :returns: (B, T, T), rows of real tokens summing to 1, zero on padding.
    """
    mean = probs.mean(1)
    eye = torch.diag_embed(real.to(mean.dtype))
    mixed = ((1 - residual) * mean + residual * eye) * real[:, None, :]
    return mixed / mixed.sum(-1, keepdim=True).clamp_min(torch.finfo(mixed.dtype).tiny)


def aggregate(per_layer: Sequence[MixingMatrix]) -> list[MixingMatrix]:
    """Rollout of per-layer mixing matrices: R_1 = C_1, R_l = C_l R_(l-1) (Abnar & Zuidema 2020,
    `Quantifying Attention Flow in Transformers <https://arxiv.org/abs/2005.00928>`_).

    :param per_layer: C_l, one (B, T, T) matrix per layer.
    :returns: R_l, one (B, T, T) matrix per layer.
    """
    out: list[MixingMatrix] = []
    for matrix in per_layer:
        out.append(matrix if not out else torch.bmm(matrix, out[-1]))
    return out


@dataclass(frozen=True, repr=False)
class Rollout(AcrossLayers):
    """The per-layer maps of method ``of`` multiplied through the layers (:func:`aggregate`; Abnar & Zuidema
    2020, `Quantifying Attention Flow in Transformers <https://arxiv.org/abs/2005.00928>`_).

    :param name: the method's name (``rollout``, ``alti``, ``value_zeroing_rollout``).
    :param of: the per-layer method rolled out.
    :param residual: for per-head maps, the residual weight r of :func:`residual_attention`, which each layer's
        map first goes through (``rollout``: 0.5); None for a method with one map a layer that models the
        residual stream itself (ALTI, value zeroing).
    """

    name: str
    of: str
    residual: float | None = None

    def combine(
        self, per_layer: Sequence[AttentionMaps], real: TokenMask, options: Mapping[str, Any]
    ) -> list[MixingMatrix]:
        """The rolled-out maps, one (B, T, T) per layer (see :meth:`AcrossLayers.combine`)."""
        if self.residual is None:
            return aggregate([m[:, 0] for m in per_layer])
        return aggregate([residual_attention(m, real, self.residual) for m in per_layer])
