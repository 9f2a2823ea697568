"""Attention sinks, no-op heads and outlier dimensions, measured per sentence from one traced forward pass.

Three literatures describe one mechanism, and this module measures each side of it on the same sentences:

* where the attention goes: each head's mass on [CLS], [SEP] and punctuation (Clark et al. 2019's no-op);
* what that attention moves: the norm of the transformed vectors f_h(x_j) = W_O^h v^h_j the sink tokens send
  (Kobayashi et al. 2020, `Attention is Not Only a Weight <https://arxiv.org/abs/2004.10102>`_), their share of
  the layer's norm-weighted attention, and the norm of each head's whole update;
* what the residual stream carries: activations many times the hidden state's median magnitude, the tokens and
  dimensions they sit on, and the attention heads pay to those tokens (Bondarenko et al. 2023, `Quantizable
  Transformers <https://arxiv.org/abs/2306.12929>`_; Sun et al. 2024, `Massive Activations in Large Language
  Models <https://arxiv.org/abs/2402.17762>`_).

Every quantity is kept per sentence (:class:`SinkStatistics`), so a claim resamples sentences
(:meth:`SinkStatistics.draws`) and its interval carries the sentences' spread. An activation is an *outlier*
when its magnitude exceeds ``multiple`` times the median magnitude of its sentence's hidden state at that depth
(:func:`outlier_profile`): with the default 10, a Gaussian hidden state of any realistic size has none (the
median of \\|N(0, 1)\\| is 0.674, and 6.7 standard deviations has odds under 1e-10).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from bertology_utils.core.errors import BertologyError
from bertology_utils.core.models import LoadedModel, evaluating
from bertology_utils.core.typing import TokenMask, TokenVectors
from bertology_utils.core.uncertainty import Draws, bootstrap_weights
from bertology_utils.interventions.mixing.base import trace
from bertology_utils.interventions.mixing.norm import head_vectors
from bertology_utils.interventions.objectives import CLS, KINDS, OTHER, PUNCT, SEP, TokenBatch, token_batches

__all__ = [
    "SINK_KINDS",
    "OUTLIER_MULTIPLE",
    "outlier_profile",
    "peak_ratio",
    "SinkStatistics",
    "sink_statistics",
]

#: The token kinds a head may park its attention on, in :data:`~bertology_utils.interventions.objectives.KINDS`' names.
SINK_KINDS = ("cls", "sep", "punct")
_SINK_CODES = (CLS, SEP, PUNCT)
#: The default multiple of the median magnitude above which an activation is an outlier (see the module's note).
OUTLIER_MULTIPLE = 10.0


def _peak(magnitude: torch.Tensor, real: TokenMask) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(B,) each item's largest magnitude over its real tokens, its flat (token, dimension) index, and the median
    magnitude over those tokens and every dimension (of ``magnitude``, (B, T, E))."""
    largest, at = magnitude.masked_fill(~real[..., None], 0).flatten(1).max(dim=1)
    median = magnitude.masked_fill(~real[..., None], float("nan")).flatten(1).nanmedian(dim=1).values
    return largest, at, median


def outlier_profile(
    hidden: TokenVectors, real: TokenMask, multiple: float = OUTLIER_MULTIPLE
) -> dict[str, torch.Tensor]:
    """Where one hidden state's large activations are, per item of a batch.

    :param hidden: (B, T, E) a hidden state (a layer's input or output).
    :param real: (B, T) bool, the real tokens.
    :param multiple: an activation is an outlier above ``multiple`` times its item's median magnitude.
    :returns: ``ratio`` (B,) the largest magnitude over the median; ``inf_norm`` (B,) the largest magnitude;
        ``kurtosis`` (B,) the kurtosis of each token's activations across dimensions (Pearson's, 3 for a Gaussian),
        averaged over real tokens (Bondarenko et al.'s measure); ``outliers`` (B, T, E) bool, the outlier
        activations of real tokens; ``peak_token`` and ``peak_dim`` (B,) where the largest magnitude sits.
    """
    x = hidden.float()
    magnitude = x.abs()
    largest, at, median = _peak(magnitude, real)
    centred = x - x.mean(-1, keepdim=True)
    variance = centred.pow(2).mean(-1)
    kurtosis = centred.pow(4).mean(-1) / variance.pow(2).clamp_min(torch.finfo(x.dtype).tiny)
    rows = real.to(x.dtype)
    return {
        "ratio": largest / median,
        "inf_norm": largest,
        "kurtosis": (kurtosis * rows).sum(1) / rows.sum(1),
        "outliers": (magnitude > multiple * median[:, None, None]) & real[..., None],
        "peak_token": torch.div(at, x.shape[-1], rounding_mode="floor"),
        "peak_dim": at % x.shape[-1],
    }


