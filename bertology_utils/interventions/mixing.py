"""Context mixing: how much each token's representation draws on every other token, beyond raw weights.

A raw attention weight says how much a head looks at a token, not how much of that token
reaches the output: the value vector may be tiny, and the residual stream carries most of
each token through every layer. This module computes, from hooks on the model's own forward
pass (any architecture registered in :mod:`bertology_utils.core.architectures`), the maps the
literature proposes instead. Per layer (token level, rows = the receiving token):

``attention``      the raw weights alpha^h_ij, per head;
``norm``           Kobayashi et al. (2020): ||alpha^h_ij f_h(x_j)||, f_h(x) = W_O^h (W_V^h x + b_V^h), per head;
``norm_layer``     the norm of the heads' summed vectors, ||sum_h alpha^h_ij f_h(x_j)||;
``alti_layer``     Ferrando et al. (2022): the contributions of each input to the attention block's
                   output, residual and layer norm included (see :func:`alti_contributions`);
``value_zeroing``  Mohebbi et al. (2023): zero token j's value vectors (every head) in one layer and
                   measure the cosine distance of each output of that layer from the original,
                   rows normalised to sum to 1;

and across layers (row i of layer l: how much output token i at layer l draws on input token j):

``rollout``  Abnar & Zuidema (2020): A_l = 0.5 mean_h(alpha_l) + 0.5 I, rows renormalised,
             multiplied through the layers;
``flow``     their attention flow: the maximum flow from input j to node i of layer l in the
             graph whose edges carry A_l, rows normalised to sum to 1 as in their code
             (:func:`attention_flow`; O(n^4) per item, so its inputs have a length limit);
``alti``     ALTI as the paper defines it: ``alti_layer`` multiplied through the layers;
``value_zeroing_rollout``  ``value_zeroing`` multiplied through the layers (Mohebbi et al.'s aggregate).

:class:`MixingMaps` is one method as a map source for the extraction pipeline
(:func:`bertology_utils.attention.extraction.attention_for`, ``extract_attention``, ``extract_cached``
with ``maps=``): batching, word-level conversion, stores and resumption are extraction's own.
:func:`mixing_for` gives several methods' word-level maps from one pass of that pipeline.
:func:`faithfulness` compares each method's input attribution with behavioural and gradient
references (:mod:`bertology_utils.interventions.attribution`) as Abnar & Zuidema's Table 3 does.

Every architecture here is post-LN (BERT, RoBERTa, ELECTRA, DistilBERT, MPNet): an attention
block computes LN(x + W_O ctx + b_O). :func:`trace` checks that decomposition on every pass
and refuses a model where it does not hold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
import torch
from scipy import sparse, stats
from scipy.sparse import csgraph
from torch import nn

from bertology_utils.attention.alignment import LEADING_SPECIAL, WORD
from bertology_utils.attention.extraction import attention_for
from bertology_utils.attention.word_attention import ItemAttention
from bertology_utils.core import architectures
from bertology_utils.core.errors import BertologyError, UnsupportedArchitectureError
from bertology_utils.interventions.editing import capture_attention

__all__ = [
    "METHODS",
    "LAYER_METHODS",
    "AGGREGATED",
    "FLOW_MAX_TOKENS",
    "LayerTrace",
    "trace",
    "mixing_maps",
    "MixingMaps",
    "mixing_for",
    "head_vectors",
    "transformed_vectors",
    "alti_contributions",
    "value_zeroing",
    "residual_attention",
    "aggregate",
    "attention_flow",
    "input_attribution",
    "faithfulness",
    "faithfulness_summary",
    "plot_shares",
    "plot_faithfulness",
    "plot_side_by_side",
]

#: Per-layer methods, and whether each has one map per head (True) or one per layer.
LAYER_METHODS = {"attention": True, "norm": True, "norm_layer": False, "alti_layer": False, "value_zeroing": False}
#: Methods that aggregate across layers, and the per-layer map each multiplies through.
AGGREGATED = {
    "rollout": "attention",
    "flow": "attention",
    "alti": "alti_layer",
    "value_zeroing_rollout": "value_zeroing",
}
METHODS = (*LAYER_METHODS, *AGGREGATED)
#: Default length limit of attention flow (tokens): one item of n tokens costs L n^2 maximum flows.
FLOW_MAX_TOKENS = 48
#: Flow capacities are scaled to integers (scipy's maximum flow is exact on integers); the
#: rounding moves a flow value by at most (edges in the cut) x 2^-21.
_FLOW_SCALE = 1 << 20
#: Tolerance of the post-LN check in :func:`trace` (float32 over a layer).
_DECOMPOSITION_TOL = 1e-4


def _unwrap(model) -> nn.Module:
    return model if isinstance(model, nn.Module) else model.model


# --------------------------------------------------------------------------- tracing one forward pass


@dataclass
class LayerTrace:
    """What one encoder layer computed in a forward pass (eval mode, no dropout).

    ``hidden`` (B, T, D) is the layer's input x; ``values`` (B, H, T, d) the value vectors W_V x + b_V
    per head; ``probs`` (B, H, T, T) the attention weights; ``dense`` (B, T, D) the attention output
    projection W_O ctx + b_O; ``normed`` (B, T, D) the attention block's output LN(x + dense);
    ``output`` (B, T, D) the layer's output; ``call`` the layer's own arguments, to run it again.
    """

    hidden: torch.Tensor
    values: torch.Tensor
    probs: torch.Tensor
    dense: torch.Tensor
    normed: torch.Tensor
    output: torch.Tensor
    call: tuple = field(repr=False, default=((), {}))


def _first(output):
    return output[0] if isinstance(output, tuple) else output


@torch.no_grad()
def trace(loaded, inputs: dict[str, torch.Tensor]) -> list[LayerTrace]:
    """Run ``inputs`` through the model once and keep, for every layer, what :class:`LayerTrace` holds.

    Raises UnsupportedArchitectureError when an attention block is not LN(x + W_O ctx + b_O), the
    decomposition every method here relies on (a pre-LN encoder, say).
    """
    model = _unwrap(loaded)
    blocks = architectures.layers(model)
    n = len(blocks)
    kept: dict[str, list] = {name: [None] * n for name in ("call", "values", "dense", "norm_in", "normed", "output")}
    handles = []

    def keep(name, layer, pick):
        def hook(*args):
            kept[name][layer] = pick(*args)

        return hook

    for layer, block in enumerate(blocks):
        _, _, value = architectures.qkv(model, layer)
        norm, _ = architectures.layer_norms(model, layer)
        handles += [
            block.register_forward_pre_hook(keep("call", layer, lambda m, a, k: (a, k)), with_kwargs=True),
            block.register_forward_hook(keep("output", layer, lambda m, a, o: _first(o))),
            value.register_forward_hook(keep("values", layer, lambda m, a, o: o)),
            architectures.attention_output(model, layer).register_forward_hook(keep("dense", layer, lambda m, a, o: o)),
            norm.register_forward_hook(keep("norm_in", layer, lambda m, a, o: a[0])),
            norm.register_forward_hook(keep("normed", layer, lambda m, a, o: o)),
        ]
    try:
        with capture_attention(model, retain_grad=False) as capture:
            model(**inputs)
    finally:
        for handle in handles:
            handle.remove()
    traces = []
    for layer in range(n):
        args, kwargs = kept["call"][layer]
        hidden = args[0] if args else kwargs["hidden_states"]
        probs = capture.probs[layer]
        heads = probs.shape[1]
        values = kept["values"][layer]
        values = values.view(*values.shape[:2], heads, -1).transpose(1, 2)
        residual = (kept["norm_in"][layer] - kept["dense"][layer] - hidden).abs().max()
        if residual > _DECOMPOSITION_TOL * max(1.0, float(hidden.abs().max())):
            raise UnsupportedArchitectureError(
                f"layer {layer} of {type(model).__name__}: the attention layer norm's input is not the layer input "
                f"plus the attention output (off by {float(residual):.2g}); context-mixing maps need a post-LN block",
                model_type=getattr(model.config, "model_type", None),
                missing=["attention_layer_norm"],
            )
        traces.append(
            LayerTrace(
                hidden,
                values,
                probs,
                kept["dense"][layer],
                kept["normed"][layer],
                kept["output"][layer],
                (args, kwargs),
            )
        )
    return traces


# --------------------------------------------------------------------------- per-layer maps


def head_vectors(model, layer: int, values: torch.Tensor) -> torch.Tensor:
    """f_h(x_j) = W_O^h v^h_j, shape (B, H, T, D): what head h would add to a token attending only to j."""
    weight = architectures.attention_output(_unwrap(model), layer).weight  # (D, H*d): heads along input columns
    heads, d = values.shape[1], values.shape[-1]
    return torch.einsum("bhtd,ehd->bhte", values, weight.view(weight.shape[0], heads, d))


def _row_chunk(batch: int, tokens: int, dim: int, budget: int = 1 << 24) -> int:
    """Receiving rows per chunk so a (B, rows, T, D) tensor stays under ``budget`` elements."""
    return max(1, budget // max(1, batch * tokens * dim))


def _mixed_vectors(probs: torch.Tensor, vectors: torch.Tensor, rows: slice) -> torch.Tensor:
    """sum_h alpha^h_ij f_h(x_j) for receiving tokens ``rows``: (B, rows, T, D)."""
    return torch.einsum("bhij,bhjd->bijd", probs[:, :, rows], vectors)


def _layer_norm_scale(model, layer: int, normed_input: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(gamma, 1 / sigma(z_i)) of the attention layer norm: LN(z) = gamma (z - mean z) / sigma(z) + beta."""
    norm, _ = architectures.layer_norms(_unwrap(model), layer)
    eps = float(getattr(norm, "eps", getattr(norm, "variance_epsilon", 1e-12)))
    var = normed_input.var(-1, unbiased=False, keepdim=True)
    gamma = norm.weight
    if not isinstance(gamma, torch.Tensor):
        raise UnsupportedArchitectureError(
            f"layer {layer}'s attention layer norm has no weight", model_type=None, missing=["attention_layer_norm"]
        )
    return gamma, torch.rsqrt(var + eps)


def transformed_vectors(
    model, layer: int, t: LayerTrace, rows: slice, vectors: torch.Tensor | None = None
) -> torch.Tensor:
    """ALTI's T_i(x_j) for receiving tokens ``rows``: (B, rows, T, D).

    With z_i = sum_j (sum_h alpha^h_ij f_h(x_j) + [i = j] x_i) + b_O, the input of the attention layer
    norm, and its linear part L_i(u) = gamma (u - mean u) / sigma(z_i), T_i(x_j) = L_i(sum_h alpha^h_ij
    f_h(x_j) + [i = j] x_i); they add up to y_i - L_i(b_O) - beta, y_i the layer norm's output.
    ``vectors``: :func:`head_vectors`, when the caller has them.
    """
    vectors = head_vectors(model, layer, t.values) if vectors is None else vectors
    gamma, inv_sigma = _layer_norm_scale(model, layer, t.hidden + t.dense)
    tokens = t.hidden.shape[1]
    eye = torch.eye(tokens, dtype=t.hidden.dtype, device=t.hidden.device)[rows]
    z = _mixed_vectors(t.probs, vectors, rows) + eye[None, :, :, None] * t.hidden[:, rows, None, :]
    return gamma * (z - z.mean(-1, keepdim=True)) * inv_sigma[:, rows, None, :]


