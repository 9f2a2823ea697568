"""Disabling and pruning attention heads; what fine-tuning changes in attention.

Reproduces the head experiments of Kovaleva et al. (2019, "Revealing the Dark Secrets of BERT")
and Michel et al. (2019, "Are Sixteen Heads Really Better than One?") on any BERT-style
sequence classifier (the layer and head counts come from the model):

* :func:`ablation_sweep` — disable each head alone and each layer alone on a dev set; the change
  of the GLUE metric and of the mean dev loss (the classifier's training loss: continuous, so it
  ranks heads even where the metric of a small dev set ties) as ``(layers, heads)`` and
  ``(layers,)`` arrays, with every configuration's per-example predictions, so that
  :meth:`AblationResult.draws` can resample the dev examples. Heads are disabled with gates
  (:func:`bertology_utils.interventions.editing.gate_heads`'s mechanism); several gate configurations
  share one forward pass (the dev batch is repeated, one gate row per copy), and both numbers
  come from the same logits;
* :func:`head_importance` — Michel's importance ``I_h = E_x |dL(x)/dxi_h|``: per-example gates
  ``xi`` (all 1) on every head, one backward pass per batch gives every example's gradient for
  every head at once; normalised per layer to unit L2 norm;
* :func:`pruning_curve` — prune the least important heads in 10% steps (importance recomputed
  after each step, as Michel et al. do) or in random order (several seeds): metric vs share
  pruned, and :func:`prunable_share`, the largest share pruned while the metric stays at or
  above 90% of the original; :func:`importance_ablation_agreement`, Spearman's rho between
  importance and the loss increase when each head alone is disabled;
* :func:`prune_heads` — *physical* pruning: the heads' rows of the query/key/value projections
  and columns of the attention output projection are removed (transformers 5 dropped
  ``PreTrainedModel.prune_heads``; this re-implements it for every registered architecture without a
  shared position bias: BERT, RoBERTa, ELECTRA and DistilBERT);
* :func:`attention_change` — per head, the cosine similarity of attention maps of two models
  (pre-trained vs fine-tuned) on the same inputs, over real tokens only (no padding compared).

Everything above comes from two computations, the logits of gate configurations
(:func:`predict_with_gates`) and importance (:func:`head_importance`). With ``cache=True`` each
is stored in the results cache (:mod:`~bertology_utils.interventions.results_cache`), keyed by the
model's weights, the encoded dev set, the gates and :data:`RESULTS_VERSION`, and read back by a
later run that asks for the same; a re-run of a notebook then redoes only the cheap steps.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from bertology_utils.core import architectures
from bertology_utils.core.batching import Padding, plan_batches
from bertology_utils.core.errors import BertologyError, ModelNotAvailableError
from bertology_utils.core.models import LoadedModel
from bertology_utils.core.uncertainty import Draws, bootstrap_weights
from bertology_utils.data import Corpus
from bertology_utils.interventions.editing import classifier_inference, edit_attention
from bertology_utils.interventions.finetuning import encode
from bertology_utils.interventions.head_gates import example_losses, gate_edit, require_loaded
from bertology_utils.interventions.results_cache import RESULTS_VERSION, cached_result
from bertology_utils.interventions.scoring import glue_metric_draws, glue_metrics, label_ids, task_spec

__all__ = [
    "DevSet",
    "dev_set",
    "gate_shape",
    "predict_with_gates",
    "scores_for_gates",
    "AblationResult",
    "ablation_sweep",
    "head_importance",
    "normalise_per_layer",
    "PruningCurve",
    "pruning_curve",
    "random_pruning_curves",
    "prunable_share",
    "importance_ablation_agreement",
    "prune_heads",
    "pruned_heads",
    "attention_change",
    "layer_means",
    "RESULTS_VERSION",
    "plot_pruning_curves",
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
    #: The corpus's own labels (what :func:`~bertology_utils.interventions.scoring.glue_metrics` takes).
    raw_labels: tuple = field(default=(), repr=False)

    def __len__(self) -> int:
        return len(self.labels)

    def fingerprint(self) -> str:
        """sha256 of the task, the encoded batches (every input tensor) and the labels."""
        digest = hashlib.sha256(f"{self.task}\n".encode())
        for batch, rows in zip(self.batches, self.rows):
            digest.update(np.asarray(rows, dtype=np.int64).tobytes())
            for name in sorted(batch):
                digest.update(f"{name}{tuple(batch[name].shape)}".encode())
                digest.update(batch[name].cpu().contiguous().numpy().tobytes())
        digest.update(np.ascontiguousarray(self.labels).tobytes())
        return digest.hexdigest()


def _gates_digest(gates: np.ndarray) -> str:
    gates = np.ascontiguousarray(gates, dtype=np.float32)
    return hashlib.sha256(f"{gates.shape}".encode() + gates.tobytes()).hexdigest()


def dev_set(
    loaded: LoadedModel,
    corpus: Corpus,
    task: str,
    *,
    max_tokens: int | None = None,
    batch_size: int = 32,
    token_budget: int | None = None,
) -> DevSet:
    """Encode and collate ``corpus`` for ``loaded`` once, so every configuration reuses the batches.

    ``token_budget``: keep only the first items of ``corpus`` whose tokens (after truncation to
    ``max_tokens``, no padding) add up to at most this many (at least one item), so that tasks
    with long inputs (RTE) cost about what short ones (SST-2) cost per configuration.
    """
    if corpus.labels is None:
        raise ValueError(f"{corpus.name}: the dev corpus needs labels")
    spec = task_spec(task)
    limit = loaded.max_tokens if max_tokens is None else min(max_tokens, loaded.max_tokens)
    encodings = encode(loaded.tokenizer, list(corpus), limit)
    if token_budget is not None:
        total = np.cumsum([len(e["input_ids"]) for e in encodings])
        n = max(1, int(np.searchsorted(total, token_budget, side="right")))
        if n < len(corpus):
            corpus, encodings = corpus[:n], encodings[:n]
    padding = Padding.of(loaded)
    rows = plan_batches([len(e["input_ids"]) for e in encodings], batch_size)
    batches = [padding.collate([encodings[i] for i in chunk], loaded.device) for chunk in rows]
    raw = tuple(corpus.labels or ())  # checked above; a slice of a labelled corpus keeps its labels
    return DevSet(spec.name, batches, rows, label_ids(spec.name, list(raw)), corpus.name, raw)


def gate_shape(loaded: LoadedModel) -> tuple[int, int]:
    """(layers, heads) of the model's gates, read from the model itself (heads as the first layer has them now).

    A gate acts on one layer's call (:func:`~bertology_utils.interventions.editing.gate_heads`), so a model whose
    layers share their weights (ALBERT) has one row per layer it runs.
    """
    return len(architectures.layers(loaded, shared=True)), architectures.attention_heads(loaded, 0)


def _repeat(batch: dict, copies: int) -> dict:
    return {k: v.repeat(copies, *([1] * (v.dim() - 1))) for k, v in batch.items()}


@contextlib.contextmanager
def _copies_from(layers: list[nn.Module], first: int, rows: int, copies: int):
    """Run layers below ``first`` once on the batch, then ``copies`` copies of it from layer ``first`` on.

    A pre-hook on each layer from ``first`` on repeats every per-example tensor argument that
    still has the batch's ``rows`` (the hidden states entering layer ``first``; the attention
    mask, position bias... of every later layer), in the layout of :func:`_repeat`.
    """

    def repeat(value):
        if torch.is_tensor(value) and value.dim() >= 2 and value.shape[0] == rows:
            return value.repeat(copies, *([1] * (value.dim() - 1)))
        return value

    def hook(_module, args, kwargs):
        return tuple(repeat(a) for a in args), {k: repeat(v) for k, v in kwargs.items()}

    handles = [layer.register_forward_pre_hook(hook, with_kwargs=True) for layer in layers[first:]]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def _first_gated_layers(gate_stack: torch.Tensor) -> np.ndarray:
    """For each configuration, the first layer with a gate other than 1 (the layer count when none)."""
    touched = (gate_stack != 1).any(-1)  # (configs, layers)
    first = torch.where(touched.any(-1), touched.float().argmax(-1), torch.tensor(gate_stack.shape[1]))
    return first.numpy()


def predict_with_gates(
    loaded: LoadedModel,
    dev: DevSet,
    gate_stack,
    *,
    configs_per_pass: int | None = None,
    rows_per_pass: int = 128,
    cache: bool = False,
    progress: bool = False,
    desc: str = "gated passes",
) -> np.ndarray:
    """Logits for every gate configuration: ``gate_stack`` (configs, layers, heads) -> (configs, n, classes).

    Several configurations go through the model together: each batch is repeated once per
    configuration, with that configuration's gates on its copy; ``configs_per_pass`` of them
    (default: as many as fit in ``rows_per_pass`` rows). Configurations are grouped by the
    first layer they gate, and a group's copies are made only at that layer: the layers below
    it run once per pass, not once per configuration (disabling a head of the last layer
    costs about one layer per configuration, not the whole model). ``cache``: read the logits
    stored by an earlier call with the same model, dev set and gates, or store them. ``progress``:
    a bar labelled ``desc`` counting the forward passes.
    """
    loaded = require_loaded(loaded)
    gate_stack = torch.as_tensor(gate_stack, dtype=torch.float32)
    if gate_stack.dim() == 2:
        gate_stack = gate_stack[None]
    fields = {"gates": _gates_digest(gate_stack.numpy()), "configs_per_pass": configs_per_pass, "rows": rows_per_pass}
    return cached_result(
        "gated-logits",
        loaded,
        dev,
        fields,
        lambda: _predict_with_gates(loaded, dev, gate_stack, configs_per_pass, rows_per_pass, progress, desc),
        cache,
    )


@torch.no_grad()
def _predict_with_gates(
    loaded: LoadedModel,
    dev: DevSet,
    gate_stack: torch.Tensor,
    configs_per_pass: int | None,
    rows_per_pass: int,
    progress: bool = False,
    desc: str = "gated passes",
) -> np.ndarray:
    n_configs = gate_stack.shape[0]
    model = loaded.model
    shared = architectures.shares_layers(model)  # ALBERT: a hook on a layer's module would fire at every depth
    layers = architectures.layers(model, shared=True)
    first = _first_gated_layers(gate_stack)
    groups = [np.nonzero(first == f)[0] for f in np.unique(first)]
    out: np.ndarray | None = None

    def configs_at_once(b: int) -> int:
        return configs_per_pass or max(1, rows_per_pass // b)

    passes = sum(-(-len(g) // configs_at_once(len(rows))) for rows in dev.rows for g in groups)
    with classifier_inference(loaded), tqdm(total=passes, desc=desc, unit="pass", disable=not progress) as bar:
        for batch, rows in zip(dev.batches, dev.rows):
            b = len(rows)
            per_pass = configs_at_once(b)
            for group in groups:
                f = int(first[group[0]])
                for lo in range(0, len(group), per_pass):
                    index = group[lo : lo + per_pass]
                    c = len(index)
                    if f == len(layers):  # every gate 1: one plain pass serves all
                        logits = np.tile(model(**batch).logits.float().cpu().numpy(), (c, 1))
                    else:
                        gates = gate_stack[index].repeat_interleave(b, dim=0)  # copy k: configuration index[k]
                        late = c > 1 and f > 0 and not shared  # copies made at layer f (one copy needs none)
                        with contextlib.ExitStack() as stack:
                            stack.enter_context(edit_attention(model, gate_edit(gates, f if late else 0)))
                            if late:
                                stack.enter_context(_copies_from(layers, f, b, c))
                            logits = model(**(batch if late else _repeat(batch, c))).logits.float().cpu().numpy()
                    if logits.shape[0] != b * c:
                        raise ModelNotAvailableError(
                            f"{type(model).__name__}: expected {b * c} rows of logits, got {logits.shape[0]}"
                        )
                    if out is None:
                        out = np.zeros((n_configs, len(dev), logits.shape[-1]), dtype=np.float32)
                    out[np.ix_(index, rows)] = logits.reshape(c, b, -1)
                    bar.update()
    if out is None:
        raise ValueError(f"{dev.task}: the dev set has no examples")
    return out


def _scores(dev: DevSet, logits: np.ndarray, metric: str) -> np.ndarray:
    labels = dev.raw_labels or dev.labels
    return np.array([glue_metrics(dev.task, p, labels)[metric] for p in logits])


def _mean_losses(dev: DevSet, logits: np.ndarray) -> np.ndarray:
    """Mean dev loss of each configuration's logits (configs, n, classes), all configurations at once."""
    configs, n = logits.shape[:2]
    targets = torch.as_tensor(dev.labels).repeat(configs)
    losses = example_losses(
        torch.from_numpy(logits).reshape(configs * n, -1), targets, task_spec(dev.task).is_regression
    )
    return losses.reshape(configs, n).double().mean(1).numpy()