def peak_ratio(hidden_states: Iterable[TokenVectors], real: TokenMask) -> torch.Tensor:
    """(B, S) :func:`outlier_profile`'s ``ratio`` of each of S hidden states, for the interventions' comparisons.

    :param hidden_states: the hidden states, each (B, T, E).
    :param real: (B, T) bool.
    :returns: (B, S).
    """
    peaks = [_peak(h.float().abs(), real) for h in hidden_states]
    return torch.stack([largest / median for largest, _, median in peaks], 1)


def _row_mean(per_row: torch.Tensor, real: TokenMask) -> torch.Tensor:
    """(..., B, H) the mean of (..., B, H, T) values over each item's real receiving rows."""
    rows = real.to(per_row.dtype)[:, None, :]
    return (per_row * rows).sum(-1) / rows.sum(-1)


def _ratio_of_sums(num: torch.Tensor, den: torch.Tensor, real: TokenMask) -> torch.Tensor:
    """(B, H) sum over rows of ``num`` over sum over rows of ``den`` (each (B, H, T)); NaN where ``den`` sums to 0."""
    rows = real.to(num.dtype)[:, None, :]
    total = (den * rows).sum(-1)
    return torch.where(total > 0, (num * rows).sum(-1) / total.clamp_min(torch.finfo(num.dtype).tiny), torch.nan)


