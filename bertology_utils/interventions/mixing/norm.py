"""Kobayashi et al. (2020): attention weighted by the norm of what each token sends.

``norm``        ||alpha^h_ij f_h(x_j)||, f_h(x) = W_O^h (W_V^h x + b_V^h), per head;
``norm_layer``  the norm of the heads' summed vectors, ||sum_h alpha^h_ij f_h(x_j)||, per layer.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn

from bertology_utils.core import architectures
from bertology_utils.core.typing import AttentionMaps, TokenMask
from bertology_utils.interventions.mixing.base import LayerMethod, LayerTrace, register

__all__ = ["head_vectors", "row_chunks", "mixed_vectors", "Norm", "NormLayer"]


def head_vectors(model, layer: int, values: torch.Tensor) -> torch.Tensor:
    """f_h(x_j) = W_O^h v^h_j, shape (B, H, T, D): what head h would add to a token attending only to j."""
    weight = architectures.attention_output(
        architectures.torch_module(model), layer
    ).weight  # (D, H*d): heads along input columns
    heads, d = values.shape[1], values.shape[-1]
    return torch.einsum("bhtd,ehd->bhte", values, weight.view(weight.shape[0], heads, d))


def row_chunks(batch: int, tokens: int, dim: int, budget: int = 1 << 24) -> list[slice]:
    """Slices of receiving rows so that a (B, rows, T, D) tensor stays under ``budget`` elements."""
    step = max(1, budget // max(1, batch * tokens * dim))
    return [slice(start, min(tokens, start + step)) for start in range(0, tokens, step)]


def mixed_vectors(probs: torch.Tensor, vectors: torch.Tensor, rows: slice) -> torch.Tensor:
    """sum_h alpha^h_ij f_h(x_j) for receiving tokens ``rows``: (B, rows, T, D)."""
    return torch.einsum("bhij,bhjd->bijd", probs[:, :, rows], vectors)


class Norm(LayerMethod):
    name = "norm"
    per_head = True
    reads: ClassVar[frozenset[str]] = frozenset({"values"})

    def layer_map(self, model: nn.Module, layer: int, t: LayerTrace, real: TokenMask) -> AttentionMaps:
        norms = head_vectors(model, layer, t.values).norm(dim=-1)  # (B, H, T)
        return t.probs * norms[:, :, None, :]


class NormLayer(LayerMethod):
    name = "norm_layer"
    reads: ClassVar[frozenset[str]] = frozenset({"values", "hidden"})

    def layer_map(self, model: nn.Module, layer: int, t: LayerTrace, real: TokenMask) -> AttentionMaps:
        vectors = head_vectors(model, layer, t.values)
        chunks = row_chunks(*t.hidden.shape)
        return torch.cat([mixed_vectors(t.probs, vectors, rows).norm(dim=-1) for rows in chunks], dim=1)[:, None]


register(Norm())
register(NormLayer())