def _predictions(task: str, logits: np.ndarray) -> np.ndarray:
    """What each configuration's logits (configs, n, classes) predict for each example, (configs, n): class ids in
    the smallest integer type, or float32 scores for a regression task (what :func:`glue_metrics` reads)."""
    if task_spec(task).is_regression:
        return logits[..., 0].astype(np.float32)
    return logits.argmax(-1).astype(np.min_scalar_type(max(logits.shape[-1] - 1, 0)))


def scores_for_gates(
    loaded: LoadedModel,
    dev: DevSet,
    gate_stack,
    *,
    metric: str = "score",
    configs_per_pass: int | None = None,
    cache: bool = False,
    progress: bool = False,
    desc: str = "gated passes",
) -> np.ndarray:
    """The GLUE ``metric`` for each gate configuration in ``gate_stack`` (configs, layers, heads)."""
    logits = predict_with_gates(
        loaded, dev, gate_stack, configs_per_pass=configs_per_pass, cache=cache, progress=progress, desc=desc
    )
    return _scores(dev, logits, metric)


# --------------------------------------------------------------------------- ablation sweeps


@dataclass
class AblationResult:
    """Metric and loss change when each head alone / each layer alone is disabled."""

    task: str
    metric: str
    base: float
    #: (layers, heads): metric with that head disabled minus the base metric (negative: worse).
    head_deltas: np.ndarray
    #: (layers,): metric with every head of that layer disabled minus the base metric.
    layer_deltas: np.ndarray
    #: Mean dev loss (the classifier's training loss) with every head on.
    base_loss: float
    #: (layers, heads): mean dev loss with that head disabled minus ``base_loss`` (positive: worse).
    head_loss_deltas: np.ndarray
    #: (layers,): mean dev loss with that layer's heads disabled minus ``base_loss``.
    layer_loss_deltas: np.ndarray
    #: (configurations, n): each configuration's prediction for each dev example (corpus order): with every head on
    #: (row 0), each head alone disabled in (layer, head) order, then each layer (when swept). Class ids in the
    #: smallest integer type, or float32 scores for a regression task. None: not kept; no :meth:`draws` then.
    predictions: np.ndarray | None = field(default=None, repr=False)
    #: (n,): the dev examples' label ids (class ids, or scores), in corpus order; None with no ``predictions``.
    labels: np.ndarray | None = field(default=None, repr=False)

    def harm(self, by: str = "loss") -> np.ndarray:
        """(layers, heads): how much disabling each head alone hurts: loss increase, or metric drop."""
        if by == "loss":
            return self.head_loss_deltas
        if by == "metric":
            return -self.head_deltas
        raise ValueError(f"by must be 'loss' or 'metric', not {by!r}")

    def draws(self, n_resamples: int = 2000, seed: int = 0) -> Draws | None:
        """Bootstrap draws of ``head_deltas`` and ``layer_deltas`` over the dev examples: the metric of every
        configuration recomputed on each resample of the examples (:func:`glue_metric_draws`, all resamples at
        once), minus the base's on the same resample; a configuration that predicts as the base on every example
        changes nothing on any resample. ``values["head_deltas"]`` is (resamples, layers, heads),
        ``values["layer_deltas"]`` (resamples, layers), NaN where the layers were not swept. None without
        :attr:`predictions`; every draw NaN (so NaN intervals) with fewer than 3 examples or predictions that do not
        fit the deltas, the task or the metric."""
        if self.predictions is None or self.labels is None:
            return None
        predictions, labels = np.asarray(self.predictions), np.asarray(self.labels).ravel()
        layers, heads = np.shape(self.head_deltas)
        n, configs = len(labels), 1 + layers * heads
        deltas = np.full((n_resamples, layers * heads + layers), np.nan)  # the heads', then the layers'
        fits = (
            predictions.ndim == 2 and predictions.shape[1] == n and predictions.shape[0] in (configs, configs + layers)
        )
        if fits and n >= 3:
            with contextlib.suppress(BertologyError, ValueError):  # a task or a metric not known here
                weights = bootstrap_weights(n, n_resamples, seed)
                scores = glue_metric_draws(self.task, self.metric, predictions, labels, weights)
                changed = scores[1:] - scores[0]
                changed[(predictions[1:] == predictions[0]).all(1)] = 0.0
                deltas[:, : len(changed)] = changed.T
        head_deltas = deltas[:, : layers * heads].reshape(n_resamples, layers, heads)
        return Draws({"head_deltas": head_deltas, "layer_deltas": deltas[:, layers * heads :]}, f"{n} dev examples")

    def summary(self, tolerance: float = 0.0) -> dict:
        d = self.head_deltas
        return {
            "base": self.base,
            "share_heads_improve": float((d > tolerance).mean()),
            "share_heads_not_hurting": float((d >= -tolerance).mean()),
            "worst_head_delta": float(d.min()),
            "best_head_delta": float(d.max()),
            "best_layer_delta": float(self.layer_deltas.max()),
            "worst_layer_delta": float(self.layer_deltas.min()),
            "base_loss": self.base_loss,
            "share_heads_lower_loss": float((self.head_loss_deltas < 0).mean()),
            "worst_head_loss_delta": float(self.head_loss_deltas.max()),
        }

    def metrics(self, prefix: str, tolerance: float = 0.0) -> dict:
        """The deltas of every head and layer and :meth:`summary` (base as ``base_score``), as ``{prefix}.<name>``."""
        arrays = {
            "head_deltas": self.head_deltas,
            "layer_deltas": self.layer_deltas,
            "head_loss_deltas": self.head_loss_deltas,
            "layer_loss_deltas": self.layer_loss_deltas,
        }
        summary = self.summary(tolerance)
        return {f"{prefix}.{k}": v for k, v in {"base_score": summary.pop("base"), **arrays, **summary}.items()}


