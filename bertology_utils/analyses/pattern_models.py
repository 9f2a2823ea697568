"""Trained classifiers of Kovaleva et al.'s pattern types, fitted on the project's labelled maps.

Two estimators with scikit-learn's ``fit``/``predict``/``predict_proba``, both taking a sequence of
maps, each ``(attention (n, n), word_kinds (n,), segments (n,))`` of any length:

- :class:`FeatureClassifier`: multinomial logistic regression on :data:`FEATURES`, interpretable
  numbers read off the map (the template scores, the share on the busiest columns, the share at
  each small offset, row entropy, ...). Saved as JSON.
- :class:`CNNClassifier`: a small convolutional network on the map resized to ``size`` x ``size``
  (area averaging, as Kovaleva et al. resized theirs), with three fixed position channels beside it
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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import confusion_matrix, recall_score
from sklearn.model_selection import StratifiedKFold
from torch import nn

from bertology_utils.analyses.pattern_types import LABELS_DIR, METHODS, TYPES, classify_scores, template_scores
from bertology_utils.attention.alignment import LEADING_SPECIAL, SEPARATOR, WORD
from bertology_utils.attention.word_attention import ItemAttention
from bertology_utils.core.errors import BertologyError
from bertology_utils.core.files import atomic_path, atomic_write_text

__all__ = [
    "FEATURES",
    "map_features",
    "map_images",
    "FeatureClassifier",
    "CNNClassifier",
    "TemplateClassifier",
    "CrossValidation",
    "cross_validate",
    "MODELS_DIR",
    "load_classifier",
    "best_method",
    "classify_map",
    "classify_items",
    "fit_classifiers",
    "planted_layout",
    "planted_map",
    "planted_maps",
]

Map = tuple[np.ndarray, np.ndarray, np.ndarray]

#: The shipped classifiers: ``features.json``, ``cnn.safetensors`` + ``cnn.json``, ``best.json``.
MODELS_DIR = LABELS_DIR / "models"

FEATURES = (
    "vertical",  # template: share on special tokens
    "diagonal",  # template: share on words at offset -1, 0, +1
    "block",  # template: in-segment share of word-to-word attention (pairs; 0.5 for single sentences)
    "block_spread",  # template: entropy inside the own segment (pairs; 0 for single sentences)
    "block_lift",  # in-segment share above what uniform attention would give, (s - e) / (1 - e) (pairs; else 0)
    "pair",
    "cls",  # share on the leading special token
    "sep",  # share on separators
    "top_column",  # share of all attention on the busiest column
    "top2_columns",  # ... on the two busiest columns
    "top_word_column",  # ... on the busiest column that is a word (a stripe on an ordinary word)
    "offset_prev",  # share on the word at offset -1 (words only)
    "offset_self",
    "offset_next",
    "offset_best",  # largest mean share at any single offset |k| <= 3 (a shifted diagonal)
    "row_entropy",  # mean row entropy / log(n): 1 = uniform
    "row_max",  # mean of each row's largest weight
    "column_gini",  # inequality of the columns' total attention
    "log_words",
)


def _normalised(attention) -> np.ndarray:
    att = np.asarray(attention, dtype=np.float64)
    if not np.isfinite(att).all() or (att < 0).any():
        raise ValueError("attention maps must be finite and non-negative (NaN, infinite or negative weights found)")
    mass = att.sum(-1, keepdims=True)
    return np.divide(att, mass, out=np.zeros_like(att), where=mass > 0)


def map_features(attention, word_kinds, segments) -> np.ndarray:
    """:data:`FEATURES` of maps ``(..., n, n)`` that share ``word_kinds`` and ``segments``: ``(..., F)``."""
    return _scored_features(attention, word_kinds, segments)[0]


def _scored_features(attention, word_kinds, segments) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """:func:`map_features` and the template scores it starts from (so a caller that shows both computes them once)."""
    p = _normalised(attention)
    kinds = np.asarray(word_kinds)
    n = p.shape[-1]
    lead = p.shape[:-2]
    scores = template_scores(p, kinds, segments)
    pair = not np.isnan(np.asarray(scores["block"], float)).all()
    word = kinds == WORD
    columns = p.mean(-2)  # (..., n): share of all attention on each column
    ranked = np.sort(columns, axis=-1)[..., ::-1]
    word_columns = np.where(word, columns, 0.0)
    lift = np.zeros(lead)
    if pair:
        # uniform attention already keeps a word of the long segment of an uneven pair mostly "inside"
        segs = np.asarray(segments)
        rows = np.flatnonzero(word)
        same = (segs[rows][:, None] == segs[word][None, :]).astype(np.float64)
        expected = same.mean(-1)  # (w,) share of the words in the row's own segment
        to_words = p[..., rows, :][..., word]
        total = to_words.sum(-1)
        inside = np.divide((to_words * same).sum(-1), total, out=expected * np.ones_like(total), where=total > 0)
        lift = ((inside - expected) / np.maximum(1 - expected, 1e-12)).mean(-1)
    offsets = {}
    for k in range(-3, 4):
        # the rows whose word has a word at offset k, and that cell of each: no pass over the whole map
        rows = np.flatnonzero(word[max(0, -k) : n - max(0, k)]) + max(0, -k)
        rows = rows[word[rows + k]]
        offsets[k] = p[..., rows, rows + k].mean(-1) if len(rows) else np.zeros(lead)
    entropy = -(p * np.log(np.maximum(p, 1e-12))).sum(-1).mean(-1) / np.log(max(n, 2))
    sorted_columns = np.sort(columns, axis=-1)
    index = np.arange(1, n + 1)
    gini = ((2 * index - n - 1) * sorted_columns).sum(-1) / (n * np.maximum(sorted_columns.sum(-1), 1e-12))
    values = {
        "vertical": scores["vertical"],
        "diagonal": scores["diagonal"],
        "block": np.nan_to_num(np.asarray(scores["block"], float), nan=0.5),
        "block_spread": np.nan_to_num(np.asarray(scores["block_spread"], float), nan=0.0),
        "block_lift": lift,
        "pair": np.full(lead, float(pair)),
        "cls": p[..., kinds == LEADING_SPECIAL].sum(-1).mean(-1),
        "sep": p[..., kinds == SEPARATOR].sum(-1).mean(-1),
        "top_column": ranked[..., 0],
        "top2_columns": ranked[..., :2].sum(-1),
        "top_word_column": word_columns.max(-1) if word.any() else np.zeros(lead),
        "offset_prev": offsets[-1],
        "offset_self": offsets[0],
        "offset_next": offsets[1],
        "offset_best": np.max(np.stack(list(offsets.values())), axis=0),
        "row_entropy": entropy,
        "row_max": p.max(-1).mean(-1),
        "column_gini": gini,
        "log_words": np.full(lead, np.log(n)),
    }
    return np.stack([np.broadcast_to(np.asarray(values[f], float), lead) for f in FEATURES], axis=-1), scores


def map_images(attention, word_kinds, segments, size: int = 32) -> np.ndarray:
    """Maps ``(..., n, n)`` as ``(..., 4, size, size)`` float32 images: the square root of the attention and
    three position channels (special-token columns, same-segment cells, the band ``|i - j| <= 1``), each
    resized by area averaging (a map shorter than ``size`` is repeated cell by cell)."""
    p = torch.as_tensor(_normalised(attention), dtype=torch.float32)
    kinds = torch.as_tensor(np.asarray(word_kinds))
    seg = torch.as_tensor(np.asarray(segments))
    n = p.shape[-1]
    lead = p.shape[:-2]
    i, j = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    fixed = torch.stack(
        [
            (kinds != WORD)[None, :].expand(n, n).float(),
            (seg[:, None] == seg[None, :]).float(),
            ((i - j).abs() <= 1).float(),
        ]
    )
    flat = p.reshape(-1, 1, n, n).sqrt()
    resize = functools.partial(nn.functional.adaptive_avg_pool2d, output_size=size)
    images = torch.cat([resize(flat), resize(fixed[None]).expand(flat.shape[0], -1, -1, -1)], dim=1)
    return images.reshape(*lead, 4, size, size).numpy()


# --------------------------------------------------------------------------- planted patterns


def planted_layout(n_first: int, n_second: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Word kinds and segments of ``[CLS] a.. [SEP]``, or ``[CLS] a.. [SEP] b.. [SEP]`` when ``n_second``."""
    kinds = [LEADING_SPECIAL] + [WORD] * n_first + [SEPARATOR]
    segments = [0] * (n_first + 2)
    if n_second:
        kinds += [WORD] * n_second + [SEPARATOR]
        segments += [1] * (n_second + 1)
    return np.asarray(kinds, np.int8), np.asarray(segments, np.int8)


