"""Abnar & Zuidema's (2020) attention flow: the maximum flow from input j to node i of layer l in the graph
whose edges carry the residual-mixed attention A_l, rows normalised to sum to 1 as in their code.
O(n^4) per item, so its inputs have a length limit."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from scipy import sparse
from scipy.sparse import csgraph

from bertology_utils.core.errors import BertologyError
from bertology_utils.core.typing import AttentionMaps, MixingMatrix, TokenMask
from bertology_utils.interventions.mixing.base import AcrossLayers, Options, register
from bertology_utils.interventions.mixing.rollout import residual_attention

__all__ = ["FLOW_MAX_TOKENS", "attention_flow", "Flow"]

#: Default length limit of attention flow (tokens): one item of n tokens costs L n^2 maximum flows.
FLOW_MAX_TOKENS = Options().flow_max_tokens
#: Flow capacities are scaled to integers (scipy's maximum flow is exact on integers); the
#: rounding moves a flow value by at most (edges in the cut) x 2^-21.
_FLOW_SCALE = 1 << 20


def attention_flow(mixing: np.ndarray, rows: Sequence[int] | None = None) -> np.ndarray:
    """Abnar & Zuidema's attention flow for one item: (L, T, T) per-layer edge capacities -> (L, T, T).

    ``mixing[l, i, j]`` is the capacity of the edge from token j below layer l+1 to token i at
    layer l+1 (:func:`~bertology_utils.interventions.mixing.rollout.residual_attention`). Entry [l, i, j]
    of the result is the maximum flow from input token j to token i of layer l+1, each row normalised to
    sum to 1 (as their code does); ``rows`` limits the receiving tokens computed (others are zero), e.g.
    ``[0]`` for [CLS]. Computed with scipy's maximum flow on capacities scaled to integers (``_FLOW_SCALE``).
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


class Flow(AcrossLayers):
    name = "flow"
    of = "attention"

    def check_batch(self, real: TokenMask, options: Options) -> None:
        longest = int(real.sum(1).max())
        if longest > options.flow_max_tokens:
            raise BertologyError(
                f"attention flow costs O(n^4) per item and is limited to {options.flow_max_tokens} tokens; this batch "
                f"has an item of {longest}. Skip longer items (max_tokens={options.flow_max_tokens}) or raise "
                "flow_max_tokens"
            )

    def combine(self, per_layer: Sequence[AttentionMaps], real: TokenMask, options: Options) -> list[MixingMatrix]:
        mixing = torch.stack([residual_attention(p, real) for p in per_layer], dim=1)  # (B, L, T, T)
        rows = options.flow_rows
        out = torch.zeros_like(mixing)
        for b in range(mixing.shape[0]):
            n = int(real[b].sum())  # real tokens come first; padding is not part of the graph
            flow = attention_flow(
                mixing[b, :, :n, :n].double().cpu().numpy(), None if rows is None else [r for r in rows if r < n]
            )
            out[b, :, :n, :n] = torch.from_numpy(flow).to(out)
        return list(out.unbind(1))


register(Flow())
