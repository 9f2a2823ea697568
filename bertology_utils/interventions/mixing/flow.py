"""Abnar & Zuidema's (2020, `Quantifying Attention Flow in Transformers <https://arxiv.org/abs/2005.00928>`_)
attention flow: the maximum flow from input j to node i of layer l in the graph whose edges carry the
residual-mixed attention A_l, rows normalised to sum to 1 as in their code. O(n^4) per item, so its inputs have
a length limit; it takes two options of its own, ``flow_rows`` and ``flow_max_tokens`` (:class:`Flow`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import torch
from scipy import sparse
from scipy.sparse import csgraph

from bertology_utils.core.errors import BertologyError
from bertology_utils.core.typing import AttentionMaps, MixingMatrix, TokenMask
from bertology_utils.interventions.mixing.base import AcrossLayers
from bertology_utils.interventions.mixing.rollout import residual_attention

__all__ = ["FLOW_MAX_TOKENS", "attention_flow", "Flow"]

#: Default length limit of attention flow (tokens): one item of n tokens costs L n^2 maximum flows.
FLOW_MAX_TOKENS = 48
#: Flow capacities are scaled to integers (scipy's maximum flow is exact on integers); the
#: rounding moves a flow value by at most (edges in the cut) x 2^-21.
_FLOW_SCALE = 1 << 20


def attention_flow(mixing: np.ndarray, rows: Sequence[int] | None = None) -> np.ndarray:
    """Abnar & Zuidema's attention flow for one item (`Quantifying Attention Flow in Transformers
    <https://arxiv.org/abs/2005.00928>`_).

    Entry [l, i, j] of the result is the maximum flow from input token j to token i of layer l+1, each row
    normalised to sum to 1 (as their code does). Computed with scipy's maximum flow on capacities scaled to
    integers (``_FLOW_SCALE``).

    :param mixing: (L, T, T) edge capacities: ``mixing[l, i, j]`` is the capacity of the edge from token j
        below layer l+1 to token i at layer l+1
        (:func:`~bertology_utils.interventions.mixing.rollout.residual_attention`).
    :param rows: the receiving tokens computed (others are zero), e.g. ``[0]`` for [CLS]; None for all.
    :returns: (L, T, T) flows, rows summing to 1.
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
    """``flow``: Abnar & Zuidema's attention flow (`Quantifying Attention Flow in Transformers
    <https://arxiv.org/abs/2005.00928>`_) of each item of a batch, over the raw attention mixed with the
    residual stream (:func:`~bertology_utils.interventions.mixing.rollout.residual_attention`) and run
    through :func:`attention_flow` on the item's real tokens.

    Its options: ``flow_rows``, the receiving tokens computed (e.g. ``(0,)`` for [CLS]; None for all),
    and ``flow_max_tokens``, the longest item it takes (a longer one is refused).
    """

    name = "flow"
    of = "attention"
    options: ClassVar[Mapping[str, Any]] = {"flow_rows": None, "flow_max_tokens": FLOW_MAX_TOKENS}

    def max_tokens(self, options: Mapping[str, Any]) -> int:
        """``flow_max_tokens``: one item of n tokens costs L n^2 maximum flows."""
        return int(options["flow_max_tokens"])

    def check_batch(self, real: TokenMask, options: Mapping[str, Any]) -> None:
        """Refuse a batch with an item longer than ``flow_max_tokens`` (BertologyError).

        :param real: (B, T) token mask.
        :param options: the method's options.
        """
        longest, limit = int(real.sum(1).max()), self.max_tokens(options)
        if longest > limit:
            raise BertologyError(
                f"attention flow costs O(n^4) per item and is limited to {limit} tokens; this batch "
                f"has an item of {longest}. Skip longer items (max_tokens={limit}) or raise flow_max_tokens"
            )

    def settings(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """The receiving rows (a list, or None) and the length limit, as a store records them."""
        rows = options["flow_rows"]
        return {"rows": None if rows is None else list(rows), "max_tokens": options["flow_max_tokens"]}

    def combine(
        self, per_layer: Sequence[AttentionMaps], real: TokenMask, options: Mapping[str, Any]
    ) -> list[MixingMatrix]:
        """Each item's flow through the layers.

        :param per_layer: the raw attention, (B, H, T, T) per layer.
        :param real: (B, T) token mask; real tokens come first.
        :param options: the method's options (``flow_rows``).
        :returns: one (B, T, T) map per layer, zero on padding and on rows not computed.
        """
        mixing = torch.stack([residual_attention(p, real) for p in per_layer], dim=1)  # (B, L, T, T)
        rows = options["flow_rows"]
        out = torch.zeros_like(mixing)
        for b in range(mixing.shape[0]):
            n = int(real[b].sum())  # real tokens come first; padding is not part of the graph
            flow = attention_flow(
                mixing[b, :, :n, :n].double().cpu().numpy(), None if rows is None else [r for r in rows if r < n]
            )
            out[b, :, :n, :n] = torch.from_numpy(flow).to(out)
        return list(out.unbind(1))
