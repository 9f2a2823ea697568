"""Disabling and pruning attention heads; what fine-tuning changes in attention.

Reproduces the head experiments of Kovaleva et al. (2019, "Revealing the Dark Secrets of BERT")
and Michel et al. (2019, "Are Sixteen Heads Really Better than One?") on any BERT-style
sequence classifier (the layer and head counts come from the model):

* :func:`ablation_sweep` — disable each head alone and each layer alone on a dev set; the change
  of the GLUE metric as a ``(layers, heads)`` array and a ``(layers,)`` array. Heads are disabled
  with gates (:func:`bertology_utils.interventions.gate_heads`'s mechanism); several gate
  configurations share one forward pass (the dev batch is repeated, one gate row per copy);
* :func:`head_importance` — Michel's importance ``I_h = E_x |dL(x)/dxi_h|``: per-example gates
  ``xi`` (all 1) on every head, one backward pass per batch gives every example's gradient for
  every head at once; normalised per layer to unit L2 norm;
* :func:`pruning_curve` — prune the least important heads in 10% steps (importance recomputed
  after each step, as Michel et al. do) or in random order (several seeds): metric vs share
  pruned, and :func:`prunable_share`, the largest share pruned while the metric stays at or
  above 90% of the original;
* :func:`prune_heads` — *physical* pruning: the heads' rows of the query/key/value projections
  and columns of the attention output projection are removed (transformers 5 dropped
  ``PreTrainedModel.prune_heads``; this re-implements it for BERT, RoBERTa and ELECTRA);
* :func:`attention_change` — per head, the cosine similarity of attention maps of two models
  (pre-trained vs fine-tuned) on the same inputs, over real tokens only (no padding compared).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch
from torch import nn

from .data import Corpus
from .errors import ModelNotAvailableError
from .finetuning import _collate, _pad_id, _uses_token_types, encode, glue_metrics, label_ids, task_spec
from .interventions import attention_modules, edit_attention
from .models import LoadedModel

__all__ = [
    "DevSet", "dev_set", "gate_shape", "predict_with_gates", "scores_for_gates", "AblationResult", "ablation_sweep",
    "head_importance", "normalise_per_layer", "PruningCurve", "pruning_curve", "random_pruning_curves",
    "prunable_share", "importance_ablation_agreement", "prune_heads", "pruned_heads", "attention_change",
    "layer_means", "pruning_claims",
]


# --------------------------------------------------------------------------- the dev set, batched once

@dataclass
class DevSet:
    """A labelled corpus encoded and collated once: batches sorted by length, labels in corpus order."""

    task: str
    batches: list = field(repr=False)
    #: For each batch, the corpus rows it holds.
    rows: list = field(repr=False)
    #: Label ids (class numbers, or scores for regression), in corpus order.
    labels: np.ndarray = field(repr=False)
    name: str = ""
    #: The corpus's own labels (what :func:`~bertology_utils.finetuning.glue_metrics` takes).
    raw_labels: tuple = field(default=(), repr=False)

    def __len__(self) -> int:
        return len(self.labels)


def _as_loaded(model) -> LoadedModel:
    if not isinstance(model, LoadedModel):
        raise TypeError("pass a LoadedModel (e.g. FineTuned.loaded)")
    return model


def dev_set(loaded: LoadedModel, corpus: Corpus, task: str, *, max_tokens: int | None = None,
            batch_size: int = 32) -> DevSet:
    """Encode and collate ``corpus`` for ``loaded`` once, so every configuration reuses the batches."""
    if corpus.labels is None:
        raise ValueError(f"{corpus.name}: the dev corpus needs labels")
    spec = task_spec(task)
    limit = loaded.max_tokens if max_tokens is None else min(max_tokens, loaded.max_tokens)
    encodings = encode(loaded.tokenizer, list(corpus), limit)
    order = np.argsort([len(e["input_ids"]) for e in encodings], kind="stable")
    token_types = _uses_token_types(loaded.model)
    batches, rows = [], []
    for lo in range(0, len(order), batch_size):
        chunk = order[lo:lo + batch_size]
        batches.append(_collate([encodings[i] for i in chunk], _pad_id(loaded.tokenizer), loaded.device, token_types))
        rows.append(chunk)
    labels = label_ids(spec.name, list(corpus.labels))
    return DevSet(spec.name, batches, rows, labels, corpus.name, tuple(corpus.labels))


def gate_shape(loaded: LoadedModel) -> tuple[int, int]:
    """(layers, heads) of the model's gates, read from the model itself."""
    modules = attention_modules(loaded.model)
    heads = getattr(modules[0], "num_attention_heads", None) or getattr(modules[0], "n_heads", None)
    return len(modules), int(heads if heads is not None else loaded.num_heads)


