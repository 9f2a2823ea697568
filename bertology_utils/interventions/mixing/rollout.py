"""Rollout: per-layer mixing maps multiplied through the layers (Abnar & Zuidema 2020, `Quantifying Attention
Flow in Transformers <https://arxiv.org/abs/2005.00928>`_), as one wrapper over any per-layer method.

``rollout``  their attention rollout: A_l = 0.5 mean_h(alpha_l) + 0.5 I, rows renormalised, multiplied
             through the layers. Per-head maps lack the residual stream, so the wrapper adds it
             (``residual``); per-layer maps that model it already (ALTI, value zeroing, GlobEnc) go in as
             they are, and maps whose rows are not distributions (GlobEnc's norms) are multiplied as they
             are and reported with rows summing to 1 (``renormalise``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from bertology_utils.core.typing import AttentionMaps, MixingMatrix, TokenMask
from bertology_utils.interventions.mixing.base import AcrossLayers
from bertology_utils.interventions.mixing.maps import rows_summing_to_one

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


def aggregate(per_layer: Sequence[MixingMatrix], *, renormalise: bool = False) -> list[MixingMatrix]:
    """Rollout of per-layer mixing matrices: R_1 = C_1, R_l = C_l R_(l-1) (Abnar & Zuidema 2020,
    `Quantifying Attention Flow in Transformers <https://arxiv.org/abs/2005.00928>`_).

    :param per_layer: C_l, one (B, T, T) matrix per layer.
    :param renormalise: return each R_l with its rows rescaled to sum to 1, for C_l whose rows are not
        distributions: the product runs on the C_l as they are, divided by its total per item after each
        layer (one factor per item changes no ratio in R_l, and keeps products of norms finite however deep).
    :returns: R_l, one (B, T, T) matrix per layer.
    """
    out: list[MixingMatrix] = []
    product: MixingMatrix | None = None
    for matrix in per_layer:
        product = matrix if product is None else torch.bmm(matrix, product)
        if renormalise:
            product = product / product.sum((-2, -1), keepdim=True).clamp_min(torch.finfo(product.dtype).tiny)
            out.append(rows_summing_to_one(product))
        else:
            out.append(product)
    return out


@dataclass(frozen=True, repr=False)
class Rollout(AcrossLayers):
    """The per-layer maps of method ``of`` multiplied through the layers (:func:`aggregate`; Abnar & Zuidema
    2020, `Quantifying Attention Flow in Transformers <https://arxiv.org/abs/2005.00928>`_).

    :param name: the method's name (``rollout``, ``alti``, ``value_zeroing_rollout``, ``globenc``).
    :param of: the per-layer method rolled out.
    :param residual: for per-head maps, the residual weight r of :func:`residual_attention`, which each layer's
        map first goes through (``rollout``: 0.5); None for a method with one map a layer that models the
        residual stream itself (ALTI, value zeroing, GlobEnc).
    :param renormalise: for per-layer maps whose rows are not distributions (GlobEnc's norms): multiply them as
        they are and give the products' rows rescaled to sum to 1 (:func:`aggregate`).
    """

    name: str
    of: str
    residual: float | None = None
    renormalise: bool = False

    def combine(
        self, per_layer: Sequence[AttentionMaps], real: TokenMask, options: Mapping[str, Any]
    ) -> list[MixingMatrix]:
        """The rolled-out maps, one (B, T, T) per layer (see :meth:`AcrossLayers.combine`)."""
        if self.residual is None:
            return aggregate([m[:, 0] for m in per_layer], renormalise=self.renormalise)
        return aggregate([residual_attention(m, real, self.residual) for m in per_layer], renormalise=self.renormalise)
