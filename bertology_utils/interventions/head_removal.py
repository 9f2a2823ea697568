"""Physical pruning: heads' weights removed from the model, so it computes what it computed with them gated to 0.

Michel et al. (2019, "Are Sixteen Heads Really Better than One?", https://arxiv.org/abs/1905.10650) prune
heads to make inference faster; gates only switch heads off. :func:`prune_heads` deletes the heads' rows of
the query/key/value projections and columns of the attention output projection (transformers 5 dropped
``PreTrainedModel.prune_heads``; this re-implements it for every registered architecture without a shared
position bias: BERT, RoBERTa, ELECTRA and DistilBERT); :func:`pruned_heads` says what was removed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import torch
from torch import nn

from bertology_utils.core import architectures
from bertology_utils.core.architectures import Model
from bertology_utils.core.errors import ModelNotAvailableError

__all__ = ["prune_heads", "pruned_heads"]

_PRUNED = "_bertology_pruned_heads"


def _keep_rows(linear: nn.Linear, index: torch.Tensor, dim: int) -> nn.Linear:
    """A copy of ``linear`` keeping only ``index`` along its output (dim 0) or input (dim 1) features."""
    weight = linear.weight.index_select(dim, index).detach().clone()
    bias: torch.Tensor | None = linear.bias
    if bias is not None and dim == 0:
        bias = bias[index]
    new = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None, device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        new.weight.copy_(weight)
        if bias is not None:
            new.bias.copy_(bias.detach())
    return new


def pruned_heads(model: Model) -> dict[int, list[int]]:
    """Heads physically removed so far (by :func:`prune_heads`), in original head numbers.

    :param model: a model, or what :func:`~bertology_utils.core.architectures.torch_module` takes.
    :returns: layer -> the sorted head numbers removed from it (layers with none left out).
    """
    module = architectures.torch_module(model)
    return {k: sorted(v) for k, v in getattr(module, _PRUNED, {}).items() if v}


@torch.no_grad()
def prune_heads(model: Model, heads: Mapping[int, Iterable[int]] | np.ndarray) -> dict[int, list[int]]:
    """Physically remove ``heads`` (layer -> head numbers, or a (L, H) mask with 0/False = remove).

    In place: the heads' rows of the query, key and value projections and the matching columns
    of the attention output projection are deleted, so the model computes exactly what it
    computed with those heads gated to 0 (the output projection's bias stays). Head numbers are
    the original ones; pruning again removes further heads. A layer cannot lose all its heads.

    :param model: a model, or what :func:`~bertology_utils.core.architectures.torch_module` takes; changed in place.
    :param heads: layer -> head numbers to remove, or an (L, H) mask with 0/False = remove.
    :returns: :func:`pruned_heads` after the removal.
    :raises ModelNotAvailableError: for an architecture whose heads can only be gated.
    :raises ValueError: for a head the layer does not have, or every head of a layer.
    """
    module = architectures.torch_module(model)
    spec = architectures.arch_spec(module)
    if spec.position_bias is not None:
        raise ModelNotAvailableError(
            f"{type(module).__name__}: its position bias ({spec.position_bias}) is computed once for all heads of "
            "every layer, so its heads can only be gated"
        )
    if spec.heads_attr is None:
        raise ModelNotAvailableError(
            f"{type(module).__name__}: its self-attention modules keep no head count of their own "
            "(ArchSpec.heads_attr), so its heads can only be gated"
        )
    attentions, blocks = architectures.self_attention_modules(module), architectures.layers(module)
    if not isinstance(heads, dict):
        mask = np.asarray(heads)
        heads = {l: [int(h) for h in np.nonzero(mask[l] == 0)[0]] for l in range(mask.shape[0])}
    done: dict = getattr(module, _PRUNED, {})
    for layer, remove in heads.items():
        remove = set(int(h) for h in remove) - set(done.get(layer, ()))
        if not remove:
            continue
        attn = attentions[layer]
        n_now = architectures.attention_heads(module, layer)
        projections = architectures.qkv(module, layer)  # refuses a fused projection
        size = projections[0].out_features // n_now
        original = sorted(set(range(n_now + len(done.get(layer, ())))) - set(done.get(layer, ())))
        keep = [i for i, h in enumerate(original) if h not in remove]
        if len(remove - set(original)):
            raise ValueError(f"layer {layer} has no heads {sorted(remove - set(original))}")
        if not keep:
            raise ValueError(f"pruning every head of layer {layer} is not supported; gate the layer instead")
        output = architectures.attention_output(module, layer)
        device = output.weight.device
        index = (torch.as_tensor(keep, device=device)[:, None] * size + torch.arange(size, device=device)).flatten()
        for path, proj in zip((spec.query, spec.key, spec.value), projections):
            attn.set_submodule(str(path), _keep_rows(proj, index, 0))
        blocks[layer].set_submodule(spec.attention_output, _keep_rows(output, index, 1))
        setattr(attn, spec.heads_attr, len(keep))
        if hasattr(attn, "all_head_size"):
            # an int attribute: nn.Module's __setattr__ is typed for tensors and modules only
            attn.all_head_size = len(keep) * size  # type: ignore[assignment]
        done[layer] = sorted(set(done.get(layer, ())) | remove)
    setattr(module, _PRUNED, done)
    return pruned_heads(module)
