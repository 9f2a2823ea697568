"""Structural probes: how much of the dependency tree a layer's hidden states hold, read by a linear map.

Hewitt and Manning (2019), `A Structural Probe for Finding Syntax in Word Representations
<https://aclanthology.org/N19-1419/>`_ (NAACL). A probe learns ``B`` (``rank x hidden``):

* :class:`DistanceProbe`: ``||B(h_i - h_j)||^2`` should be the tree distance between words i and j.
  Loss: L1 over every pair of a sentence, divided by the squared sentence length, averaged over sentences.
* :class:`DepthProbe`: ``||B h_i||^2`` should be word i's depth (edges to the root). Loss: L1 over the
  words, divided by the sentence length, averaged over sentences.

Training follows the authors' released training loop: Adam with learning rate 0.001; after an epoch
whose dev loss is not lower, the learning rate is divided by 10; training stops when the dev loss has
not improved by more than 1e-4 for 5 epochs, and the weights of the last such improvement are kept
(without ``dev``, the training loss plays its part). This project's choices: at most 40 epochs,
batches of 20 sentences, ``B`` starting uniform in [-0.05, 0.05]; ``B`` and the data order are drawn
on the CPU from ``seed``, so a seed gives one fit on every device. The rank search of the paper's
Figure 2 is ranks 1, 2, 4, ... up to the hidden size (:func:`rank_grid`); the default is full rank.

Metrics (:func:`structural_metrics`), punctuation left out as in the paper (relation ``punct``, the
definition of :mod:`bertology_utils.analyses.syntax.scoring`); every punctuation word is dropped
before scoring, so a sentence's "length" below counts its other words:

* UUAS: the minimum spanning tree of the predicted distances against the gold tree's edges between
  non-punctuation words, summed over sentences (correct edges / gold edges).
* DSpr: per word, Spearman's correlation of its predicted and gold distances to every other word;
  averaged within each sentence, then over the sentences of each length 5 to 50, then over lengths.
* root%: the word with the smallest predicted depth is the root, over sentences whose root is not punctuation.
* NSpr: per sentence, Spearman's correlation of predicted and gold depths, averaged as DSpr.

Sentences with fewer than two scored words have no edge to score: they are counted in ``skipped``.
"""

from __future__ import annotations

import functools
import math
import os
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import minimum_spanning_tree
from scipy.stats import rankdata
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError

from bertology_utils.analyses.probes.data import probe_device
from bertology_utils.analyses.probes.structural_data import StructuralBatch, StructuralData
from bertology_utils.analyses.probes.structural_fit import StructuralFit, l1_losses, train_jointly
from bertology_utils.core import settings
from bertology_utils.core.cache import cached_frames, entry_name
from bertology_utils.core.errors import BertologyError
from bertology_utils.core.models import LoadedModel, resolve_precision
from bertology_utils.core.threads import torch_threads
from bertology_utils.data import Corpus

__all__ = [
    "SPEARMAN_LENGTHS",
    "rank_grid",
    "spanning_tree_edges",
    "spanning_trees",
    "rowwise_spearman",
    "structural_metrics",
    "uuas_by_sentence",
    "DistanceProbe",
    "DepthProbe",
    "structural_probe_layers",
    "StructuralLayers",
    "fit_jointly",
    "STRUCTURAL_VERSION",
]

#: Sentence lengths (scored words) whose Spearman correlations are averaged, as in the paper.
SPEARMAN_LENGTHS = (5, 50)


def rank_grid(hidden_size: int) -> list[int]:
    """The paper's rank search: 1, 2, 4, ... below ``hidden_size``, then ``hidden_size`` (full rank).

    :param hidden_size: the vectors' dimension.
    :returns: the ranks, increasing.
    """
    return [2**k for k in range(int(math.log2(hidden_size)) + 1) if 2**k < hidden_size] + [int(hidden_size)]


def spanning_tree_edges(distances: np.ndarray) -> set[tuple[int, int]]:
    """The edges of the minimum spanning tree of a complete graph.

    :param distances: ``(W, W)`` symmetric distances (only the upper triangle is read).
    :returns: the ``W - 1`` edges as ``(i, j)`` with ``i < j``.
    """
    return spanning_trees([distances])[0]


