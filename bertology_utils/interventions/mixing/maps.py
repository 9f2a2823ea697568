"""Context-mixing maps for batches and corpora: every requested method from one traced forward pass, and
methods as map sources for the extraction pipeline."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from bertology_utils.attention.extraction import attention_for
from bertology_utils.attention.word_attention import ItemAttention
from bertology_utils.core import architectures
from bertology_utils.core.architectures import Model
from bertology_utils.core.models import LoadedModel
from bertology_utils.core.typing import AttentionMaps, TokenMask
from bertology_utils.interventions.mixing.base import (
    METHODS,
    PARTS,
    AcrossLayers,
    get_method,
    layer_method,
    method_options,
    option_names,
    trace,
)

__all__ = ["mixing_maps", "MixingMaps", "mixing_for", "rows_summing_to_one"]


def _real(inputs: dict[str, torch.Tensor]) -> TokenMask:
    mask = inputs.get("attention_mask")
    return torch.ones_like(inputs["input_ids"], dtype=torch.float32) if mask is None else mask.to(torch.float32)


def rows_summing_to_one(m: torch.Tensor) -> torch.Tensor:
    """``m`` with each row (last axis) rescaled to sum to 1; all-zero rows stay zero.

    :param m: maps, e.g. (B, H, T, T).
    :returns: the maps, rows summing to 1 (or 0).
    """
    return m / m.sum(-1, keepdim=True).clamp_min(torch.finfo(m.dtype).tiny)


@torch.no_grad()
def mixing_maps(
    loaded: Model,
    inputs: dict[str, torch.Tensor],
    methods: Sequence[str] = METHODS,
    **options: Any,
) -> dict[str, list[AttentionMaps]]:
    """Every method in ``methods`` for one padded batch, from one traced forward pass.

    :param loaded: a LoadedModel or its torch module.
    :param inputs: the batch's model inputs (``input_ids``, ``attention_mask``...).
    :param methods: names in :data:`~bertology_utils.interventions.mixing.base.METHODS`.
    :param options: the methods' own options by keyword (:attr:`~bertology_utils.interventions.mixing.base.
        MixingMethod.options`), e.g. attention flow's ``flow_rows`` (receiving tokens, e.g. ``[0]``) and
        ``flow_max_tokens`` (a longer batch is refused: extract with ``max_tokens`` to skip and count such items).
    :returns: per method, one (B, H', T, T) tensor per layer (H' = heads for per-head methods, else 1), zero on
        padding.
    """
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown context-mixing method(s) {unknown}; choose from {', '.join(METHODS)}")
    real = _real(inputs)
    chosen = [get_method(m) for m in methods]
    own = {method.name: method_options(method, options) for method in chosen}
    for method in chosen:
        method.check_batch(real, own[method.name])
    # the per-layer methods needed: those asked for and those the across-layer ones combine
    layer_methods = {base.name: base for base in map(layer_method, chosen)}
    reads = frozenset().union(*(m.reads for m in layer_methods.values())) & PARTS
    model = architectures.torch_module(loaded)
    traces = trace(model, inputs, reads)
    per_layer = {name: m.maps(model, traces, real) for name, m in layer_methods.items()}
    return {
        m.name: m.maps(per_layer[m.of], real, own[m.name]) if isinstance(m, AcrossLayers) else per_layer[m.name]
        for m in chosen
    }


@dataclass(frozen=True, init=False)
class MixingMaps:
    """One context-mixing method as a map source for extraction (``maps=`` of ``attention_for``,
    ``extract_attention``, ``extract_cached``): the per-item, word-level maps, stores and resumption
    are extraction's.

    :param method: a name in :data:`~bertology_utils.interventions.mixing.base.METHODS`.
    :param normalise: rescale each row to sum to 1 (norm maps are not distributions).
    :param options: the method's own options by keyword, as :func:`mixing_maps` takes them (``flow_rows``...);
        :attr:`options` holds all of the method's, defaults included.
    """

    method: str
    normalise: bool
    options: Mapping[str, Any] = field(hash=False)

    def __init__(self, method: str, normalise: bool = False, **options: Any):
        if method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}, not {method!r}")
        object.__setattr__(self, "method", method)
        object.__setattr__(self, "normalise", normalise)
        object.__setattr__(self, "options", method_options(get_method(method), options))

    @property
    def name(self) -> str:
        """The method's name, which extraction records."""
        return self.method

    @property
    def heads(self) -> int | None:
        """Maps per layer: None for as many as the model has heads (a per-head method), else 1."""
        return None if get_method(self.method).per_head else 1

    @property
    def max_tokens(self) -> int | None:
        """The longest item the method takes with these options (None: no limit of its own)."""
        return get_method(self.method).max_tokens(self.options)

    def settings(self) -> dict[str, Any]:
        """What a store records: ``normalise`` and the method's own (:meth:`MixingMethod.settings`)."""
        return {"normalise": self.normalise, **get_method(self.method).settings(self.options)}

    def __call__(self, loaded: Model, inputs: dict[str, torch.Tensor]) -> list[AttentionMaps]:
        """The method's (B, H', T, T) maps of one batch, per layer (:func:`mixing_maps`), rows normalised if asked."""
        maps = mixing_maps(loaded, inputs, (self.method,), **self.options)[self.method]
        return [rows_summing_to_one(m) for m in maps] if self.normalise else maps


@dataclass(frozen=True)
class _Stacked:
    """Several methods as one map source: one :func:`mixing_maps` call per batch, their maps side by side
    on the heads axis (``heads_of[k]`` for ``methods[k]``), split again by :func:`mixing_for`."""

    methods: tuple[str, ...]
    heads_of: tuple[int, ...]
    normalise: bool
    options: Mapping[str, Any] = field(hash=False)

    @property
    def name(self) -> str:
        return "+".join(self.methods)

    @property
    def heads(self) -> int:
        return sum(self.heads_of)

    def settings(self) -> dict[str, Any]:
        return {"methods": list(self.methods), "heads": list(self.heads_of), "normalise": self.normalise}

    def __call__(self, loaded: Model, inputs: dict[str, torch.Tensor]) -> list[AttentionMaps]:
        maps = mixing_maps(loaded, inputs, self.methods, **self.options)
        layers = zip(*(maps[m] for m in self.methods))
        return [torch.cat([rows_summing_to_one(m) if self.normalise else m for m in layer], 1) for layer in layers]


def mixing_for(
    items: Any,
    model: LoadedModel,
    methods: Sequence[str] = METHODS,
    *,
    normalise: bool = False,
    **kwargs: Any,
) -> dict[str, list[ItemAttention]]:
    """Word-level maps of several methods at once.

    One traced forward pass per batch serves every method (``value_zeroing`` and ``value_zeroing_rollout``
    share their per-layer maps), and the items are aligned, batched and converted to words once.

    :param items: what ``attention_for`` takes (a corpus, items or texts).
    :param model: a :class:`~bertology_utils.core.models.LoadedModel`.
    :param methods: names in :data:`~bertology_utils.interventions.mixing.base.METHODS`.
    :param normalise: rescale each row to sum to 1.
    :param kwargs: the methods' own options (``flow_rows``...; see :func:`mixing_maps`), the rest for
        ``attention_for``.
    :returns: method -> items, each list what ``attention_for(items, model, maps=MixingMaps(method, normalise,
        **options), **rest)`` gives.
    """
    options = {k: v for k, v in kwargs.items() if k in option_names()}
    rest = {k: v for k, v in kwargs.items() if k not in options}
    sources = [MixingMaps(m, normalise, **options) for m in dict.fromkeys(methods)]
    heads_of = tuple(model.num_heads if s.heads is None else s.heads for s in sources)
    stacked = _Stacked(tuple(s.method for s in sources), heads_of, normalise, options)
    together = attention_for(items, model, maps=stacked, **rest)
    ends = np.cumsum(heads_of)
    return {s.method: [_heads(item, end - h, end) for item in together] for s, h, end in zip(sources, heads_of, ends)}


def _heads(item: ItemAttention, lo: int, hi: int) -> ItemAttention:
    tokens = None if item.token_attention is None else item.token_attention[:, lo:hi]
    return replace(item, attention=item.attention[:, lo:hi], token_attention=tokens)
