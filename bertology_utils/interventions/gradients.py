"""Is [SEP] a no-op? Gradients of a loss with respect to attention.

Clark et al. (2019, `What Does BERT Look At? <https://arxiv.org/abs/1906.04341>`_, Figure 3) measured, per layer,
how much attention goes to [SEP] and how large the gradient of BERT's masked-LM loss with respect to that attention
is; from layer 5 on, attention to [SEP] is high and its gradient small, so they read [SEP] as a "no-op". This
module measures the same for any encoder and any differentiable objective;
:mod:`~bertology_utils.interventions.ablations` tests the reading directly by moving the attention away.

Gradients (:func:`attention_gradients`)
    One forward and one backward pass per batch give d(loss)/d(attention) for every weight
    of every head: :func:`bertology_utils.interventions.editing.capture_attention` keeps the
    probabilities each layer multiplies with its values, and ``torch.autograd.grad`` takes the
    gradient with respect to all of them at once (no parameter gradients are computed). The
    gradient is that of the weight itself, other weights held fixed, as in Clark et al.

Statistics, per layer and head, over every real token of every item (attending rows of
[CLS] and [SEP] included, as Clark's averages over tokens do; padding excluded):

* ``attention[kind]``: the mean share of a row's attention that goes to tokens of that kind;
* ``gradient[kind]``: the mean of |d loss / d alpha_ij| over the attention weights alpha_ij
  whose attended token j is of that kind (a mean *per weight*, so kinds with few tokens,
  like [SEP], are not penalised for being rare);
* :meth:`GradientStats.normalised_gradient`: the same divided by the mean |gradient| over
  *all* attention weights of the model, so 1 is an average attention weight. Clark's Figure 3
  plots the raw per-weight mean magnitude (the loss's own units); dividing by one constant
  per model and objective keeps the curves' shape while making models and objectives (whose
  losses have different scales) comparable. This is the normalisation used for figures and
  claims (:mod:`bertology_utils.papers.clark`); raw values are kept;
* ``logit_gradient[kind]`` (beyond the paper): the mean |d loss / d s_ij| for the pre-softmax
  score s_ij, i.e. alpha_ij (g_ij - sum_k alpha_ik g_ik). Unlike the raw gradient it only sees
  changes that keep each row a distribution, and it is small where attention is small;
* ``gradient_norm``: per layer, the Frobenius norm of d loss / d attention over all heads of
  the layer, averaged over items (Clark's "gradients shrink with depth").

Each item's own sums are kept too (``GradientStats.per_item``), so that :meth:`GradientStats.bootstrap` can
resample the items: the claims' intervals (:mod:`bertology_utils.papers.clark`) are over them.

Token kinds, batches and objectives: :mod:`bertology_utils.interventions.objectives`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from bertology_utils.core.architectures import check_architecture
from bertology_utils.core.errors import BertologyError
from bertology_utils.core.models import evaluating
from bertology_utils.core.typing import AllAttentionMaps, HeadMatrix, ItemValues, LayerValues
from bertology_utils.core.uncertainty import Draws, bootstrap_weights
from bertology_utils.interventions.editing import capture_attention, edit_attention
from bertology_utils.interventions.objectives import (
    DEFAULT_MAX_TOKENS,
    KIND_COLORS,
    KIND_LABELS,
    KINDS,
    SEP,
    Objective,
    ObjectiveOutput,
    TokenBatch,
    token_batches,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "GradientStats",
    "attention_gradients",
    "batch_attention_gradients",
    "plot_attention_and_gradients",
    "plot_gradient_norms",
]


# --------------------------------------------------------------------------- gradients


@dataclass
class GradientStats:
    """What :func:`attention_gradients` measured: attention shares and d(loss)/d(attention) per head and kind.

    Clark et al. 2019's Figure 3 (`What Does BERT Look At? <https://arxiv.org/abs/1906.04341>`_) from these numbers:
    per kind of attended token (:data:`~bertology_utils.interventions.objectives.KINDS`), arrays ``(L, H)`` unless
    said otherwise.
    """

    model: str
    objective: str
    n_items: int
    n_skipped: int
    n_tokens: int
    mean_loss: float
    attention: dict  #: kind -> mean share of attention to that kind
    gradient: dict  #: kind -> mean |d loss / d alpha| per attention weight to that kind
    logit_gradient: dict  #: kind -> mean |d loss / d score| per weight to that kind
    weights_per_kind: dict  #: kind -> how many attention weights were averaged
    overall_gradient: float  #: mean |d loss / d alpha| over all attention weights (the normalisation)
    gradient_norm: LayerValues  #: (L,) mean over items of the layer's Frobenius norm
    head_gradient_norm: HeadMatrix  #: (L, H) the same per head
    #: Each item's sums, what :meth:`bootstrap` resamples: ``"gradient"`` (N, L, kinds) |d loss / d alpha|
    #: summed over the layer's heads and the weights to each kind; ``"weights"`` (N, kinds) how many weights
    #: to each kind one head has; ``"norm"`` (N, L) the layer's Frobenius norm; ``"pair"`` (N,) whether
    #: the item holds two segments (two [SEP]s).
    per_item: dict = field(default_factory=dict, repr=False)

    @property
    def num_layers(self) -> int:
        """How many layers were measured (L)."""
        return self.gradient_norm.shape[0]

    def bootstrap(self, n_resamples: int = 2000, seed: int = 0, level: float = 0.95) -> Draws:
        """Bootstrap draws over the items (sentences, or sentence pairs), each resampled whole with its weights: per
        draw, :meth:`gradient_ratio` of each kind (``"gradient_ratio:<kind>"``, (L,)) and ``gradient_norm``
        ((L,)) of ``n_items`` items drawn with replacement, the ratio's sums and weight counts drawn together.
        Seeded; every draw NaN with fewer than 3 items. ValueError without the per-item sums.

        :param n_resamples: how many bootstrap draws.
        :param seed: the draws' seed.
        :param level: the intervals' confidence level the draws carry.
        :returns: the draws, ``(n_resamples, L)`` per name, described by the items resampled.
        """
        if not self.per_item:
            raise ValueError(
                "these statistics keep no per-item sums to resample: compute them with attention_gradients"
            )
        gradient = np.asarray(self.per_item["gradient"], dtype=np.float64)
        n, layers, kinds = gradient.shape
        weights = bootstrap_weights(n, n_resamples, seed) if n else np.zeros((n_resamples, 0))
        drawn = (weights @ gradient.reshape(n, layers * kinds)).reshape(n_resamples, layers, kinds)
        counts = weights @ np.asarray(self.per_item["weights"], dtype=np.float64)  # (draws, kinds)
        with np.errstate(invalid="ignore", divide="ignore"):
            per_weight = drawn / np.where(counts > 0, counts, np.nan)[:, None, :]  # (draws, layers, kinds)
            other = per_weight[..., KINDS.index("other")]
            values = {
                f"gradient_ratio:{kind}": per_weight[..., i] / np.where(other > 0, other, np.nan)
                for i, kind in enumerate(KINDS)
            }
        values["gradient_norm"] = weights @ np.asarray(self.per_item["norm"], dtype=np.float64) / max(n, 1)
        if n < 3:  # too few items to resample: no draws
            values = {name: np.full_like(drawn_values, np.nan) for name, drawn_values in values.items()}
        pairs = np.asarray(self.per_item.get("pair", np.zeros(n, dtype=bool)), dtype=bool)
        what = "sentence pairs" if n and pairs.all() else "sentences" if not pairs.any() else "items"
        return Draws(values, f"{n} {what}", level)

    def normalised_gradient(self, kind: str) -> HeadMatrix:
        """``gradient[kind]`` divided by the mean |gradient| over all attention weights of the model.

        :param kind: a kind of attended token (``sep``, ``cls``, ``punct``, ``other``).
        :returns: ``(L, H)``, 1 where a weight's gradient is the model's average (NaN when that average is 0).
        """
        if self.overall_gradient > 0:
            return self.gradient[kind] / self.overall_gradient
        return self.gradient[kind] * np.nan

    def layer_table(self) -> pd.DataFrame:
        """One row per layer (from 1) and kind: head means of attention share and gradients.

        :returns: columns ``layer``, ``kind``, ``attention``, ``gradient``, ``normalised_gradient``,
            ``logit_gradient``.
        """
        rows = []
        for kind in KINDS:
            for layer in range(self.num_layers):
                rows.append(
                    {
                        "layer": layer + 1,
                        "kind": kind,
                        "attention": float(np.nanmean(self.attention[kind][layer])),
                        "gradient": float(np.nanmean(self.gradient[kind][layer])),
                        "normalised_gradient": float(np.nanmean(self.normalised_gradient(kind)[layer])),
                        "logit_gradient": float(np.nanmean(self.logit_gradient[kind][layer])),
                    }
                )
        return pd.DataFrame(rows)

    def head_table(self) -> pd.DataFrame:
        """One row per layer, head (both from 1) and kind, with the per-head values (Figure 3's dots).

        :returns: the columns of :meth:`layer_table`, and ``head``.
        """
        layers, heads = self.gradient_norm.shape[0], self.head_gradient_norm.shape[1]
        layer_index, head_index = np.meshgrid(np.arange(1, layers + 1), np.arange(1, heads + 1), indexing="ij")
        frames = [
            pd.DataFrame(
                {
                    "layer": layer_index.ravel(),
                    "head": head_index.ravel(),
                    "kind": kind,
                    "attention": self.attention[kind].ravel(),
                    "gradient": self.gradient[kind].ravel(),
                    "normalised_gradient": self.normalised_gradient(kind).ravel(),
                    "logit_gradient": self.logit_gradient[kind].ravel(),
                }
            )
            for kind in KINDS
        ]
        return pd.concat(frames, ignore_index=True)

    def gradient_ratio(self, kind: str = "sep") -> LayerValues:
        """Per layer: mean gradient for attention to ``kind`` over that to ordinary ("other") tokens.

        :param kind: a kind of attended token.
        :returns: ``(L,)``; below 1 where attention to ``kind`` matters less than to ordinary tokens (Clark's no-op).
        """
        other = np.nanmean(self.gradient["other"], axis=1)
        return np.nanmean(self.gradient[kind], axis=1) / np.where(other > 0, other, np.nan)

    def sep_gradient_ratio(self) -> LayerValues:
        """:meth:`gradient_ratio` for [SEP].

        :returns: ``(L,)``.
        """
        return self.gradient_ratio("sep")

    def head_metrics(self, prefix: str, objective: str) -> dict:
        """Per head, (L, H), under ``{prefix}.head.{objective}.``: ``attention_to_<kind>`` and
        ``normalised_gradient_<kind>`` for each of :data:`KINDS`, and ``gradient_norm``.

        :param prefix: the metric names' prefix (a notebook's).
        :param objective: the objective's key (:attr:`~bertology_utils.interventions.objectives.Objective.key`).
        :returns: metric name -> ``(L, H)`` array.
        """
        key = f"{prefix}.head.{objective}"
        out = {f"{key}.attention_to_{kind}": self.attention[kind] for kind in KINDS}
        out |= {f"{key}.normalised_gradient_{kind}": self.normalised_gradient(kind) for kind in KINDS}
        return out | {f"{key}.gradient_norm": self.head_gradient_norm}

    def metrics(self, prefix: str) -> dict:
        """Per layer, the attention to [SEP] and [CLS] and their gradient ratios; the gradient norm, loss, items.

        :param prefix: the metric names' prefix.
        :returns: metric name -> ``(L,)`` array or a number.
        """
        out = {
            f"{prefix}.attention_to_{kind}_by_layer": np.nanmean(self.attention[kind], axis=1)
            for kind in ("sep", "cls")
        }
        out |= {f"{prefix}.{kind}_gradient_ratio_by_layer": self.gradient_ratio(kind) for kind in ("sep", "cls")}
        return out | {
            f"{prefix}.gradient_norm_by_layer": self.gradient_norm,
            f"{prefix}.mean_loss": self.mean_loss,
            f"{prefix}.n_items": self.n_items,
        }


class _Totals:
    """Running sums of the statistics, vectorized over items, layers, heads and tokens, kept on the device until
    :meth:`read`: a read per batch would wait for a GPU at every batch."""

    #: What :attr:`sums` holds, in order.
    NAMES = ("share", "gradient", "logit", "norm", "head_norm", "weights", "tokens", "loss")

    def __init__(self) -> None:
        #: Summed over batches, float64: share, gradient and logit gradient (L, H, kinds), norm (L,), head norm
        #: (L, H), weights (kinds,), real tokens and loss (scalars); empty before the first batch.
        self.sums: list[torch.Tensor] = []
        self.items = 0
        self.per_item: dict[str, list[torch.Tensor]] = {"gradient": [], "weights": [], "norm": [], "pair": []}

    def add(self, probs: AllAttentionMaps, grads: AllAttentionMaps, batch: TokenBatch, losses: ItemValues) -> None:
        # probs, grads: (B, L, H, T, T) float
        real = batch.real.to(probs.dtype)  # (B, T)
        onehot = F.one_hot(batch.kinds.clamp_min(0), len(KINDS)).to(probs.dtype) * real[..., None]  # (B, K, 4)
        pair = real[:, None, None, :, None] * real[:, None, None, None, :]  # real query x real key
        grads = grads * pair
        share = torch.einsum("blhqk,bkc,bq->lhc", probs, onehot, real)
        item_grad = torch.einsum("blhqk,bkc,bq->blhc", grads.abs(), onehot, real)  # each item's own sums
        logit_grads = probs * (grads - (probs * grads).sum(-1, keepdim=True))
        logit = torch.einsum("blhqk,bkc,bq->lhc", logit_grads.abs(), onehot, real)
        head_norm = grads.pow(2).sum((-1, -2)).sqrt()  # (B, L, H)
        norm = grads.pow(2).sum((-1, -2, -3)).sqrt()  # (B, L)
        item_weights = torch.einsum("bq,bkc->bc", real, onehot)
        values = [share, item_grad.sum(0), logit, norm.sum(0), head_norm.sum(0), item_weights.sum(0), real.sum()]
        values = [v.double() for v in values] + [losses.detach().double().sum()]
        pair = ((batch.kinds == SEP) & batch.real.bool()).sum(-1) >= 2
        for name, per_item in (
            ("gradient", item_grad.sum(2)),
            ("weights", item_weights),
            ("norm", norm),
            ("pair", pair),
        ):
            self.per_item[name].append(per_item.detach())
        if not self.sums:
            self.sums = values
        else:
            for total, value in zip(self.sums, values):
                total += value
        self.items += len(batch.items)

    def read(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """The sums by name (:attr:`NAMES`), and each item's own sums, in batch order, read from the device."""
        sums = {name: total.cpu().numpy() for name, total in zip(self.NAMES, self.sums)}
        per_item = {
            name: torch.cat(chunks).cpu().numpy().astype(bool if name == "pair" else np.float64)
            for name, chunks in self.per_item.items()
        }
        return sums, per_item


def batch_attention_gradients(
    objective: Objective, batch: TokenBatch
) -> tuple[AllAttentionMaps, AllAttentionMaps, ObjectiveOutput]:
    """(probs, grads, output) for a prepared batch: one forward and one backward pass for all heads.

    ``probs`` and ``grads`` have shape ``(B, L, H, T, T)``: the probabilities each layer
    multiplied with its values, and d(sum of the items' losses)/d(probs). Each item's loss
    depends only on its own row of the batch, so ``grads[b]`` is the gradient of item b's loss.

    :param objective: the loss to differentiate.
    :param batch: a batch already prepared by ``objective``
        (:meth:`~bertology_utils.interventions.objectives.Objective.prepare`).
    :returns: the probabilities (detached), their gradients (zeros where none flowed), and the objective's output.
    """
    model = objective.loaded.model
    with capture_attention(model, retain_grad=False) as captured:
        with torch.enable_grad():
            output = objective.forward(batch)
            probs = list(captured.probs)
            if any(p is None for p in probs):
                raise BertologyError(f"{objective.loaded.name}: some layers did not report attention probabilities")
            grads = torch.autograd.grad(output.losses.sum(), probs, allow_unused=True)
    filled = [torch.zeros_like(p) if g is None else g for p, g in zip(probs, grads)]
    return torch.stack([p.detach() for p in probs], 1), torch.stack(filled, 1), output


def _head_gradient(objective: Objective, batch: TokenBatch, layer: int, head: int) -> torch.Tensor:
    """d(loss)/d(attention) of one head (layer and head from 0) by a forward and backward pass of its own.

    The slow way, one pass per head: for checks, and for the benchmark against the one-pass
    :func:`attention_gradients`. ``batch`` must already be prepared by the objective.
    Returns (B, T, T).
    """
    model = objective.loaded.model
    shape = tuple(batch.input_ids.shape) + (batch.input_ids.shape[1],)
    delta = torch.zeros(shape, device=batch.input_ids.device, requires_grad=True)

    def add_delta(at_layer: int, probs: torch.Tensor) -> torch.Tensor | None:
        if at_layer != layer:
            return None
        one_head = torch.zeros(probs.shape[1], dtype=probs.dtype, device=probs.device)
        one_head[head] = 1
        return probs + delta.to(probs.dtype)[:, None] * one_head[None, :, None, None]

    with edit_attention(model, add_delta), torch.enable_grad():
        output = objective.forward(batch)
        (grad,) = torch.autograd.grad(output.losses.sum(), [delta])
    return grad


def attention_gradients(
    items: Iterable,
    objective: Objective,
    *,
    batch_size: int = 8,
    max_tokens: int | None = DEFAULT_MAX_TOKENS,
    progress: bool = True,
) -> GradientStats:
    """Attention shares and d(loss)/d(attention) statistics per layer and head (see the module docs).

    One forward and one backward pass per batch cover every head. Items longer than
    ``max_tokens`` are skipped (counted in ``n_skipped``). The model stays in eval mode
    (no dropout), so the probabilities are exactly those multiplied with the values.

    :param items: sentences or sentence pairs (anything :meth:`~bertology_utils.data.Corpus.of` takes).
    :param objective: the loss whose gradient is taken (masked LM, a classifier's, masked embedding).
    :param batch_size: items per pass.
    :param max_tokens: longer items are skipped (None: what the model takes).
    :param progress: show a progress bar.
    :returns: the statistics, each item's sums kept for :meth:`GradientStats.bootstrap`; BertologyError when no
        item is short enough.
    """
    loaded = objective.loaded
    check_architecture(loaded.model)  # fail early, with a clear message, on an unsupported architecture
    batches, skipped = token_batches(loaded, items, batch_size=batch_size, max_tokens=max_tokens)
    if not batches:
        raise BertologyError(f"no items to measure ({len(skipped)} skipped as longer than {max_tokens} tokens)")
    with evaluating(loaded.model):
        totals = _Totals()
        for batch in tqdm(batches, desc="gradients", unit="batch", disable=not progress):
            batch = objective.prepare(batch)
            probs, grads, output = batch_attention_gradients(objective, batch)
            totals.add(probs.float(), grads.float(), batch, output.losses)
    sums, per_item = totals.read()
    weights = np.where(sums["weights"] > 0, sums["weights"], np.nan)
    share = sums["share"] / sums["tokens"]
    grad, logit = sums["gradient"] / weights, sums["logit"] / weights
    overall = float(sums["gradient"].sum() / (sums["weights"].sum() * grad.shape[0] * grad.shape[1]))
    return GradientStats(
        model=loaded.name,
        objective=objective.name,
        n_items=totals.items,
        n_skipped=len(skipped),
        n_tokens=int(sums["tokens"]),
        mean_loss=float(sums["loss"]) / max(totals.items, 1),
        attention={k: share[..., i] for i, k in enumerate(KINDS)},
        gradient={k: grad[..., i] for i, k in enumerate(KINDS)},
        logit_gradient={k: logit[..., i] for i, k in enumerate(KINDS)},
        weights_per_kind={k: int(sums["weights"][i]) for i, k in enumerate(KINDS)},
        overall_gradient=overall,
        gradient_norm=sums["norm"] / totals.items,
        head_gradient_norm=sums["head_norm"] / totals.items,
        per_item=per_item,
    )


# --------------------------------------------------------------------------- figures


def plot_attention_and_gradients(
    stats: dict[str, GradientStats], kinds: Sequence[str] = KINDS, value: str = "normalised_gradient"
) -> Figure:
    """Clark et al.'s Figure 3 layout, one row per objective: attention per layer next to its gradient.

    Left: the mean share of attention each head (dot) puts on each kind, lines joining the
    layer means. Right: the mean |d loss / d attention| per weight to that kind (``value``:
    "normalised_gradient", 1 = the mean over all attention weights; or "gradient",
    "logit_gradient").

    :param stats: a row's label -> its statistics (:func:`attention_gradients`).
    :param kinds: the kinds of attended token drawn.
    :param value: the gradient column drawn on the right.
    :returns: the figure.
    """
    import matplotlib.pyplot as plt

    labels = {
        "normalised_gradient": "avg. |dL/d attention|\n(1 = mean over all weights)",
        "gradient": "avg. |dL/d attention|",
        "logit_gradient": "avg. |dL/d score|",
    }
    fig, axes = plt.subplots(len(stats), 2, figsize=(11, 3.3 * len(stats)), squeeze=False)
    jitter = np.random.default_rng(0)
    for row, (label, s) in enumerate(stats.items()):
        table = s.head_table()
        for col, (column, ylabel) in enumerate((("attention", "avg. attention"), (value, labels[value]))):
            ax = axes[row, col]
            for kind in kinds:
                part = table[table.kind == kind]
                ax.scatter(
                    part.layer + jitter.uniform(-0.12, 0.12, len(part)),
                    part[column],
                    s=9,
                    alpha=0.3,
                    color=KIND_COLORS[kind],
                    linewidths=0,
                )
                means = part.groupby("layer")[column].mean()
                ax.plot(means.index, means.values, marker="o", color=KIND_COLORS[kind], label=KIND_LABELS[kind])
            ax.set(xticks=range(1, s.num_layers + 1), xlabel="layer", ylabel=ylabel)
            if column == "attention":
                ax.set_ylim(0, 1)
            ax.set_title(f"{'attention' if col == 0 else 'gradient'} — {label}", fontsize=10)
        axes[row, 0].legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    return fig


def plot_gradient_norms(stats: dict[str, GradientStats], ax: Axes | None = None) -> Axes:
    """Per objective, the layer's gradient norm relative to layer 1 (log scale): Clark's "gradients shrink with depth".

    :param stats: a line's label -> its statistics (:func:`attention_gradients`).
    :param ax: where to draw (None: a new figure).
    :returns: the axes drawn on.
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    for label, s in stats.items():
        layers = np.arange(1, s.num_layers + 1)
        ax.plot(layers, s.gradient_norm / s.gradient_norm[0], marker="o", label=label)
    ax.axhline(1, color="grey", linewidth=0.8, linestyle=":")
    ax.set(
        yscale="log",
        xlabel="layer",
        ylabel="||dL/d attention|| / layer 1",
        title="Gradient norm by layer (all heads, mean over items)",
    )
    ax.set_xticks(np.arange(1, max(s.num_layers for s in stats.values()) + 1))
    ax.legend(fontsize=8)
    return ax
