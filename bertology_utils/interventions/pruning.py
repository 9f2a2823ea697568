"""Disabling heads, Michel's head importance and pruning curves.

Reproduces the head experiments of Kovaleva et al. (2019, "Revealing the Dark Secrets of BERT",
https://arxiv.org/abs/1908.08593) and Michel et al. (2019, "Are Sixteen Heads Really Better than One?",
https://arxiv.org/abs/1905.10650) on any BERT-style sequence classifier (the layer and head counts come from
the model):

* :func:`ablation_sweep` — disable each head alone and each layer alone on a dev set; the change
  of the GLUE metric and of the mean dev loss (the classifier's training loss: continuous, so it
  ranks heads even where the metric of a small dev set ties) as ``(L, H)`` and
  ``(L,)`` arrays, with every configuration's per-example predictions, so that
  :meth:`AblationResult.draws` can resample the dev examples;
* :func:`head_importance` — Michel's importance ``I_h = E_x |dL(x)/dxi_h|``: per-example gates
  ``xi`` (all 1) on every head, one backward pass per batch gives every example's gradient for
  every head at once; normalised per layer to unit L2 norm;
* :func:`pruning_curve` — prune the least important heads in 10% steps (importance recomputed
  after each step, as Michel et al. do) or in random order (several seeds): metric vs share
  pruned, and :func:`prunable_share`, the largest share pruned while the metric stays at or
  above 90% of the original; :func:`importance_ablation_agreement`, Spearman's rho between
  importance and the loss increase when each head alone is disabled.

Heads are disabled with gates, whose logits come from
:func:`~bertology_utils.interventions.gated_logits.predict_with_gates` on a
:class:`~bertology_utils.interventions.dev_sets.DevSet`; heads are removed for real by
:mod:`~bertology_utils.interventions.head_removal`, and what fine-tuning changes in attention is
:mod:`~bertology_utils.interventions.finetuning_change`'s. With ``cache=True`` the logits and the importances are
stored in the results cache (:mod:`~bertology_utils.interventions.results_cache`), keyed by the model's
weights, the encoded dev set, the gates and
:data:`~bertology_utils.interventions.results_cache.RESULTS_VERSION`, and read back by a later run that asks
for the same; a re-run of a notebook then redoes only the cheap steps.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch
from tqdm.auto import tqdm

from bertology_utils.core.batching import to_device
from bertology_utils.core.errors import BertologyError
from bertology_utils.core.models import LoadedModel
from bertology_utils.core.typing import HeadMatrix, HeadSamples, HeadTensor, LayerValues, SampleValues
from bertology_utils.core.uncertainty import Draws, bootstrap_weights
from bertology_utils.interventions.dev_sets import DevSet
from bertology_utils.interventions.editing import classifier_inference, edit_attention
from bertology_utils.interventions.gated_logits import (
    config_mean_losses,
    config_predictions,
    config_scores,
    gate_shape,
    gates_digest,
    predict_with_gates,
)
from bertology_utils.interventions.head_gates import example_losses, gate_edit, require_loaded
from bertology_utils.interventions.results_cache import cached_result
from bertology_utils.interventions.scoring import glue_metric_draws, task_spec

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "AblationResult",
    "ablation_sweep",
    "head_importance",
    "normalise_per_layer",
    "PruningCurve",
    "pruning_curve",
    "random_pruning_curves",
    "prunable_share",
    "importance_ablation_agreement",
    "plot_pruning_curves",
]

# --------------------------------------------------------------------------- ablation sweeps


@dataclass
class AblationResult:
    """Metric and loss change when each head alone / each layer alone is disabled (Kovaleva et al. 2019,
    "Revealing the Dark Secrets of BERT", https://arxiv.org/abs/1908.08593; Michel et al. 2019, "Are Sixteen Heads
    Really Better than One?", https://arxiv.org/abs/1905.10650).

    :param task: the GLUE task of the dev set.
    :param metric: the metric of :attr:`base` and the deltas.
    :param base: the metric with every head on.
    """

    task: str
    metric: str
    base: float
    #: ``(L, H)``: metric with that head disabled minus the base metric (negative: worse).
    head_deltas: HeadMatrix
    #: ``(L,)``: metric with every head of that layer disabled minus the base metric.
    layer_deltas: LayerValues
    #: Mean dev loss (the classifier's training loss) with every head on.
    base_loss: float
    #: ``(L, H)``: mean dev loss with that head disabled minus ``base_loss`` (positive: worse).
    head_loss_deltas: HeadMatrix
    #: ``(L,)``: mean dev loss with that layer's heads disabled minus ``base_loss``.
    layer_loss_deltas: LayerValues
    #: ``(configurations, N)``: each configuration's prediction for each dev example (corpus order): with every head on
    #: (row 0), each head alone disabled in (layer, head) order, then each layer (when swept). Class ids in the
    #: smallest integer type, or float32 scores for a regression task. None: not kept; no :meth:`draws` then.
    predictions: np.ndarray | None = field(default=None, repr=False)
    #: ``(N,)``: the dev examples' label ids (class ids, or scores), in corpus order; None with no ``predictions``.
    labels: SampleValues | None = field(default=None, repr=False)

    def harm(self, by: str = "loss") -> HeadMatrix:
        """How much disabling each head alone hurts.

        :param by: ``"loss"`` (the mean dev loss's increase) or ``"metric"`` (the metric's drop).
        :returns: (L, H).
        :raises ValueError: for another ``by``.
        """
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
        fit the deltas, the task or the metric.

        :param n_resamples: bootstrap resamples.
        :param seed: the resamples' seed.
        :returns: the draws, or None without :attr:`predictions`.
        """
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
        """The sweep in a few numbers: shares of heads that help or do not hurt, the best and worst head and layer.

        :param tolerance: a head "improves" when its delta exceeds this, and "does not hurt" when it is above minus it.
        :returns: name -> float.
        """
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
        """The deltas of every head and layer and :meth:`summary` (base as ``base_score``), as a notebook records them.

        :param prefix: the metrics' prefix (``"pruning.SST-2"``).
        :param tolerance: as :meth:`summary`'s.
        :returns: ``{prefix}.<name>`` -> value.
        """
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
    Kovaleva et al. 2019, "Revealing the Dark Secrets of BERT", https://arxiv.org/abs/1908.08593.

    :param loaded: a fine-tuned sequence classifier.
    :param dev: its encoded dev set.
    :param metric: the metric (``"score"``: the task's main one).
    :param layers: also disable each layer's heads together.
    :param configs_per_pass: configurations per forward pass.
    :param cache: read and store the logits in the results cache.
    :param progress: show a bar of the forward passes.
    :returns: the deltas, (L, H) and (L,), and each configuration's predictions.
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
    predictions = config_predictions(dev.task, logits)
    deltas = []
    for values in (config_scores(dev, logits, metric), config_mean_losses(dev, logits)):
        heads = values[1 : 1 + n_layers * n_heads].reshape(n_layers, n_heads) - values[0]
        layer_d = values[1 + n_layers * n_heads :] - values[0] if layers else np.full(n_layers, np.nan)
        deltas.append((float(values[0]), heads, layer_d))
    (base, heads, layer_d), (base_loss, head_loss, layer_loss) = deltas
    return AblationResult(
        dev.task, metric, base, heads, layer_d, base_loss, head_loss, layer_loss, predictions, np.array(dev.labels)
    )


# --------------------------------------------------------------------------- Michel's importance


def normalise_per_layer(importance: HeadMatrix, exponent: float = 2.0) -> HeadMatrix:
    """Each layer's importances divided by their L``exponent`` norm (L2 in
    Michel et al. 2019, "Are Sixteen Heads Really Better than One?", https://arxiv.org/abs/1905.10650).

    :param importance: (L, H).
    :param exponent: the norm's exponent.
    :returns: (L, H), float64; a layer of zeros stays zeros.
    """
    importance = np.asarray(importance, dtype=np.float64)
    norm = np.power(np.power(np.abs(importance), exponent).sum(-1, keepdims=True), 1 / exponent)
    return importance / np.where(norm > 0, norm, 1.0)


def head_importance(
    loaded: LoadedModel,
    dev: DevSet,
    *,
    mask: HeadMatrix | HeadTensor | None = None,
    normalise: bool = True,
    per_example: bool = True,
    cache: bool = False,
    progress: bool = True,
) -> HeadMatrix:
    """Michel et al.'s head importance ``E_x |dL(x)/dxi_h|`` over the dev set, (L, H).

    One forward and one backward pass per batch for all heads. With ``per_example`` (default)
    each example has its own gates, so the absolute value is taken per example as in the
    paper's definition; otherwise one gate per head per batch (the reference implementation's
    batch-level estimate). ``mask`` ((L, H); 0 = pruned) is applied while measuring
    (pruned heads get importance 0). ``normalise``: unit L2 norm per layer. ``cache``: reuse the
    importance an earlier call measured with the same model, dev set, mask and estimate. ``progress``:
    a bar of the dev examples.
    Michel et al. 2019, "Are Sixteen Heads Really Better than One?", https://arxiv.org/abs/1905.10650.

    :param loaded: a fine-tuned sequence classifier.
    :param dev: the encoded dev set the expectation runs over.
    :param mask: (L, H), 0 = pruned; default: every head on.
    :param normalise: divide each layer by its L2 norm.
    :param per_example: one gate per head per example (the paper's definition), else per batch.
    :param cache: read and store the importance in the results cache.
    :param progress: show a bar of the dev examples.
    :returns: (L, H).
    """
    loaded = require_loaded(loaded)
    n_layers, n_heads = gate_shape(loaded)
    # on the host, detached: its digest reads it, whatever device or graph the caller's mask came from
    mask_t = (
        torch.ones(n_layers, n_heads) if mask is None else torch.as_tensor(mask, dtype=torch.float32).detach().cpu()
    )
    importance = cached_result(
        "importance",
        loaded,
        dev,
        {"mask": gates_digest(mask_t.numpy()), "per_example": per_example},
        lambda: _importance(loaded, dev, mask_t, per_example, progress),
        cache,
    )
    return normalise_per_layer(importance) if normalise else importance


def _importance(
    loaded: LoadedModel, dev: DevSet, mask_t: HeadTensor, per_example: bool, progress: bool = False
) -> HeadMatrix:
    n_layers, n_heads = mask_t.shape
    regression = task_spec(dev.task).is_regression
    model = loaded.model
    # summed on the device and read once: a read per batch would wait for the device at every batch
    total = torch.zeros(n_layers, n_heads, dtype=torch.float64, device=loaded.device)
    on_device = to_device(mask_t, loaded.device)
    with (
        classifier_inference(loaded),
        tqdm(total=len(dev), desc=f"importance {dev.task}", unit="example", disable=not progress) as bar,
    ):
        for batch, rows in zip(dev.batches, dev.rows):
            b = len(rows)
            gates = torch.ones(b if per_example else 1, n_layers, n_heads, device=loaded.device, requires_grad=True)
            applied = (gates * on_device).expand(b, n_layers, n_heads)
            targets = to_device(dev.labels[rows], loaded.device)
            with edit_attention(model, gate_edit(applied)):
                loss = example_losses(model(**batch).logits, targets, regression)
            # the gates' gradient alone: backward() would also fill every weight's .grad, work nobody reads
            (grad,) = torch.autograd.grad(loss.sum(), gates)
            grad = grad.abs().double()
            total += grad.sum(0) if per_example else grad[0]
            bar.update(b)
    return (total.cpu() / (len(dev) if per_example else len(dev.batches))).numpy() * mask_t.numpy()


# --------------------------------------------------------------------------- pruning curves


@dataclass
class PruningCurve:
    """Metric against the share of heads pruned (gated to 0):
    Michel et al. 2019, "Are Sixteen Heads Really Better than One?", https://arxiv.org/abs/1905.10650.

    :param strategy: how the heads were ordered (``"importance"``, ``"random (seed 0)"``).
    :param fractions: the share of heads pruned at each step, (steps,).
    :param scores: the metric at each step, (steps,).
    :param base: the metric with every head on.
    """

    strategy: str
    fractions: np.ndarray
    scores: np.ndarray
    base: float
    #: Heads in the order they were pruned, as (layer, head) pairs.
    order: list = field(default_factory=list)
    #: The task and the metric of :attr:`scores` (for :meth:`draws`).
    task: str = ""
    metric: str = "score"
    #: ``(steps, N)``: each step's prediction for each dev example (corpus order), as
    #: :attr:`AblationResult.predictions`; None: not kept, no :meth:`draws` then.
    predictions: np.ndarray | None = field(default=None, repr=False)
    #: ``(N,)``: the dev examples' label ids, in corpus order; None with no ``predictions``.
    labels: SampleValues | None = field(default=None, repr=False)

    def prunable(self, keep: float = 0.9) -> float:
        """:func:`prunable_share` of this curve.

        :param keep: the share of :attr:`base` the metric must keep.
        :returns: the largest share of heads pruned before the metric drops below ``keep`` x :attr:`base`.
        """
        return float(prunable_share(self.fractions, self.scores, self.base, keep))

    def draws(self, keep: float = 0.9, n_resamples: int = 2000, seed: int = 0) -> Draws | None:
        """Bootstrap draws over the dev examples: ``values["scores"]`` (resamples, steps), the metric of every step
        recomputed on each resample (:func:`glue_metric_draws`), and ``values["prunable"]`` (resamples,), the
        :meth:`prunable` share on each (against that resample's own unpruned score). Curves on one dev set drawn
        with one ``seed`` see the same resamples. None without :attr:`predictions`; NaN draws with fewer than 3
        examples, or predictions that do not fit the steps, the task or the metric.

        :param keep: as :meth:`prunable`'s.
        :param n_resamples: bootstrap resamples.
        :param seed: the resamples' seed.
        :returns: the draws, or None without :attr:`predictions`.
        """
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

    def masks_keeping(self, kept: Sequence[int] | np.ndarray, shape: tuple[int, int]) -> HeadSamples:
        """Gates keeping ``kept[i]`` heads: the first ones of :attr:`order` pruned.

        Scores this order at head counts of another method's (L0 gates), not only at the curve's steps.

        :param kept: head counts to keep.
        :param shape: (L, H).
        :returns: (N, L, H), N = len(kept), 1 kept and 0 pruned.
        :raises ValueError: for a count outside [0, L x H] or one that needs more of the order than it has.
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
    importance: HeadMatrix | None = None,
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
    Michel et al. 2019, "Are Sixteen Heads Really Better than One?", https://arxiv.org/abs/1905.10650.

    :param loaded: a fine-tuned sequence classifier.
    :param dev: the encoded dev set the steps are scored on.
    :param step: the share of all heads pruned per step.
    :param metric: the metric (``"score"``: the task's main one).
    :param recompute: measure importance again after each step.
    :param importance_dev: the dev set importance is measured on (default: ``dev``).
    :param importance: the first importance, (L, H), when already measured.
    :param configs_per_pass: configurations per forward pass.
    :param cache: read and store importances and logits in the results cache.
    :param progress: show bars of the steps and the passes.
    :returns: the curve, its order the heads pruned one by one.
    :raises ValueError: when ``importance`` is not (L, H).
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
    scores = config_scores(dev, logits, metric)
    return PruningCurve(
        "importance",
        np.array(counts) / total,
        scores,
        float(scores[0]),
        order,
        dev.task,
        metric,
        config_predictions(dev.task, logits),
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

    :param loaded: a fine-tuned sequence classifier.
    :param dev: the encoded dev set.
    :param seeds: one curve per seed of the random order.
    :param step: the share of all heads pruned per step.
    :param metric: the metric (``"score"``: the task's main one).
    :param configs_per_pass: configurations per forward pass.
    :param cache: read and store the logits in the results cache.
    :param progress: show a bar of each curve's passes.
    :returns: one curve per seed.
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
        scores = config_scores(dev, logits, metric)
        curves.append(
            PruningCurve(
                f"random (seed {seed})",
                np.array(counts) / total,
                scores,
                float(scores[0]),
                [divmod(int(i), n_heads) for i in perm],
                dev.task,
                metric,
                config_predictions(dev.task, logits),
                np.array(dev.labels),
            )
        )
    return curves


def prunable_share(
    fractions: Sequence[float] | np.ndarray,
    scores: Sequence[float] | np.ndarray,
    base: float | np.ndarray,
    keep: float = 0.9,
) -> float | np.ndarray:
    """The largest share pruned before the metric first drops below ``keep`` x ``base`` (90% in
    Michel et al. 2019, "Are Sixteen Heads Really Better than One?", https://arxiv.org/abs/1905.10650).

    :param fractions: the share pruned at each step, (steps,).
    :param scores: the metric at each step, (steps,), or with leading axes (bootstrap draws: (draws, steps)).
    :param base: the unpruned metric: a float, or one per row of ``scores``.
    :param keep: the share of ``base`` the metric must keep.
    :returns: a float for (steps,) scores, else one share per row.
    """
    fractions, scores = np.asarray(fractions, dtype=np.float64), np.asarray(scores, dtype=np.float64)
    below = scores < keep * np.asarray(base, dtype=np.float64)[..., None]
    first = below.argmax(-1)  # the first step under the line
    shares = np.where(below.any(-1), np.where(first > 0, fractions[first - 1], 0.0), fractions[-1])
    return float(shares) if shares.ndim == 0 else shares


def importance_ablation_agreement(
    importance: HeadMatrix, ablation: AblationResult, *, by: str = "loss"
) -> tuple[float, float]:
    """Spearman's rho (and p-value) of importance with the harm of disabling each head alone.

    ``by="loss"``: the increase of the mean dev loss (what importance estimates to first order);
    ``"metric"``: the drop of the metric (mostly ties on a small dev set). nan when either is constant.
    Importance estimates that harm to first order:
    Michel et al. 2019, "Are Sixteen Heads Really Better than One?", https://arxiv.org/abs/1905.10650.

    :param importance: (L, H).
    :param ablation: the sweep on the same classifier.
    :param by: ``"loss"`` or ``"metric"``, as :meth:`AblationResult.harm`.
    :returns: (rho, p).
    """
    from scipy.stats import spearmanr

    importance, harm = np.ravel(importance), np.ravel(ablation.harm(by))
    if np.ptp(importance) == 0 or np.ptp(harm) == 0:
        return float("nan"), float("nan")
    rho, p = spearmanr(importance, harm)
    return float(rho), float(p)


def plot_pruning_curves(
    curve: PruningCurve,
    random_curves: Sequence[PruningCurve],
    *,
    keep: float = 0.9,
    task: str = "",
    ax: Axes | None = None,
) -> Axes:
    """The score against the share of heads pruned: by importance, the random orders' mean and range, and the
    ``keep`` share of the original score (dotted):
    Michel et al. 2019, "Are Sixteen Heads Really Better than One?", https://arxiv.org/abs/1905.10650.

    :param curve: the curve by importance.
    :param random_curves: the curves in random orders, on the same steps.
    :param keep: the share of the original score drawn as a line.
    :param task: the task, for the title and the axis.
    :param ax: the axes to draw on (default: a new figure's).
    :returns: the axes.
    """
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