def planted_map(kind: str, rng: np.random.Generator, pair: bool | None = None) -> Map:
    """One clear map of type ``kind`` with noise, 5 to 19 words a sentence: 80% of every row on the pattern
    (a special-token column, or a word's 1 time in 5; the diagonal at offset -1, 0 or +1; the own segment's
    words) and the rest Dirichlet(1) noise; vertical+diagonal puts 45% on each."""
    if kind not in TYPES:
        raise ValueError(f"kind must be one of {TYPES}, not {kind!r}")
    pair = kind == "block" or (bool(rng.random() < 0.5) if pair is None else pair)
    kinds, segments = planted_layout(int(rng.integers(5, 20)), int(rng.integers(5, 20)) if pair else 0)
    n = len(kinds)
    noise = rng.dirichlet(np.ones(n), size=n)
    if kind == "heterogeneous":
        return noise, kinds, segments
    planted = np.zeros((n, n))
    if kind in ("vertical", "vertical+diagonal"):
        planted[:, rng.choice(np.flatnonzero(kinds != WORD)) if rng.random() < 0.8 else rng.integers(n)] += 1.0
    if kind in ("diagonal", "vertical+diagonal"):
        i = np.arange(n)
        planted[i, np.clip(i + int(rng.choice([-1, 0, 1])), 0, n - 1)] += 1.0
    if kind == "block":
        planted = (segments[:, None] == segments[None, :]) * (kinds == WORD)[None, :] + 1e-3
    planted /= planted.sum(-1, keepdims=True)
    weight = 0.9 if kind == "vertical+diagonal" else 0.8
    return weight * planted + (1 - weight) * noise, kinds, segments


