"""Queries and keys of every head, and how many of their dimensions decide where a head attends.

Vig's bertviz posts ("Deconstructing BERT, Part 2"; the neuron view of Vig 2019, `A Multiscale Visualization of
Attention in the Transformer Model <https://arxiv.org/abs/1906.05714>`_) read a head's score for a
key as the sum over the head's dimensions of the elementwise product ``q_d k_d``, and observed
that a head attending to [SEP] or spread over its own sentence needs only a few dimensions of
that product to decide where to attend, while a next-word head needs many. This module is the
one home for capturing queries and keys (:func:`capture_query_key`, which the neuron view of
:mod:`bertology_utils.present.views` also uses) and measures that claim for every head at once
(:func:`query_key_dimensions`).

What is counted, per head and per attending token (a *query*):

* the content logit of each key is ``q·k_j`` (the scaling by 1/sqrt(d) changes no ranking);
  the winning key ``j*`` is its argmax over the item's real keys, ``j2`` the runner-up;
* each dimension's contribution to the margin between them is ``c_d = q_d (k_{j*,d} - k_{j2,d})``,
  and the margin ``m = sum_d c_d`` is > 0 (a query whose two best keys tie exactly, ``m == 0``,
  is left out and counted in ``n_ties``: two identical key vectors; rare with real inputs);
* the count is the fewest dimensions whose contributions, largest first, sum to at least
  ``keep * m``. With ``keep=1`` it is at most the number of positive contributions: the
  negative ones only lower the running sum.

Only the content logits are decomposed: MPNet's relative position bias and the attention mask
are added to the scores but are not products of dimensions, so the winning key here is the
winner of ``q·k`` alone (for MPNet possibly not the key the head attends to most). Queries are
the real tokens that are not special tokens ([CLS]/``<s>`` and [SEP]/``</s>`` rows are left
out; padding is never a query nor a key); keys are all real tokens, special ones included
(attending to [SEP] is half the claim).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from bertology_utils.attention.alignment import AlignedItem
from bertology_utils.core.architectures import (
    Model,
    arch_spec,
    attention_heads,
    base_model,
    qkv,
    self_attention_modules,
    torch_module,
)
from bertology_utils.core.errors import BertologyError, UnsupportedArchitectureError
from bertology_utils.core.models import LoadedModel, evaluating
from bertology_utils.core.typing import AttentionMaps, AttentionScores, HeadMatrix
from bertology_utils.interventions.objectives import CLS, DEFAULT_MAX_TOKENS, KINDS, SEP, TokenBatch, token_batches

__all__ = [
    "SCORE_TERMS",
    "QueryKeyCapture",
    "capture_query_key",
    "additive_term",
    "QueryKeyDimensions",
    "query_key_dimensions",
    "dimensions_needed",
    "QUERY_KEY_METHOD",
]

#: Arguments of a self-attention module's forward that are added to the scores before the softmax.
SCORE_TERMS = ("attention_mask", "position_bias")

#: What :func:`query_key_dimensions` measures, in words a notebook can show as it is.
QUERY_KEY_METHOD = (
    "For every head and every real, non-special token as query ([CLS]/[SEP] rows and padding left out), "
    "the winning key j* (argmax over the real keys of the content logit q·k, special keys included) and the "
    "runner-up j2; each dimension's contribution to the margin is c_d = q_d (k_j*,d - k_j2,d); the count is "
    "the fewest dimensions whose contributions, largest first, reach keep x the margin (queries whose two best "
    "keys tie are left out). Content logits only: the attention mask and MPNet's relative position bias are "
    "added to the scores but are not products of dimensions."
)


# --------------------------------------------------------------------------- capture


def additive_term(term: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A mask or bias as what is added to the scores (boolean masks: 0 where kept, the dtype's minimum elsewhere).

    :param term: a mask (bool or additive) or a bias, as a layer was passed it.
    :param dtype: the float type of the result.
    :returns: the same shape, in ``dtype``.
    """
    if term.dtype == torch.bool:
        return torch.zeros((), dtype=dtype, device=term.device).masked_fill(~term, torch.finfo(dtype).min)
    return term.to(dtype)


