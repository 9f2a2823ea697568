"""GLUE tasks as a classifier sees them: their labels as model targets, and how its predictions are scored.

A task (:class:`TaskSpec`, by GLUE name or a user's own :class:`~bertology_utils.data.Task`) says which classes
it has (none for a regression) and which metrics score it. Dev-set metrics follow GLUE (Wang et al. 2019,
`GLUE <https://arxiv.org/abs/1804.07461>`_; :func:`glue_metrics`): accuracy (SST-2, RTE), F1 and accuracy
(MRPC), Pearson and Spearman correlations (STS-B, a regression), Matthews correlation (CoLA);
:func:`glue_metric_draws` gives the same metrics on bootstrap resamples of the examples, for many predictors at once,
and :func:`majority_baseline` the floor a classifier must clear.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from bertology_utils.core.errors import BertologyError, DataNotFoundError
from bertology_utils.data import Task, glue_task_name

__all__ = [
    "TaskSpec",
    "TASKS",
    "task_spec",
    "label_ids",
    "glue_metrics",
    "glue_metric_draws",
    "majority_baseline",
]


@dataclass(frozen=True)
class TaskSpec:
    """How a GLUE task's labels become model targets, and how it is scored.

    :param name: the task's name (GLUE's spelling, e.g. ``SST-2``, or a user's task's).
    :param label_names: class names in label-id order; empty for a regression.
    :param metrics: what :func:`glue_metrics` reports.
    :param label_map: the data layer's labels -> ids (None: they already are ids).
    """

    name: str
    #: Class names in label-id order; empty for a regression task.
    label_names: tuple[str, ...]
    #: Metric names reported by :func:`glue_metrics`; ``score`` (their mean, as GLUE does) is added.
    metrics: tuple[str, ...]
    #: How the data layer's labels map to ids (None: they already are ids).
    label_map: dict | None = None

    @property
    def is_regression(self) -> bool:
        """Whether the task is a regression (STS-B): no classes, one score per example."""
        return not self.label_names

    @property
    def num_labels(self) -> int:
        """How many outputs a classifier of the task has (1 for a regression)."""
        return 1 if self.is_regression else len(self.label_names)

    @property
    def problem_type(self) -> str:
        """transformers' ``problem_type`` of the task's classifier."""
        return "regression" if self.is_regression else "single_label_classification"


TASKS: dict[str, TaskSpec] = {
    "SST-2": TaskSpec("SST-2", ("negative", "positive"), ("accuracy",)),
    "CoLA": TaskSpec("CoLA", ("unacceptable", "acceptable"), ("matthews",)),
    "MRPC": TaskSpec("MRPC", ("not_equivalent", "equivalent"), ("f1", "accuracy")),
    # GLUE's convention: 0 = entailment, 1 = not_entailment.
    "RTE": TaskSpec(
        "RTE", ("entailment", "not_entailment"), ("accuracy",), label_map={"entailment": 0, "not_entailment": 1}
    ),
    "STS-B": TaskSpec("STS-B", (), ("pearson", "spearman")),
}


# A user's tasks (data.Task from a folder), by name, once seen: results keep the name, as for GLUE tasks.
_USER_TASKS: dict[str, TaskSpec] = {}


def task_spec(task: str | TaskSpec | Task) -> TaskSpec:
    """The :class:`TaskSpec` of a task: a GLUE name ('SST-2', 'sst2', 'glue/SST-2'...), a
    :class:`~bertology_utils.data.Task` (a user's task is scored by accuracy and is known by its
    name from then on), or a TaskSpec.

    :param task: the task, by name, as a data-layer task, or as its spec.
    :returns: its spec; BertologyError for an unknown name, or a user's task named like a GLUE task.
    """
    if isinstance(task, TaskSpec):
        return task
    if isinstance(task, Task):
        if task.glue:
            return task_spec(task.name)
        if _glue_name(task.name) is not None:
            raise BertologyError(
                f"a task of your own cannot be named like a GLUE task ({task.name!r}); give it a 'name'"
            )
        spec = TaskSpec(
            task.name, task.label_names, ("accuracy",), label_map={n: i for i, n in enumerate(task.label_names)}
        )
        _USER_TASKS[task.name] = spec
        return spec
    name = _glue_name(task)
    if name is not None:
        return TASKS[name]
    if task in _USER_TASKS:
        return _USER_TASKS[task]
    raise BertologyError(f"unknown task {task!r}; fine-tuning knows {', '.join([*TASKS, *_USER_TASKS])}")


def _glue_name(task: str) -> str | None:
    """The canonical GLUE name ``task`` spells, or None."""
    try:
        return glue_task_name(task)
    except DataNotFoundError:
        return None


def label_ids(task: str | TaskSpec | Task, labels: Sequence | np.ndarray | None) -> np.ndarray:
    """The data layer's labels as model targets: int64 class ids, or float32 scores for regression.

    :param task: the task (see :func:`task_spec`).
    :param labels: a corpus's labels, as the data layer gives them.
    :returns: ``(n,)`` targets; BertologyError when there are none or one is not among the task's classes.
    """
    spec = task_spec(task)
    if labels is None:
        raise BertologyError(f"{spec.name}: the corpus has no labels")
    if spec.is_regression:
        return np.asarray(labels, dtype=np.float32)
    label_map = spec.label_map
    if label_map:
        unknown = sorted({str(label) for label in labels} - {str(k) for k in label_map})
        if unknown:
            raise BertologyError(f"{spec.name}: labels {unknown} are not among its classes {list(label_map)}")
    mapped = [label_map[label] for label in labels] if label_map else list(labels)
    ids = np.asarray(mapped, dtype=np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= spec.num_labels):
        raise BertologyError(f"{spec.name}: labels outside 0..{spec.num_labels - 1}")
    return ids


def glue_metrics(task: str, predictions: np.ndarray, labels: Sequence | np.ndarray | None) -> dict[str, float]:
    """GLUE's metrics for ``predictions`` (logits (n, classes), class ids (n,), or scores for STS-B).

    Returns the task's metrics (see :data:`TASKS`) and ``score``, their mean (GLUE's single
    number for MRPC and STS-B). F1 is that of class 1 (MRPC's "equivalent").

    :param task: the task (see :func:`task_spec`).
    :param predictions: ``(n, classes)`` logits, ``(n,)`` class ids, or ``(n,)`` scores for a regression.
    :param labels: the n examples' labels, as the data layer gives them.
    :returns: metric name -> value, ``accuracy`` included for a classification and ``score`` always.
    """
    from scipy.stats import pearsonr, spearmanr
    from sklearn.metrics import f1_score, matthews_corrcoef

    spec = task_spec(task)
    y = label_ids(spec.name, labels)
    p = np.asarray(predictions)
    if len(p) != len(y):
        raise ValueError(f"{len(p)} predictions for {len(y)} labels")
    if spec.is_regression:
        scores = p.reshape(len(p), -1)[:, 0] if p.ndim > 1 else p
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a constant prediction has no correlation: nan
            values = {"pearson": float(pearsonr(scores, y)[0]), "spearman": float(spearmanr(scores, y)[0])}
    else:
        pred = p.argmax(-1) if p.ndim > 1 else p.astype(np.int64)
        values = {"accuracy": float((pred == y).mean())}
        if "f1" in spec.metrics:
            values["f1"] = float(f1_score(y, pred, pos_label=1, zero_division=0))
        if "matthews" in spec.metrics:
            values["matthews"] = float(matthews_corrcoef(y, pred))
    metrics = {name: values[name] for name in spec.metrics}
    if "accuracy" in values and "accuracy" not in metrics:
        metrics["accuracy"] = values["accuracy"]
    metrics["score"] = float(np.mean([values[name] for name in spec.metrics]))
    return metrics


def glue_metric_draws(
    task: str, metric: str, predictions: ArrayLike, labels: ArrayLike, weights: ArrayLike
) -> np.ndarray:
    """A GLUE ``metric`` of several predictors on bootstrap resamples of the dev examples, all at once.

    ``predictions``: (predictors, n) class ids (or scores for a regression task), one row per predictor (e.g. a gate
    configuration); ``labels``: the n examples' label ids (:func:`label_ids`); ``weights``: (resamples, n), how often
    each example is drawn in each resample (:func:`~bertology_utils.core.uncertainty.bootstrap_weights`). Returns
    (predictors, resamples): ``metric`` (``score`` or one of the task's metrics, as :func:`glue_metrics` names them) of
    each predictor on each resample; with weights all 1, what :func:`glue_metrics` gives. Accuracy, F1 (class 1) and
    Matthews correlation come from confusion counts that are weighted sums over the examples (one matrix product
    each; exact, so two predictors that agree on every example get the same value); Pearson's r from weighted
    moments, Spearman's rho from the resample's mid-ranks (ties share their mean rank). A resample whose predictions
    or labels are constant gets NaN correlations, F1 and Matthews with a zero denominator 0, as scikit-learn's.

    :param task: the task (see :func:`task_spec`).
    :param metric: ``score`` or one of the task's metrics.
    :param predictions: ``(predictors, n)`` class ids, or scores for a regression.
    :param labels: ``(n,)`` label ids.
    :param weights: ``(resamples, n)`` how often each example is drawn.
    :returns: ``(predictors, resamples)``; ValueError for a metric the task has not, or shapes that disagree.
    """
    spec = task_spec(task)
    names = spec.metrics if metric == "score" else (metric,)
    known = ("pearson", "spearman") if spec.is_regression else ("accuracy", "f1", "matthews")
    if set(names) - set(known):
        raise ValueError(f"{spec.name}: no resampled {metric!r}; the task's metrics are {', '.join(known)}")
    pred = np.atleast_2d(np.asarray(predictions))
    y = np.asarray(labels).ravel()
    w = np.atleast_2d(np.asarray(weights, dtype=np.float64))
    if pred.shape[1] != len(y) or w.shape[1] != len(y):
        raise ValueError(f"predictions {pred.shape}, labels {y.shape} and weights {w.shape} must share n examples")
    total = w.sum(1)  # (resamples,)
    if spec.is_regression:
        values = [_correlation_draws(pred.astype(np.float64), y.astype(np.float64), w, name) for name in names]
        return np.mean(values, axis=0)

    def counts(hit: np.ndarray) -> np.ndarray:  # (predictors, n) booleans -> (predictors, resamples) weighted counts
        return hit.astype(np.float64) @ w.T

    values = []
    with np.errstate(invalid="ignore", divide="ignore"):
        for name in names:
            if name == "accuracy":
                values.append(counts(pred == y) / total)
            elif name == "f1":
                tp, fp, fn = (
                    counts((pred == 1) & (y == 1)),
                    counts((pred == 1) & (y != 1)),
                    counts((pred != 1) & (y == 1)),
                )
                values.append(np.where(2 * tp + fp + fn > 0, 2 * tp / (2 * tp + fp + fn), 0.0))
            else:  # Matthews correlation, multi-class as scikit-learn's
                classes = np.union1d(np.unique(pred), np.unique(y))
                correct = counts(pred == y)
                true = np.stack([w @ (y == k).astype(np.float64) for k in classes])  # (classes, resamples)
                said = np.stack([counts(pred == k) for k in classes])  # (classes, predictors, resamples)
                cov_tp = correct * total - np.einsum("kpr,kr->pr", said, true)
                cov_pp = total**2 - (said**2).sum(0)
                cov_tt = total**2 - (true**2).sum(0)
                denominator = cov_pp * cov_tt
                values.append(np.where(denominator != 0, cov_tp / np.sqrt(np.abs(denominator)), 0.0))
    return np.mean(values, axis=0)


def _correlation_draws(pred: np.ndarray, y: np.ndarray, w: np.ndarray, name: str) -> np.ndarray:
    """Pearson's r or Spearman's rho of each row of ``pred`` with ``y`` on each weighted resample of ``w``:
    (predictors, resamples); NaN where a side of a resample is constant."""
    total = w.sum(1)  # (resamples,)
    if name == "pearson":  # weighted moments about the whole sample's means: one matrix product each
        x, y = pred - pred.mean(1, keepdims=True), y - y.mean()
        sx, sy = x @ w.T, w @ y
        sxx, syy, sxy = (x * x) @ w.T, w @ (y * y), (x * y) @ w.T
        vxx, vyy, vxy = sxx - sx**2 / total, syy - sy**2 / total, sxy - sx * sy / total
        constant = (vxx <= 1e-12 * sxx) | (vyy <= 1e-12 * syy)  # a constant side leaves only rounding
    else:  # Pearson's r of the mid-ranks, whose weighted mean is (total + 1) / 2; exact sums of quarter-integers
        order_y, w_y, ranks_y = _sorted_midranks(y, w)
        square = total * ((total + 1) / 2) ** 2
        vyy = (w_y * ranks_y * ranks_y).sum(1) - square
        ry = np.empty_like(w)
        ry[:, order_y] = ranks_y
        vxx, vxy = np.empty((2, len(pred), len(w)))
        for i, p in enumerate(pred):
            order, w_x, ranks = _sorted_midranks(p, w)
            vxx[i] = (w_x * ranks * ranks).sum(1) - square
            vxy[i] = (w_x * ranks * ry[:, order]).sum(1) - square
        constant = (vxx <= 0) | (vyy <= 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(constant, np.nan, vxy / np.sqrt(np.abs(vxx * vyy)))


def _sorted_midranks(values: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The order that sorts ``values``, and in that order the weights ``w`` (resamples, n) and each example's rank in
    each resample (its copies and its ties at their mean rank)."""
    order = np.argsort(values, kind="stable")
    ordered, weights = values[order], w[:, order]
    through = np.cumsum(weights, axis=1)  # the weight at or below each position
    starts = np.r_[True, ordered[1:] != ordered[:-1]]
    if starts.all():  # no ties: ranks below + 1 .. through, their mean
        return order, weights, through - (weights - 1) / 2
    top = through[:, np.r_[np.nonzero(starts)[0][1:], len(values)] - 1]  # (resamples, tie groups)
    bottom = np.concatenate([np.zeros((len(w), 1)), top[:, :-1]], axis=1)
    return order, weights, ((bottom + top + 1) / 2)[:, np.cumsum(starts) - 1]


def majority_baseline(task: str, labels: Sequence) -> float:
    """GLUE score of always predicting the most frequent class of ``labels`` (nan for a regression task).

    The floor a classifier must clear to have learned anything: Kovaleva et al.'s random-init
    runs, and small fine-tuning budgets on RTE, can end up there.

    :param task: the task (see :func:`task_spec`).
    :param labels: the examples' labels, as the data layer gives them.
    :returns: the majority class's GLUE ``score``; BertologyError without labels.
    """
    spec = task_spec(task)
    if spec.is_regression:
        return float("nan")
    ids = label_ids(spec.name, labels)
    if not ids.size:
        raise BertologyError(f"{spec.name}: no labels")
    majority = int(np.bincount(ids, minlength=spec.num_labels).argmax())
    return glue_metrics(spec.name, np.full(len(ids), majority), labels)["score"]
