"""``norm``: Kobayashi et al.'s (2020, `Attention is Not Only a Weight: Analyzing Transformers with Vector Norms
<https://arxiv.org/abs/2004.10102>`_) attention weighted by the norm of what each token sends,
||alpha^h_ij f_h(x_j)||, f_h(x) = W_O^h (W_V^h x + b_V^h), per head; and the transformed vectors f_h(x_j) that
``norm_layer`` (``norm_layer.py``) and ALTI (``alti.py``) build on.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn

from bertology_utils.core import architectures
from bertology_utils.core.architectures import Model
from bertology_utils.core.typing import AttentionMaps, TokenMask
from bertology_utils.interventions.mixing.base import LayerMethod, LayerTrace

__all__ = ["head_vectors", "row_chunks", "mixed_vectors", "Norm"]


def head_vectors(model: Model, layer: int, values: torch.Tensor) -> torch.Tensor:
    """Kobayashi et al.'s transformed vectors f_h(x_j) = W_O^h v^h_j: what head h would add to a token attending
    only to j (`Attention is Not Only a Weight <https://arxiv.org/abs/2004.10102>`_).

    :param model: the model (a LoadedModel or its torch module).
    :param layer: the layer (from 0).
    :param values: (B, H, T, d) the layer's value vectors per head.
    :returns: (B, H, T, E).
    """
    weight = architectures.attention_output(
        architectures.torch_module(model), layer
    ).weight  # (E, H*d): heads along input columns
    heads, d = values.shape[1], values.shape[-1]
    return torch.einsum("bhtd,ehd->bhte", values, weight.view(weight.shape[0], heads, d))


def row_chunks(batch: int, tokens: int, dim: int, budget: int = 1 << 24) -> list[slice]:
    """Slices of receiving rows so that a (B, rows, T, E) tensor stays under ``budget`` elements.

    :param batch: B.
    :param tokens: T.
    :param dim: D.
    :param budget: the most elements a chunk's tensor may hold.
    :returns: consecutive slices covering ``range(tokens)``.
    """
    step = max(1, budget // max(1, batch * tokens * dim))
    return [slice(start, min(tokens, start + step)) for start in range(0, tokens, step)]


def mixed_vectors(probs: AttentionMaps, vectors: torch.Tensor, rows: slice) -> torch.Tensor:
    """sum_h alpha^h_ij f_h(x_j) for receiving tokens ``rows``.

    :param probs: (B, H, T, T) attention weights.
    :param vectors: (B, H, T, E) :func:`head_vectors`.
    :param rows: the receiving tokens.
    :returns: (B, rows, T, E).
    """
    return torch.einsum("bhij,bhjd->bijd", probs[:, :, rows], vectors)


class Norm(LayerMethod):
    """``norm``: each head's weight alpha^h_ij times the norm of the vector it moves, ||alpha^h_ij f_h(x_j)||
    (Kobayashi et al. 2020, `Attention is Not Only a Weight <https://arxiv.org/abs/2004.10102>`_), one map per
    head; rows are not distributions."""

    name = "norm"
    per_head = True
    reads: ClassVar[frozenset[str]] = frozenset({"values"})

    def layer_map(self, model: nn.Module, layer: int, t: LayerTrace, real: TokenMask) -> AttentionMaps:
        """(B, H, T, T) norm-weighted attention of ``layer`` (see :meth:`LayerMethod.layer_map`)."""
        norms = head_vectors(model, layer, t.values).norm(dim=-1)  # (B, H, T)
        return t.probs * norms[:, :, None, :]