def _gate_edit(gates: torch.Tensor):
    """An edit multiplying head h of layer l of example b by ``gates[b, l, h]``."""
    def edit(layer: int, probs: torch.Tensor):
        g = gates[:, layer].to(device=probs.device, dtype=probs.dtype)
        if g.shape != probs.shape[:2]:
            raise ValueError(f"gates for layer {layer} have shape {tuple(g.shape)}, probabilities {tuple(probs.shape)}")
        return probs * g[:, :, None, None]
    return edit


def _repeat(batch: dict, copies: int) -> dict:
    return {k: v.repeat(copies, *([1] * (v.dim() - 1))) for k, v in batch.items()}


@torch.no_grad()
def predict_with_gates(loaded: LoadedModel, dev: DevSet, gate_stack, *, configs_per_pass: int | None = None,
                       rows_per_pass: int = 128) -> np.ndarray:
    """Logits for every gate configuration: ``gate_stack`` (configs, layers, heads) -> (configs, n, classes).

    Several configurations go through the model together: each batch is repeated once per
    configuration, with that configuration's gates on its copy; ``configs_per_pass`` of them
    (default: as many as fit in ``rows_per_pass`` rows).
    """
    loaded = _as_loaded(loaded)
    gate_stack = torch.as_tensor(gate_stack, dtype=torch.float32)
    if gate_stack.dim() == 2:
        gate_stack = gate_stack[None]
    n_configs = gate_stack.shape[0]
    model = loaded.model
    was_training = model.training
    model.eval()
    out = None
    try:
        for batch, rows in zip(dev.batches, dev.rows):
            b = len(rows)
            per_pass = configs_per_pass or max(1, rows_per_pass // b)
            for lo in range(0, n_configs, per_pass):
                chunk = gate_stack[lo:lo + per_pass]
                c = chunk.shape[0]
                gates = chunk.repeat_interleave(b, dim=0)  # copy k of the batch gets configuration k
                with edit_attention(model, _gate_edit(gates)):
                    logits = model(**_repeat(batch, c)).logits.float().cpu().numpy()
                if out is None:
                    out = np.zeros((n_configs, len(dev), logits.shape[-1]), dtype=np.float32)
                out[lo:lo + c][:, rows] = logits.reshape(c, b, -1)
    finally:
        model.train(was_training)
    return out


def scores_for_gates(loaded: LoadedModel, dev: DevSet, gate_stack, *, metric: str = "score",
                     configs_per_pass: int | None = None) -> np.ndarray:
    """The GLUE ``metric`` for each gate configuration in ``gate_stack`` (configs, layers, heads)."""
    logits = predict_with_gates(loaded, dev, gate_stack, configs_per_pass=configs_per_pass)
    labels = dev.raw_labels or dev.labels
    return np.array([glue_metrics(dev.task, p, labels)[metric] for p in logits])


# --------------------------------------------------------------------------- ablation sweeps

@dataclass
class AblationResult:
    """Metric change when each head alone / each layer alone is disabled (negative: worse)."""

    task: str
    metric: str
    base: float
    #: (layers, heads): metric with that head disabled minus the base metric.
    head_deltas: np.ndarray
    #: (layers,): metric with every head of that layer disabled minus the base metric.
    layer_deltas: np.ndarray

    def summary(self, tolerance: float = 0.0) -> dict:
        d = self.head_deltas
        return {"base": self.base, "share_heads_improve": float((d > tolerance).mean()),
                "share_heads_not_hurting": float((d >= -tolerance).mean()),
                "worst_head_delta": float(d.min()), "best_head_delta": float(d.max()),
                "worst_layer_delta": float(self.layer_deltas.min())}


def ablation_sweep(loaded: LoadedModel, dev: DevSet, *, metric: str = "score", layers: bool = True,
                   configs_per_pass: int | None = None) -> AblationResult:
    """Disable each head alone (and, with ``layers``, each layer's heads together); metric deltas."""
    n_layers, n_heads = gate_shape(loaded)
    stack = [torch.ones(n_layers, n_heads)]
    for layer in range(n_layers):
        for head in range(n_heads):
            g = torch.ones(n_layers, n_heads)
            g[layer, head] = 0
            stack.append(g)
    if layers:
        for layer in range(n_layers):
            g = torch.ones(n_layers, n_heads)
            g[layer] = 0
            stack.append(g)
    scores = scores_for_gates(loaded, dev, torch.stack(stack), metric=metric, configs_per_pass=configs_per_pass)
    base = float(scores[0])
    heads = scores[1:1 + n_layers * n_heads].reshape(n_layers, n_heads) - base
    layer_d = scores[1 + n_layers * n_heads:] - base if layers else np.full(n_layers, np.nan)
    return AblationResult(dev.task, metric, base, heads, layer_d)


# --------------------------------------------------------------------------- Michel's importance

def normalise_per_layer(importance: np.ndarray, exponent: float = 2.0) -> np.ndarray:
    """Each layer's importances divided by their L``exponent`` norm (Michel et al.: L2)."""
    importance = np.asarray(importance, dtype=np.float64)
    norm = np.power(np.power(np.abs(importance), exponent).sum(-1, keepdims=True), 1 / exponent)
    return importance / np.where(norm > 0, norm, 1.0)


def _loss(logits: torch.Tensor, targets: torch.Tensor, regression: bool) -> torch.Tensor:
    """Per-example loss (summed by the caller so per-example gate gradients come out of one backward)."""
    if regression:
        return (logits.float().reshape(len(targets), -1)[:, 0] - targets.float()) ** 2
    return nn.functional.cross_entropy(logits.float(), targets.long(), reduction="none")


def head_importance(loaded: LoadedModel, dev: DevSet, *, mask=None, normalise: bool = True,
                    per_example: bool = True) -> np.ndarray:
    """Michel et al.'s head importance ``E_x |dL(x)/dxi_h|`` over the dev set, (layers, heads).

    One forward and one backward pass per batch for all heads. With ``per_example`` (default)
    each example has its own gates, so the absolute value is taken per example as in the
    paper's definition; otherwise one gate per head per batch (the reference implementation's
    batch-level estimate). ``mask`` (layers, heads; 0 = pruned) is applied while measuring
    (pruned heads get importance 0). ``normalise``: unit L2 norm per layer.
    """
    loaded = _as_loaded(loaded)
    n_layers, n_heads = gate_shape(loaded)
    mask_t = torch.ones(n_layers, n_heads) if mask is None else torch.as_tensor(mask, dtype=torch.float32)
    regression = task_spec(dev.task).is_regression
    model = loaded.model
    was_training = model.training
    model.eval()
    total = torch.zeros(n_layers, n_heads, dtype=torch.float64)
    try:
        for batch, rows in zip(dev.batches, dev.rows):
            b = len(rows)
            gates = torch.ones(b if per_example else 1, n_layers, n_heads, device=loaded.device, requires_grad=True)
            applied = (gates * mask_t.to(loaded.device)).expand(b, n_layers, n_heads)
            targets = torch.as_tensor(dev.labels[rows], device=loaded.device)
            with edit_attention(model, _gate_edit(applied)):
                loss = _loss(model(**batch).logits, targets, regression)
            model.zero_grad(set_to_none=True)
            loss.sum().backward()
            grad = gates.grad.detach().abs().double().cpu()
            total += grad.sum(0) if per_example else grad[0]
    finally:
        model.zero_grad(set_to_none=True)
        model.train(was_training)
    importance = (total / (len(dev) if per_example else len(dev.batches))).numpy() * mask_t.numpy()
    return normalise_per_layer(importance) if normalise else importance


# --------------------------------------------------------------------------- pruning curves

@dataclass
class PruningCurve:
    """Metric against the share of heads pruned (gated to 0)."""

    strategy: str
    fractions: np.ndarray
    scores: np.ndarray
    base: float
    #: Heads in the order they were pruned, as (layer, head) pairs.
    order: list = field(default_factory=list)

    def prunable(self, keep: float = 0.9) -> float:
        return prunable_share(self.fractions, self.scores, self.base, keep)


def _steps(total: int, step: float) -> list[int]:
    counts = sorted({int(round(f * total)) for f in np.arange(0, 1 + 1e-9, step)} | {0})
    return [c for c in counts if c <= total]


def pruning_curve(loaded: LoadedModel, dev: DevSet, *, step: float = 0.1, metric: str = "score",
                  recompute: bool = True, importance_dev: DevSet | None = None,
                  configs_per_pass: int | None = None) -> PruningCurve:
    """Prune the least important heads in ``step`` shares of all heads; the metric after each step.

    Importance (normalised per layer) is measured on ``importance_dev`` (default: ``dev``) and,
    with ``recompute``, measured again with the heads pruned so far switched off, as Michel et al.
    """
    n_layers, n_heads = gate_shape(loaded)
    total = n_layers * n_heads
    counts = _steps(total, step)
    mask = np.ones((n_layers, n_heads))
    order: list = []
    masks = [mask.copy()]
    imp_dev = importance_dev or dev
    importance = head_importance(loaded, imp_dev)
    for count in counts[1:]:
        if recompute and order:
            importance = head_importance(loaded, imp_dev, mask=mask)
        candidates = [(importance[l, h], l, h) for l in range(n_layers) for h in range(n_heads) if mask[l, h]]
        candidates.sort()
        for _, l, h in candidates[:count - len(order)]:
            mask[l, h] = 0
            order.append((l, h))
        masks.append(mask.copy())
    scores = scores_for_gates(loaded, dev, np.stack(masks), metric=metric, configs_per_pass=configs_per_pass)
    return PruningCurve("importance", np.array(counts) / total, scores, float(scores[0]), order)


def random_pruning_curves(loaded: LoadedModel, dev: DevSet, *, seeds: Sequence[int] = (0, 1, 2), step: float = 0.1,
                          metric: str = "score", configs_per_pass: int | None = None) -> list[PruningCurve]:
    """Pruning in a random order (one curve per seed), same steps as :func:`pruning_curve`."""
    n_layers, n_heads = gate_shape(loaded)
    total = n_layers * n_heads
    counts = _steps(total, step)
    curves = []
    for seed in seeds:
        perm = np.random.default_rng(seed).permutation(total)
        masks = []
        for count in counts:
            m = np.ones(total)
            m[perm[:count]] = 0
            masks.append(m.reshape(n_layers, n_heads))
        scores = scores_for_gates(loaded, dev, np.stack(masks), metric=metric, configs_per_pass=configs_per_pass)
        curves.append(PruningCurve(f"random (seed {seed})", np.array(counts) / total, scores, float(scores[0]),
                                   [divmod(int(i), n_heads) for i in perm]))
    return curves


def prunable_share(fractions, scores, base: float, keep: float = 0.9) -> float:
    """The largest share pruned before the metric first drops below ``keep`` x ``base``."""
    fractions, scores = np.asarray(fractions), np.asarray(scores)
    below = np.nonzero(scores < keep * base)[0]
    if len(below) == 0:
        return float(fractions[-1])
    return float(fractions[below[0] - 1]) if below[0] > 0 else 0.0


def importance_ablation_agreement(importance: np.ndarray, head_deltas: np.ndarray) -> tuple[float, float]:
    """Spearman correlation (and p-value) of importance with the drop when the head alone is disabled."""
    from scipy.stats import spearmanr

    importance, drops = np.ravel(importance), -np.ravel(head_deltas)
    if np.ptp(importance) == 0 or np.ptp(drops) == 0:
        return float("nan"), float("nan")
    rho, p = spearmanr(importance, drops)
    return float(rho), float(p)


# --------------------------------------------------------------------------- physical pruning

_PRUNED = "_bertology_pruned_heads"


def _attention_blocks(model: nn.Module) -> list[nn.Module]:
    """The attention block (self-attention + output projection) of every layer, BERT-style."""
    modules = attention_modules(model)
    blocks = []
    for module in modules:
        parent = next((m for m in model.modules() if getattr(m, "self", None) is module), None)
        if (parent is None or not all(hasattr(module, a) for a in ("query", "key", "value"))
                or not isinstance(getattr(getattr(parent, "output", None), "dense", None), nn.Linear)):
            raise ModelNotAvailableError(
                f"{type(module).__name__}: physical pruning supports BERT-style attention "
                "(self.query/key/value and output.dense: BERT, RoBERTa, ELECTRA)")
        blocks.append(parent)
    return blocks


def _keep_rows(linear: nn.Linear, index: torch.Tensor, dim: int) -> nn.Linear:
    """A copy of ``linear`` keeping only ``index`` along its output (dim 0) or input (dim 1) features."""
    weight = linear.weight.index_select(dim, index).detach().clone()
    bias = linear.bias
    if bias is not None and dim == 0:
        bias = bias[index]
    new = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None, device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        new.weight.copy_(weight)
        if bias is not None:
            new.bias.copy_(bias.detach())
    return new


def pruned_heads(model) -> dict[int, list[int]]:
    """Heads physically removed so far, in original head numbers: layer -> sorted list."""
    module = getattr(model, "model", model)
    return {k: sorted(v) for k, v in getattr(module, _PRUNED, {}).items() if v}


@torch.no_grad()
def prune_heads(model, heads) -> dict[int, list[int]]:
    """Physically remove ``heads`` (layer -> head numbers, or a (layers, heads) mask with 0/False = remove).

    In place: the heads' rows of the query, key and value projections and the matching columns
    of the attention output projection are deleted, so the model computes exactly what it
    computed with those heads gated to 0 (the output projection's bias stays). Head numbers are
    the original ones; pruning again removes further heads. A layer cannot lose all its heads.
    Returns :func:`pruned_heads`.
    """
    module = getattr(model, "model", model)
    blocks = _attention_blocks(module)
    if not isinstance(heads, dict):
        mask = np.asarray(heads)
        heads = {l: [int(h) for h in np.nonzero(mask[l] == 0)[0]] for l in range(mask.shape[0])}
    done: dict = getattr(module, _PRUNED, {})
    for layer, remove in heads.items():
        remove = set(int(h) for h in remove) - set(done.get(layer, ()))
        if not remove:
            continue
        attn = blocks[layer].self
        size = attn.attention_head_size
        original = sorted(set(range(attn.num_attention_heads + len(done.get(layer, ())))) - set(done.get(layer, ())))
        keep = [i for i, h in enumerate(original) if h not in remove]
        if len(remove - set(original)):
            raise ValueError(f"layer {layer} has no heads {sorted(remove - set(original))}")
        if not keep:
            raise ValueError(f"pruning every head of layer {layer} is not supported; gate the layer instead")
        index = torch.tensor([i * size + j for i in keep for j in range(size)], device=attn.query.weight.device)
        attn.query = _keep_rows(attn.query, index, 0)
        attn.key = _keep_rows(attn.key, index, 0)
        attn.value = _keep_rows(attn.value, index, 0)
        blocks[layer].output.dense = _keep_rows(blocks[layer].output.dense, index, 1)
        attn.num_attention_heads = len(keep)
        attn.all_head_size = len(keep) * size
        done[layer] = sorted(set(done.get(layer, ())) | remove)
    setattr(module, _PRUNED, done)
    return pruned_heads(module)


# --------------------------------------------------------------------------- what fine-tuning changes

@torch.no_grad()
def _attentions(loaded: LoadedModel, batch: dict) -> list[torch.Tensor]:
    out = loaded.model(**batch, output_attentions=True)
    return [a.float() for a in out.attentions]


@torch.no_grad()
def attention_change(before: LoadedModel, after: LoadedModel, corpus: Corpus, *, max_tokens: int = 128,
                     batch_size: int = 16) -> np.ndarray:
    """Mean over ``corpus`` of the cosine similarity of each head's attention map in ``before`` and ``after``.

    Both models see the same token ids (``after``'s tokenizer; they must share a vocabulary).
    Each map is compared over its real tokens only (queries and keys); padding is left out.
    Returns (layers, heads).
    """
    limit = min(max_tokens, before.max_tokens, after.max_tokens)
    encodings = encode(after.tokenizer, list(corpus), limit)
    order = np.argsort([len(e["input_ids"]) for e in encodings], kind="stable")
    states = [(m, m.model.training) for m in (before, after)]
    for m, _ in states:
        m.model.eval()
    total, n = None, 0
    try:
        for lo in range(0, len(order), batch_size):
            chunk = [encodings[i] for i in order[lo:lo + batch_size]]
            a_batch = _collate(chunk, _pad_id(after.tokenizer), after.device, _uses_token_types(after.model))
            b_batch = _collate(chunk, _pad_id(after.tokenizer), before.device, _uses_token_types(before.model))
            real = b_batch["attention_mask"].float()
            pair = (real[:, :, None] * real[:, None, :])[:, None]  # (batch, 1, queries, keys)
            sims = []
            for x, y in zip(_attentions(before, b_batch), _attentions(after, a_batch)):
                x, y = x * pair, (y.to(x.device)) * pair
                dot = (x * y).sum((-1, -2))
                norm = x.pow(2).sum((-1, -2)).sqrt() * y.pow(2).sum((-1, -2)).sqrt()
                sims.append(dot / norm.clamp_min(1e-12))
            sims = torch.stack(sims, 1).double().sum(0).cpu()  # (layers, heads)
            total = sims if total is None else total + sims
            n += len(chunk)
    finally:
        for m, was in states:
            m.model.train(was)
    return (total / max(n, 1)).numpy()


def layer_means(values: np.ndarray) -> np.ndarray:
    """Mean of a (layers, heads) array per layer."""
    return np.asarray(values, dtype=float).mean(-1)


# --------------------------------------------------------------------------- the papers' claims

def pruning_claims(*, ablation: AblationResult | None = None, cosine: np.ndarray | None = None,
                   importance_curve: PruningCurve | None = None, random_curves: Sequence[PruningCurve] = (),
                   tolerance: float = 0.0, keep: float = 0.9, task: str = "") -> list[dict]:
    """Rows of a "paper vs ours" table, each with a verdict computed from the numbers.

    Verdicts: "reproduced", "partly", "not reproduced", or "inconclusive" when the numbers cannot
    tell (no single-head removal changes the metric; the metric never drops, even with all heads off).
    """
    rows = []
    tag = f" ({task})" if task else ""
    if cosine is not None:
        by_layer = layer_means(cosine)
        lowest = set(np.argsort(by_layer)[:2].tolist())
        last_two = {len(by_layer) - 1, len(by_layer) - 2}
        verdict = ("reproduced" if lowest == last_two else
                   "partly" if int(np.argmin(by_layer)) in last_two else "not reproduced")
        rows.append({"paper": "Kovaleva et al.", "claim": "the last two layers change most in fine-tuning" + tag,
                     "ours": "mean cosine by layer: " + ", ".join(f"{v:.3f}" for v in by_layer),
                     "verdict": verdict})
    if ablation is not None:
        s = ablation.summary(tolerance)
        verdict = ("inconclusive" if not np.any(ablation.head_deltas) else
                   "reproduced" if s["share_heads_not_hurting"] >= 0.5 and s["share_heads_improve"] > 0 else
                   "partly" if s["share_heads_not_hurting"] >= 0.5 or s["share_heads_improve"] > 0 else
                   "not reproduced")
        rows.append({"paper": "Kovaleva et al.",
                     "claim": "disabling one head often does not hurt, sometimes improves" + tag,
                     "ours": f"{s['share_heads_not_hurting']:.0%} of heads do not hurt, {s['share_heads_improve']:.0%} "
                             f"improve (base {s['base']:.3f})", "verdict": verdict})
    if importance_curve is not None:
        share = importance_curve.prunable(keep)
        rand = [c.prunable(keep) for c in random_curves]
        rand_text = f"; random order {np.mean(rand):.0%} on average" if rand else ""
        # a curve that never drops below keep x base (even with every head pruned) says nothing about heads
        verdict = ("inconclusive" if share >= 1.0 else
                   "reproduced" if share >= 0.2 and (not rand or share >= np.mean(rand)) else
                   "partly" if share >= 0.2 or share > 0 else "not reproduced")
        rows.append({"paper": "Michel et al.",
                     "claim": f"many heads can be pruned keeping {keep:.0%} of the metric, importance beats random" + tag,
                     "ours": f"{share:.0%} pruned by importance{rand_text}", "verdict": verdict})
    return rows
