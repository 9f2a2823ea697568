"""The raw attention weights alpha^h_ij, per head: the baseline every other method is compared with."""

from __future__ import annotations

from typing import ClassVar

from torch import nn

from bertology_utils.core.typing import AttentionMaps, TokenMask
from bertology_utils.interventions.mixing.base import LayerMethod, LayerTrace

__all__ = ["Attention"]


class Attention(LayerMethod):
    """``attention``: the attention weights alpha^h_ij as the model computed them, one map per head."""

    name = "attention"
    per_head = True
    reads: ClassVar[frozenset[str]] = frozenset()

    def layer_map(self, model: nn.Module, layer: int, t: LayerTrace, real: TokenMask) -> AttentionMaps:
        """(B, H, T, T) ``layer``'s attention weights (see :meth:`LayerMethod.layer_map`)."""
        return t.probs