@dataclass
class QueryKeyCapture:
    """Queries, keys and score terms of the layers :func:`capture_query_key` watches, from the latest forward pass.

    Entries are per layer (from 0); layers not watched, or not run yet, hold None.

    :param queries: per layer, ``(B, H, T, head_dim)`` query vectors.
    :param keys: per layer, ``(B, H, T, head_dim)`` key vectors.
    :param terms: per layer, the tensors added to the scores.
    :param scaling: per layer, the factor of ``q·k``.
    """

    #: ``(B, H, T, head_dim)`` query vectors: the query projection's output, split into heads.
    queries: list = field(default_factory=list)
    #: ``(B, H, T, head_dim)`` key vectors.
    keys: list = field(default_factory=list)
    #: The tensors the layer adds to its scores before the softmax (attention mask, MPNet's position
    #: bias), as they were passed to the self-attention module's forward.
    terms: list = field(default_factory=list)
    #: The factor the layer multiplies q·k with (its ``scaling``, else 1/sqrt(head_dim)).
    scaling: list = field(default_factory=list)

    def _vectors(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        q, k = self.queries[layer], self.keys[layer]
        if q is None or k is None:
            raise BertologyError(
                f"layer {layer} (from 0) was not captured: watch it, and run the model inside the block"
            )
        return q, k

    def content_logits(self, layer: int) -> AttentionScores:
        """``q·k`` in float32, unscaled and without mask or bias.

        :param layer: the layer (from 0).
        :returns: ``(B, H, T, T)``; BertologyError for a layer not captured.
        """
        q, k = self._vectors(layer)
        return q.float() @ k.float().transpose(-1, -2)

    def bias(self, layer: int) -> AttentionScores:
        """Everything the layer adds to the scaled ``q·k`` (zeros if nothing).

        :param layer: the layer (from 0).
        :returns: ``(B, H, T, T)`` float32.
        """
        q, k = self._vectors(layer)
        shape = (q.shape[0], q.shape[1], q.shape[2], k.shape[2])
        total = torch.zeros(shape, dtype=torch.float32, device=q.device)
        for term in self.terms[layer] or ():
            total = total + torch.broadcast_to(additive_term(term.to(q.device)), shape)
        return total

    def scores(self, layer: int) -> AttentionScores:
        """``q·k * scaling + bias``: the scores the layer softmaxes.

        :param layer: the layer (from 0).
        :returns: ``(B, H, T, T)`` float32.
        """
        return self.content_logits(layer) * self.scaling[layer] + self.bias(layer)

    def probabilities(self, layer: int) -> AttentionMaps:
        """The softmax of :meth:`scores`: the model's attention, where the layer adds nothing else.

        :param layer: the layer (from 0).
        :returns: ``(B, H, T, T)`` float32, rows summing to 1.
        """
        return torch.softmax(self.scores(layer), dim=-1)


@contextlib.contextmanager
def capture_query_key(loaded: Model, *, layers: Sequence[int] | None = None) -> Iterator[QueryKeyCapture]:
    """Keep the query and key vectors of every head (and what the layer adds to the scores) during forward passes.

    Forward hooks on the query and key projections that
    :func:`bertology_utils.core.architectures.qkv` names (their outputs are the vectors the scores
    multiply) and a pre-hook on each self-attention module (its ``attention_mask`` and
    ``position_bias`` arguments). ``loaded`` is a LoadedModel or a transformers model; ``layers``
    (from 0; None: all) are the layers watched. Vectors are detached, in the model's dtype and
    device. Each forward pass replaces what the previous one captured.

    :param loaded: the model.
    :param layers: the layers watched (from 0; None: all).
    :returns: a context manager yielding the capture; UnsupportedArchitectureError for a model whose self-attention
        adds score terms of its own (DeBERTa), ValueError for a layer out of range.
    """
    modules = self_attention_modules(loaded)
    spec = arch_spec(loaded)
    if spec.internal_score_terms:
        raise UnsupportedArchitectureError(
            f"{type(torch_module(loaded)).__name__} (model type {spec.model_type!r}) adds score terms of its own to "
            "q·k inside its self-attention (content-to-position and position-to-content, ArchSpec."
            "internal_score_terms): the queries and keys of its projections do not rebuild its attention",
            model_type=spec.model_type,
        )
    watched = range(len(modules)) if layers is None else [int(layer) for layer in layers]
    for layer in watched:
        if not 0 <= layer < len(modules):
            raise ValueError(f"layer {layer} out of range: the model has {len(modules)} layers (counted from 0)")
    n = len(modules)
    capture = QueryKeyCapture([None] * n, [None] * n, [None] * n, [None] * n)
    handles = []

    def keep_terms(layer: int) -> Callable[..., None]:
        def hook(mod: torch.nn.Module, args: tuple, kwargs: dict) -> None:
            bound = inspect.signature(mod.forward).bind_partial(*args, **kwargs).arguments
            capture.terms[layer] = [bound[name] for name in SCORE_TERMS if isinstance(bound.get(name), torch.Tensor)]

        return hook

    def keep(store: list, layer: int, heads: int) -> Callable[..., None]:
        def hook(_mod: torch.nn.Module, _inputs: tuple, output: torch.Tensor) -> None:
            store[layer] = output.detach().unflatten(-1, (heads, -1)).transpose(1, 2)

        return hook

    try:
        for layer in watched:
            q_proj, k_proj, _ = qkv(loaded, layer)
            heads = attention_heads(loaded, layer)
            head_dim = q_proj.out_features // max(heads, 1)
            capture.scaling[layer] = float(getattr(modules[layer], "scaling", head_dim**-0.5))
            handles += [
                modules[layer].register_forward_pre_hook(keep_terms(layer), with_kwargs=True),
                q_proj.register_forward_hook(keep(capture.queries, layer, heads)),
                k_proj.register_forward_hook(keep(capture.keys, layer, heads)),
            ]
        yield capture
    finally:
        for handle in handles:
            handle.remove()


# --------------------------------------------------------------------------- dimensions


def dimensions_needed(
    q: torch.Tensor, k: torch.Tensor, key_mask: torch.Tensor, keep: float = 0.9
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """How many dimensions of ``q * k`` decide each query's winning key, vectorised over any leading dimensions.

    ``q`` (..., queries, d), ``k`` (..., keys, d), ``key_mask`` (bool, broadcastable to (..., keys):
    the keys that may win; at least two). Returns (count, margin, winner), each (..., queries):
    the fewest dimensions whose contributions ``q_d (k_{j*,d} - k_{j2,d})``, largest first, reach
    ``keep`` times the margin ``q·k_{j*} - q·k_{j2}``; the margin; the winning key. Computed in
    float64. Where the margin is 0 (a tie) the count is 0.

    :param q: ``(..., T, d)`` query vectors.
    :param k: ``(..., T, d)`` key vectors.
    :param key_mask: bool, broadcastable to ``(..., T)``: the keys that may win.
    :param keep: the share of the margin the counted dimensions must reach, in (0, 1].
    :returns: ``(..., T)`` counts, margins and winning keys.
    """
    if not 0 < keep <= 1:
        raise ValueError(f"keep must be in (0, 1], not {keep}")
    q, k = q.double(), k.double()
    logits = (q @ k.transpose(-1, -2)).masked_fill(~key_mask.unsqueeze(-2), -torch.inf)
    if logits.shape[-1] < 2:
        raise BertologyError("a query needs at least two keys to have a runner-up")
    top = logits.topk(2, dim=-1).indices  # (..., queries, 2)
    lead = k.shape[:-2]
    flat_k = k.reshape(-1, *k.shape[-2:])  # (N, keys, d)
    flat_top = top.reshape(flat_k.shape[0], -1)  # (N, queries * 2)
    picked = flat_k.gather(1, flat_top.unsqueeze(-1).expand(-1, -1, k.shape[-1]))
    picked = picked.reshape(*lead, top.shape[-2], 2, k.shape[-1])
    contributions = q * (picked[..., 0, :] - picked[..., 1, :])  # (..., queries, d)
    margin = contributions.sum(-1)
    running = contributions.sort(dim=-1, descending=True).values.cumsum(-1)
    # The running sum over the positive contributions reaches the margin in exact arithmetic; allow rounding.
    slack = 1e-9 * contributions.abs().sum(-1, keepdim=True)
    reached = running >= keep * margin.unsqueeze(-1) - slack
    count = reached.int().argmax(-1) + 1
    count = torch.where(margin > 0, count, torch.zeros_like(count))
    return count, margin, top[..., 0]


@dataclass(frozen=True)
class QueryKeyDimensions:
    """What :func:`query_key_dimensions` returns: per head and query, how many dimensions decide the winning key.

    Queries run along the last axis of ``counts`` (every head sees the same queries, in
    ``query_items`` / ``query_positions`` order); :attr:`median` and :attr:`mean` are over a head's
    queries with a margin (ties left out), as fractions of ``head_dim``.

    :param model: the model's name.
    :param keep: the share of the margin counted.
    :param head_dim: the dimensions of a head's query and key.
    :param counts: ``(L, H, queries)`` int16 dimensions needed, 0 on ties.
    :param winner_kinds: ``(L, H, queries)`` int8 kind of the winning key.
    :param query_items: ``(queries,)`` each query's item index.
    :param query_positions: ``(queries,)`` each query's token position.
    :param n_items: the items measured.
    :param n_skipped: the items skipped as too long.
    :param method: what is counted, in words.
    """

    model: str
    keep: float
    head_dim: int
    #: ``(L, H, queries)`` int16: the dimensions needed; 0 where the two best keys tie.
    counts: np.ndarray = field(repr=False)
    #: ``(L, H, queries)`` int8: the kind (:data:`~bertology_utils.interventions.objectives.KINDS`) of the
    #: winning key.
    winner_kinds: np.ndarray = field(repr=False)
    #: ``(queries,)`` the item index (``item.index``) and token position of each query.
    query_items: np.ndarray = field(repr=False)
    query_positions: np.ndarray = field(repr=False)
    n_items: int
    n_skipped: int  #: items longer than ``max_tokens``, not measured
    method: str = QUERY_KEY_METHOD

    @property
    def num_layers(self) -> int:
        """How many layers were measured (L)."""
        return int(self.counts.shape[0])

    @property
    def num_heads(self) -> int:
        """How many heads a layer has (H)."""
        return int(self.counts.shape[1])

    @property
    def n_queries(self) -> HeadMatrix:
        """``(L, H)`` int: the queries with a margin (those the statistics are over)."""
        return (self.counts > 0).sum(-1)

    @property
    def n_ties(self) -> HeadMatrix:
        """``(L, H)`` int: the queries left out because their two best keys tie exactly."""
        return (self.counts == 0).sum(-1)

    @property
    def fractions(self) -> np.ndarray:
        """``(L, H, queries)`` float: counts / head_dim, NaN on ties."""
        return np.where(self.counts > 0, self.counts / self.head_dim, np.nan)

    def _over_queries(self, how: Callable[[np.ndarray], Any]) -> HeadMatrix:
        fractions, ok = self.fractions, self.counts > 0
        out = np.full(self.counts.shape[:2], np.nan)
        for layer, head in zip(*np.nonzero(ok.any(-1))):
            out[layer, head] = how(fractions[layer, head][ok[layer, head]])
        return out

    @property
    def median(self) -> HeadMatrix:
        """``(L, H)``: the median count as a fraction of ``head_dim`` (NaN for a head without queries)."""
        return self._over_queries(np.median)

    @property
    def mean(self) -> HeadMatrix:
        """``(L, H)``: the mean count as a fraction of ``head_dim``."""
        return self._over_queries(np.mean)

    def winner_share(self, kind: str) -> HeadMatrix:
        """The share of a head's queries (ties included) whose winning key is of ``kind``.

        :param kind: a kind of token (:data:`~bertology_utils.interventions.objectives.KINDS`).
        :returns: ``(L, H)`` (NaN without queries); ValueError for an unknown kind.
        """
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
        if self.counts.shape[-1] == 0:
            return np.full(self.counts.shape[:2], np.nan)
        return (self.winner_kinds == KINDS.index(kind)).mean(-1)

    def head_table(self) -> pd.DataFrame:
        """One row per head (layer and head from 1): median and mean fraction, median count, queries, ties.

        :returns: columns ``layer``, ``head``, ``median_fraction``, ``mean_fraction``, ``median_dims``, ``queries``,
            ``ties`` and ``winner_<kind>`` for each kind.
        """
        layer, head = np.meshgrid(np.arange(1, self.num_layers + 1), np.arange(1, self.num_heads + 1), indexing="ij")
        return pd.DataFrame(
            {
                "layer": layer.ravel(),
                "head": head.ravel(),
                "median_fraction": self.median.ravel(),
                "mean_fraction": self.mean.ravel(),
                "median_dims": (self.median * self.head_dim).ravel(),
                "queries": self.n_queries.ravel(),
                "ties": self.n_ties.ravel(),
                **{f"winner_{kind}": self.winner_share(kind).ravel() for kind in KINDS},
            }
        )


def _as_batches(
    loaded: LoadedModel, source: TokenBatch | Sequence[TokenBatch] | Iterable, batch_size: int, max_tokens: int | None
) -> tuple[list[TokenBatch], list[AlignedItem]]:
    if isinstance(source, TokenBatch):
        return [source], []
    if isinstance(source, (list, tuple)) and source and all(isinstance(b, TokenBatch) for b in source):
        return list(source), []
    return token_batches(loaded, source, batch_size=batch_size, max_tokens=max_tokens)


def query_key_dimensions(
    loaded: LoadedModel,
    batch_or_items: TokenBatch | Sequence[TokenBatch] | Iterable,
    *,
    keep: float = 0.9,
    batch_size: int = 16,
    max_tokens: int | None = DEFAULT_MAX_TOKENS,
    progress: bool = True,
) -> QueryKeyDimensions:
    """For every head, how many dimensions of the elementwise ``q * k`` decide where each query attends (Vig).

    ``batch_or_items``: a :class:`~bertology_utils.interventions.objectives.TokenBatch`, a list of
    them, or items (a Corpus, Sentences, pairs) batched with
    :func:`~bertology_utils.interventions.objectives.token_batches` (``batch_size``; items longer
    than ``max_tokens`` are skipped and counted). One forward pass per batch, in eval mode, with
    :func:`capture_query_key`; the counting is vectorised over layers' heads, queries and the batch
    (see the module docstring and :data:`QUERY_KEY_METHOD` for what is counted and left out).

    :param loaded: the model.
    :param batch_or_items: a batch, batches, or items.
    :param keep: the share of the margin the counted dimensions must reach, in (0, 1].
    :param batch_size: items per pass (items only).
    :param max_tokens: longer items are skipped (items only; None: what the model takes).
    :param progress: show a progress bar.
    :returns: the counts per head and query; BertologyError when no item is short enough or layers differ in heads.
    """
    if not 0 < keep <= 1:
        raise ValueError(f"keep must be in (0, 1], not {keep}")
    batches, skipped = _as_batches(loaded, batch_or_items, batch_size, max_tokens)
    if not batches:
        raise BertologyError(f"no items to measure ({len(skipped)} skipped as longer than {max_tokens} tokens)")
    n_layers = len(self_attention_modules(loaded))
    heads = {attention_heads(loaded, layer) for layer in range(n_layers)}
    if len(heads) != 1:
        raise BertologyError(f"{loaded.name}: layers have different head counts {sorted(heads)} (pruned?)")
    head_dim = qkv(loaded, 0)[0].out_features // heads.pop()
    counts, winners, items, positions = [], [], [], []
    encoder = base_model(loaded)
    with evaluating(loaded.model), torch.no_grad(), capture_query_key(loaded) as captured:
        for batch in tqdm(batches, desc="query·key", unit="batch", disable=not progress):
            encoder(**batch.model_inputs())
            real = batch.real
            queries = real & (batch.kinds != SEP) & (batch.kinds != CLS)
            b_idx, t_idx = queries.nonzero(as_tuple=True)
            per_layer_counts, per_layer_winners = [], []
            for layer in range(n_layers):
                count, _, winner = dimensions_needed(
                    captured.queries[layer], captured.keys[layer], real[:, None, :], keep
                )  # (B, H, T)
                per_layer_counts.append(count[b_idx, :, t_idx].T)  # (H, n)
                kinds = batch.kinds[:, None, :].expand_as(winner).gather(-1, winner)
                per_layer_winners.append(kinds[b_idx, :, t_idx].T)
            counts.append(torch.stack(per_layer_counts).to(torch.int16).cpu().numpy())
            winners.append(torch.stack(per_layer_winners).to(torch.int8).cpu().numpy())
            index = torch.as_tensor([item.index for item in batch.items], device=b_idx.device)
            items.append(index[b_idx].cpu().numpy())
            positions.append(t_idx.cpu().numpy())
    return QueryKeyDimensions(
        model=loaded.name,
        keep=float(keep),
        head_dim=int(head_dim),
        counts=np.concatenate(counts, axis=-1),
        winner_kinds=np.concatenate(winners, axis=-1),
        query_items=np.concatenate(items),
        query_positions=np.concatenate(positions),
        n_items=sum(len(b.items) for b in batches),
        n_skipped=len(skipped),
    )