def ablation_sweep(
    loaded: LoadedModel,
    dev: DevSet,
    *,
    metric: str = "score",
    layers: bool = True,
    configs_per_pass: int | None = None,
    cache: bool = False,
    progress: bool = True,
) -> AblationResult:
    """Disable each head alone (and, with ``layers``, each layer's heads together); metric and loss deltas, and
    each configuration's predictions for every dev example (for :meth:`AblationResult.draws`).

    ``cache``: reuse the logits of an earlier identical sweep (:func:`predict_with_gates`). ``progress``:
    a bar of the forward passes.
    """
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
    logits = predict_with_gates(
        loaded,
        dev,
        torch.stack(stack),
        configs_per_pass=configs_per_pass,
        cache=cache,
        progress=progress,
        desc=f"ablation sweep {dev.task}",
    )
    predictions = _predictions(dev.task, logits)
    deltas = []
    for values in (_scores(dev, logits, metric), _mean_losses(dev, logits)):
        heads = values[1 : 1 + n_layers * n_heads].reshape(n_layers, n_heads) - values[0]
        layer_d = values[1 + n_layers * n_heads :] - values[0] if layers else np.full(n_layers, np.nan)
        deltas.append((float(values[0]), heads, layer_d))
    (base, heads, layer_d), (base_loss, head_loss, layer_loss) = deltas
    return AblationResult(
        dev.task, metric, base, heads, layer_d, base_loss, head_loss, layer_loss, predictions, np.array(dev.labels)
    )