def planted_maps(per_type: int, seed: int = 0) -> tuple[list[Map], np.ndarray]:
    """``per_type`` :func:`planted_map` of every type, shuffled: ``(maps, labels)``; deterministic for a seed."""
    rng = np.random.default_rng(seed)
    rows = [(planted_map(t, rng), t) for t in TYPES for _ in range(per_type)]
    order = rng.permutation(len(rows))
    return [rows[k][0] for k in order], np.asarray([rows[k][1] for k in order], dtype=object)


def _with_anchors(X: Sequence[Map], y, anchors: int, seed: int) -> tuple[list[Map], np.ndarray]:
    """The labelled maps plus ``anchors`` planted clear maps of each type, which pin down how the model reads
    unambiguous cases (a pure [CLS] column, a pure diagonal) that a few hundred real maps leave to chance."""
    y = _labels(y)
    if not anchors:
        return list(X), y
    maps, labels = planted_maps(anchors, seed)
    return [*X, *maps], np.concatenate([y, labels])


def _stack(maps: Sequence[Map], encode) -> np.ndarray:
    if len(maps) == 0:
        raise ValueError("no maps")
    return np.stack([encode(*m) for m in maps])


def _labels(y) -> np.ndarray:
    y = np.asarray(y, dtype=object)
    unknown = sorted(set(y) - set(TYPES))
    if unknown:
        raise ValueError(f"labels {unknown} are not pattern types {TYPES}")
    return y


