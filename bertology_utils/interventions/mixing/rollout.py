"""Rollout: per-layer mixing maps multiplied through the layers (Abnar & Zuidema 2020), as one wrapper over
any per-layer method.

``rollout``  their attention rollout: A_l = 0.5 mean_h(alpha_l) + 0.5 I, rows renormalised, multiplied
             through the layers. Per-head maps lack the residual stream, so the wrapper adds it
             (``residual``); per-layer maps that model it already (ALTI, value zeroing) go in as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from bertology_utils.core.typing import AttentionMaps, MixingMatrix, TokenMask
from bertology_utils.interventions.mixing.base import AcrossLayers, Options, register

__all__ = ["residual_attention", "aggregate", "Rollout"]


def residual_attention(probs: AttentionMaps, real: TokenMask, residual: float = 0.5) -> MixingMatrix:
    """Abnar & Zuidema's A = (1 - r) mean_h(alpha) + r I over real tokens, rows renormalised: (B, T, T)."""
    mean = probs.mean(1)
    eye = torch.diag_embed(real.to(mean.dtype))
    mixed = ((1 - residual) * mean + residual * eye) * real[:, None, :]
    return mixed / mixed.sum(-1, keepdim=True).clamp_min(torch.finfo(mixed.dtype).tiny)


def aggregate(per_layer: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Rollout of per-layer (B, T, T) mixing matrices: R_1 = C_1, R_l = C_l R_(l-1)."""
    out: list[torch.Tensor] = []
    for matrix in per_layer:
        out.append(matrix if not out else torch.bmm(matrix, out[-1]))
    return out


@dataclass(frozen=True, repr=False)
class Rollout(AcrossLayers):
    """The per-layer maps of method ``of`` multiplied through the layers. With ``residual`` (for per-head
    maps) each layer's map is first :func:`residual_attention`; without, it is the method's one map a layer."""

    name: str
    of: str
    residual: float | None = None

    def combine(self, per_layer: Sequence[AttentionMaps], real: TokenMask, options: Options) -> list[MixingMatrix]:
        if self.residual is None:
            return aggregate([m[:, 0] for m in per_layer])
        return aggregate([residual_attention(m, real, self.residual) for m in per_layer])


register(Rollout("rollout", of="attention", residual=0.5))