# --------------------------------------------------------------------------- Michel's importance


def normalise_per_layer(importance: np.ndarray, exponent: float = 2.0) -> np.ndarray:
    """Each layer's importances divided by their L``exponent`` norm (Michel et al.: L2)."""
    importance = np.asarray(importance, dtype=np.float64)
    norm = np.power(np.power(np.abs(importance), exponent).sum(-1, keepdims=True), 1 / exponent)
    return importance / np.where(norm > 0, norm, 1.0)


def head_importance(
    loaded: LoadedModel,
    dev: DevSet,
    *,
    mask=None,
    normalise: bool = True,
    per_example: bool = True,
    cache: bool = False,
    progress: bool = True,
) -> np.ndarray:
    """Michel et al.'s head importance ``E_x |dL(x)/dxi_h|`` over the dev set, (layers, heads).

    One forward and one backward pass per batch for all heads. With ``per_example`` (default)
    each example has its own gates, so the absolute value is taken per example as in the
    paper's definition; otherwise one gate per head per batch (the reference implementation's
    batch-level estimate). ``mask`` (layers, heads; 0 = pruned) is applied while measuring
    (pruned heads get importance 0). ``normalise``: unit L2 norm per layer. ``cache``: reuse the
    importance an earlier call measured with the same model, dev set, mask and estimate. ``progress``:
    a bar of the dev examples.
    """
    loaded = require_loaded(loaded)
    n_layers, n_heads = gate_shape(loaded)
    mask_t = torch.ones(n_layers, n_heads) if mask is None else torch.as_tensor(mask, dtype=torch.float32)
    importance = cached_result(
        "importance",
        loaded,
        dev,
        {"mask": _gates_digest(mask_t.numpy()), "per_example": per_example},
        lambda: _importance(loaded, dev, mask_t, per_example, progress),
        cache,
    )
    return normalise_per_layer(importance) if normalise else importance


