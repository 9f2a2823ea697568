"""Trained classifiers of Kovaleva et al.'s pattern types, fitted on the project's labelled maps.

Kovaleva et al. (2019, "Revealing the Dark Secrets of BERT", https://arxiv.org/abs/1908.08593) trained a CNN on
about 400 hand-labelled maps; this module fits two estimators on the project's own labelled set.

Two estimators with scikit-learn's ``fit``/``predict``/``predict_proba``, both taking a sequence of
maps, each ``(attention (n, n), word_kinds (n,), segments (n,))`` of any length:

- :class:`FeatureClassifier`: multinomial logistic regression on
  :data:`~bertology_utils.analyses.pattern_maps.FEATURES`, interpretable
  numbers read off the map (the template scores, the share on the busiest columns, the share at
  each small offset, row entropy, ...). Saved as JSON.
- :class:`~bertology_utils.analyses.pattern_cnn.CNNClassifier`: a small convolutional network on the map resized
  to ``size`` x ``size`` (area averaging, as Kovaleva et al. resized theirs), with three fixed position channels
  beside it
  (special-token columns, same-segment cells, the diagonal band) so that what resizing blurs stays
  known. Saved as safetensors plus a JSON of its settings. Seeded and deterministic.

:func:`cross_validate` scores any of them (and the template rules) by stratified k-fold: out-of-fold
predictions, macro F1 with a bootstrap confidence interval, per-type recall and the confusion
matrix. :func:`load_classifier` reads the shipped classifiers (``LABELS_DIR/models``) and gives the
template rules as :class:`TemplateClassifier`; :func:`classify_map` and :func:`classify_items` use the
one ``method`` names through it, by default the one ``best.json`` names.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import confusion_matrix, recall_score
from sklearn.model_selection import StratifiedKFold

from bertology_utils.analyses.pattern_cnn import CNNClassifier
from bertology_utils.analyses.pattern_maps import (
    FEATURES,
    Map,
    checked_types,
    map_features,
    scored_features,
    stack_maps,
    with_anchors,
)
from bertology_utils.analyses.pattern_types import LABELS_DIR, METHODS, TYPES, classify_scores, template_scores
from bertology_utils.attention.word_attention import ItemAttention
from bertology_utils.core.errors import BertologyError
from bertology_utils.core.files import atomic_path, atomic_write_text
from bertology_utils.core.typing import SampleValues, WordMap, WordValues

__all__ = [
    "FeatureClassifier",
    "TemplateClassifier",
    "CrossValidation",
    "cross_validate",
    "MODELS_DIR",
    "load_classifier",
    "best_method",
    "classify_map",
    "classify_items",
    "fit_classifiers",
]

#: The shipped classifiers: ``features.json``, ``cnn.safetensors`` + ``cnn.json``, ``best.json``.
MODELS_DIR = LABELS_DIR / "models"


class TemplateClassifier(ClassifierMixin, BaseEstimator):
    """The transparent rules of :mod:`~bertology_utils.analyses.pattern_types` as an estimator (``fit`` learns
    nothing).

    :param thresholds: overrides of :data:`~bertology_utils.analyses.pattern_types.THRESHOLDS`.
    """

    def __init__(self, thresholds: Mapping[str, float] | None = None):
        self.thresholds = thresholds

    def fit(self, X: Sequence[Map], y: Sequence[str] | np.ndarray) -> TemplateClassifier:
        """Nothing to learn: the classes are the types.

        :param X: maps, each (attention (W, W), word kinds (W,), segments (W,)).
        :param y: their types, (n,).
        :returns: self.
        """
        self.classes_ = np.asarray(TYPES, dtype=object)
        return self

    def predict(self, X: Sequence[Map]) -> SampleValues:
        """The rules' type of each map.

        :param X: maps, each (attention (W, W), word kinds (W,), segments (W,)).
        :returns: types, (N,).
        """
        return np.asarray(
            [str(classify_scores(template_scores(*m), self.thresholds)[()]) for m in X],
            dtype=object,
        )

    def types_and_scores(
        self, attention: WordMap, word_kinds: Sequence | WordValues, segments: Sequence | WordValues
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Types of maps that share one sentence's layout, and their template scores.

        :param attention: word maps, (..., W, W).
        :param word_kinds: each word's kind, (W,).
        :param segments: each word's segment, (W,).
        :returns: the types, strings of shape ``attention.shape[:-2]``, and the template scores.
        """
        scores = template_scores(attention, word_kinds, segments)
        return classify_scores(scores, self.thresholds), scores


