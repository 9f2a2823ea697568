"""Mohebbi et al. (2023, `Quantifying Context Mixing in Transformers <https://arxiv.org/abs/2301.12971>`_),
value zeroing: zero token j's value vectors (every head) in one layer and measure how far each output of that
layer moves.

``value_zeroing``          one layer's cosine distances, rows normalised to sum to 1 (:class:`ValueZeroing`);
``value_zeroing_rollout``  those maps multiplied through the layers (the paper's aggregate: a
                           :class:`~bertology_utils.interventions.mixing.rollout.Rollout` the package registers).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from bertology_utils.core import architectures
from bertology_utils.core.architectures import Model
from bertology_utils.core.typing import AttentionMaps, MixingMatrix, TokenMask
from bertology_utils.interventions.mixing.base import LayerMethod, LayerTrace, first_output, value_projection

__all__ = ["value_zeroing", "ValueZeroing"]


def _repeat_batch(value: Any, batch: int, copies: int) -> Any:
    """Tensors with a leading batch dimension repeated ``copies`` times per item, inside tuples and lists too
    (rotary position embeddings come as a pair); other values as they are."""
    if isinstance(value, (tuple, list)):
        return type(value)(_repeat_batch(v, batch, copies) for v in value)
    if isinstance(value, torch.Tensor) and value.dim() and value.shape[0] == batch:
        return value.repeat_interleave(copies, dim=0)
    return value


def _repeated(call: tuple[Any, ...], batch: int, copies: int) -> tuple[list[Any], dict[str, Any]]:
    """A layer's arguments for ``copies`` copies of each item. With one item, a tensor of leading size 1 may
    be batch-independent (DeBERTa's relative positions) and everything broadcasts against the copies, so
    only the hidden states are repeated."""
    args, kwargs = call
    if batch > 1:
        return [_repeat_batch(a, batch, copies) for a in args], {
            k: _repeat_batch(v, batch, copies) for k, v in kwargs.items()
        }
    if args:
        return [_repeat_batch(args[0], 1, copies), *args[1:]], dict(kwargs)
    return [], {**kwargs, "hidden_states": _repeat_batch(kwargs["hidden_states"], 1, copies)}


@torch.no_grad()
def value_zeroing(model: Model, layer: int, t: LayerTrace, real: TokenMask, max_rows: int = 256) -> MixingMatrix:
    """Mohebbi et al.'s value zeroing for one layer (`Quantifying Context Mixing in Transformers
    <https://arxiv.org/abs/2301.12971>`_).

    The layer is run again once per token j (batched, ``max_rows`` copies at a time) on its own
    inputs, with every head's value vector of j set to zero; entry (i, j) is the cosine distance
    between output i and the original output i, normalised over j.

    :param model: the model (a LoadedModel or its torch module).
    :param layer: the layer (from 0).
    :param t: what the layer computed (with its arguments, to run it again).
    :param real: (B, T) token mask.
    :param max_rows: the most copies of the batch's items run at once.
    :returns: (B, T, T), rows summing to 1 over real tokens.
    """
    module = architectures.torch_module(model)
    block = architectures.layers(module)[layer]
    value = value_projection(module, layer)
    fused = architectures.fused_qkv(module, layer) is not None
    batch, tokens, _ = t.hidden.shape
    scores = torch.zeros(batch, tokens, tokens, dtype=t.output.dtype, device=t.output.device)
    per_chunk = max(1, max_rows // batch)
    for start in range(0, tokens, per_chunk):
        zeroed = torch.arange(start, min(tokens, start + per_chunk), device=t.hidden.device)
        copies = len(zeroed)
        keep = torch.ones(batch * copies, tokens, 1, dtype=t.hidden.dtype, device=t.hidden.device)
        keep[torch.arange(batch * copies), zeroed.repeat(batch)] = 0

        def zero_values(
            _module: nn.Module, _inputs: tuple[Any, ...], output: torch.Tensor, keep: torch.Tensor = keep
        ) -> torch.Tensor:
            if fused:  # queries and keys as they were, the values (the last third) zeroed
                third = 2 * output.shape[-1] // 3
                return torch.cat([output[..., :third], output[..., third:] * keep], -1)
            return output * keep

        args, kwargs = _repeated(t.call, batch, copies)
        handle = value.register_forward_hook(zero_values)
        try:
            out = first_output(block(*args, **kwargs))
        finally:
            handle.remove()
        original = t.output.repeat_interleave(copies, dim=0)
        # 1 - cos(a, b) = |a/|a| - b/|b||^2 / 2, without 1 - cos's cancellation for small changes.
        unit = nn.functional.normalize(out, dim=-1) - nn.functional.normalize(original, dim=-1)
        distance = unit.square().sum(-1) / 2  # (B*copies, T)
        scores[:, :, zeroed] = distance.view(batch, copies, tokens).transpose(1, 2)
    scores = scores * real[:, None, :]
    return scores / scores.sum(-1, keepdim=True).clamp_min(torch.finfo(scores.dtype).tiny)


class ValueZeroing(LayerMethod):
    """``value_zeroing``: one layer's value-zeroing map (:func:`value_zeroing`; Mohebbi et al. 2023,
    `Quantifying Context Mixing in Transformers <https://arxiv.org/abs/2301.12971>`_), one map per layer,
    rows summing to 1."""

    name = "value_zeroing"

    def layer_map(self, model: nn.Module, layer: int, t: LayerTrace, real: TokenMask) -> AttentionMaps:
        """(B, 1, T, T) ``layer``'s value-zeroing map (see :meth:`LayerMethod.layer_map`)."""
        return value_zeroing(model, layer, t, real)[:, None]