def _importance(
    loaded: LoadedModel, dev: DevSet, mask_t: torch.Tensor, per_example: bool, progress: bool = False
) -> np.ndarray:
    n_layers, n_heads = mask_t.shape
    regression = task_spec(dev.task).is_regression
    model = loaded.model
    total = torch.zeros(n_layers, n_heads, dtype=torch.float64)
    with (
        classifier_inference(loaded),
        tqdm(total=len(dev), desc=f"importance {dev.task}", unit="example", disable=not progress) as bar,
    ):
        for batch, rows in zip(dev.batches, dev.rows):
            b = len(rows)
            gates = torch.ones(b if per_example else 1, n_layers, n_heads, device=loaded.device, requires_grad=True)
            applied = (gates * mask_t.to(loaded.device)).expand(b, n_layers, n_heads)
            targets = torch.as_tensor(dev.labels[rows], device=loaded.device)
            with edit_attention(model, gate_edit(applied)):
                loss = example_losses(model(**batch).logits, targets, regression)
            # the gates' gradient alone: backward() would also fill every weight's .grad, work nobody reads
            (grad,) = torch.autograd.grad(loss.sum(), gates)
            grad = grad.abs().double().cpu()
            total += grad.sum(0) if per_example else grad[0]
            bar.update(b)
    return (total / (len(dev) if per_example else len(dev.batches))).numpy() * mask_t.numpy()


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
    #: The task and the metric of :attr:`scores` (for :meth:`draws`).
    task: str = ""
    metric: str = "score"
    #: (steps, n): each step's prediction for each dev example (corpus order), as
    #: :attr:`AblationResult.predictions`; None: not kept, no :meth:`draws` then.
    predictions: np.ndarray | None = field(default=None, repr=False)
    #: (n,): the dev examples' label ids, in corpus order; None with no ``predictions``.
    labels: np.ndarray | None = field(default=None, repr=False)

    def prunable(self, keep: float = 0.9) -> float:
        return prunable_share(self.fractions, self.scores, self.base, keep)

    def draws(self, keep: float = 0.9, n_resamples: int = 2000, seed: int = 0) -> Draws | None:
        """Bootstrap draws over the dev examples: ``values["scores"]`` (resamples, steps), the metric of every step
        recomputed on each resample (:func:`glue_metric_draws`), and ``values["prunable"]`` (resamples,), the
        :meth:`prunable` share on each (against that resample's own unpruned score). Curves on one dev set drawn
        with one ``seed`` see the same resamples. None without :attr:`predictions`; NaN draws with fewer than 3
        examples, or predictions that do not fit the steps, the task or the metric."""
        if self.predictions is None or self.labels is None:
            return None
        predictions, labels = np.asarray(self.predictions), np.asarray(self.labels).ravel()
        fractions, n = np.asarray(self.fractions, dtype=np.float64), len(labels)
        scores = np.full((n_resamples, len(fractions)), np.nan)
        if predictions.shape == (len(fractions), n) and n >= 3:
            with contextlib.suppress(BertologyError, ValueError):  # a task or a metric not known here
                weights = bootstrap_weights(n, n_resamples, seed)
                scores = glue_metric_draws(self.task, self.metric, predictions, labels, weights).T
        if not len(fractions):  # no steps: nothing to draw
            return Draws({"scores": scores, "prunable": np.full(n_resamples, np.nan)}, f"{n} dev examples")
        shares = np.where(np.isfinite(scores).all(1), prunable_share(fractions, scores, scores[:, 0], keep), np.nan)
        return Draws({"scores": scores, "prunable": shares}, f"{n} dev examples")

    def masks_keeping(self, kept, shape: tuple[int, int]) -> np.ndarray:
        """(len(kept), layers, heads) gates keeping ``kept[i]`` heads: the first ones of :attr:`order` pruned.

        Scores this order at head counts of another method's (L0 gates), not only at the curve's steps.
        """
        kept = np.asarray(kept, dtype=np.int64).ravel()
        total = shape[0] * shape[1]
        if ((kept < 0) | (kept > total)).any() or (total - kept).max(initial=0) > len(self.order):
            raise ValueError(
                f"kept counts {kept.tolist()} need an order of up to {total} heads; it has {len(self.order)}"
            )
        masks = np.ones((len(kept), *shape))
        for row, count in enumerate(kept):
            for layer, head in self.order[: total - int(count)]:
                masks[row, layer, head] = 0
        return masks