class TemplateClassifier(ClassifierMixin, BaseEstimator):
    """The transparent rules of :mod:`pattern_types` as an estimator (``fit`` learns nothing)."""

    def __init__(self, thresholds=None):
        self.thresholds = thresholds

    def fit(self, X: Sequence[Map], y) -> TemplateClassifier:
        self.classes_ = np.asarray(TYPES, dtype=object)
        return self

    def predict(self, X: Sequence[Map]) -> np.ndarray:
        return np.asarray(
            [str(classify_scores(template_scores(*m), self.thresholds)[()]) for m in X],
            dtype=object,
        )

    def types_and_scores(self, attention, word_kinds, segments) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Types of maps ``(..., n, n)`` that share ``word_kinds`` and ``segments``, and their template scores."""
        scores = template_scores(attention, word_kinds, segments)
        return classify_scores(scores, self.thresholds), scores


class FeatureClassifier(ClassifierMixin, BaseEstimator):
    """Multinomial logistic regression on standardised :data:`FEATURES` (balanced class weights), fitted on the
    labelled maps plus ``anchors`` planted clear maps of each type (:func:`planted_maps` with ``seed``)."""

    def __init__(self, C: float = 1.0, anchors: int = 10, seed: int = 0):
        self.C, self.anchors, self.seed = C, anchors, seed

    def fit(self, X: Sequence[Map], y) -> FeatureClassifier:
        X, y = _with_anchors(X, y, self.anchors, self.seed)
        features = _stack(X, map_features)
        self.mean_ = features.mean(0)
        self.scale_ = np.where(features.std(0) > 0, features.std(0), 1.0)
        model = LogisticRegression(C=self.C, class_weight="balanced", max_iter=5000)
        model.fit((features - self.mean_) / self.scale_, y)
        self.classes_ = model.classes_
        self.coef_, self.intercept_ = model.coef_, model.intercept_
        return self

    def decision_function_features(self, features: np.ndarray) -> np.ndarray:
        """Class scores of precomputed :func:`map_features` rows ``(..., F)``."""
        return ((features - self.mean_) / self.scale_) @ self.coef_.T + self.intercept_

    def predict_features(self, features: np.ndarray) -> np.ndarray:
        return self.classes_[self.decision_function_features(features).argmax(-1)]

    def predict_proba(self, X: Sequence[Map]) -> np.ndarray:
        scores = self.decision_function_features(_stack(X, map_features))
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        return scores / scores.sum(-1, keepdims=True)

    def predict(self, X: Sequence[Map]) -> np.ndarray:
        return self.predict_features(_stack(X, map_features))

    def types_and_scores(self, attention, word_kinds, segments) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """As :meth:`TemplateClassifier.types_and_scores`, the types by this model."""
        features, scores = _scored_features(attention, word_kinds, segments)
        return self.predict_features(features), scores

    def to_json(self) -> dict:
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
        if record.get("kind") != "features" or record.get("features") != list(FEATURES):
            raise BertologyError("not a FeatureClassifier of this version's FEATURES")
        model = cls(**record["params"])
        model.classes_ = np.asarray(record["classes"], dtype=object)
        model.mean_, model.scale_ = np.asarray(record["mean"]), np.asarray(record["scale"])
        model.coef_, model.intercept_ = np.asarray(record["coef"]), np.asarray(record["intercept"])
        return model

    def save(self, path) -> None:
        atomic_write_text(path, json.dumps(self.to_json(), indent=1) + "\n")


class _Net(nn.Module):
    def __init__(self, n_classes: int, width: int):
        super().__init__()

        def block(a, b):
            return [nn.Conv2d(a, b, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]

        self.body = nn.Sequential(
            *block(4, width), *block(width, 2 * width), *block(2 * width, 2 * width), nn.AdaptiveAvgPool2d(2)
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Dropout(0.2), nn.Linear(8 * width, n_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


class CNNClassifier(ClassifierMixin, BaseEstimator):
    """A small CNN on :func:`map_images` (Adam, balanced cross-entropy, fixed epochs; seeded), fitted on the
    labelled maps plus ``anchors`` planted maps of each type, as :class:`FeatureClassifier`."""

    def __init__(
        self,
        size: int = 32,
        width: int = 16,
        epochs: int = 60,
        lr: float = 3e-3,
        weight_decay: float = 1e-4,
        batch_size: int = 32,
        anchors: int = 10,
        seed: int = 0,
    ):
        self.size, self.width, self.epochs, self.lr = size, width, epochs, lr
        self.weight_decay, self.batch_size, self.anchors, self.seed = weight_decay, batch_size, anchors, seed

    def images(self, X: Sequence[Map]) -> np.ndarray:
        return _stack(X, functools.partial(map_images, size=self.size))

    def fit(self, X: Sequence[Map], y) -> CNNClassifier:
        X, y = _with_anchors(X, y, self.anchors, self.seed)
        return self.fit_images(self.images(X), y)

    def fit_images(self, images: np.ndarray, y) -> CNNClassifier:
        y = _labels(y)
        self.classes_ = np.asarray(sorted(set(y), key=TYPES.index), dtype=object)
        target = torch.as_tensor([list(self.classes_).index(v) for v in y])
        counts = torch.bincount(target, minlength=len(self.classes_)).float()
        weight = counts.sum() / (len(counts) * counts.clamp_min(1))
        x = torch.as_tensor(images)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            self.net_ = _Net(len(self.classes_), self.width)
            optimiser = torch.optim.Adam(self.net_.parameters(), lr=self.lr, weight_decay=self.weight_decay)
            generator = torch.Generator().manual_seed(self.seed)
            loss = nn.CrossEntropyLoss(weight=weight)
            self.net_.train()
            for _ in range(self.epochs):
                for rows in torch.randperm(len(x), generator=generator).split(self.batch_size):
                    optimiser.zero_grad()
                    loss(self.net_(x[rows]), target[rows]).backward()
                    optimiser.step()
            self.net_.eval()
        return self

    @torch.no_grad()
    def logits_images(self, images: np.ndarray, batch: int = 4096) -> np.ndarray:
        x = torch.as_tensor(images).reshape(-1, 4, self.size, self.size)
        out = torch.cat([self.net_(x[i : i + batch]) for i in range(0, len(x), batch)]) if len(x) else x.new_zeros(0)
        return out.reshape(*images.shape[:-3], len(self.classes_)).numpy()

    def predict_images(self, images: np.ndarray) -> np.ndarray:
        return self.classes_[self.logits_images(images).argmax(-1)]

    def predict_proba(self, X: Sequence[Map]) -> np.ndarray:
        return torch.softmax(torch.as_tensor(self.logits_images(self.images(X))), -1).numpy()

    def predict(self, X: Sequence[Map]) -> np.ndarray:
        return self.predict_images(self.images(X))

    def types_and_scores(self, attention, word_kinds, segments) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """As :meth:`TemplateClassifier.types_and_scores`, the types by this model."""
        images = map_images(attention, word_kinds, segments, size=self.size)
        return self.predict_images(images), template_scores(attention, word_kinds, segments)

    def save(self, path) -> None:
        """``path`` + ``.safetensors`` (the weights) and ``.json`` (settings and classes); no pickle."""
        from safetensors.torch import save_file

        path = Path(path)
        with atomic_path(path.with_suffix(".safetensors")) as partial:
            save_file({k: v.contiguous() for k, v in self.net_.state_dict().items()}, str(partial))
        record = {"kind": "cnn", "params": self.get_params(), "classes": [str(c) for c in self.classes_]}
        atomic_write_text(path.with_suffix(".json"), json.dumps(record, indent=1) + "\n")

    @classmethod
    def load(cls, path) -> CNNClassifier:
        from safetensors.torch import load_file

        path = Path(path)
        record = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
        if record.get("kind") != "cnn":
            raise BertologyError(f"{path.with_suffix('.json')} is not a CNNClassifier")
        model = cls(**record["params"])
        model.classes_ = np.asarray(record["classes"], dtype=object)
        model.net_ = _Net(len(model.classes_), model.width)
        model.net_.load_state_dict(load_file(str(path.with_suffix(".safetensors"))))
        model.net_.eval()
        return model


# --------------------------------------------------------------------------- evaluation


@dataclass
class CrossValidation:
    """Out-of-fold predictions of one method and what they score."""

    method: str
    labels: np.ndarray
    predicted: np.ndarray
    macro_f1: float
    #: 95% percentile bootstrap interval of the macro F1 (maps resampled with replacement).
    interval: tuple[float, float]
    recall: dict
    folds: int
    #: Standard deviation of the bootstrap macro F1s.
    se: float = float("nan")

    def confusion(self) -> pd.DataFrame:
        """Counts of labels (rows) against predictions (columns), in :data:`TYPES` order."""
        matrix = confusion_matrix(self.labels, self.predicted, labels=list(TYPES))
        return pd.DataFrame(matrix, index=pd.Index(TYPES, name="label"), columns=pd.Index(TYPES, name="predicted"))

    def summary(self) -> dict:
        return {
            "method": self.method,
            "macro_f1": self.macro_f1,
            "low": self.interval[0],
            "high": self.interval[1],
            "se": self.se,
            **{f"recall_{t}": r for t, r in self.recall.items()},
        }


def _macro_f1_resampled(labels, predicted, rows) -> np.ndarray:
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
    estimator, maps: Sequence[Map], labels, *, folds: int = 5, seed: int = 0, n_boot: int = 2000
) -> CrossValidation:
    """Stratified ``folds``-fold out-of-fold predictions of ``estimator`` (cloned per fold) and their scores."""
    labels = _labels(labels)
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
    ``"template"``: the rules with :data:`~bertology_utils.analyses.pattern_types.THRESHOLDS`, which need no file."""
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
    """The method with the best cross-validated macro F1, as recorded in ``best.json`` when they were fitted."""
    root = Path(folder) if folder is not None else MODELS_DIR
    try:
        return str(json.loads((root / "best.json").read_text(encoding="utf-8"))["method"])
    except (OSError, ValueError, KeyError) as exc:
        raise BertologyError(f"cannot read {root / 'best.json'}: {exc}") from exc


