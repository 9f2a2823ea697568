"""The raw attention weights alpha^h_ij, per head: the baseline every other method is compared with."""

from __future__ import annotations

from typing import ClassVar

from torch import nn

from bertology_utils.core.typing import AttentionMaps, TokenMask
from bertology_utils.interventions.mixing.base import LayerMethod, LayerTrace, register

__all__ = ["Attention"]


class Attention(LayerMethod):
    name = "attention"
    per_head = True
    reads: ClassVar[frozenset[str]] = frozenset()

    def layer_map(self, model: nn.Module, layer: int, t: LayerTrace, real: TokenMask) -> AttentionMaps:
        return t.probs


register(Attention())