def spanning_trees(distances: Sequence[np.ndarray]) -> list[set[tuple[int, int]]]:
    """The edges of each complete graph's minimum spanning tree, all found by one call to scipy.

    The graphs are laid side by side as one graph of disconnected blocks: its minimum spanning forest is each
    block's minimum spanning tree.

    :param distances: ``(W, W)`` symmetric distances per graph (only the upper triangles are read).
    :returns: per graph, its ``W - 1`` edges as ``(i, j)`` with ``i < j``.
    """
    starts = np.concatenate([[0], np.cumsum([len(d) for d in distances])]).astype(np.int64)
    rows, columns, weights = [], [], []
    for matrix, start in zip(distances, starts):
        if len(matrix) < 2:
            continue
        i, j = np.triu_indices(len(matrix), 1)
        upper = np.asarray(matrix, dtype=np.float64)[i, j]
        # Shifted to be positive (scipy reads 0 as "no edge"); a constant shift changes no spanning tree's rank.
        rows.append(i + start)
        columns.append(j + start)
        weights.append(upper - upper.min() + 1.0)
    trees: list[set[tuple[int, int]]] = [set() for _ in distances]
    if weights:
        size = int(starts[-1])
        graph = csr_matrix((np.concatenate(weights), (np.concatenate(rows), np.concatenate(columns))), (size, size))
        forest = minimum_spanning_tree(graph).tocoo()
        owner = np.searchsorted(starts, forest.row, side="right") - 1
        for k, a, b in zip(
            owner.tolist(), (forest.row - starts[owner]).tolist(), (forest.col - starts[owner]).tolist()
        ):
            trees[k].add((min(a, b), max(a, b)))
    return trees


