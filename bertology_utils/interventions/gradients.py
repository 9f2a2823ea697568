"""Is [SEP] a no-op? Gradients of a loss with respect to attention, and attention ablations.

Clark et al. (2019, Figure 3) measured, per layer, how much attention goes to [SEP] and how
large the gradient of BERT's masked-LM loss with respect to that attention is; from layer 5
on, attention to [SEP] is high and its gradient small, so they read [SEP] as a "no-op". This
module measures the same for any encoder and any differentiable objective, and then tests the
reading directly by moving the attention away (:func:`ablation_curves`).

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

Ablations (:func:`ablation_curves`)
    Layer by layer, the attention every head puts on [SEP] (or [CLS]) is taken away — dropped
    (``zero``: the head loses those tokens' value vectors) or moved to the other tokens in
    proportion (``renormalise``: as if [SEP] were masked out) — and the change of the final
    hidden states, of the objective's prediction and of its loss is measured against the
    control: the same mass, row by row, taken off one random non-special token of the item
    (see :func:`bertology_utils.interventions.editing.move_matched_mass`).
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from bertology_utils.core.architectures import check_architecture, self_attention_modules, shares_layers
from bertology_utils.core.errors import BertologyError
from bertology_utils.core.models import evaluating
from bertology_utils.core.uncertainty import Draws, bootstrap_weights
from bertology_utils.data import Corpus
from bertology_utils.interventions.editing import (
    REMOVAL_MODES,
    ablate_matched_random,
    ablate_tokens,
    capture_attention,
    edit_attention,
    negative_share,
    record_layer_outputs,
    replay_layers_below,
)
from bertology_utils.interventions.objectives import (
    CLS,
    DEFAULT_MAX_TOKENS,
    KINDS,
    OTHER,
    PUNCT,
    SEP,
    ClassifierObjective,
    MaskedEmbeddingObjective,
    MaskedLMObjective,
    Objective,
    ObjectiveOutput,
    TokenBatch,
    has_mlm_head,
    make_batch,
    mask_token_id,
    token_batches,
    token_kinds,
)
from bertology_utils.interventions.results_cache import cached_results

__all__ = [
    "KINDS",
    "SEP",
    "CLS",
    "PUNCT",
    "OTHER",
    "token_kinds",
    "TokenBatch",
    "make_batch",
    "token_batches",
    "mask_token_id",
    "Objective",
    "ObjectiveOutput",
    "MaskedLMObjective",
    "ClassifierObjective",
    "MaskedEmbeddingObjective",
    "has_mlm_head",
    "GradientStats",
    "attention_gradients",
    "batch_attention_gradients",
    "ablation_curves",
    "ablation_summary",
    "ITEM_MEASURES",
    "plot_attention_and_gradients",
    "plot_gradient_norms",
    "plot_ablation_curves",
]

#: The measures :func:`ablation_curves` keeps each item's value of (``<measure>_items``), for intervals over items.
ITEM_MEASURES = ("hidden_change", "output_change", "loss_change")

_KIND_LABELS = {"sep": "[SEP]", "cls": "[CLS]", "punct": "punctuation", "other": "other tokens"}
_KIND_COLORS = {"sep": "tab:red", "cls": "tab:blue", "punct": "tab:green", "other": "tab:grey"}


# --------------------------------------------------------------------------- gradients


@dataclass
class GradientStats:
    """What :func:`attention_gradients` measured; arrays are (layers, heads) unless said otherwise."""

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
    gradient_norm: np.ndarray  #: (layers,) mean over items of the layer's Frobenius norm
    head_gradient_norm: np.ndarray  #: (layers, heads) the same per head
    #: Each item's sums, what :meth:`bootstrap` resamples: ``"gradient"`` (items, layers, kinds) |d loss / d alpha|
    #: summed over the layer's heads and the weights to each kind; ``"weights"`` (items, kinds) how many weights
    #: to each kind one head has; ``"norm"`` (items, layers) the layer's Frobenius norm; ``"pair"`` (items,) whether
    #: the item holds two segments (two [SEP]s).
    per_item: dict = field(default_factory=dict, repr=False)

    @property
    def num_layers(self) -> int:
        return self.gradient_norm.shape[0]

    def bootstrap(self, n_resamples: int = 2000, seed: int = 0, level: float = 0.95) -> Draws:
        """Bootstrap draws over the items (sentences, or sentence pairs), each resampled whole with its weights: per
        draw, :meth:`gradient_ratio` of each kind (``"gradient_ratio:<kind>"``, (layers,)) and ``gradient_norm``
        ((layers,)) of ``n_items`` items drawn with replacement, the ratio's sums and weight counts drawn together.
        Seeded; every draw NaN with fewer than 3 items. ValueError without the per-item sums."""
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

    def normalised_gradient(self, kind: str) -> np.ndarray:
        """``gradient[kind]`` divided by the mean |gradient| over all attention weights of the model."""
        if self.overall_gradient > 0:
            return self.gradient[kind] / self.overall_gradient
        return self.gradient[kind] * np.nan

    def layer_table(self) -> pd.DataFrame:
        """One row per layer (from 1) and kind: head means of attention share and gradients."""
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
        """One row per layer, head (both from 1) and kind, with the per-head values (Figure 3's dots)."""
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

    def gradient_ratio(self, kind: str = "sep") -> np.ndarray:
        """(layers,) per layer: mean gradient for attention to ``kind`` over that to ordinary ("other") tokens."""
        other = np.nanmean(self.gradient["other"], axis=1)
        return np.nanmean(self.gradient[kind], axis=1) / np.where(other > 0, other, np.nan)

    def sep_gradient_ratio(self) -> np.ndarray:
        """:meth:`gradient_ratio` for [SEP]."""
        return self.gradient_ratio("sep")

    def head_metrics(self, prefix: str, objective: str) -> dict:
        """Per head, (layers, heads), under ``{prefix}.head.{objective}.``: ``attention_to_<kind>`` and
        ``normalised_gradient_<kind>`` for each of :data:`KINDS`, and ``gradient_norm``."""
        key = f"{prefix}.head.{objective}"
        out = {f"{key}.attention_to_{kind}": self.attention[kind] for kind in KINDS}
        out |= {f"{key}.normalised_gradient_{kind}": self.normalised_gradient(kind) for kind in KINDS}
        return out | {f"{key}.gradient_norm": self.head_gradient_norm}

    def metrics(self, prefix: str) -> dict:
        """Per layer, the attention to [SEP] and [CLS] and their gradient ratios; the gradient norm, loss, items."""
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
    """Running sums of the statistics, vectorized over items, layers, heads and tokens."""

    def __init__(self):
        self.share = self.grad = self.logit = self.norm = self.head_norm = None
        self.rows = 0.0
        self.weights = np.zeros(len(KINDS))
        self.items = 0
        self.loss = 0.0
        self.tokens = 0
        self.per_item: dict[str, list] = {"gradient": [], "weights": [], "norm": [], "pair": []}

    def add(self, probs: torch.Tensor, grads: torch.Tensor, batch: TokenBatch, losses: torch.Tensor) -> None:
        # probs, grads: (B, L, H, Q, K) float
        real = batch.real.to(probs.dtype)  # (B, T)
        onehot = F.one_hot(batch.kinds.clamp_min(0), len(KINDS)).to(probs.dtype) * real[..., None]  # (B, K, 4)
        pair = real[:, None, None, :, None] * real[:, None, None, None, :]  # real query x real key
        grads = grads * pair
        share = torch.einsum("blhqk,bkc,bq->lhc", probs, onehot, real)
        item_grad = torch.einsum("blhqk,bkc,bq->blhc", grads.abs(), onehot, real)  # each item's own sums
        grad = item_grad.sum(0)
        logit_grads = probs * (grads - (probs * grads).sum(-1, keepdim=True))
        logit = torch.einsum("blhqk,bkc,bq->lhc", logit_grads.abs(), onehot, real)
        head_norm = grads.pow(2).sum((-1, -2)).sqrt()  # (B, L, H)
        norm = grads.pow(2).sum((-1, -2, -3)).sqrt()  # (B, L)
        item_weights = torch.einsum("bq,bkc->bc", real, onehot)
        weights = item_weights.sum(0)
        values = [v.double().cpu().numpy() for v in (share, grad, logit, norm.sum(0), head_norm.sum(0))]
        pair = ((batch.kinds == SEP) & batch.real.bool()).sum(-1) >= 2
        for name, per_item in (
            ("gradient", item_grad.sum(2)),
            ("weights", item_weights),
            ("norm", norm),
            ("pair", pair),
        ):
            self.per_item[name].append(per_item.detach().cpu().numpy())
        if self.share is None:
            self.share, self.grad, self.logit, self.norm, self.head_norm = values
        else:
            for total, value in zip((self.share, self.grad, self.logit, self.norm, self.head_norm), values):
                total += value
        self.rows += float(real.sum())
        self.weights += weights.double().cpu().numpy()
        self.items += len(batch.items)
        self.loss += float(losses.detach().double().sum())
        self.tokens += int(real.sum())


def batch_attention_gradients(objective: Objective, batch: TokenBatch):
    """(probs, grads, output) for a prepared batch: one forward and one backward pass for all heads.

    ``probs`` and ``grads`` have shape (B, layers, heads, T, T): the probabilities each layer
    multiplied with its values, and d(sum of the items' losses)/d(probs). Each item's loss
    depends only on its own row of the batch, so ``grads[b]`` is the gradient of item b's loss.
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

    def add_delta(at_layer: int, probs: torch.Tensor):
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
    weights = np.where(totals.weights > 0, totals.weights, np.nan)
    share = totals.share / totals.rows
    grad, logit = totals.grad / weights, totals.logit / weights
    overall = float(totals.grad.sum() / (totals.weights.sum() * grad.shape[0] * grad.shape[1]))
    return GradientStats(
        model=loaded.name,
        objective=objective.name,
        n_items=totals.items,
        n_skipped=len(skipped),
        n_tokens=totals.tokens,
        mean_loss=totals.loss / max(totals.items, 1),
        attention={k: share[..., i] for i, k in enumerate(KINDS)},
        gradient={k: grad[..., i] for i, k in enumerate(KINDS)},
        logit_gradient={k: logit[..., i] for i, k in enumerate(KINDS)},
        weights_per_kind={k: int(totals.weights[i]) for i, k in enumerate(KINDS)},
        overall_gradient=overall,
        gradient_norm=totals.norm / totals.items,
        head_gradient_norm=totals.head_norm / totals.items,
        per_item={
            name: np.concatenate(chunks).astype(bool if name == "pair" else np.float64)
            for name, chunks in totals.per_item.items()
        },
    )


# --------------------------------------------------------------------------- ablations


def _random_tokens(batch: TokenBatch, seed: int) -> torch.Tensor:
    """(B,) one random non-special token per item (punctuation or other), seeded by (seed, item index)."""
    kinds = batch.kinds.cpu().numpy()
    chosen = np.zeros(len(batch.items), dtype=np.int64)
    for b, item in enumerate(batch.items):
        candidates = np.flatnonzero((kinds[b] == PUNCT) | (kinds[b] == OTHER))
        if len(candidates) == 0:
            raise BertologyError(f"item {item.item_id} has no non-special token to serve as the control")
        chosen[b] = np.random.default_rng([seed, item.index, 1]).choice(candidates)
    return torch.from_numpy(chosen).to(batch.input_ids.device)


def _hidden_change(base: torch.Tensor, new: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """(B,) mean over real tokens of ||h' - h|| / ||h||."""
    relative = (new - base).float().norm(dim=-1) / base.float().norm(dim=-1).clamp_min(1e-12)
    weights = real.to(relative.dtype)
    return (relative * weights).sum(-1) / weights.sum(-1).clamp_min(1)


def ablation_curves(
    items: Iterable,
    objective: Objective,
    *,
    targets: Sequence[str] = ("sep", "cls"),
    modes: Sequence[str] = REMOVAL_MODES,
    layers: Sequence[int] | None = None,
    seed: int = 0,
    batch_size: int = 16,
    max_tokens: int | None = DEFAULT_MAX_TOKENS,
    progress: bool = True,
    cache: bool = False,
) -> pd.DataFrame:
    """Move the attention on ``targets`` away, one layer at a time, against the matched random-token control.

    For each target kind, mode (``zero`` / ``renormalise``) and layer (0-based in ``layers``;
    None: all), every head of that layer loses its attention to the target tokens, and
    separately the same mass, row by row, is taken off one random non-special token of the
    item (same token in every layer). Returns one row per (layer from 1, target, intervention
    "target"/"control", mode) with item means of:

    * ``mass``: attention moved, per attending row and head;
    * ``hidden_change``: mean over real tokens of ||h' - h|| / ||h|| of the final hidden states;
    * ``output_change``: the objective's own measure (``objective.output_change_name``);
    * ``loss_change``: mean change of the objective's loss;
    * ``negative_share``: for the control, the share of (row, head) pairs where the random
      token had less attention than the mass taken off it (its weight went negative);

    plus ``*_se`` standard errors over items, and for each of :data:`ITEM_MEASURES` the items' own values
    (``<measure>_items``: an array per row, the items in the same order in every row), which
    :func:`ablation_summary` resamples for its intervals. ``DataFrame.attrs`` holds the objective's name,
    the output-change measure, and ``null_change``: the largest hidden-state change caused by
    an ablation of nothing (0 when the machinery is exact).

    An ablation at layer ``l`` reuses the unablated pass's outputs of the layers below ``l``
    (:func:`~bertology_utils.interventions.editing.replay_layers_below`): the same numbers, at
    about half the model's cost per setting on average. A model whose layers share one module (ALBERT)
    runs every pass in full: no layer there has an output of its own to replay.

    ``cache``: store the curves in the results cache (:mod:`~bertology_utils.interventions.results_cache`) and
    reuse them when the model's weights, the items, the objective (:meth:`Objective.cache_key`; never
    for an objective without one) and every setting above are the same.
    """
    loaded = objective.loaded
    n_layers = len(self_attention_modules(loaded.model, shared=True))
    layers = list(range(n_layers)) if layers is None else [int(layer) for layer in layers]
    unknown = [t for t in targets if t not in ("sep", "cls", "punct")]
    if unknown:
        raise ValueError(f"targets must be among 'sep', 'cls', 'punct', not {unknown}")
    corpus = Corpus.of(items)
    batches, skipped = token_batches(loaded, corpus, batch_size=batch_size, max_tokens=max_tokens)
    if not batches:
        raise BertologyError(f"no items to ablate ({len(skipped)} skipped as longer than {max_tokens} tokens)")
    fields = {"targets": list(targets), "modes": list(modes), "layers": layers, "seed": seed}
    fields |= {"items": len(corpus), "batch_size": batch_size, "max_tokens": max_tokens}
    fields["per_item"] = list(ITEM_MEASURES)  # curves stored before the items' own values were kept: not these
    key = objective.cache_key()
    compute = functools.partial(_ablations, objective, batches, targets, modes, layers, seed, progress)
    arrays = cached_results(
        "ablation-curves", loaded, corpus.sha256, {**fields, "objective": key}, compute, cache and bool(key)
    )
    columns = [str(c) for c in arrays["columns"]]
    frame = pd.DataFrame({c: arrays[f"column {c}"] for c in columns})
    for name in ITEM_MEASURES:  # (rows, items) arrays: one array per row
        frame[f"{name}_items"] = list(np.asarray(arrays[f"items {name}"], dtype=np.float64))
    frame.attrs.update(
        objective=objective.name,
        output_change=objective.output_change_name,
        null_change=float(arrays["null_change"]),
        skipped=len(skipped),
        model=loaded.name,
    )
    return frame


def _ablations(objective, batches, targets, modes, layers, seed: int, progress: bool) -> dict[str, np.ndarray]:
    """:func:`ablation_curves`' passes: its frame as one array per column (strings as str), and the null change."""
    loaded = objective.loaded
    records: dict[tuple, dict[str, list]] = {}
    null_change = 0.0
    shared = shares_layers(loaded.model)  # one module at every depth: nothing to record or replay
    with evaluating(loaded.model):
        total = len(batches) * (1 + len(targets) * len(modes) * len(layers) * 2)
        with torch.no_grad(), tqdm(total=total, desc="ablations", unit="pass", disable=not progress) as bar:
            for batch in batches:
                batch = objective.prepare(batch)
                recording: contextlib.AbstractContextManager[dict] = (
                    contextlib.nullcontext({}) if shared else record_layer_outputs(loaded.model)
                )
                with capture_attention(loaded.model, retain_grad=False) as captured, recording as below:
                    base = objective.forward(batch)
                probs = torch.stack(list(captured.probs), 1).float()  # (B, L, H, T, T)
                real = batch.real
                with ablate_tokens(loaded.model, torch.zeros_like(real), None, "renormalise"):
                    nothing = objective.forward(batch)
                null_change = max(null_change, float((nothing.hidden - base.hidden).abs().max()))
                bar.update(1)
                token = _random_tokens(batch, seed)
                rows = real.to(probs.dtype)
                for target in targets:
                    reference = batch.kinds == KINDS.index(target)
                    mass = (probs * reference[:, None, None, None, :].to(probs.dtype)).sum(-1)  # (B, L, H, Q)
                    mass = (mass * rows[:, None, None, :]).sum(-1) / rows.sum(-1)[:, None, None]  # (B, L, H)
                    mass = mass.mean(-1)  # (B, L)
                    for mode in modes:
                        for layer in layers:
                            for kind, context in (
                                ("target", ablate_tokens(loaded.model, reference, [layer], mode)),
                                ("control", ablate_matched_random(loaded.model, reference, token, [layer], mode)),
                            ):
                                replay = (
                                    contextlib.nullcontext()
                                    if shared
                                    else replay_layers_below(loaded.model, layer, below)
                                )
                                with replay, context:
                                    new = objective.forward(batch)
                                values = {
                                    "mass": mass[:, layer],
                                    "hidden_change": _hidden_change(base.hidden, new.hidden, real),
                                    "output_change": objective.output_change(base, new, batch),
                                    "loss_change": new.losses - base.losses,
                                }
                                if kind == "control":
                                    values["negative_share"] = negative_share(probs[:, layer], reference, token, real)
                                entry = records.setdefault((layer + 1, target, kind, mode), {})
                                for name, value in values.items():
                                    entry.setdefault(name, []).append(value.detach().double().cpu().numpy())
                                bar.update(1)
    rows_out = []
    for (layer, target, kind, mode), entry in records.items():
        row = {"layer": layer, "target": target, "intervention": kind, "mode": mode}
        for name, chunks in entry.items():
            samples = np.concatenate(chunks)
            row[name] = float(samples.mean())
            row[f"{name}_se"] = float(samples.std(ddof=1) / np.sqrt(len(samples))) if len(samples) > 1 else np.nan
            if name in ITEM_MEASURES:
                row[f"{name}_items"] = samples
        row["items"] = int(sum(len(c) for c in entry["mass"]))
        rows_out.append(row)
    frame = pd.DataFrame(rows_out).sort_values(["target", "mode", "intervention", "layer"], ignore_index=True)
    per_item = {f"items {name}": np.stack(frame.pop(f"{name}_items").to_list()) for name in ITEM_MEASURES}
    arrays = {f"column {c}": frame[c].to_numpy() for c in frame.columns}
    arrays = {name: a.astype(str) if a.dtype == object else a for name, a in arrays.items()}  # npz: no pickle
    columns = np.asarray(frame.columns, dtype=str)
    return {"columns": columns, "null_change": np.asarray(null_change), **arrays, **per_item}


def ablation_summary(
    curves: pd.DataFrame, measure: str = "hidden_change", *, level: float = 0.95, n_resamples: int = 2000, seed: int = 0
) -> pd.DataFrame:
    """Per target and mode: ``measure`` averaged over layers for the target and the control, and their ratio.

    Also the mean mass moved, and the share of control rows where the random token's weight
    went negative (see :func:`ablation_curves`). With the items' own values (``<measure>_items``), the ratio's
    percentile bootstrap interval over the items (``ratio_low``, ``ratio_high`` at ``ratio_level``; ``items``
    resampled): each item's change averaged over the layers, target and control resampled together, the ratio
    that of their sums (``n_resamples`` draws, ``seed``). NaN bounds without per-item values, with fewer than 3
    items, or when the ratio is not finite.
    """
    table = curves.pivot_table(index=["target", "mode"], columns="intervention", values=measure, aggfunc="mean")
    by = curves.groupby(["target", "mode"])
    table = table.rename(columns={"target": f"{measure} (target)", "control": f"{measure} (control)"})
    table["ratio"] = table[f"{measure} (target)"] / table[f"{measure} (control)"]
    bounds = [_ratio_interval(curves, target, mode, measure, level, n_resamples, seed) for target, mode in table.index]
    table["ratio_low"] = [low for low, _, _ in bounds]
    table["ratio_high"] = [high for _, high, _ in bounds]
    table["ratio_level"] = level
    table["items"] = [n for _, _, n in bounds]
    table["mean mass moved"] = curves[curves.intervention == "target"].groupby(["target", "mode"])["mass"].mean()
    if "negative_share" in curves:
        table["control rows with negative weight"] = by["negative_share"].mean()
    table.columns.name = None
    return table.reset_index()


def _ratio_interval(
    curves: pd.DataFrame, target: str, mode: str, measure: str, level: float, n_resamples: int, seed: int
) -> tuple[float, float, int]:
    """:func:`ablation_summary`'s interval of one target and mode: (low, high, items); NaN bounds when it has none."""
    column = f"{measure}_items"
    if column not in curves:
        return math.nan, math.nan, 0
    part = curves[(curves.target == target) & (curves["mode"] == mode)]
    per_layer = {kind: part.loc[part.intervention == kind, column].to_list() for kind in ("target", "control")}
    arrays = per_layer["target"] + per_layer["control"]
    if not per_layer["target"] or not per_layer["control"] or len({len(a) for a in arrays}) != 1:
        return math.nan, math.nan, 0
    changes = {kind: np.mean(np.stack(arrays).astype(np.float64), axis=0) for kind, arrays in per_layer.items()}
    n = len(changes["target"])
    if n < 3 or not (np.isfinite(changes["target"]).all() and np.isfinite(changes["control"]).all()):
        return math.nan, math.nan, n
    weights = bootstrap_weights(n, n_resamples, seed)
    control = weights @ changes["control"]
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = (weights @ changes["target"]) / np.where(control != 0, control, np.nan)
    interval = Draws({"ratio": ratio}, f"{n} items", level).interval(ratio)
    return interval.low, interval.high, n


# --------------------------------------------------------------------------- figures


def plot_attention_and_gradients(stats: dict, kinds: Sequence[str] = KINDS, value: str = "normalised_gradient"):
    """Clark et al.'s Figure 3 layout, one row per objective: attention per layer next to its gradient.

    Left: the mean share of attention each head (dot) puts on each kind, lines joining the
    layer means. Right: the mean |d loss / d attention| per weight to that kind (``value``:
    "normalised_gradient", 1 = the mean over all attention weights; or "gradient",
    "logit_gradient").
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
                    color=_KIND_COLORS[kind],
                    linewidths=0,
                )
                means = part.groupby("layer")[column].mean()
                ax.plot(means.index, means.values, marker="o", color=_KIND_COLORS[kind], label=_KIND_LABELS[kind])
            ax.set(xticks=range(1, s.num_layers + 1), xlabel="layer", ylabel=ylabel)
            if column == "attention":
                ax.set_ylim(0, 1)
            ax.set_title(f"{'attention' if col == 0 else 'gradient'} — {label}", fontsize=10)
        axes[row, 0].legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    return fig


def plot_gradient_norms(stats: dict, ax=None):
    """Per objective, the layer's gradient norm relative to layer 1 (log scale)."""
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


def plot_ablation_curves(curves: pd.DataFrame, measure: str = "hidden_change", title: str | None = None):
    """One panel per target and mode: ``measure`` by layer, target vs matched random-token control.

    Error bars are standard errors over items; grey bars (right axis) show the mass moved.
    """
    import matplotlib.pyplot as plt

    targets, modes = list(dict.fromkeys(curves.target)), list(dict.fromkeys(curves["mode"]))
    fig, axes = plt.subplots(
        len(targets), len(modes), figsize=(5.2 * len(modes), 3.2 * len(targets)), squeeze=False, sharex=True
    )
    names = {
        "hidden_change": "hidden-state change\n(mean ||h' - h|| / ||h||)",
        "output_change": curves.attrs.get("output_change", "output change"),
        "loss_change": "loss change",
    }
    for r, target in enumerate(targets):
        for c, mode in enumerate(modes):
            ax = axes[r, c]
            part = curves[(curves.target == target) & (curves["mode"] == mode)]
            mass = part[part.intervention == "target"].set_index("layer")["mass"]
            twin = ax.twinx()
            twin.bar(mass.index, mass.values, color="lightgrey", alpha=0.5, width=0.6)
            twin.set_ylim(0, max(1.0, float(mass.max()) * 1.1))
            twin.set_ylabel("mass moved", color="grey", fontsize=8)
            ax.set_zorder(twin.get_zorder() + 1)
            ax.patch.set_visible(False)
            for kind, color, label in (
                ("target", _KIND_COLORS[target], f"{_KIND_LABELS[target]} attention moved"),
                ("control", "black", "same mass off a random token"),
            ):
                line = part[part.intervention == kind]
                ax.errorbar(
                    line.layer,
                    line[measure],
                    yerr=line.get(f"{measure}_se"),
                    marker="o",
                    capsize=3,
                    color=color,
                    label=label,
                )
            ax.set(xlabel="layer", ylabel=names.get(measure, measure), xticks=sorted(part.layer.unique()))
            ax.set_title(f"{_KIND_LABELS[target]}, {mode}", fontsize=10)
            ax.legend(fontsize=8, loc="best")
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig
