"""Context-mixing maps for batches and corpora: every requested method from one traced forward pass, and
methods as map sources for the extraction pipeline."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from bertology_utils.attention.extraction import attention_for
from bertology_utils.attention.word_attention import ItemAttention
from bertology_utils.core import architectures
from bertology_utils.interventions.mixing.base import (
    METHODS,
    PARTS,
    AcrossLayers,
    Options,
    get_method,
    layer_method,
    trace,
)
from bertology_utils.interventions.mixing.flow import FLOW_MAX_TOKENS

__all__ = ["mixing_maps", "MixingMaps", "mixing_for", "rows_summing_to_one"]


def _real(inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    mask = inputs.get("attention_mask")
    return torch.ones_like(inputs["input_ids"], dtype=torch.float32) if mask is None else mask.to(torch.float32)


def rows_summing_to_one(m: torch.Tensor) -> torch.Tensor:
    """``m`` with each row (last axis) rescaled to sum to 1; all-zero rows stay zero."""
    return m / m.sum(-1, keepdim=True).clamp_min(torch.finfo(m.dtype).tiny)


@torch.no_grad()
def mixing_maps(
    loaded,
    inputs: dict[str, torch.Tensor],
    methods: Sequence[str] = METHODS,
    *,
    flow_rows: Sequence[int] | None = None,
    flow_max_tokens: int = FLOW_MAX_TOKENS,
) -> dict[str, list[torch.Tensor]]:
    """Every method in ``methods`` for one padded batch, from one traced forward pass.

    Returns, per method, one (B, H', T, T) tensor per layer (H' = heads for per-head methods, else 1),
    zero on padding. ``flow_rows`` limits flow to some receiving tokens (e.g. ``[0]``); a batch longer
    than ``flow_max_tokens`` is refused for flow (extract with ``max_tokens`` to skip and count such items).
    """
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown context-mixing method(s) {unknown}; choose from {', '.join(METHODS)}")
    options = Options(flow_rows, flow_max_tokens)
    real = _real(inputs)
    chosen = [get_method(m) for m in methods]
    for method in chosen:
        method.check_batch(real, options)
    # the per-layer methods needed: those asked for and those the across-layer ones combine
    layer_methods = {base.name: base for base in map(layer_method, chosen)}
    reads = frozenset().union(*(m.reads for m in layer_methods.values())) & PARTS
    model = architectures.torch_module(loaded)
    traces = trace(model, inputs, reads)
    per_layer = {name: m.maps(model, traces, real) for name, m in layer_methods.items()}
    return {
        m.name: m.maps(per_layer[m.of], real, options) if isinstance(m, AcrossLayers) else per_layer[m.name]
        for m in chosen
    }


@dataclass(frozen=True)
class MixingMaps:
    """One context-mixing method as a map source for extraction (``maps=`` of ``attention_for``,
    ``extract_attention``, ``extract_cached``): the per-item, word-level maps, stores and resumption
    are extraction's. ``normalise`` rescales each row to sum to 1 (norm maps are not distributions)."""

    method: str
    normalise: bool = False
    flow_rows: tuple[int, ...] | None = None
    flow_max_tokens: int = FLOW_MAX_TOKENS

    def __post_init__(self):
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}, not {self.method!r}")

    @property
    def name(self) -> str:
        return self.method

    @property
    def heads(self) -> int | None:
        """Maps per layer: None for as many as the model has heads (a per-head method), else 1."""
        return None if get_method(self.method).per_head else 1

    def settings(self) -> dict:
        out: dict = {"normalise": self.normalise}
        if self.method == "flow":
            out.update(rows=None if self.flow_rows is None else list(self.flow_rows), max_tokens=self.flow_max_tokens)
        return out

    def __call__(self, loaded, inputs: dict[str, torch.Tensor]) -> list[torch.Tensor]:
        maps = mixing_maps(
            loaded, inputs, (self.method,), flow_rows=self.flow_rows, flow_max_tokens=self.flow_max_tokens
        )[self.method]
        return [rows_summing_to_one(m) for m in maps] if self.normalise else maps


@dataclass(frozen=True)
class _Stacked:
    """Several methods as one map source: one :func:`mixing_maps` call per batch, their maps side by side
    on the heads axis (``heads_of[k]`` for ``methods[k]``), split again by :func:`mixing_for`."""

    methods: tuple[str, ...]
    heads_of: tuple[int, ...]
    normalise: bool
    flow_rows: tuple[int, ...] | None
    flow_max_tokens: int

    @property
    def name(self) -> str:
        return "+".join(self.methods)

    @property
    def heads(self) -> int:
        return sum(self.heads_of)

    def settings(self) -> dict:
        return {"methods": list(self.methods), "heads": list(self.heads_of), "normalise": self.normalise}

    def __call__(self, loaded, inputs: dict[str, torch.Tensor]) -> list[torch.Tensor]:
        maps = mixing_maps(loaded, inputs, self.methods, flow_rows=self.flow_rows, flow_max_tokens=self.flow_max_tokens)
        layers = zip(*(maps[m] for m in self.methods))
        return [torch.cat([rows_summing_to_one(m) if self.normalise else m for m in layer], 1) for layer in layers]


def mixing_for(
    items,
    model,
    methods: Sequence[str] = METHODS,
    *,
    normalise: bool = False,
    flow_rows: tuple[int, ...] | None = None,
    flow_max_tokens: int = FLOW_MAX_TOKENS,
    **kwargs,
) -> dict[str, list[ItemAttention]]:
    """Word-level maps of several methods at once: method -> items, each list what
    ``attention_for(items, model, maps=MixingMaps(method, normalise, flow_rows, flow_max_tokens), **kwargs)``
    gives. One traced forward pass per batch serves every method (``value_zeroing`` and
    ``value_zeroing_rollout`` share their per-layer maps), and the items are aligned, batched and
    converted to words once. ``model``: a :class:`~bertology_utils.core.models.LoadedModel`.
    """
    sources = [MixingMaps(m, normalise, flow_rows, flow_max_tokens) for m in dict.fromkeys(methods)]
    heads_of = tuple(model.num_heads if s.heads is None else s.heads for s in sources)
    stacked = _Stacked(tuple(s.method for s in sources), heads_of, normalise, flow_rows, flow_max_tokens)
    together = attention_for(items, model, maps=stacked, **kwargs)
    ends = np.cumsum(heads_of)
    return {s.method: [_heads(item, end - h, end) for item in together] for s, h, end in zip(sources, heads_of, ends)}


def _heads(item: ItemAttention, lo: int, hi: int) -> ItemAttention:
    tokens = None if item.token_attention is None else item.token_attention[:, lo:hi]
    return replace(item, attention=item.attention[:, lo:hi], token_attention=tokens)