def alti_contributions(model, layer: int, t: LayerTrace, real: torch.Tensor) -> torch.Tensor:
    """ALTI's contributions c_ij of input j to the attention block's output y_i, (B, T, T), rows summing to 1.

    Ferrando et al.'s contribution is max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1) (see
    :func:`transformed_vectors`), normalised over j. ``real`` (B, T) masks padding.
    """
    vectors = head_vectors(model, layer, t.values)
    batch, tokens, dim = t.hidden.shape
    out = torch.zeros(batch, tokens, tokens, dtype=t.normed.dtype, device=t.normed.device)
    step = _row_chunk(batch, tokens, dim)
    for start in range(0, tokens, step):
        rows = slice(start, min(tokens, start + step))
        y = t.normed[:, rows, None, :]
        transformed = transformed_vectors(model, layer, t, rows, vectors)
        out[:, rows] = (y.abs().sum(-1) - (y - transformed).abs().sum(-1)).clamp_min(0)
    out = out * real[:, None, :]
    return out / out.sum(-1, keepdim=True).clamp_min(torch.finfo(out.dtype).tiny)


def _repeat_batch(value, batch: int, copies: int):
    """Tensors with a leading batch dimension repeated ``copies`` times per item (other values as they are)."""
    if isinstance(value, torch.Tensor) and value.dim() and value.shape[0] == batch:
        return value.repeat_interleave(copies, dim=0)
    return value