class FeatureClassifier(ClassifierMixin, BaseEstimator):
    """Multinomial logistic regression on standardised :data:`~bertology_utils.analyses.pattern_maps.FEATURES`
    (balanced class weights), fitted on the
    labelled maps plus ``anchors`` planted clear maps of each type
    (:func:`~bertology_utils.analyses.pattern_maps.planted_maps` with ``seed``).

    :param C: the inverse regularisation strength.
    :param anchors: planted maps of each type added to the fit.
    :param seed: the planted maps' seed.
    """

    def __init__(self, C: float = 1.0, anchors: int = 10, seed: int = 0):
        self.C, self.anchors, self.seed = C, anchors, seed

    def fit(self, X: Sequence[Map], y: Sequence[str] | np.ndarray) -> FeatureClassifier:
        """Fit on the maps and the anchors.

        :param X: maps, each (attention (W, W), word kinds (W,), segments (W,)).
        :param y: their types, (n,).
        :returns: self.
        """
        X, y = with_anchors(X, y, self.anchors, self.seed)
        features = stack_maps(X, map_features)
        self.mean_ = features.mean(0)
        self.scale_ = np.where(features.std(0) > 0, features.std(0), 1.0)
        model = LogisticRegression(C=self.C, class_weight="balanced", max_iter=5000)
        model.fit((features - self.mean_) / self.scale_, y)
        self.classes_ = model.classes_
        self.coef_, self.intercept_ = model.coef_, model.intercept_
        return self

    def decision_function_features(self, features: np.ndarray) -> np.ndarray:
        """Class scores of precomputed features.

        :param features: :func:`~bertology_utils.analyses.pattern_maps.map_features` rows, (..., F).
        :returns: (..., C).
        """
        return ((features - self.mean_) / self.scale_) @ self.coef_.T + self.intercept_

    def predict_features(self, features: np.ndarray) -> np.ndarray:
        """The type of precomputed features.

        :param features: (..., F).
        :returns: types, (...).
        """
        return self.classes_[self.decision_function_features(features).argmax(-1)]

    def predict_proba(self, X: Sequence[Map]) -> np.ndarray:
        """Each map's probability of each class (:attr:`classes_` order).

        :param X: maps, each (attention (W, W), word kinds (W,), segments (W,)).
        :returns: (N, C).
        """
        scores = self.decision_function_features(stack_maps(X, map_features))
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        return scores / scores.sum(-1, keepdims=True)

    def predict(self, X: Sequence[Map]) -> SampleValues:
        """Each map's type.

        :param X: maps, each (attention (W, W), word kinds (W,), segments (W,)).
        :returns: types, (N,).
        """
        return self.predict_features(stack_maps(X, map_features))

    def types_and_scores(
        self, attention: WordMap, word_kinds: Sequence | WordValues, segments: Sequence | WordValues
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """As :meth:`TemplateClassifier.types_and_scores`, the types by this model.

        :param attention: word maps, (..., W, W).
        :param word_kinds: each word's kind, (W,).
        :param segments: each word's segment, (W,).
        :returns: the types, strings of shape ``attention.shape[:-2]``, and the template scores.
        """
        features, scores = scored_features(attention, word_kinds, segments)
        return self.predict_features(features), scores

    def to_json(self) -> dict:
        """The fitted model as JSON-able data (what :meth:`save` writes).

        :returns: its settings, classes and coefficients.
        """
        return {
            "kind": "features",
            "features": list(FEATURES),
            "params": self.get_params(),
            "classes": [str(c) for c in self.classes_],
            "mean": self.mean_.tolist(),
            "scale": self.scale_.tolist(),
            "coef": self.coef_.tolist(),
            "intercept": self.intercept_.tolist(),
        }

    @classmethod
    def from_json(cls, record: dict) -> FeatureClassifier:
        """The model :meth:`to_json` wrote.

        :param record: the JSON data.
        :returns: the fitted model.
        :raises BertologyError: for another kind of record, or one of other features.
        """
        if record.get("kind") != "features" or record.get("features") != list(FEATURES):
            raise BertologyError("not a FeatureClassifier of this version's FEATURES")
        model = cls(**record["params"])
        model.classes_ = np.asarray(record["classes"], dtype=object)
        model.mean_, model.scale_ = np.asarray(record["mean"]), np.asarray(record["scale"])
        model.coef_, model.intercept_ = np.asarray(record["coef"]), np.asarray(record["intercept"])
        return model

    def save(self, path: str | Path) -> None:
        """Write :meth:`to_json` to ``path`` (JSON).

        :param path: the file.
        """
        atomic_write_text(path, json.dumps(self.to_json(), indent=1) + "\n")


# --------------------------------------------------------------------------- evaluation


@dataclass
class CrossValidation:
    """Out-of-fold predictions of one method and what they score.

    :param method: the estimator's name.
    :param labels: the maps' types, (N,).
    :param predicted: the out-of-fold predictions, (N,).
    :param macro_f1: the macro F1 of the predictions.
    :param recall: type -> its recall.
    :param folds: the folds.
    """

    method: str
    labels: SampleValues
    predicted: SampleValues
    macro_f1: float
    #: 95% percentile bootstrap interval of the macro F1 (maps resampled with replacement).
    interval: tuple[float, float]
    recall: dict
    folds: int
    #: Standard deviation of the bootstrap macro F1s.
    se: float = float("nan")

    def confusion(self) -> pd.DataFrame:
        """Counts of labels (rows) against predictions (columns).

        :returns: (types, types), in :data:`~bertology_utils.analyses.pattern_types.TYPES` order.
        """
        matrix = confusion_matrix(self.labels, self.predicted, labels=list(TYPES))
        return pd.DataFrame(matrix, index=pd.Index(TYPES, name="label"), columns=pd.Index(TYPES, name="predicted"))

    def summary(self) -> dict:
        """One row of :func:`fit_classifiers`' table.

        :returns: the method, the macro F1, its interval and standard error, and each type's recall.
        """
        return {
            "method": self.method,
            "macro_f1": self.macro_f1,
            "low": self.interval[0],
            "high": self.interval[1],
            "se": self.se,
            **{f"recall_{t}": r for t, r in self.recall.items()},
        }


def _macro_f1_resampled(labels: np.ndarray, predicted: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Macro F1 over :data:`TYPES` of each resample ``rows[b]`` (indices into ``labels``), all at once.

    Each resample's F1 averages the types present among its own labels, as scikit-learn's
    ``f1_score(labels[r], predicted[r], labels=present, average="macro")`` does; one confusion count per
    resample (a single ``bincount``) replaces one call per resample (2,000 bootstrap resamples of 455 maps:
    0.04 s instead of about 10 s)."""
    k = len(TYPES)
    code = {t: i for i, t in enumerate(TYPES)}
    truth = np.array([code[t] for t in labels], dtype=np.int64)
    guess = np.array([code.get(t, k) for t in predicted], dtype=np.int64)  # k: a prediction outside TYPES
    rows = np.atleast_2d(np.asarray(rows, dtype=np.int64))
    cells = (np.arange(len(rows))[:, None] * k + truth[rows]) * (k + 1) + guess[rows]
    counts = np.bincount(cells.ravel(), minlength=len(rows) * k * (k + 1)).reshape(len(rows), k, k + 1)
    hits = np.diagonal(counts[:, :, :k], axis1=1, axis2=2)
    support = counts.sum(axis=2)  # true maps of each type: > 0 where the type is present
    said = counts[:, :, :k].sum(axis=1)  # predictions of each type
    denominator = support + said
    f1 = np.divide(2 * hits, denominator, out=np.zeros(hits.shape), where=denominator > 0)
    present = support > 0
    return (f1 * present).sum(axis=1) / present.sum(axis=1)


def cross_validate(
    estimator: Classifier,
    maps: Sequence[Map],
    labels: Sequence[str] | np.ndarray,
    *,
    folds: int = 5,
    seed: int = 0,
    n_boot: int = 2000,
) -> CrossValidation:
    """Stratified ``folds``-fold out-of-fold predictions of ``estimator`` (cloned per fold) and their scores.

    :param estimator: a classifier with scikit-learn's ``fit`` and ``predict``.
    :param maps: the labelled maps.
    :param labels: their types, (n,).
    :param folds: the folds.
    :param seed: the folds' and the bootstrap's seed.
    :param n_boot: bootstrap resamples of the macro F1.
    :returns: the predictions and their scores.
    :raises ValueError: when the maps and labels differ in number.
    :raises BertologyError: when a type has fewer maps than folds.
    """
    labels = checked_types(labels)
    if len(maps) != len(labels):
        raise ValueError(f"{len(maps)} maps but {len(labels)} labels")
    counts = pd.Series(labels).value_counts()
    if counts.min() < folds:
        raise BertologyError(
            f"type {counts.idxmin()!r} has {counts.min()} labelled maps, fewer than the {folds} folds: "
            "cross-validation cannot stratify"
        )
    predicted = np.empty(len(labels), dtype=object)
    splitter = StratifiedKFold(folds, shuffle=True, random_state=seed)
    for fit_rows, test_rows in splitter.split(np.zeros(len(labels)), labels):
        model = clone(estimator).fit([maps[i] for i in fit_rows], labels[fit_rows])
        predicted[test_rows] = model.predict([maps[i] for i in test_rows])
    boots = _macro_f1_resampled(
        labels, predicted, np.random.default_rng(seed).integers(0, len(labels), (n_boot, len(labels)))
    )
    present = [t for t in TYPES if (labels == t).any()]
    recall = recall_score(labels, predicted, labels=present, average=None, zero_division=0)
    return CrossValidation(
        type(estimator).__name__,
        labels,
        predicted,
        float(_macro_f1_resampled(labels, predicted, np.arange(len(labels)))[0]),
        (float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5))),
        dict(zip(present, map(float, recall))),
        folds,
        float(np.std(boots)),
    )


# --------------------------------------------------------------------------- the shipped classifiers


Classifier = TemplateClassifier | FeatureClassifier | CNNClassifier


@functools.lru_cache(maxsize=4)
def load_classifier(method: str, folder: str | None = None) -> Classifier:
    """A shipped classifier: ``"features"`` or ``"cnn"`` (from ``folder``, default :data:`MODELS_DIR`), or
    ``"template"``: the rules with :data:`~bertology_utils.analyses.pattern_types.THRESHOLDS`, which need no file.

    :param method: ``"features"``, ``"cnn"`` or ``"template"``.
    :param folder: the classifiers' folder.
    :returns: the classifier (cached: the same object for the same arguments).
    :raises BertologyError: when the files cannot be read.
    """
    if method == "template":
        return TemplateClassifier()
    root = Path(folder) if folder is not None else MODELS_DIR
    try:
        if method == "features":
            return FeatureClassifier.from_json(json.loads((root / "features.json").read_text(encoding="utf-8")))
        if method == "cnn":
            return CNNClassifier.load(root / "cnn")
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise BertologyError(f"cannot read the {method} pattern classifier in {root}: {exc}") from exc
    raise ValueError(f"method must be one of {METHODS}, not {method!r}")


def best_method(folder: str | None = None) -> str:
    """The method with the best cross-validated macro F1, as recorded in ``best.json`` when they were fitted.

    :param folder: the classifiers' folder (default :data:`MODELS_DIR`).
    :returns: ``"features"`` or ``"cnn"``.
    :raises BertologyError: when ``best.json`` cannot be read.
    """
    root = Path(folder) if folder is not None else MODELS_DIR
    try:
        return str(json.loads((root / "best.json").read_text(encoding="utf-8"))["method"])
    except (OSError, ValueError, KeyError) as exc:
        raise BertologyError(f"cannot read {root / 'best.json'}: {exc}") from exc


def _classifier(method: str | None, thresholds: Mapping[str, float] | None) -> Classifier:
    """The classifier to use: ``method`` as given, else the template rules when ``thresholds`` are, else the best."""
    method = method or ("template" if thresholds is not None else "best")
    if method == "best":
        method = best_method()
    if method not in METHODS:
        raise ValueError(f"method must be one of {('best', *METHODS)}, not {method!r}")
    if thresholds is not None and method != "template":
        raise ValueError(f"thresholds belong to the template rules, not to the {method} classifier")
    return TemplateClassifier(thresholds) if thresholds is not None else load_classifier(method)


def classify_map(
    attention: WordMap,
    word_kinds: Sequence | WordValues,
    segments: Sequence | WordValues,
    thresholds: Mapping[str, float] | None = None,
    method: str | None = None,
) -> str:
    """The type of one map, among Kovaleva et al.'s five (:mod:`~bertology_utils.analyses.pattern_types`).

    ``method``: ``"best"`` (the default unless ``thresholds`` are given: the trained classifier with the best
    cross-validated F1, :func:`best_method`), ``"features"``, ``"cnn"`` or ``"template"`` (the transparent
    rules of :mod:`~bertology_utils.analyses.pattern_types`, with ``thresholds``).

    :param attention: a word map, (W, W).
    :param word_kinds: each word's kind, (W,).
    :param segments: each word's segment, (W,).
    :param thresholds: overrides of the rules' thresholds (``method`` then defaults to ``"template"``).
    :param method: the classifier.
    :returns: a type of :data:`~bertology_utils.analyses.pattern_types.TYPES`.
    :raises ValueError: for an unknown method, or thresholds with a trained one.
    """
    one = (np.asarray(attention), np.asarray(word_kinds), np.asarray(segments))
    return str(_classifier(method, thresholds).predict([one])[0])


def classify_items(
    items: Iterable[ItemAttention],
    dataset: str = "",
    thresholds: Mapping[str, float] | None = None,
    method: str | None = None,
) -> pd.DataFrame:
    """One row per (item, layer, head): template scores and type (by ``method``, as :func:`classify_map`).

    :param items: word-level attention of each item, (L, H, W, W) each.
    :param dataset: a ``dataset`` column's value.
    :param thresholds: as :func:`classify_map`'s.
    :param method: as :func:`classify_map`'s.
    :returns: the table; layers and heads counted from 1.
    :raises ValueError: for no items.
    """
    model = _classifier(method, thresholds)
    columns: dict[str, list] = {}
    for item in items:
        types, scores = model.types_and_scores(item.attention, item.word_kinds, item.segments)
        L, H = types.shape
        layer, head = np.meshgrid(np.arange(1, L + 1), np.arange(1, H + 1), indexing="ij")
        row = {
            "item": np.full(L * H, item.index),
            "pair": np.full(L * H, bool(len(np.unique(item.segments)) > 1)),
            "layer": layer.ravel(),
            "head": head.ravel(),
            **{k: v.ravel() for k, v in scores.items()},
            "type": types.ravel(),
        }
        for name, values in row.items():
            columns.setdefault(name, []).append(values)
    if not columns:
        raise ValueError("no items")
    # one frame at the end: building one per item took as long as the template rules' own arithmetic
    table = {name: np.concatenate(parts) for name, parts in columns.items()}
    return pd.DataFrame({"dataset": dataset, **table})


def fit_classifiers(
    maps: Sequence[Map],
    labels: Sequence[str] | np.ndarray,
    folder: str | Path,
    *,
    folds: int = 5,
    seed: int = 0,
    cnn: CNNClassifier | None = None,
) -> pd.DataFrame:
    """Cross-validate the template rules and both trained classifiers on labelled ``maps``, fit the trained
    ones on all of them and write them to ``folder`` with ``best.json``. The best is chosen by the one-standard-
    error rule: the simpler feature model unless the CNN's cross-validated macro F1 beats it by more than the
    CNN's bootstrap standard error. Returns one :meth:`CrossValidation.summary` row per method.

    ``folder`` is replaced whole: an interrupted fit leaves the old classifiers, never old and new mixed.

    :param maps: the labelled maps.
    :param labels: their types, (n,).
    :param folder: where the classifiers go.
    :param folds: cross-validation folds.
    :param seed: the folds', bootstrap's and CNN's seed.
    :param cnn: the CNN to fit (default: :class:`~bertology_utils.analyses.pattern_cnn.CNNClassifier` with ``seed``).
    :returns: one row per method.
    """
    labels = checked_types(labels)
    cnn = cnn if cnn is not None else CNNClassifier(seed=seed)
    estimators: dict[str, Classifier] = {"template": TemplateClassifier(), "features": FeatureClassifier(), "cnn": cnn}
    results = {name: cross_validate(est, maps, labels, folds=folds, seed=seed) for name, est in estimators.items()}
    features, fitted_cnn = FeatureClassifier().fit(maps, labels), clone(cnn).fit(maps, labels)
    table = pd.DataFrame([r.summary() | {"method": name} for name, r in results.items()]).set_index("method")
    cnn_cv = results["cnn"]
    best = "cnn" if cnn_cv.macro_f1 - results["features"].macro_f1 > cnn_cv.se else "features"
    record = {
        "method": best,
        "rule": "features unless the CNN's macro F1 is higher by more than its bootstrap standard error",
        "maps": len(labels),
        "folds": folds,
        "seed": seed,
        "cross_validation": table.reset_index().to_dict(orient="records"),
        "confusion": {name: r.confusion().to_dict(orient="index") for name, r in results.items()},
    }
    with atomic_path(folder, folder=True) as partial:
        features.save(partial / "features.json")
        fitted_cnn.save(partial / "cnn")
        atomic_write_text(partial / "best.json", json.dumps(record, indent=1) + "\n")
    load_classifier.cache_clear()
    return table