def _classifier(method: str | None, thresholds) -> Classifier:
    """The classifier to use: ``method`` as given, else the template rules when ``thresholds`` are, else the best."""
    method = method or ("template" if thresholds is not None else "best")
    if method == "best":
        method = best_method()
    if method not in METHODS:
        raise ValueError(f"method must be one of {('best', *METHODS)}, not {method!r}")
    if thresholds is not None and method != "template":
        raise ValueError(f"thresholds belong to the template rules, not to the {method} classifier")
    return TemplateClassifier(thresholds) if thresholds is not None else load_classifier(method)


def classify_map(attention: np.ndarray, word_kinds, segments, thresholds=None, method: str | None = None) -> str:
    """Type of one ``(n, n)`` map.

    ``method``: ``"best"`` (the default unless ``thresholds`` are given: the trained classifier with the best
    cross-validated F1, :func:`best_method`), ``"features"``, ``"cnn"`` or ``"template"`` (the transparent
    rules of :mod:`~bertology_utils.analyses.pattern_types`, with ``thresholds``).
    """
    return str(_classifier(method, thresholds).predict([(attention, word_kinds, segments)])[0])


def classify_items(
    items: Iterable[ItemAttention], dataset: str = "", thresholds=None, method: str | None = None
) -> pd.DataFrame:
    """One row per (item, layer, head): template scores and type (by ``method``, as :func:`classify_map`).

    Layers and heads counted from 1.
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
    maps: Sequence[Map], labels, folder, *, folds: int = 5, seed: int = 0, cnn: CNNClassifier | None = None
) -> pd.DataFrame:
    """Cross-validate the template rules and both trained classifiers on labelled ``maps``, fit the trained
    ones on all of them and write them to ``folder`` with ``best.json``. The best is chosen by the one-standard-
    error rule: the simpler feature model unless the CNN's cross-validated macro F1 beats it by more than the
    CNN's bootstrap standard error. Returns one :meth:`CrossValidation.summary` row per method.

    ``folder`` is replaced whole: an interrupted fit leaves the old classifiers, never old and new mixed."""
    labels = _labels(labels)
    cnn = cnn if cnn is not None else CNNClassifier(seed=seed)
    estimators = {"template": TemplateClassifier(), "features": FeatureClassifier(), "cnn": cnn}
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