@torch.no_grad()
def value_zeroing(model, layer: int, t: LayerTrace, real: torch.Tensor, max_rows: int = 256) -> torch.Tensor:
    """Mohebbi et al.'s value zeroing for one layer, (B, T, T), rows summing to 1 over real tokens.

    The layer is run again once per token j (batched, ``max_rows`` copies at a time) on its own
    inputs, with every head's value vector of j set to zero; entry (i, j) is the cosine distance
    between output i and the original output i, normalised over j.
    """
    module = _unwrap(model)
    block = architectures.layers(module)[layer]
    _, _, value = architectures.qkv(module, layer)
    args, kwargs = t.call
    batch, tokens, _ = t.hidden.shape
    scores = torch.zeros(batch, tokens, tokens, dtype=t.output.dtype, device=t.output.device)
    per_chunk = max(1, max_rows // batch)
    for start in range(0, tokens, per_chunk):
        zeroed = torch.arange(start, min(tokens, start + per_chunk), device=t.hidden.device)
        copies = len(zeroed)
        keep = torch.ones(batch * copies, tokens, 1, dtype=t.hidden.dtype, device=t.hidden.device)
        keep[torch.arange(batch * copies), zeroed.repeat(batch)] = 0

        def zero_values(_module, _inputs, output, keep=keep):
            return output * keep

        handle = value.register_forward_hook(zero_values)
        try:
            out = _first(
                block(
                    *(_repeat_batch(a, batch, copies) for a in args),
                    **{k: _repeat_batch(v, batch, copies) for k, v in kwargs.items()},
                )
            )
        finally:
            handle.remove()
        original = t.output.repeat_interleave(copies, dim=0)
        # 1 - cos(a, b) = |a/|a| - b/|b||^2 / 2, without 1 - cos's cancellation for small changes.
        unit = nn.functional.normalize(out, dim=-1) - nn.functional.normalize(original, dim=-1)
        distance = unit.square().sum(-1) / 2  # (B*copies, T)
        scores[:, :, zeroed] = distance.view(batch, copies, tokens).transpose(1, 2)
    scores = scores * real[:, None, :]
    return scores / scores.sum(-1, keepdim=True).clamp_min(torch.finfo(scores.dtype).tiny)


def _layer_map(model, method: str, layer: int, t: LayerTrace, real: torch.Tensor) -> torch.Tensor:
    """The per-layer ``method`` map of one layer: (B, H, T, T) per head or (B, 1, T, T)."""
    if method == "attention":
        return t.probs
    if method == "norm":
        norms = head_vectors(model, layer, t.values).norm(dim=-1)  # (B, H, T)
        return t.probs * norms[:, :, None, :]
    if method == "norm_layer":
        vectors = head_vectors(model, layer, t.values)
        batch, tokens, dim = t.hidden.shape
        step = _row_chunk(batch, tokens, dim)
        rows = [
            _mixed_vectors(t.probs, vectors, slice(s, min(tokens, s + step))).norm(dim=-1)
            for s in range(0, tokens, step)
        ]
        return torch.cat(rows, dim=1)[:, None]
    if method == "alti_layer":
        return alti_contributions(model, layer, t, real)[:, None]
    if method == "value_zeroing":
        return value_zeroing(model, layer, t, real)[:, None]
    raise ValueError(f"method must be one of {METHODS}, not {method!r}")


# --------------------------------------------------------------------------- across layers


def residual_attention(probs: torch.Tensor, real: torch.Tensor, residual: float = 0.5) -> torch.Tensor:
    """Abnar & Zuidema's A = (1 - r) mean_h(alpha) + r I over real tokens, rows renormalised: (B, T, T)."""
    mean = probs.mean(1)
    eye = torch.diag_embed(real.to(mean.dtype))
    mixed = ((1 - residual) * mean + residual * eye) * real[:, None, :]
    return mixed / mixed.sum(-1, keepdim=True).clamp_min(torch.finfo(mixed.dtype).tiny)


def aggregate(per_layer: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Rollout of per-layer (B, T, T) mixing matrices: R_1 = C_1, R_l = C_l R_(l-1)."""
    out: list[torch.Tensor] = []
    for matrix in per_layer:
        out.append(matrix if not out else torch.bmm(matrix, out[-1]))
    return out


def attention_flow(mixing: np.ndarray, rows: Sequence[int] | None = None) -> np.ndarray:
    """Abnar & Zuidema's attention flow for one item: (L, T, T) per-layer edge capacities -> (L, T, T).

    ``mixing[l, i, j]`` is the capacity of the edge from token j below layer l+1 to token i at
    layer l+1 (:func:`residual_attention`). Entry [l, i, j] of the result is the maximum flow from
    input token j to token i of layer l+1, each row normalised to sum to 1 (as their code does);
    ``rows`` limits the receiving tokens computed (others are zero), e.g. ``[0]`` for [CLS].
    Computed with scipy's maximum flow on capacities scaled to integers (``_FLOW_SCALE``).
    """
    mixing = np.asarray(mixing, dtype=np.float64)
    n_layers, tokens, _ = mixing.shape
    rows = range(tokens) if rows is None else rows
    out = np.zeros((n_layers, tokens, tokens))
    for layer in range(n_layers):
        nodes = (layer + 2) * tokens  # layers 0..layer+1, tokens each
        src, dst, cap = [], [], []
        for k in range(layer + 1):
            below, above = np.nonzero(mixing[k].T > 0)  # edge j (below) -> i (above) wherever A[i, j] > 0
            src.append(k * tokens + below)
            dst.append((k + 1) * tokens + above)
            cap.append(np.rint(mixing[k][above, below] * _FLOW_SCALE))
        graph = sparse.csr_matrix(
            (np.concatenate(cap).astype(np.int32), (np.concatenate(src), np.concatenate(dst))), shape=(nodes, nodes)
        )
        for i in rows:
            sink = (layer + 1) * tokens + i
            for j in range(tokens):
                out[layer, i, j] = csgraph.maximum_flow(graph, j, sink).flow_value / _FLOW_SCALE
    total = out.sum(-1, keepdims=True)
    return np.divide(out, total, out=np.zeros_like(out), where=total > 0)


def _flow(probs: Sequence[torch.Tensor], real: torch.Tensor, rows) -> list[torch.Tensor]:
    mixing = torch.stack([residual_attention(p, real) for p in probs], dim=1)  # (B, L, T, T)
    out = torch.zeros_like(mixing)
    for b in range(mixing.shape[0]):
        n = int(real[b].sum())  # real tokens come first; padding is not part of the graph
        flow = attention_flow(
            mixing[b, :, :n, :n].double().cpu().numpy(), None if rows is None else [r for r in rows if r < n]
        )
        out[b, :, :n, :n] = torch.from_numpy(flow).to(out)
    return list(out.unbind(1))


# --------------------------------------------------------------------------- all methods


def _real(inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    mask = inputs.get("attention_mask")
    return torch.ones_like(inputs["input_ids"], dtype=torch.float32) if mask is None else mask.to(torch.float32)


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
    real = _real(inputs)
    if "flow" in methods and int(real.sum(1).max()) > flow_max_tokens:
        raise BertologyError(
            f"attention flow costs O(n^4) per item and is limited to {flow_max_tokens} tokens; this batch has an item "
            f"of {int(real.sum(1).max())}. Skip longer items (max_tokens={flow_max_tokens}) or raise flow_max_tokens"
        )
    model = _unwrap(loaded)
    traces = trace(model, inputs)
    per_layer: dict[str, list[torch.Tensor]] = {}
    needed = {AGGREGATED.get(m, m) for m in methods}
    for method in LAYER_METHODS:
        if method in needed:
            per_layer[method] = [_layer_map(model, method, layer, t, real) for layer, t in enumerate(traces)]
    out: dict[str, list[torch.Tensor]] = {}
    for method in methods:
        if method in LAYER_METHODS:
            out[method] = per_layer[method]
        elif method == "rollout":
            out[method] = [m[:, None] for m in aggregate([residual_attention(t.probs, real) for t in traces])]
        elif method == "flow":
            out[method] = [m[:, None] for m in _flow([t.probs for t in traces], real, flow_rows)]
        else:
            out[method] = [m[:, None] for m in aggregate([m[:, 0] for m in per_layer[AGGREGATED[method]]])]
    return out


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
        return None if LAYER_METHODS.get(self.method, False) else 1

    def settings(self) -> dict:
        out: dict = {"normalise": self.normalise}
        if self.method == "flow":
            out.update(rows=None if self.flow_rows is None else list(self.flow_rows), max_tokens=self.flow_max_tokens)
        return out

    def __call__(self, loaded, inputs: dict[str, torch.Tensor]) -> list[torch.Tensor]:
        maps = mixing_maps(
            loaded, inputs, (self.method,), flow_rows=self.flow_rows, flow_max_tokens=self.flow_max_tokens
        )[self.method]
        return [_rows_summing_to_one(m) for m in maps] if self.normalise else maps


def _rows_summing_to_one(m: torch.Tensor) -> torch.Tensor:
    return m / m.sum(-1, keepdim=True).clamp_min(torch.finfo(m.dtype).tiny)


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
        return [torch.cat([_rows_summing_to_one(m) if self.normalise else m for m in layer], 1) for layer in layers]


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


# --------------------------------------------------------------------------- faithfulness


def input_attribution(item, row: int | None = None) -> np.ndarray:
    """(L, W) what each layer's map of ``item`` (an ItemAttention) says about the input words, read from
    ``row`` (default: the leading special token, [CLS] or <s>), averaged over heads."""
    if row is None:
        leading = np.flatnonzero(np.asarray(item.word_kinds) == LEADING_SPECIAL)
        if not len(leading):
            raise BertologyError(f"item {item.item_id} has no leading special token; pass the row to read")
        row = int(leading[0])
    return np.asarray(item.attention, dtype=np.float64)[:, :, row, :].mean(1)


def faithfulness(
    maps: dict[str, Sequence], references: dict[str, Sequence[np.ndarray]], *, absolute: bool = True
) -> pd.DataFrame:
    """Spearman correlation of each method's input attribution with each reference, per item and layer.

    ``maps``: method -> ItemAttention per item (word level); ``references``: name -> (W,) scores per item
    (blank-out, input x gradient...), the same items in the same order. Only ordinary words count
    (special tokens have no blank-out score); items with fewer than three words or a constant ranking
    are left out (rho undefined). ``absolute`` ranks references by magnitude (a gradient's sign says
    which way a word pushes, not how much it matters). One row per (method, reference, layer, item).
    """
    rows = []
    for method, items in maps.items():
        for name, scores in references.items():
            if len(scores) != len(items):
                raise ValueError(f"{name} has {len(scores)} items, {method} {len(items)}")
            for k, (item, score) in enumerate(zip(items, scores)):
                words = np.asarray(item.word_kinds) == WORD
                score = np.asarray(score, dtype=np.float64)[: len(words)][words]
                score = np.abs(score) if absolute else score
                attribution = input_attribution(item)[:, words]
                if words.sum() < 3 or np.ptp(score) == 0:
                    continue
                for layer, values in enumerate(attribution):
                    rho = stats.spearmanr(values, score).statistic if np.ptp(values) > 0 else np.nan
                    rows.append((method, name, layer + 1, k, float(rho)))
    return pd.DataFrame(rows, columns=["method", "reference", "layer", "item", "spearman"])


def faithfulness_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Mean, standard deviation and count of rho per (method, reference, layer)."""
    grouped = table.dropna(subset=["spearman"]).groupby(["method", "reference", "layer"], sort=False)["spearman"]
    return grouped.agg(["mean", "std", "count"]).reset_index()


# --------------------------------------------------------------------------- figures


def plot_shares(raw: pd.DataFrame, weighted: pd.DataFrame, kinds: Sequence[str] = ("cls", "sep", "punct")):
    """Per-layer share of attention on each kind of token, raw (solid) vs norm-weighted (dashed).

    ``raw`` and ``weighted``: one row per layer (from 1), a column per kind (``SurfaceStats.per_layer()``).
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for k, kind in enumerate(kinds):
        color = f"C{k}"
        ax.plot(raw.index, raw[kind], color=color, marker="o", label=f"{kind} (raw)")
        ax.plot(weighted.index, weighted[kind], color=color, marker="s", linestyle="--", label=f"{kind} (norm)")
    ax.set_xlabel("layer")
    ax.set_ylabel("share of attention")
    ax.set_xticks(list(raw.index))
    ax.set_ylim(0, None)
    ax.legend(ncol=2, fontsize="small", frameon=False)
    fig.tight_layout()
    return fig


def plot_faithfulness(summary: pd.DataFrame, references: Sequence[str] | None = None):
    """Mean Spearman rho per layer, one line per method, one panel per reference (``faithfulness_summary``)."""
    import matplotlib.pyplot as plt

    references = list(dict.fromkeys(summary.reference)) if references is None else list(references)
    fig, axes = plt.subplots(1, len(references), figsize=(5 * len(references), 3.8), squeeze=False, sharey=True)
    for ax, reference in zip(axes[0], references):
        part = summary[summary.reference == reference]
        for method, rows in part.groupby("method", sort=False):
            ax.plot(rows.layer, rows["mean"], marker="o", label=method)
        ax.axhline(0, color="grey", linewidth=0.8)
        ax.set_title(f"against {reference.replace('_', ' ')}")
        ax.set_xlabel("layer")
        ax.set_xticks(sorted(part.layer.unique()))
    axes[0][0].set_ylabel("mean Spearman rho")
    axes[0][-1].legend(fontsize="small", frameon=False, loc="center left", bbox_to_anchor=(1, 0.5))
    fig.tight_layout()
    return fig


def plot_side_by_side(items: Mapping[str, ItemAttention], layer: int = -1):
    """One item's maps under several methods (``{title: ItemAttention}``) at ``layer``, heads averaged."""
    import matplotlib.pyplot as plt

    from bertology_utils.core.figures import plot_attention_map

    first = next(iter(items.values()))
    size = max(3.0, 0.32 * first.n_words + 1.5)
    fig, axes = plt.subplots(1, len(items), figsize=((size + 1) * len(items), size), squeeze=False)
    for ax, (title, item) in zip(axes[0], items.items()):
        plot_attention_map(np.asarray(item.attention, dtype=np.float64)[layer].mean(0), item.words, ax=ax, title=title)
    fig.tight_layout()
    return fig