@dataclass
class SinkStatistics:
    """Per-sentence measures of :func:`sink_statistics` (n sentences, L layers, H heads, K = len(SINK_KINDS)).

    Per head, over the sentence's receiving tokens: ``mass`` (n, K, L, H) the share of attention on each sink kind;
    ``norm_share`` (n, K, L, H) that share under norm weighting, sum_j alpha_ij ||f_h(x_j)|| (Kobayashi et al.);
    ``sink_norm`` and ``other_norm`` (n, L, H) the attention-weighted mean ||f_h(x_j)|| of the sink tokens and of
    the other tokens (NaN where the head puts no attention on them); ``update`` (n, L, H) the mean norm of the
    head's output ||sum_j alpha_ij f_h(x_j)||; ``peak_mass`` (n, L, H) the share of attention on the token that
    carries the largest activation of the layer's input. Per layer: ``layer_norm_share`` (n, K, L) each sink kind's share of the layer's
    norm-weighted attention, all heads together. Per hidden state 0 (embeddings) .. L: ``ratio``, ``inf_norm``,
    ``kurtosis`` (n, L + 1) (:func:`outlier_profile`), ``peak_kind`` and ``peak_dim`` (n, L + 1) the kind code
    (:data:`~bertology_utils.interventions.objectives.KINDS`) of the token and the dimension holding the largest
    activation, ``outliers_by_kind`` (n, L + 1, 4) outlier activations on each kind, and ``outlier_dims``
    (L + 1, E) the outlier activations per dimension over all sentences. ``tokens_by_kind`` (n, 4) counts each
    sentence's tokens.
    """

    model: str
    num_layers: int
    num_heads: int
    multiple: float
    items: np.ndarray  #: (n,) each sentence's index in the corpus
    mass: np.ndarray
    norm_share: np.ndarray
    sink_norm: np.ndarray
    other_norm: np.ndarray
    update: np.ndarray
    peak_mass: np.ndarray
    layer_norm_share: np.ndarray
    ratio: np.ndarray
    inf_norm: np.ndarray
    kurtosis: np.ndarray
    peak_kind: np.ndarray
    peak_dim: np.ndarray
    outliers_by_kind: np.ndarray
    tokens_by_kind: np.ndarray
    outlier_dims: np.ndarray
    n_skipped: int = 0

    @property
    def n(self) -> int:
        """Sentences measured."""
        return len(self.items)

    @property
    def sink_mass(self) -> np.ndarray:
        """(n, L, H) attention on all sink kinds together."""
        return self.mass.sum(1)

    def head_table(self) -> pd.DataFrame:
        """One row per head (layer and head from 1), means over sentences.

        :returns: columns ``mass_<kind>``, ``sink_mass``, ``norm_share_<kind>``, ``norm_sink_share``, ``sink_norm``,
            ``other_norm``, ``value_ratio`` (sink_norm over other_norm), ``update``, ``peak_mass``.
        """
        layers, heads = np.meshgrid(np.arange(self.num_layers), np.arange(self.num_heads), indexing="ij")
        columns = {"layer": layers.ravel() + 1, "head": heads.ravel() + 1}
        for k, kind in enumerate(SINK_KINDS):
            columns[f"mass_{kind}"] = self.mass[:, k].mean(0).ravel()
        columns["sink_mass"] = self.sink_mass.mean(0).ravel()
        for k, kind in enumerate(SINK_KINDS):
            columns[f"norm_share_{kind}"] = self.norm_share[:, k].mean(0).ravel()
        columns["norm_sink_share"] = self.norm_share.sum(1).mean(0).ravel()
        sink, other = np.nanmean(self.sink_norm, 0).ravel(), np.nanmean(self.other_norm, 0).ravel()
        columns |= {"sink_norm": sink, "other_norm": other, "value_ratio": sink / other}
        columns["update"] = self.update.mean(0).ravel()
        columns["peak_mass"] = self.peak_mass.mean(0).ravel()
        return pd.DataFrame(columns)

    def layer_table(self) -> pd.DataFrame:
        """One row per hidden state (0: the embeddings, l: layer l's output), means over sentences.

        :returns: columns ``ratio`` (geometric mean over sentences), ``inf_norm``, ``kurtosis``, ``outliers`` (per
            sentence), ``on_<kind>`` (the outliers' share on each token kind), ``top_dims`` (the dimensions holding
            most outliers, by count, as text), ``peak_on_sinks`` (share of sentences whose largest activation sits on
            a sink token), ``peak_dim`` (the dimension holding it most often) and ``peak_dim_share`` (how often) and, for layers 1..L, ``norm_share_<kind>`` of the layer's attention.
        """
        counts = self.outliers_by_kind.sum(0)  # (L + 1, 4)
        total = counts.sum(1)
        frame = pd.DataFrame(
            {
                "ratio": np.exp(np.log(self.ratio).mean(0)),
                "inf_norm": self.inf_norm.mean(0),
                "kurtosis": self.kurtosis.mean(0),
                "outliers": total / self.n,
            },
            index=pd.RangeIndex(self.num_layers + 1, name="hidden state"),
        )
        with np.errstate(invalid="ignore", divide="ignore"):
            for k, kind in enumerate(KINDS):
                frame[f"on_{kind}"] = counts[:, k] / total
        frame["top_dims"] = [_top_dims(row) for row in self.outlier_dims]
        frame["peak_on_sinks"] = np.isin(self.peak_kind, _SINK_CODES).mean(0)
        modal = [np.bincount(column).argmax() for column in self.peak_dim.T]
        frame["peak_dim"] = modal
        frame["peak_dim_share"] = (self.peak_dim == np.asarray(modal)).mean(0)
        for k, kind in enumerate(SINK_KINDS):
            frame[f"norm_share_{kind}"] = np.r_[np.nan, self.layer_norm_share[:, k].mean(0)]
        return frame

    def metrics(self, prefix: str = "sinks") -> dict:
        """What notebook 10 records of the measures (declared in ``papers/metrics/sinks.py``).

        :param prefix: the metric names' prefix.
        :returns: metric name -> number, (L, H) per-head grid or per-layer list.
        """
        heads, layers = self.head_table(), self.layer_table()
        shape = (self.num_layers, self.num_heads)
        grid = {name: heads[name].to_numpy().reshape(shape) for name in heads.columns if name not in ("layer", "head")}
        out = {f"{prefix}.head.mass_{kind}": grid[f"mass_{kind}"] for kind in SINK_KINDS}
        out |= {f"{prefix}.head.{name}": grid[name] for name in ("sink_mass", "norm_sink_share", "value_ratio")}
        out |= {f"{prefix}.head.{name}": grid[name] for name in ("update", "peak_mass")}
        out |= {
            f"{prefix}.layer_norm_share_{kind}_by_layer": layers[f"norm_share_{kind}"].to_numpy()[1:]
            for kind in SINK_KINDS
        }
        for name in ("ratio", "kurtosis", "inf_norm", "outliers", "peak_dim", "peak_dim_share", "peak_on_sinks"):
            out[f"{prefix}.{name}_by_state"] = layers[name].to_numpy()
        return out | {
            f"{prefix}.n_sentences": self.n,
            f"{prefix}.n_skipped": self.n_skipped,
            f"{prefix}.num_layers": self.num_layers,
            f"{prefix}.num_heads": self.num_heads,
            f"{prefix}.outlier_multiple": self.multiple,
        }

    def draws(self, n_resamples: int = 2000, seed: int = 0) -> Draws:
        """Bootstrap draws over sentences of the means a claim reads (NaN-aware: a sentence without a value is left
        out of that value's mean in every resample).

        :param n_resamples: resamples.
        :param seed: their seed.
        :returns: :meth:`means` with a leading (n_resamples,) axis.
        """
        return Draws(self.means(bootstrap_weights(self.n, n_resamples, seed)), f"{self.n} sentences")

    def means(self, weights: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """The means over sentences a claim reads, under each row of ``weights`` (R, n) (None: each sentence once,
        and no leading axis).

        :param weights: how often each sentence counts in each resample (:func:`bootstrap_weights`).
        :returns: ``mass`` (K, L, H), ``sink_mass``, ``sink_norm``, ``other_norm``, ``update``, ``peak_mass`` (L, H),
            ``uniform_mass`` (the mean of 1 / tokens: a head spreading evenly), ``log_ratio`` (L + 1,) the mean log
            of ``ratio``, ``peaks_on_sinks`` (L + 1,) the share of sentences whose largest activation sits on a sink
            token, and ``sink_tokens`` the sink tokens' mean share of a sentence's tokens.
        """
        one = weights is None
        rows = np.ones((1, self.n)) if weights is None else weights

        def mean(values: np.ndarray) -> np.ndarray:
            flat = values.reshape(values.shape[0], -1)
            finite = np.isfinite(flat)
            with np.errstate(invalid="ignore", divide="ignore"):
                out = (rows @ np.where(finite, flat, 0.0)) / (rows @ finite)
            out = out.reshape(rows.shape[0], *values.shape[1:])
            return out[0] if one else out

        counts = self.tokens_by_kind.sum(1)
        return {
            "mass": mean(self.mass),
            "sink_mass": mean(self.sink_mass),
            "sink_norm": mean(self.sink_norm),
            "other_norm": mean(self.other_norm),
            "update": mean(self.update),
            "peak_mass": mean(self.peak_mass),
            "uniform_mass": mean(1.0 / counts),
            "log_ratio": mean(np.log(self.ratio)),
            "peaks_on_sinks": mean(np.isin(self.peak_kind, _SINK_CODES).astype(float)),
            "sink_tokens": mean(self.tokens_by_kind[:, list(_SINK_CODES)].sum(1) / counts),
        }


def _top_dims(counts: np.ndarray, k: int = 3) -> str:
    """The ``k`` dimensions with most outliers, as "dim (count)"; "none" without outliers."""
    order = [int(d) for d in np.argsort(-counts, kind="stable")[:k] if counts[d] > 0]
    return ", ".join(f"{d} ({int(counts[d])})" for d in order) or "none"


def _batch_statistics(
    loaded: LoadedModel, batch: TokenBatch, multiple: float
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """One batch's per-item measures (see :class:`SinkStatistics`) and its outliers per hidden state and dimension."""
    traces = trace(loaded, batch.model_inputs())
    real, kinds = batch.real, batch.kinds
    sink_masks = torch.stack([kinds == code for code in _SINK_CODES]).float()  # (K, B, T)
    sink_any, other = sink_masks.sum(0), (kinds == OTHER).float()
    states = [t.hidden for t in traces] + [traces[-1].output]
    profiles = [outlier_profile(h, real, multiple) for h in states]
    tokens = torch.arange(real.shape[1], device=real.device)
    peaks = [(tokens == p["peak_token"][:, None]).float() for p in profiles]  # (B, T) per hidden state
    per_layer: dict[str, list[torch.Tensor]] = {}
    for layer, t in enumerate(traces):
        p = t.probs.float()  # (B, H, T, T)
        vectors = head_vectors(loaded, layer, t.values).float()  # (B, H, T, E)
        weighted = p * vectors.norm(dim=-1)[:, :, None, :]  # alpha_ij ||f_h(x_j)||
        on_kind = torch.einsum("bhij,kbj->kbhi", p, sink_masks)  # (K, B, H, T)
        weighted_on_kind = torch.einsum("bhij,kbj->kbhi", weighted, sink_masks)
        total_weighted = weighted.sum(-1)  # (B, H, T)
        layer_rows = (total_weighted.sum(1) * real).sum(-1)  # (B,) the layer's norm-weighted attention
        entry = {
            "mass": _row_mean(on_kind, real),
            "norm_share": _row_mean(weighted_on_kind / total_weighted.clamp_min(torch.finfo(p.dtype).tiny), real),
            "layer_norm_share": (weighted_on_kind.sum(2) * real).sum(-1) / layer_rows,
            "sink_norm": _ratio_of_sums((weighted * sink_any[:, None, None, :]).sum(-1), on_kind.sum(0), real),
            "other_norm": _ratio_of_sums(
                (weighted * other[:, None, None, :]).sum(-1), (p * other[:, None, None, :]).sum(-1), real
            ),
            # W_O^h is linear: sum_j alpha_ij W_O^h v_j = W_O^h (sum_j alpha_ij v_j), the mix in d, not E, dimensions
            "update": _row_mean(head_vectors(loaded, layer, p @ t.values.float()).norm(dim=-1), real),
            "peak_mass": _row_mean((p * peaks[layer][:, None, None, :]).sum(-1), real),
        }
        for name, value in entry.items():
            per_layer.setdefault(name, []).append(value)
    codes = kinds.clamp_min(0)
    by_kind = torch.stack(
        [
            torch.stack([(p["outliers"].sum(-1) * ((codes == k) & real)).sum(1) for k in range(len(KINDS))], 1)
            for p in profiles
        ],
        1,
    )  # (B, L + 1, 4)
    arrays = {
        # (K, B, H) per layer -> (B, K, L, H); (B, H) -> (B, L, H); (K, B) -> (B, K, L); (B,) -> (B, L)
        "mass": torch.stack(per_layer["mass"], 2).permute(1, 0, 2, 3),
        "norm_share": torch.stack(per_layer["norm_share"], 2).permute(1, 0, 2, 3),
        "layer_norm_share": torch.stack(per_layer["layer_norm_share"], 2).permute(1, 0, 2),
        **{name: torch.stack(per_layer[name], 1) for name in ("sink_norm", "other_norm", "update", "peak_mass")},
        **{name: torch.stack([p[name] for p in profiles], 1) for name in ("ratio", "inf_norm", "kurtosis", "peak_dim")},
        "peak_kind": torch.stack([kinds.gather(1, p["peak_token"][:, None])[:, 0] for p in profiles], 1),
        "outliers_by_kind": by_kind,
        "tokens_by_kind": torch.stack([((codes == k) & real).sum(1) for k in range(len(KINDS))], 1),
    }
    dims = torch.stack([p["outliers"].sum((0, 1)) for p in profiles])  # (L + 1, E)
    return {k: v.detach().double().cpu().numpy() for k, v in arrays.items()}, dims.cpu().numpy()


@torch.no_grad()
def sink_statistics(
    loaded: LoadedModel,
    items: Iterable,
    *,
    multiple: float = OUTLIER_MULTIPLE,
    batch_size: int = 8,
    max_tokens: int | None = 128,
    progress: bool = False,
) -> SinkStatistics:
    """Measure every head's sinks, its value norms and the hidden states' outliers on ``items``.

    One traced forward pass per batch (:func:`~bertology_utils.interventions.mixing.base.trace`), vectorised over
    sentences, heads and tokens.

    :param loaded: the model (an architecture the traced decomposition supports; ALBERT's shared layers are not).
    :param items: sentences or sentence pairs.
    :param multiple: an activation above ``multiple`` times its sentence's median magnitude is an outlier.
    :param batch_size: sentences per forward pass.
    :param max_tokens: longer sentences are skipped and counted.
    :param progress: a progress bar.
    :returns: the per-sentence measures; BertologyError when no sentence is short enough.
    """
    if not multiple > 1:
        raise ValueError(f"multiple must exceed 1 (a multiple of the median magnitude), not {multiple}")
    batches, skipped = token_batches(loaded, items, batch_size=batch_size, max_tokens=max_tokens)
    if not batches:
        raise BertologyError(f"no sentence to measure ({len(skipped)} skipped as longer than {max_tokens} tokens)")
    parts: dict[str, list[np.ndarray]] = {}
    dims: list[np.ndarray] = []
    indices: list[int] = []
    with evaluating(loaded.model):
        for batch in tqdm(batches, desc="sinks", unit="batch", disable=not progress):
            arrays, batch_dims = _batch_statistics(loaded, batch, multiple)
            dims.append(batch_dims)
            indices += [item.index for item in batch.items]
            for name, value in arrays.items():
                parts.setdefault(name, []).append(value)
    order = np.argsort(indices, kind="stable")  # corpus order, whatever the batching
    joined = {name: np.concatenate(chunks)[order] for name, chunks in parts.items()}
    for name in ("peak_kind", "peak_dim", "outliers_by_kind", "tokens_by_kind"):
        joined[name] = joined[name].astype(np.int64)
    return SinkStatistics(
        model=loaded.name,
        num_layers=loaded.num_layers,
        num_heads=loaded.num_heads,
        multiple=float(multiple),
        items=np.asarray(indices)[order],
        outlier_dims=np.sum(dims, axis=0),
        n_skipped=len(skipped),
        **joined,  # the per-sentence arrays, by field name
    )
