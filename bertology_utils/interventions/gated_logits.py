"""The logits of gate configurations: many ways of disabling heads scored on one dev set, in shared passes.

A gate scales a head's output (1 on, 0 off; :func:`~bertology_utils.interventions.editing.gate_heads`'s
mechanism). Disabling each head alone and each layer (Kovaleva et al. 2019, "Revealing the Dark Secrets of
BERT", https://arxiv.org/abs/1908.08593), the steps of a pruning curve (Michel et al. 2019, "Are Sixteen Heads
Really Better than One?", https://arxiv.org/abs/1905.10650) and the masks of L0 gates are all *gate
configurations*, (L, H) arrays; :func:`predict_with_gates` runs many of them in one forward pass and stores
their logits in the results cache. The rest reads those logits: the GLUE metric, the mean loss and the
predictions of each configuration.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from bertology_utils.core import architectures
from bertology_utils.core.batching import to_device
from bertology_utils.core.errors import ModelNotAvailableError
from bertology_utils.core.models import LoadedModel
from bertology_utils.core.typing import HeadDraws, SampleValues
from bertology_utils.interventions.dev_sets import DevSet
from bertology_utils.interventions.editing import classifier_inference, edit_attention
from bertology_utils.interventions.head_gates import example_losses, gate_edit, require_loaded
from bertology_utils.interventions.results_cache import cached_result
from bertology_utils.interventions.scoring import glue_metrics, task_spec

__all__ = [
    "gates_digest",
    "gate_shape",
    "predict_with_gates",
    "config_scores",
    "config_mean_losses",
    "config_predictions",
    "scores_for_gates",
]


def gates_digest(gates: np.ndarray) -> str:
    """What the results cache keys gates by.

    :param gates: gate values of any shape, e.g. (configs, L, H).
    :returns: the sha256 (hex) of their shape and their float32 values.
    """
    gates = np.ascontiguousarray(gates, dtype=np.float32)
    return hashlib.sha256(f"{gates.shape}".encode() + gates.tobytes()).hexdigest()


def gate_shape(loaded: LoadedModel) -> tuple[int, int]:
    """(L, H) of the model's gates, read from the model itself (heads as the first layer has them now).

    A gate acts on one layer's call (:func:`~bertology_utils.interventions.editing.gate_heads`), so a model whose
    layers share their weights (ALBERT) has one row per layer it runs.

    :param loaded: the model.
    :returns: (L, H).
    """
    return len(architectures.layers(loaded, shared=True)), architectures.attention_heads(loaded, 0)


def _repeat(batch: dict, copies: int) -> dict:
    return {k: v.repeat(copies, *([1] * (v.dim() - 1))) for k, v in batch.items()}


@contextlib.contextmanager
def _copies_from(layers: list[nn.Module], first: int, rows: int, copies: int) -> Iterator[None]:
    """Run layers below ``first`` once on the batch, then ``copies`` copies of it from layer ``first`` on.

    A pre-hook on each layer from ``first`` on repeats every per-example tensor argument that
    still has the batch's ``rows`` (the hidden states entering layer ``first``; the attention
    mask, position bias... of every later layer), in the layout of :func:`_repeat`.
    """

    def repeat(value: object) -> object:
        if torch.is_tensor(value) and value.dim() >= 2 and value.shape[0] == rows:
            return value.repeat(copies, *([1] * (value.dim() - 1)))
        return value

    def hook(_module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        return tuple(repeat(a) for a in args), {k: repeat(v) for k, v in kwargs.items()}

    handles = [layer.register_forward_pre_hook(hook, with_kwargs=True) for layer in layers[first:]]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def _first_gated_layers(gate_stack: HeadDraws) -> SampleValues:
    """For each configuration, the first layer with a gate other than 1 (the layer count when none)."""
    touched = (gate_stack != 1).any(-1)  # (configs, layers)
    first = torch.where(touched.any(-1), touched.float().argmax(-1), torch.tensor(gate_stack.shape[1]))
    return first.numpy()


def predict_with_gates(
    loaded: LoadedModel,
    dev: DevSet,
    gate_stack: np.ndarray | torch.Tensor,
    *,
    configs_per_pass: int | None = None,
    rows_per_pass: int = 128,
    cache: bool = False,
    progress: bool = False,
    desc: str = "gated passes",
) -> np.ndarray:
    """Logits for every gate configuration: ``gate_stack`` (configs, L, H) -> (configs, n, classes).

    Several configurations go through the model together: each batch is repeated once per
    configuration, with that configuration's gates on its copy; ``configs_per_pass`` of them
    (default: as many as fit in ``rows_per_pass`` rows). Configurations are grouped by the
    first layer they gate, and a group's copies are made only at that layer: the layers below
    it run once per pass, not once per configuration (disabling a head of the last layer
    costs about one layer per configuration, not the whole model). ``cache``: read the logits
    stored by an earlier call with the same model, dev set and gates, or store them. ``progress``:
    a bar labelled ``desc`` counting the forward passes.

    :param loaded: a sequence classifier.
    :param dev: the encoded dev set.
    :param gate_stack: gates, (configs, L, H), or one configuration (L, H); 1 keeps a head, 0 disables it.
    :param configs_per_pass: configurations per forward pass (default: as many as ``rows_per_pass`` allows).
    :param rows_per_pass: rows per forward pass when ``configs_per_pass`` is not given.
    :param cache: read and store the logits in the results cache.
    :param progress: show a bar of the forward passes.
    :param desc: the bar's label.
    :returns: float32 logits, (configs, n, classes), the examples in corpus order.
    :raises ModelNotAvailableError: when the model does not return one row of logits per gated copy.
    """
    loaded = require_loaded(loaded)
    # on the host, detached: its digest reads it, whatever device or graph the caller's gates came from
    gate_stack = torch.as_tensor(gate_stack, dtype=torch.float32).detach().cpu()
    if gate_stack.dim() == 2:
        gate_stack = gate_stack[None]
    fields = {"gates": gates_digest(gate_stack.numpy()), "configs_per_pass": configs_per_pass, "rows": rows_per_pass}
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
    gate_stack: HeadDraws,
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
    # each pass's logits stay on the device, read in one copy at the end: a read per pass would wait for the device
    done: list[tuple[np.ndarray, np.ndarray, torch.Tensor]] = []

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
                        logits = model(**batch).logits.float().repeat(c, 1)
                    else:
                        # copy k: configuration index[k]; on the device in one copy, not one per layer
                        gates = to_device(gate_stack[index].repeat_interleave(b, dim=0), loaded.device)
                        late = c > 1 and f > 0 and not shared  # copies made at layer f (one copy needs none)
                        with contextlib.ExitStack() as stack:
                            stack.enter_context(edit_attention(model, gate_edit(gates, f if late else 0)))
                            if late:
                                stack.enter_context(_copies_from(layers, f, b, c))
                            logits = model(**(batch if late else _repeat(batch, c))).logits.float()
                    if logits.shape[0] != b * c:
                        raise ModelNotAvailableError(
                            f"{type(model).__name__}: expected {b * c} rows of logits, got {logits.shape[0]}"
                        )
                    done.append((index, rows, logits))
                    bar.update()
    if not done:
        raise ValueError(f"{dev.task}: the dev set has no examples")
    values = torch.cat([logits for *_, logits in done]).cpu().numpy()
    out = np.zeros((n_configs, len(dev), values.shape[-1]), dtype=np.float32)
    starts = np.cumsum([0] + [len(logits) for *_, logits in done])
    for (index, rows, _), start, end in zip(done, starts[:-1], starts[1:]):
        out[np.ix_(index, rows)] = values[start:end].reshape(len(index), len(rows), -1)
    return out


def config_scores(dev: DevSet, logits: np.ndarray, metric: str) -> SampleValues:
    """The GLUE ``metric`` of each configuration's logits.

    :param dev: the dev set the logits were computed on.
    :param logits: (configs, n, classes), as :func:`predict_with_gates` returns them.
    :param metric: a metric of the task's :func:`~bertology_utils.interventions.scoring.glue_metrics`
        (``"score"``: the task's main one).
    :returns: (configs,).
    """
    labels = dev.raw_labels or dev.labels
    return np.array([glue_metrics(dev.task, p, labels)[metric] for p in logits])


def config_mean_losses(dev: DevSet, logits: np.ndarray) -> SampleValues:
    """Mean dev loss (the classifier's training loss) of each configuration's logits, all configurations at once.

    :param dev: the dev set the logits were computed on.
    :param logits: (configs, n, classes).
    :returns: (configs,), float64.
    """
    configs, n = logits.shape[:2]
    targets = torch.as_tensor(dev.labels).repeat(configs)
    losses = example_losses(
        torch.from_numpy(logits).reshape(configs * n, -1), targets, task_spec(dev.task).is_regression
    )
    return losses.reshape(configs, n).double().mean(1).numpy()


def config_predictions(task: str, logits: np.ndarray) -> np.ndarray:
    """What each configuration's logits predict for each example (what
    :func:`~bertology_utils.interventions.scoring.glue_metrics` reads).

    :param task: the GLUE task.
    :param logits: (configs, n, classes).
    :returns: (configs, n): class ids in the smallest integer type, or float32 scores for a regression task.
    """
    if task_spec(task).is_regression:
        return logits[..., 0].astype(np.float32)
    return logits.argmax(-1).astype(np.min_scalar_type(max(logits.shape[-1] - 1, 0)))


def scores_for_gates(
    loaded: LoadedModel,
    dev: DevSet,
    gate_stack: np.ndarray | torch.Tensor,
    *,
    metric: str = "score",
    configs_per_pass: int | None = None,
    cache: bool = False,
    progress: bool = False,
    desc: str = "gated passes",
) -> SampleValues:
    """The GLUE ``metric`` for each gate configuration: :func:`predict_with_gates`, then :func:`config_scores`.

    :param loaded: a sequence classifier.
    :param dev: the encoded dev set.
    :param gate_stack: gates, (configs, L, H).
    :param metric: the metric (``"score"``: the task's main one).
    :param configs_per_pass: configurations per forward pass.
    :param cache: read and store the logits in the results cache.
    :param progress: show a bar of the forward passes.
    :param desc: the bar's label.
    :returns: (configs,).
    """
    logits = predict_with_gates(
        loaded, dev, gate_stack, configs_per_pass=configs_per_pass, cache=cache, progress=progress, desc=desc
    )
    return config_scores(dev, logits, metric)