def _steps(total: int, step: float) -> list[int]:
    counts = sorted({int(round(f * total)) for f in np.arange(0, 1 + 1e-9, step)} | {0})
    return [c for c in counts if c <= total]


def pruning_curve(
    loaded: LoadedModel,
    dev: DevSet,
    *,
    step: float = 0.1,
    metric: str = "score",
    recompute: bool = True,
    importance_dev: DevSet | None = None,
    importance: np.ndarray | None = None,
    configs_per_pass: int | None = None,
    cache: bool = False,
    progress: bool = True,
) -> PruningCurve:
    """Prune the least important heads in ``step`` shares of all heads; the metric after each step.

    Importance (normalised per layer) is measured on ``importance_dev`` (default: ``dev``) and,
    with ``recompute``, measured again with the heads pruned so far switched off, as Michel et al.
    ``importance``: the first measurement, when already made (:func:`head_importance` on that dev set).
    ``cache``: reuse the importances and logits of an earlier identical curve. ``progress``: a bar of
    the pruning steps, then one of the forward passes that score them.
    """
    n_layers, n_heads = gate_shape(loaded)
    total = n_layers * n_heads
    counts = _steps(total, step)
    mask = np.ones((n_layers, n_heads))
    order: list = []
    masks = [mask.copy()]
    imp_dev = importance_dev or dev
    with tqdm(total=len(counts) - 1, desc=f"pruning curve {dev.task}", unit="step", disable=not progress) as bar:
        if importance is None:
            importance = head_importance(loaded, imp_dev, cache=cache, progress=False)
        importance = np.asarray(importance)
        if importance.shape != (n_layers, n_heads):
            raise ValueError(f"importance has shape {importance.shape}, the model's heads {(n_layers, n_heads)}")
        for count in counts[1:]:
            if recompute and order:
                importance = head_importance(loaded, imp_dev, mask=mask, cache=cache, progress=False)
            candidates = [(importance[l, h], l, h) for l in range(n_layers) for h in range(n_heads) if mask[l, h]]
            candidates.sort()
            for _, l, h in candidates[: count - len(order)]:
                mask[l, h] = 0
                order.append((l, h))
            masks.append(mask.copy())
            bar.update()
    logits = predict_with_gates(
        loaded,
        dev,
        np.stack(masks),
        configs_per_pass=configs_per_pass,
        cache=cache,
        progress=progress,
        desc=f"pruning curve {dev.task}: scoring",
    )
    scores = _scores(dev, logits, metric)
    return PruningCurve(
        "importance",
        np.array(counts) / total,
        scores,
        float(scores[0]),
        order,
        dev.task,
        metric,
        _predictions(dev.task, logits),
        np.array(dev.labels),
    )


