"""``norm_layer``: Kobayashi et al.'s (2020, `Attention is Not Only a Weight: Analyzing Transformers with Vector
Norms <https://arxiv.org/abs/2004.10102>`_) norm of the heads' summed vectors, ||sum_h alpha^h_ij f_h(x_j)||,
one map per layer."""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn

from bertology_utils.core.typing import AttentionMaps, TokenMask
from bertology_utils.interventions.mixing.base import LayerMethod, LayerTrace
from bertology_utils.interventions.mixing.norm import head_vectors, mixed_vectors, row_chunks

__all__ = ["NormLayer"]


class NormLayer(LayerMethod):
    """``norm_layer``: how much of token j's vector the whole attention block moves to token i,
    ||sum_h alpha^h_ij f_h(x_j)|| (Kobayashi et al. 2020, `Attention is Not Only a Weight
    <https://arxiv.org/abs/2004.10102>`_), one map per layer; rows are not distributions."""

    name = "norm_layer"
    reads: ClassVar[frozenset[str]] = frozenset({"values", "hidden"})

    def layer_map(self, model: nn.Module, layer: int, t: LayerTrace, real: TokenMask) -> AttentionMaps:
        """(B, 1, T, T) norms of ``layer``'s mixed vectors, computed in chunks of receiving rows (see
        :meth:`LayerMethod.layer_map`)."""
        vectors = head_vectors(model, layer, t.values)
        chunks = row_chunks(*t.hidden.shape)
        return torch.cat([mixed_vectors(t.probs, vectors, rows).norm(dim=-1) for rows in chunks], dim=1)[:, None]