def rowwise_spearman(predicted: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Spearman's correlation of each row of ``predicted`` with the same row of ``gold`` (ties share ranks).

    :param predicted: ``(R, N)`` values.
    :param gold: ``(R, N)`` values.
    :returns: ``(R,)`` correlations; 0 for a row where either side is constant (it ranks nothing).
    """
    a = rankdata(predicted, axis=1)
    b = rankdata(gold, axis=1)
    a -= a.mean(1, keepdims=True)
    b -= b.mean(1, keepdims=True)
    norm = np.sqrt((a * a).sum(1) * (b * b).sum(1))
    return np.divide((a * b).sum(1), norm, out=np.zeros(len(a)), where=norm > 0)


def _length_average(values: dict[int, list[float]]) -> float:
    """Mean over lengths 5-50 of the mean within each length (nan when no sentence has such a length)."""
    lo, hi = SPEARMAN_LENGTHS
    means = [float(np.mean(v)) for n, v in values.items() if lo <= n <= hi]
    return float(np.mean(means)) if means else math.nan


def _spearman_stack(rows: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """:func:`rowwise_spearman` of (predicted, gold) arrays of one width, stacked: every row's correlation."""
    predicted, gold = zip(*rows)
    return rowwise_spearman(np.vstack(predicted), np.vstack(gold))


def uuas_by_sentence(X: StructuralData, distances: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per sentence of ``X``, the gold edges the minimum spanning tree of the predicted distances holds.

    Punctuation is left out of both trees, as :func:`structural_metrics` does; a sentence of fewer than two
    scored words has no edge.

    :param X: the data, whose gold trees and punctuation are read.
    :param distances: one ``(W, W)`` predicted distance matrix per sentence of ``X``.
    :returns: ``(index, found, edges)``, each ``(sentences,)``: the sentence's index in ``X``'s corpus, its gold
        edges found and its gold edges.
    """
    found = np.zeros(len(X), dtype=np.int64)
    edges = np.zeros(len(X), dtype=np.int64)
    gold_edges: list[set[tuple[int, int]]] = []
    predicted: list[np.ndarray] = []
    for k in range(len(X)):
        keep = np.flatnonzero(X.scored[k])
        gold = X.distances[k][np.ix_(keep, keep)]
        gold_edges.append(
            {(int(a), int(b)) for a, b in zip(*np.nonzero(np.triu(gold == 1)))} if len(keep) > 1 else set()
        )
        predicted.append(np.asarray(distances[k])[np.ix_(keep, keep)])
    for k, (tree, gold_tree) in enumerate(zip(spanning_trees(predicted), gold_edges)):
        found[k], edges[k] = len(tree & gold_tree), len(gold_tree)
    return np.asarray(X.indices, dtype=np.int64), found, edges


def structural_metrics(
    X: StructuralData,
    distances: Sequence[np.ndarray] | None = None,
    depths: Sequence[np.ndarray] | None = None,
    *,
    edges: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> dict[str, float]:
    """The paper's metrics of predicted distances (UUAS, DSpr) and depths (root%, NSpr) on ``X``'s trees.

    :param X: the data, whose gold trees and punctuation are read.
    :param distances: one ``(W, W)`` predicted distance matrix per sentence of ``X``, or None.
    :param depths: one ``(W,)`` predicted depth vector per sentence of ``X``, or None.
    :param edges: :func:`uuas_by_sentence` of ``distances`` where the caller has it (its spanning trees are not
        found again); None computes it.
    :returns: fractions ``uuas`` and ``dspr`` (with distances), ``root_acc`` and ``nspr`` (with depths), and
        counts: ``sentences``, ``skipped`` (fewer than two scored words), ``spearman_sentences`` (lengths 5-50).
    """
    out: dict[str, float] = {"sentences": len(X)}
    skipped = 0
    roots_right = roots = 0
    spread = 0
    # per length, each sentence's (predicted, gold) rows: one Spearman call per length, not per sentence
    distance_rows: dict[int, list[tuple[np.ndarray, np.ndarray]]] = defaultdict(list)
    depth_rows: dict[int, list[tuple[np.ndarray, np.ndarray]]] = defaultdict(list)
    lo, hi = SPEARMAN_LENGTHS
    for k in range(len(X)):
        keep = np.flatnonzero(X.scored[k])
        n = len(keep)
        if n < 2:
            skipped += 1
            continue
        spread += lo <= n <= hi
        if distances is not None and lo <= n <= hi:
            gold = X.distances[k][np.ix_(keep, keep)].astype(np.float64)
            predicted = np.asarray(distances[k], dtype=np.float64)[np.ix_(keep, keep)]
            others = ~np.eye(n, dtype=bool)  # a word's distances to every other word
            distance_rows[n].append((predicted[others].reshape(n, n - 1), gold[others].reshape(n, n - 1)))
        if depths is not None:
            predicted_depth = np.asarray(depths[k], dtype=np.float64)[keep]
            root = X.roots[k]
            if X.scored[k][root]:
                roots += 1
                roots_right += int(keep[np.argmin(predicted_depth)] == root)
            if lo <= n <= hi:
                depth_rows[n].append((predicted_depth, X.distances[k][root, keep].astype(np.float64)))
    dspr = {n: _spearman_stack(rows).reshape(len(rows), n).mean(1).tolist() for n, rows in distance_rows.items()}
    nspr = {n: _spearman_stack(rows).tolist() for n, rows in depth_rows.items()}
    if distances is not None:
        _, correct, total = uuas_by_sentence(X, distances) if edges is None else edges
        out["uuas"] = correct.sum() / total.sum() if total.sum() else math.nan
        out["dspr"] = _length_average(dspr)
    if depths is not None:
        out["root_acc"] = roots_right / roots if roots else math.nan
        out["nspr"] = _length_average(nspr)
    out["skipped"] = skipped
    out["spearman_sentences"] = spread
    return out


class _StructuralProbe(BaseEstimator):
    """What both probes share: ``B``, its training and the predictions, over :class:`StructuralData`."""

    #: The probe's name in tables.
    label = ""

    def __init__(
        self,
        *,
        layer: int | None = None,
        rank: int | None = None,
        lr: float = 0.001,
        lr_decay: float = 0.1,
        max_epochs: int = 40,
        patience: int = 5,
        batch_size: int = 20,
        seed: int = 0,
        n_jobs: int | None = 1,
        device: str | torch.device | None = None,
        precision: str = "fp32",
    ) -> None:
        self.layer = layer
        self.rank = rank
        self.lr = lr
        self.lr_decay = lr_decay
        self.max_epochs = max_epochs
        self.patience = patience
        self.batch_size = batch_size
        self.seed = seed
        self.n_jobs = n_jobs
        self.device = device
        self.precision = precision

    # ------------------------------------------------------------------ the probe's formula

    #: The power of the sentence length that divides a sentence's summed error (2: over pairs, 1: over words).
    _power = 1

    @staticmethod
    def _outputs(t: torch.Tensor) -> torch.Tensor:
        """The predictions from the projected words ``t`` (``(..., W, rank)``): distances or squared norms."""
        raise NotImplementedError

    @staticmethod
    def _target(batch: StructuralBatch) -> torch.Tensor:
        """The gold values the predictions are trained toward."""
        raise NotImplementedError

    @staticmethod
    def _pullback(t: torch.Tensor, s: torch.Tensor, predicted: torch.Tensor) -> torch.Tensor:
        """The gradient at ``t`` of ``sum(s * _outputs(t))``, given the ``predicted`` outputs at ``t``."""
        raise NotImplementedError

    @classmethod
    def losses(cls, t: torch.Tensor, batch: StructuralBatch) -> torch.Tensor:
        """The loss of each of ``P`` probes of this kind on a batch, from their projected words.

        :param t: ``(P, B, W, rank)``: the batch's words projected by each probe's ``B``.
        :param batch: the batch, whose gold trees are read.
        :returns: ``(P,)`` losses (per sentence, the summed absolute error over words or pairs divided by the
            length to the power :attr:`_power`; averaged over sentences).
        """
        words = batch.words if cls._power == 1 else batch.words[:, :, None] & batch.words[:, None, :]
        weights = words / batch.lengths.view(-1, *[1] * (words.dim() - 1)) ** cls._power
        return l1_losses(t, cls._target(batch), weights, cls._outputs, cls._pullback).mean(1)

    # ------------------------------------------------------------------ fitting

    def _check(self, X: object) -> StructuralData:
        if not isinstance(X, StructuralData):
            raise TypeError(f"X must be a StructuralData, not {type(X).__name__}")
        return X

    def fit(self, X: StructuralData, y: object = None, dev: StructuralData | None = None) -> _StructuralProbe:
        """Learn ``B`` on ``X``, the dev loss deciding the learning-rate decay, the stop and the epoch kept.

        :func:`fit_jointly` fits several probes in one pass and leaves each as this does.

        :param X: the training data.
        :param y: ignored (the gold trees are ``X``'s).
        :param dev: the data whose loss steers the training; without it, the training loss does.
        :returns: the probe, fitted: ``B_`` (``(rank, hidden)`` float32), ``rank_``, ``layer_``,
            ``history_`` (per epoch: train and dev loss, learning rate), ``best_epoch_``, ``n_sentences_fit_``,
            ``fit_seconds_``, ``device_``.
        """
        fit_jointly([self], X, dev)
        return self

    def _take(self, fit: StructuralFit, X: StructuralData) -> None:
        """The fitted attributes, from a training on ``X``."""
        self.B_, self.rank_, self.layer_, self.hidden_size_ = fit.B, fit.rank, fit.layer, X.hidden_size
        self.history_, self.best_epoch_, self.n_sentences_fit_ = fit.history, fit.best_epoch, len(X)
        self.fit_seconds_, self.device_ = fit.seconds, fit.device

    # ------------------------------------------------------------------ predicting and scoring

    def _check_fitted(self, X: StructuralData) -> None:
        if not hasattr(self, "B_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet: call fit(train_data) first")
        if X.hidden_size != self.hidden_size_:
            raise BertologyError(
                f"this probe was fit on vectors of size {self.hidden_size_}; {X.name}'s have {X.hidden_size}"
            )

    @torch.no_grad()
    def predict(self, X: StructuralData) -> list[np.ndarray]:
        """Predicted squared distances (:class:`DistanceProbe`) or squared norms (:class:`DepthProbe`).

        :param X: the data; its layer ``layer_`` is read.
        :returns: one ``(W, W)`` or ``(W,)`` float32 array per sentence of ``X``, in order.
        """
        X = self._check(X)
        self._check_fitted(X)
        B = torch.from_numpy(self.B_).to(self.device_)
        computed: list[tuple[np.ndarray, torch.Tensor]] = []
        with torch_threads(self.n_jobs):
            for rows, batch in X.batches(X.check_layer(self.layer_), int(self.batch_size), device=self.device_):
                computed.append((X.lengths[rows], self._outputs(batch.vectors @ B.T)))  # lengths from the host
        out: list[np.ndarray] = []
        for lengths, values in computed:  # read back once the device has computed every batch
            host = values.cpu().numpy()
            out += [v[tuple(slice(0, int(n)) for _ in v.shape)] for v, n in zip(host, lengths)]
        return out

    def evaluate(self, X: StructuralData) -> dict[str, float]:
        """The paper's metrics of this probe on ``X`` (:func:`structural_metrics`).

        :param X: the data.
        :returns: the metrics and counts.
        """
        raise NotImplementedError

    def score(self, X: StructuralData, y: object = None) -> float:
        """scikit-learn's ``score``: UUAS (:class:`DistanceProbe`) or root accuracy (:class:`DepthProbe`).

        :param X: the data.
        :param y: ignored.
        :returns: a fraction.
        """
        raise NotImplementedError


class DistanceProbe(_StructuralProbe):
    """Hewitt and Manning's distance probe: ``||B(h_i - h_j)||^2`` is trained toward the tree distance.

    `A Structural Probe for Finding Syntax in Word Representations <https://aclanthology.org/N19-1419/>`_.

    :param layer: the hidden-state layer read (0: the embeddings); None: the data's only layer.
    :param rank: rows of ``B``; None: the hidden size (full rank).
    :param lr: Adam's initial learning rate (the paper's 0.001).
    :param lr_decay: the factor the learning rate takes after an epoch without a lower dev loss.
    :param max_epochs: epochs at most.
    :param patience: epochs without a dev loss lower by 1e-4 before stopping.
    :param batch_size: sentences per batch.
    :param seed: the initial ``B`` and the data order, drawn on the CPU.
    :param n_jobs: torch threads while fitting and predicting; None leaves torch's setting.
    :param device: where to fit and predict (``"cuda"``, a ``torch.device``); None: the CPU.
    :param precision: the training's matrix products: "fp32", or "bf16" or "auto" as
        :func:`~bertology_utils.core.models.fast_fp32_products` reads them (tensors stay float32); predictions and
        scores are float32 whatever it is.
    """

    label = "distance"
    _power = 2

    @staticmethod
    def _outputs(t: torch.Tensor) -> torch.Tensor:
        # ||t_i - t_j||^2 from the Gram matrix, whose diagonal holds the squared norms: no (words x words x rank)
        # difference tensor, and no pass over t beyond the product
        gram = t @ t.transpose(-1, -2)
        norms = gram.diagonal(dim1=-2, dim2=-1)
        return (norms[..., :, None] + norms[..., None, :] - 2 * gram).clamp(min=0)

    @staticmethod
    def _pullback(t: torch.Tensor, s: torch.Tensor, predicted: torch.Tensor) -> torch.Tensor:
        s = s * (predicted > 0)  # the clamp's zeros pass nothing back, as autograd's clamp
        s = s + s.transpose(-1, -2)  # each pair's error moves both words
        # 2 (rowsum(s) t - s t) as one product by the (words x words) Laplacian of s: every elementwise step is on
        # the small matrix, none on the (words x rank) t
        laplacian = -2 * s
        laplacian.diagonal(dim1=-2, dim2=-1).add_(2 * s.sum(-1))
        return laplacian @ t

    @staticmethod
    def _target(batch: StructuralBatch) -> torch.Tensor:
        return batch.distances

    def evaluate(self, X: StructuralData) -> dict[str, float]:
        """UUAS and DSpr on ``X`` (:func:`structural_metrics`).

        :param X: the data.
        :returns: the metrics and counts.
        """
        return structural_metrics(X, distances=self.predict(X))

    def score(self, X: StructuralData, y: object = None) -> float:
        """UUAS on ``X``.

        :param X: the data.
        :param y: ignored.
        :returns: a fraction.
        """
        return self.evaluate(X)["uuas"]


class DepthProbe(_StructuralProbe):
    """Hewitt and Manning's depth probe: ``||B h_i||^2`` is trained toward the word's depth in the tree.

    `A Structural Probe for Finding Syntax in Word Representations <https://aclanthology.org/N19-1419/>`_.
    Its parameters are :class:`DistanceProbe`'s.
    """

    label = "depth"

    @staticmethod
    def _outputs(t: torch.Tensor) -> torch.Tensor:
        return torch.linalg.vecdot(t, t)

    @staticmethod
    def _pullback(t: torch.Tensor, s: torch.Tensor, predicted: torch.Tensor) -> torch.Tensor:
        return (2 * s)[..., None] * t  # the 2 on the small factor: one pass over t

    @staticmethod
    def _target(batch: StructuralBatch) -> torch.Tensor:
        return batch.depths

    def evaluate(self, X: StructuralData) -> dict[str, float]:
        """Root accuracy and NSpr on ``X`` (:func:`structural_metrics`).

        :param X: the data.
        :returns: the metrics and counts.
        """
        return structural_metrics(X, depths=self.predict(X))

    def score(self, X: StructuralData, y: object = None) -> float:
        """Root accuracy on ``X``.

        :param X: the data.
        :param y: ignored.
        :returns: a fraction.
        """
        return self.evaluate(X)["root_acc"]


def fit_jointly(
    probes: Sequence[_StructuralProbe], X: StructuralData, dev: StructuralData | None = None
) -> list[_StructuralProbe]:
    """Fit structural probes of any layers, kinds and ranks in one pass over ``X`` per epoch.

    Each ends as its own ``fit`` would leave it, up to the float rounding of a batched product
    (:func:`~bertology_utils.analyses.probes.structural_fit.train_jointly`); ``fit_seconds_`` and each history
    row's ``seconds`` are the whole joint fit's.

    :param probes: :class:`DistanceProbe` and :class:`DepthProbe` estimators, sharing ``batch_size``, ``seed``,
        ``device``, ``n_jobs`` and ``precision``; each reads its own ``layer`` of ``X``.
    :param X: the training data, holding every layer the probes read.
    :param dev: the data whose loss steers each probe's training; without it, the training loss does.
    :returns: the probes, fitted.
    """
    for probe, fit in zip(probes, train_jointly(probes, X, dev)):
        probe._take(fit, X)
    return list(probes)


_EDGE_COLUMNS = ["layer", "rank", "sentence", "found", "edges"]
_TABLE_COLUMNS = ["layer", "probe", "rank", "split", "metric", "value"]

#: Bump when fitting or scoring structural probes changes what they find: stored results stop matching.
STRUCTURAL_VERSION = 1


@dataclass
class StructuralLayers:
    """What :func:`structural_probe_layers` found.

    :param table: a tidy table: ``layer``, ``probe`` (``distance``/``depth``), ``rank``, ``split``, ``metric``
        (``uuas``, ``dspr``, ``root_acc``, ``nspr``, ``best_epoch``) and ``value``.
    :param edges: the distance probes' UUAS counts per scored sentence, for intervals over sentences:
        ``layer``, ``rank``, ``sentence`` (its index in the scored corpus), ``found`` and ``edges``
        (:func:`uuas_by_sentence`).
    :param split: the split scored (``test``, or ``dev`` without one).
    :param from_cache: whether the results were read from the cache instead of fitted.
    """

    table: pd.DataFrame
    edges: pd.DataFrame
    split: str
    from_cache: bool = False


def _layer_groups(layers: list[int], bytes_per_layer: float, budget_mb: float) -> list[list[int]]:
    """``layers`` cut into runs whose kept vectors fit ``budget_mb`` (at least one layer per run)."""
    per_group = max(1, int(budget_mb * 2**20 // max(bytes_per_layer, 1)))
    return [layers[k : k + per_group] for k in range(0, len(layers), per_group)]


def _cache_entry(
    loaded: LoadedModel,
    corpora: dict[str, Corpus | None],
    fields: dict[str, Any],
    device: str | torch.device | None,
    cache_dir: str | os.PathLike | None,
) -> tuple[Path, dict[str, Any]]:
    """Folder and key of the results of ``loaded``'s probes on ``corpora`` with ``fields``.

    Threads and ``cache_size`` are not in the key: they change a fit by a batched product's rounding at most
    (:func:`fit_jointly`). A key names no device when the model and the probes ran on the CPU; otherwise it names
    the devices' types (their results differ in the last digits), as the attention probes' keys do.
    """
    given = {name: Corpus.of(corpus) for name, corpus in corpora.items() if corpus is not None}
    key: dict[str, Any] = {
        "model": loaded.weights_fingerprint(),
        **loaded.precision_key(),
        **{name: None for name in corpora},
        **{name: {"sha256": corpus.sha256, "items": len(corpus)} for name, corpus in given.items()},
        **fields,
        "version": STRUCTURAL_VERSION,
        "torch": torch.__version__,
    }
    # the model's device too: a GPU's forward gives other hidden states in the last digits
    if devices := sorted({probe_device(device).type, torch.device(loaded.device).type} - {"cpu"}):
        key["device"] = "+".join(devices)
    root = Path(cache_dir) if cache_dir is not None else settings.cache_dir() / "probes"
    return root / entry_name(f"structural-{given['train'].name}", key), key


def structural_probe_layers(
    model: LoadedModel | str | None,
    train: Corpus,
    dev: Corpus,
    *,
    test: Corpus | None = None,
    layers: Sequence[int] | None = None,
    rank: int | None = None,
    rank_layer: int | None = None,
    ranks: Sequence[int] | None = None,
    device: str | torch.device | None = None,
    seed: int = 0,
    max_epochs: int = 40,
    precision: str = "fp32",
    cache_size: float = 2048,
    cache: bool = False,
    cache_dir: str | os.PathLike | None = None,
) -> StructuralLayers:
    """Both structural probes fitted at every layer of ``model``, and optionally a rank sweep at one layer.

    Hewitt and Manning (2019), `A Structural Probe for Finding Syntax in Word Representations
    <https://aclanthology.org/N19-1419/>`_. Each probe is fitted on ``train`` with ``dev`` steering the
    training, and scored on ``test`` (``dev`` when None). The word vectors of as many layers as fit
    ``cache_size`` MB (float16) are read in one pass of the model, and all those layers' probes are fitted
    together (:func:`fit_jointly`); the rest in later passes.

    With ``cache``, the scores are stored under ``cache_dir`` (default ``$BERTOLOGY_CACHE_DIR/probes``), keyed by
    the model's weights and precision, the three treebanks' contents, the settings above but ``cache_size``,
    :data:`STRUCTURAL_VERSION`, torch's version and the model's and probes' device types other than the CPU; a
    later call with the same key reads them (``from_cache`` is True) instead of running the model and fitting. A
    corrupt entry is fitted again with a :class:`~bertology_utils.core.cache.CacheWarning`.

    :param model: a loaded model, a name or a folder (None: the default model).
    :param train: the training treebank.
    :param dev: the treebank whose loss steers the training.
    :param test: the treebank scored; ``dev`` by default.
    :param layers: hidden-state layers (0: the embeddings); all ``L + 1`` by default.
    :param rank: the probes' rank at every layer; None: full rank.
    :param rank_layer: a layer where both probes are also fitted at every rank of ``ranks``.
    :param ranks: the ranks tried at ``rank_layer``; :func:`rank_grid` of the hidden size by default.
    :param device: where the probes fit (None: the CPU).
    :param seed: the probes' seed.
    :param max_epochs: epochs at most per fit.
    :param precision: the matrix products of the fits (:class:`DistanceProbe`'s ``precision``, resolved on the
        probes' device) and of the passes reading the word vectors; the tensors and scores are float32 whatever it is.
    :param cache_size: MB of word vectors kept at a time, over the three splits.
    :param cache: read and store the scores on disk.
    :param cache_dir: where; ``$BERTOLOGY_CACHE_DIR/probes`` by default.
    :returns: the scores per layer (:class:`StructuralLayers`).
    """
    loaded = LoadedModel.of(model)
    wanted = list(range(loaded.num_layers + 1)) if layers is None else [int(k) for k in layers]
    if rank_layer is not None and int(rank_layer) not in wanted:
        wanted.append(int(rank_layer))
    hidden = int(loaded.config.hidden_size)
    fields = {
        "layers": wanted,
        "rank": int(rank or hidden),
        "rank_layer": None if rank_layer is None else int(rank_layer),
        "ranks": [int(r) for r in (ranks or rank_grid(hidden))] if rank_layer is not None else None,
        "seed": int(seed),
        "max_epochs": int(max_epochs),
    }
    if (resolved := resolve_precision(precision, probe_device(device))) != "fp32":
        fields["probe_precision"] = resolved  # fp32 keys as before precision: their stored entries still match
        fields["vector_precision"] = resolved  # the word vectors' products too (entries of before it stop matching)
    split = "dev" if test is None else "test"

    def compute() -> dict[str, pd.DataFrame]:
        return _fit_layers(loaded, train, dev, test, fields, device, cache_size)

    if not cache:
        return StructuralLayers(**compute(), split=split)
    entry = _cache_entry(loaded, {"train": train, "dev": dev, "test": test}, fields, device, cache_dir)
    frames, from_cache = cached_frames(*entry, compute)
    return StructuralLayers(**frames, split=split, from_cache=from_cache)


def _fit_layers(
    loaded: LoadedModel,
    train: Corpus,
    dev: Corpus,
    test: Corpus | None,
    fields: dict[str, Any],
    device: str | torch.device | None,
    cache_size: float,
) -> dict[str, pd.DataFrame]:
    """:func:`structural_probe_layers`' ``table`` and ``edges``: the probes fitted on ``train``, steered by ``dev``
    and scored on ``test`` (``dev`` when None), with the resolved ``fields``."""
    split = "dev" if test is None else "test"
    words = sum(len(s.words) for corpus in (train, dev, test) if corpus is not None for s in corpus)
    bytes_per_layer = words * int(loaded.config.hidden_size) * 2
    shared = {"device": device, "precision": fields.get("probe_precision", "fp32")}
    shared |= {name: fields[name] for name in ("seed", "max_epochs")}
    rows: list[dict[str, object]] = []
    edges: list[pd.DataFrame] = []
    for group in _layer_groups(fields["layers"], bytes_per_layer, cache_size):
        # the word vectors' forward passes take the fits' products: bf16's rounding there is the size of the fits' own
        read = functools.partial(StructuralData.from_model, model=loaded, layers=group, precision=shared["precision"])
        data = {name: read(corpus) for name, corpus in (("train", train), ("dev", dev))}
        data["scored"] = data["dev"] if test is None else read(test)
        probes = [
            cls(layer=layer, rank=r, **shared)
            for layer in group
            for r in dict.fromkeys([fields["rank"], *(fields["ranks"] if layer == fields["rank_layer"] else [])])
            for cls in (DistanceProbe, DepthProbe)
        ]
        for probe in fit_jointly(probes, data["train"], data["dev"]):
            predicted = probe.predict(data["scored"])
            if isinstance(probe, DistanceProbe):
                index, found, total = uuas_by_sentence(data["scored"], predicted)
                metrics = structural_metrics(data["scored"], distances=predicted, edges=(index, found, total))
                edges.append(pd.DataFrame({"layer": probe.layer_, "rank": probe.rank_, "sentence": index,
                                           "found": found, "edges": total}))  # fmt: skip
            else:
                metrics = structural_metrics(data["scored"], depths=predicted)
            metrics["best_epoch"] = probe.best_epoch_
            rows += [
                dict(zip(_TABLE_COLUMNS, (probe.layer_, probe.label, probe.rank_, split, metric, float(value))))
                for metric in ("uuas", "dspr", "root_acc", "nspr", "best_epoch")
                if (value := metrics.get(metric)) is not None
            ]
        del data
    return {
        "table": pd.DataFrame(rows, columns=_TABLE_COLUMNS),
        "edges": pd.concat(edges, ignore_index=True) if edges else pd.DataFrame(columns=_EDGE_COLUMNS),
    }