def random_pruning_curves(
    loaded: LoadedModel,
    dev: DevSet,
    *,
    seeds: Sequence[int] = (0, 1, 2),
    step: float = 0.1,
    metric: str = "score",
    configs_per_pass: int | None = None,
    cache: bool = False,
    progress: bool = True,
) -> list[PruningCurve]:
    """Pruning in a random order (one curve per seed), same steps as :func:`pruning_curve`.

    ``cache``: reuse the logits of earlier identical curves. ``progress``: a bar of each curve's forward passes.
    """
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
        logits = predict_with_gates(
            loaded,
            dev,
            np.stack(masks),
            configs_per_pass=configs_per_pass,
            cache=cache,
            progress=progress,
            desc=f"random pruning {dev.task}, seed {seed}",
        )
        scores = _scores(dev, logits, metric)
        curves.append(
            PruningCurve(
                f"random (seed {seed})",
                np.array(counts) / total,
                scores,
                float(scores[0]),
                [divmod(int(i), n_heads) for i in perm],
                dev.task,
                metric,
                _predictions(dev.task, logits),
                np.array(dev.labels),
            )
        )
    return curves


def prunable_share(fractions, scores, base, keep: float = 0.9):
    """The largest share pruned before the metric first drops below ``keep`` x ``base``.

    ``scores`` (steps,) with a float ``base`` gives a float; ``scores`` with leading axes (e.g. bootstrap draws,
    ``(draws, steps)``) and ``base`` one per row give one share per row."""
    fractions, scores = np.asarray(fractions, dtype=np.float64), np.asarray(scores, dtype=np.float64)
    below = scores < keep * np.asarray(base, dtype=np.float64)[..., None]
    first = below.argmax(-1)  # the first step under the line
    shares = np.where(below.any(-1), np.where(first > 0, fractions[first - 1], 0.0), fractions[-1])
    return float(shares) if shares.ndim == 0 else shares


def importance_ablation_agreement(
    importance: np.ndarray, ablation: AblationResult, *, by: str = "loss"
) -> tuple[float, float]:
    """Spearman's rho (and p-value) of importance with the harm of disabling each head alone.

    ``by="loss"``: the increase of the mean dev loss (what importance estimates to first order);
    ``"metric"``: the drop of the metric (mostly ties on a small dev set). nan when either is constant.
    """
    from scipy.stats import spearmanr

    importance, harm = np.ravel(importance), np.ravel(ablation.harm(by))
    if np.ptp(importance) == 0 or np.ptp(harm) == 0:
        return float("nan"), float("nan")
    rho, p = spearmanr(importance, harm)
    return float(rho), float(p)


# --------------------------------------------------------------------------- physical pruning

_PRUNED = "_bertology_pruned_heads"


