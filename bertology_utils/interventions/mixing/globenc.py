"""Modarressi et al. (2022, `GlobEnc: Quantifying Global Token Attribution by Incorporating the Whole Encoder
Layer in Transformers <https://aclanthology.org/2022.naacl-main.19/>`_, NAACL 2022), GlobEnc: Kobayashi et al.'s
(2021) norm-based decomposition of the attention block (attention, residual, layer norm; ALTI's T_i(x_j),
:func:`~bertology_utils.interventions.mixing.alti.transformed_vectors`) carried on through the second residual
and the second layer norm, so that it decomposes the whole encoder layer's output.

``globenc_layer``  N_Enc, one layer's ||x~_(i<-j)||: the norm of input j's part of output i (:class:`GlobEncLayer`);
``globenc``        GlobEnc, ``globenc_layer`` multiplied through the layers (a
                   :class:`~bertology_utils.interventions.mixing.rollout.Rollout` the package registers).

As in the paper and the authors' code (github.com/mohsenfayyaz/GlobEnc): the feed-forward block is not
decomposed (it is not linear): the attention block's parts T_i(x_j) go through the second residual unchanged and
through the second layer norm's linear part, gamma_2 (u - mean u) / sigma(z_i), whose sigma is that of the
norm's real input z_i = y_i + FFN(y_i); so the parts add up to the layer's output less beta_2 and less the linear
part of what they leave out (the feed-forward output, beta_1 and the attention's output bias b_O). Their rows are
norms, not distributions, and are rolled out as they are, with no identity added (the residual is in them).
Choices of ours: padding's rows and columns are zero; the rollout's rows are rescaled to sum to 1
(``Rollout(renormalise=True)``: the authors' product, each row up to a positive factor, which their [CLS]-row
rank correlations do not see); on a pre-LN model (ModernBERT: x + attention(LN(x)) + FFN(LN(x + ...))) the
residual stream has no second norm, so N_Enc is the norm of T_i(x_j) there.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn

from bertology_utils.core import architectures
from bertology_utils.core.architectures import Model
from bertology_utils.core.typing import AttentionMaps, MixingMatrix, TokenMask
from bertology_utils.interventions.mixing.alti import layer_norm_part, transformed_vectors
from bertology_utils.interventions.mixing.base import LayerMethod, LayerTrace
from bertology_utils.interventions.mixing.norm import head_vectors, row_chunks

__all__ = ["encoder_vectors", "globenc_contributions", "GlobEncLayer"]


def encoder_vectors(
    model: Model, layer: int, t: LayerTrace, rows: slice, vectors: torch.Tensor | None = None
) -> torch.Tensor:
    """GlobEnc's x~_(i<-j), input j's part of the layer's output i, for receiving tokens ``rows``: (B, rows, T, E).

    Post-LN, L2_i(T_i(x_j)), L2_i the linear part of the layer's output norm with the statistics of its input
    normed_i + ffn_i (:func:`~bertology_utils.interventions.mixing.alti.layer_norm_part`); they add up to
    output_i - beta_2 - L2_i(ffn_i + beta_1 + L1_i(b_O)). Pre-LN, T_i(x_j), adding up to output_i - ffn_i - b_O.
    (Modarressi et al. 2022, `GlobEnc <https://aclanthology.org/2022.naacl-main.19/>`_.)

    :param model: the model (a LoadedModel or its torch module).
    :param layer: the layer (from 0).
    :param t: what the layer computed.
    :param rows: the receiving tokens.
    :param vectors: (B, H, T, E) the layer's head vectors, or None to compute them.
    :returns: (B, rows, T, E).
    """
    block = transformed_vectors(model, layer, t, rows, vectors)
    if architectures.is_pre_layer_norm(architectures.torch_module(model)):
        return block  # the second residual adds the feed-forward output, which GlobEnc leaves out, and no norm
    return layer_norm_part(model, layer, t.normed + t.ffn, block, rows, output_norm=True)


def globenc_contributions(model: Model, layer: int, t: LayerTrace, real: TokenMask) -> MixingMatrix:
    """GlobEnc's N_Enc of one layer: entry (i, j) the norm ||x~_(i<-j)|| (:func:`encoder_vectors`; Modarressi
    et al. 2022, `GlobEnc <https://aclanthology.org/2022.naacl-main.19/>`_), computed in chunks of rows.

    :param model: the model (a LoadedModel or its torch module).
    :param layer: the layer (from 0).
    :param t: what the layer computed.
    :param real: (B, T) token mask.
    :returns: (B, T, T), zero in padding's rows and columns; rows are not distributions.
    """
    vectors = head_vectors(model, layer, t.values)
    chunks = row_chunks(*t.hidden.shape)
    norms = torch.cat([encoder_vectors(model, layer, t, rows, vectors).norm(dim=-1) for rows in chunks], dim=1)
    return norms * real[:, :, None] * real[:, None, :]


class GlobEncLayer(LayerMethod):
    """``globenc_layer``: one layer's N_Enc (:func:`globenc_contributions`; Modarressi et al. 2022, `GlobEnc
    <https://aclanthology.org/2022.naacl-main.19/>`_), one map per layer; rows are not distributions."""

    name = "globenc_layer"
    reads: ClassVar[frozenset[str]] = frozenset({"hidden", "values", "dense", "normed", "ffn"})

    def layer_map(self, model: nn.Module, layer: int, t: LayerTrace, real: TokenMask) -> AttentionMaps:
        """(B, 1, T, T) ``layer``'s N_Enc (see :meth:`LayerMethod.layer_map`)."""
        return globenc_contributions(model, layer, t, real)[:, None]
