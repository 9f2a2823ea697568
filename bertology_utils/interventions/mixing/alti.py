"""Ferrando et al. (2022, `Measuring the Mixing of Contextual Information in the Transformer
<https://arxiv.org/abs/2203.04212>`_), ALTI: how much each input makes up the attention block's output,
residual and layer norm included.

``alti_layer``  the contributions c_ij of input j to output i of one layer's attention block (:class:`AltiLayer`);
``alti``        ALTI as the paper defines it: ``alti_layer`` multiplied through the layers (a
                :class:`~bertology_utils.interventions.mixing.rollout.Rollout` the package registers).
"""

from __future__ import annotations

import torch
from torch import nn

from bertology_utils.core import architectures
from bertology_utils.core.architectures import Model
from bertology_utils.core.errors import UnsupportedArchitectureError
from bertology_utils.core.typing import AttentionMaps, MixingMatrix, TokenMask, TokenVectors
from bertology_utils.interventions.mixing.base import LayerMethod, LayerTrace
from bertology_utils.interventions.mixing.norm import head_vectors, mixed_vectors, row_chunks

__all__ = ["layer_norm_scale", "layer_norm_part", "transformed_vectors", "alti_contributions", "AltiLayer"]


def layer_norm_scale(
    model: Model, layer: int, normed_input: TokenVectors, *, output_norm: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """The linear part of a post-LN layer norm, LN(z) = gamma (z - mean z) / sigma(z) + beta.

    :param model: the model (a LoadedModel or its torch module).
    :param layer: the layer (from 0).
    :param normed_input: (B, T, E) z, the norm's input.
    :param output_norm: the norm after the feed-forward block, the layer's last (else the attention norm).
    :returns: gamma (E,) and 1 / sigma(z_i) (B, T, 1).
    """
    norm = architectures.layer_norms(architectures.torch_module(model), layer)[1 if output_norm else 0]
    eps = float(getattr(norm, "eps", getattr(norm, "variance_epsilon", 1e-12)))
    var = normed_input.var(-1, unbiased=False, keepdim=True)
    gamma = norm.weight
    if not isinstance(gamma, torch.Tensor):
        which = "output_layer_norm" if output_norm else "attention_layer_norm"
        raise UnsupportedArchitectureError(f"layer {layer}'s {which} has no weight", model_type=None, missing=[which])
    return gamma, torch.rsqrt(var + eps)


def layer_norm_part(
    model: Model,
    layer: int,
    normed_input: TokenVectors,
    vectors: torch.Tensor,
    rows: slice,
    *,
    output_norm: bool = False,
) -> torch.Tensor:
    """A post-LN layer norm's linear part L_i(u) = gamma (u - mean u) / sigma(z_i) applied to each of ``vectors``,
    the decomposition of z_i, i in ``rows``: the parts add up to LN(z_i) - beta less L_i of what they leave out.

    :param model: the model (a LoadedModel or its torch module).
    :param layer: the layer (from 0).
    :param normed_input: (B, T, E) z, the norm's input (its statistics, sigma(z_i), scale every part of z_i).
    :param vectors: (B, rows, T, E) the parts of z_i.
    :param rows: the receiving tokens i.
    :param output_norm: the norm after the feed-forward block (see :func:`layer_norm_scale`).
    :returns: (B, rows, T, E).
    """
    gamma, inv_sigma = layer_norm_scale(model, layer, normed_input, output_norm=output_norm)
    # in place on the one (B, rows, T, E) temporary: the same products, in the same order, as gamma * (...) * inv_sigma
    return (vectors - vectors.mean(-1, keepdim=True)).mul_(gamma).mul_(inv_sigma[:, rows, None, :])


def transformed_vectors(
    model: Model, layer: int, t: LayerTrace, rows: slice, vectors: torch.Tensor | None = None
) -> torch.Tensor:
    """ALTI's T_i(x_j) for receiving tokens ``rows`` (Ferrando et al. 2022, `Measuring the Mixing of
    Contextual Information in the Transformer <https://arxiv.org/abs/2203.04212>`_): (B, rows, T, E).

    Post-LN, with z_i = sum_j (sum_h alpha^h_ij f_h(x_j) + [i = j] x_i) + b_O, the input of the attention
    layer norm, and its linear part L_i(u) = gamma (u - mean u) / sigma(z_i), T_i(x_j) = L_i(sum_h alpha^h_ij
    f_h(x_j) + [i = j] x_i); they add up to y_i - L_i(b_O) - beta, y_i the layer norm's output. Pre-LN
    (f_h reads LN(x_j), which depends on x_j alone), T_i(x_j) = sum_h alpha^h_ij f_h(x_j) + [i = j] x_i;
    they add up to y_i - b_O, y_i = x_i + W_O ctx_i + b_O. ``vectors``:
    :func:`~bertology_utils.interventions.mixing.norm.head_vectors`, when the caller has them.

    :param model: the model (a LoadedModel or its torch module).
    :param layer: the layer (from 0).
    :param t: what the layer computed.
    :param rows: the receiving tokens.
    :param vectors: (B, H, T, E) the layer's head vectors, or None to compute them.
    :returns: (B, rows, T, E).
    """
    vectors = head_vectors(model, layer, t.values) if vectors is None else vectors
    z = mixed_vectors(t.probs, vectors, rows)
    # the residual [i = j] x_i, added where it is not zero: token i's own column of its row, z[:, r, start + r]
    z.diagonal(offset=rows.indices(t.hidden.shape[1])[0], dim1=1, dim2=2).add_(t.hidden[:, rows].transpose(1, 2))
    if architectures.is_pre_layer_norm(architectures.torch_module(model)):
        return z
    return layer_norm_part(model, layer, t.hidden + t.dense, z, rows)


def alti_contributions(model: Model, layer: int, t: LayerTrace, real: TokenMask) -> MixingMatrix:
    """ALTI's contributions c_ij of input j to the attention block's output y_i.

    Ferrando et al.'s contribution (`Measuring the Mixing of Contextual Information in the Transformer
    <https://arxiv.org/abs/2203.04212>`_) is max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1) (see
    :func:`transformed_vectors`), normalised over j.

    :param model: the model (a LoadedModel or its torch module).
    :param layer: the layer (from 0).
    :param t: what the layer computed.
    :param real: (B, T) token mask.
    :returns: (B, T, T), rows summing to 1 over real tokens.
    """
    vectors = head_vectors(model, layer, t.values)
    batch, tokens, _ = t.hidden.shape
    out = torch.zeros(batch, tokens, tokens, dtype=t.normed.dtype, device=t.normed.device)
    for rows in row_chunks(*t.hidden.shape):
        y = t.normed[:, rows, None, :]
        transformed = transformed_vectors(model, layer, t, rows, vectors)
        out[:, rows] = (y.abs().sum(-1) - transformed.sub_(y).abs_().sum(-1)).clamp_min(0)  # |y - T| in place
    out = out * real[:, None, :]
    return out / out.sum(-1, keepdim=True).clamp_min(torch.finfo(out.dtype).tiny)


class AltiLayer(LayerMethod):
    """``alti_layer``: one layer's ALTI contributions (:func:`alti_contributions`; Ferrando et al. 2022,
    `Measuring the Mixing of Contextual Information in the Transformer <https://arxiv.org/abs/2203.04212>`_),
    one map per layer, rows summing to 1."""

    name = "alti_layer"

    def layer_map(self, model: nn.Module, layer: int, t: LayerTrace, real: TokenMask) -> AttentionMaps:
        """(B, 1, T, T) ``layer``'s contributions (see :meth:`LayerMethod.layer_map`)."""
        return alti_contributions(model, layer, t, real)[:, None]