def _keep_rows(linear: nn.Linear, index: torch.Tensor, dim: int) -> nn.Linear:
    """A copy of ``linear`` keeping only ``index`` along its output (dim 0) or input (dim 1) features."""
    weight = linear.weight.index_select(dim, index).detach().clone()
    bias: torch.Tensor | None = linear.bias
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
    module = architectures.torch_module(model)
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
    module = architectures.torch_module(model)
    spec = architectures.arch_spec(module)
    if spec.position_bias is not None:
        raise ModelNotAvailableError(
            f"{type(module).__name__}: its position bias ({spec.position_bias}) is computed once for all heads of "
            "every layer, so its heads can only be gated"
        )
    if spec.heads_attr is None:
        raise ModelNotAvailableError(
            f"{type(module).__name__}: its self-attention modules keep no head count of their own "
            "(ArchSpec.heads_attr), so its heads can only be gated"
        )
    attentions, blocks = architectures.self_attention_modules(module), architectures.layers(module)
    if not isinstance(heads, dict):
        mask = np.asarray(heads)
        heads = {l: [int(h) for h in np.nonzero(mask[l] == 0)[0]] for l in range(mask.shape[0])}
    done: dict = getattr(module, _PRUNED, {})
    for layer, remove in heads.items():
        remove = set(int(h) for h in remove) - set(done.get(layer, ()))
        if not remove:
            continue
        attn = attentions[layer]
        n_now = architectures.attention_heads(module, layer)
        projections = architectures.qkv(module, layer)  # refuses a fused projection
        size = projections[0].out_features // n_now
        original = sorted(set(range(n_now + len(done.get(layer, ())))) - set(done.get(layer, ())))
        keep = [i for i, h in enumerate(original) if h not in remove]
        if len(remove - set(original)):
            raise ValueError(f"layer {layer} has no heads {sorted(remove - set(original))}")
        if not keep:
            raise ValueError(f"pruning every head of layer {layer} is not supported; gate the layer instead")
        output = architectures.attention_output(module, layer)
        device = output.weight.device
        index = (torch.as_tensor(keep, device=device)[:, None] * size + torch.arange(size, device=device)).flatten()
        for path, proj in zip((spec.query, spec.key, spec.value), projections):
            attn.set_submodule(str(path), _keep_rows(proj, index, 0))
        blocks[layer].set_submodule(spec.attention_output, _keep_rows(output, index, 1))
        setattr(attn, spec.heads_attr, len(keep))
        if hasattr(attn, "all_head_size"):
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
def attention_change(
    before: LoadedModel, after: LoadedModel, corpus: Corpus, *, max_tokens: int = 128, batch_size: int = 16
) -> np.ndarray:
    """Mean over ``corpus`` of the cosine similarity of each head's attention map in ``before`` and ``after``.

    Both models see the same token ids (``after``'s tokenizer; they must share a vocabulary).
    Each map is compared over its real tokens only (queries and keys); padding is left out.
    Returns (layers, heads).
    """
    limit = min(max_tokens, before.max_tokens, after.max_tokens)
    encodings = encode(after.tokenizer, list(corpus), limit)
    a_padding = Padding.of(after)  # the same padded ids for both; token types where each model takes them
    b_padding = Padding(a_padding.pad_id, architectures.uses_token_types(before))
    states = [(m, m.model.training) for m in (before, after)]
    for m, _ in states:
        m.model.eval()
    total: torch.Tensor | None = None
    n = 0
    try:
        for rows in plan_batches([len(e["input_ids"]) for e in encodings], batch_size):
            chunk = [encodings[i] for i in rows]
            a_batch = a_padding.collate(chunk, after.device)
            b_batch = b_padding.collate(chunk, before.device)
            real = b_batch["attention_mask"].float()
            pair = (real[:, :, None] * real[:, None, :])[:, None]  # (batch, 1, queries, keys)
            per_layer = []
            for x, y in zip(_attentions(before, b_batch), _attentions(after, a_batch)):
                x, y = x * pair, (y.to(x.device)) * pair
                dot = (x * y).sum((-1, -2))
                norm = x.pow(2).sum((-1, -2)).sqrt() * y.pow(2).sum((-1, -2)).sqrt()
                per_layer.append(dot / norm.clamp_min(1e-12))
            sims = torch.stack(per_layer, 1).double().sum(0).cpu()  # (layers, heads)
            total = sims if total is None else total + sims
            n += len(chunk)
    finally:
        for m, was in states:
            m.model.train(was)
    if total is None:
        raise ValueError("no items to compare")
    return (total / n).numpy()


def layer_means(values: np.ndarray) -> np.ndarray:
    """Mean of a (layers, heads) array per layer."""
    return np.asarray(values, dtype=float).mean(-1)


def plot_pruning_curves(
    curve: PruningCurve, random_curves: Sequence[PruningCurve], *, keep: float = 0.9, task: str = "", ax=None
):
    """The score against the share of heads pruned: by importance, the random orders' mean and range, and the
    ``keep`` share of the original score (dotted). Returns the axes."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    x = curve.fractions * 100
    ax.plot(x, curve.scores, "o-", label=f"by importance (prunable {curve.prunable(keep):.0%})")
    rand = np.stack([r.scores for r in random_curves])
    prunable = np.mean([r.prunable(keep) for r in random_curves])
    ax.plot(x, rand.mean(0), "s--", color="gray", label=f"random, mean of {len(rand)} (prunable {prunable:.0%})")
    ax.fill_between(x, rand.min(0), rand.max(0), color="gray", alpha=0.2)
    ax.axhline(keep * curve.base, color="k", ls=":", lw=1, label=f"{keep:.0%} of the original")
    ax.set(
        xlabel="% of heads pruned",
        ylabel=f"dev score ({task})" if task else "dev score",
        title=f"{task}: pruning heads" if task else "pruning heads",
    )
    ax.legend(fontsize=8)
    return ax
