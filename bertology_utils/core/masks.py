"""Attention masks built before the encoder runs, so that a forward pass reads nothing back from its device.

transformers' mask functions test a 2-D padding mask for padding in Python (``padding_mask.all()``), to leave the
mask out where no token is padding. On a GPU that test waits for the device at every forward pass: the host
cannot queue the pass's kernels until the mask's values have come back. Given a 4-D mask, the models take it
as it is. :func:`prepare_attention_masks` hooks the base model so that a 2-D ``attention_mask`` becomes the
4-D mask(s) transformers would build, with the skip turned off: where no token is padding the mask is all
zeros, which changes no score (``s + 0 == s``), so every number stays as it was. Where the masks come from is
architecture knowledge (:attr:`~bertology_utils.core.architectures.ArchSpec.attention_mask`); a model type that
is not registered, or that builds its own masks, is left as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle
from transformers.masking_utils import create_bidirectional_mask, create_bidirectional_sliding_window_mask

from bertology_utils.core import architectures

__all__ = ["prepare_attention_masks"]

#: The mask function of each kind of layer (``config.layer_types``) in a model whose masks go by layer type.
_BY_LAYER_TYPE: dict[str, Callable[..., Any]] = {
    "full_attention": create_bidirectional_mask,
    "sliding_attention": create_bidirectional_sliding_window_mask,
}


def prepare_attention_masks(model: architectures.Model) -> RemovableHandle | None:
    """Have ``model``'s base model build its attention masks before its forward, from a keyword ``attention_mask``.

    :param model: a LoadedModel or a transformers model.
    :returns: the hook's handle (``remove()`` undoes it), or None where the model is left as it is (an
        unregistered model type, or one that builds its own masks).
    """
    if not architectures.is_registered(model):
        return None
    layout = architectures.arch_spec(model).attention_mask
    if layout is None:
        return None
    if layout not in ("bidirectional", "by layer type"):
        raise ValueError(f"unknown attention mask layout {layout!r}: 'bidirectional', 'by layer type' or None")
    base = architectures.base_model(model)
    config: Any = base.config
    if layout == "by layer type" and not set(config.layer_types) <= set(_BY_LAYER_TYPE):
        return None  # a kind of layer whose mask is not known here: transformers builds them all
    return base.register_forward_pre_hook(_hook(layout), with_kwargs=True)


def _hook(layout: str) -> Callable[[nn.Module, tuple, dict], tuple[tuple, dict] | None]:
    def build(base: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
        mask = kwargs.get("attention_mask")
        if not isinstance(mask, torch.Tensor) or mask.ndim != 2:
            return None  # none, already built, or a layout the mask functions take as it is
        config: Any = base.config
        weight: Any = base.get_input_embeddings().weight  # type: ignore[operator]
        # what the mask functions read of the embeddings: batch size, length, dtype (of the mask's -inf) and device
        like = torch.empty((*mask.shape, 0), dtype=weight.dtype, device=weight.device)
        built: dict[str, Any] = {"config": config, "inputs_embeds": like, "attention_mask": mask}
        if layout == "bidirectional":
            prepared: Any = create_bidirectional_mask(**built, allow_is_bidirectional_skip=False)
        else:
            kinds = dict.fromkeys(config.layer_types)
            prepared = {kind: _BY_LAYER_TYPE[kind](**built, allow_is_bidirectional_skip=False) for kind in kinds}
        return args, {**kwargs, "attention_mask": prepared}

    return build
