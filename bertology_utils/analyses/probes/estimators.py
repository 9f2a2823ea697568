"""The probes, scikit-learn estimators over :class:`~bertology_utils.analyses.probes.data.ProbeData`.

Clark et al. (2019, `What Does BERT Look At? <https://arxiv.org/abs/1906.04341>`_), Section 5 and
Table 3. :class:`RightBranching` learns nothing; the others train a scorer of
:mod:`~bertology_utils.analyses.probes.scorers` by softmax cross-entropy over the candidate heads.
"""

from __future__ import annotations

import copy
import json
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import safetensors.torch
import torch
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError
from tqdm.auto import tqdm

from bertology_utils.analyses.probes.data import Batch, ProbeData, probe_device
from bertology_utils.analyses.probes.evaluation import ProbeEvaluation
from bertology_utils.analyses.probes.scorers import AttentionScorer, AttentionWordsScorer, DistanceWordsScorer
from bertology_utils.core.errors import BertologyError
from bertology_utils.core.threads import torch_threads
from bertology_utils.core.typing import WordValues

__all__ = [
    "ProbeBase",
    "TrainedProbe",
    "RightBranching",
    "AttentionProbe",
    "AttentionWordsProbe",
    "DistanceWordsProbe",
    "epoch_postfix",
]

#: Score given to impossible candidates (padding, the word itself).
_MASKED = -1e9

#: Held while a probe seeds torch's global generator and draws its initial weights (fit_probes runs fits in threads).
_SEEDING = threading.Lock()
#: A trained probe's fitted attributes besides its weights, which :meth:`TrainedProbe.save_fitted` stores as JSON.
_FITTED_STATE = ("history_", "best_epoch_", "n_sentences_fit_", "fit_seconds_")


def epoch_postfix(row: dict[str, float]) -> dict[str, str]:
    """What a fit's bar shows after an epoch: its loss and dev UAS.

    :param row: the epoch's row of ``history_``.
    :returns: the bar's postfix.
    """
    return {k: f"{v:.4f}" for k, v in row.items() if k in ("train_loss", "dev_uas")}


def _check_data(X: object) -> ProbeData:
    if not isinstance(X, ProbeData):
        raise TypeError(
            f"X must be a ProbeData (a treebank with its attention store), not {type(X).__name__}; "
            "build one with bertology_utils.analyses.probes.ProbeData(corpus, store, vectors)"
        )
    return X


class ProbeBase(BaseEstimator):
    """What every probe shares: scikit-learn conventions over :class:`ProbeData`.

    ``X`` is a :class:`ProbeData`, and the gold trees come from its corpus (``y`` is ignored); fitted
    attributes end in ``_``.
    """

    #: Which inputs the probe reads.
    uses_attention = False
    uses_vectors = False
    #: Table 3 row name.
    label = ""

    def _check_fitted(self) -> None:
        if not hasattr(self, "n_sentences_fit_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet: call fit(train_data) first")

    def _predictions(self, X: ProbeData) -> dict[int, WordValues]:
        raise NotImplementedError

    def predict(self, X: ProbeData) -> list[WordValues]:
        """Predicted heads of every usable sentence.

        :param X: the data.
        :returns: one ``(W,)`` array of heads (UD convention) per sentence, in corpus order.
        """
        X = _check_data(X)
        self._check_fitted()
        predictions = self._predictions(X)
        return [predictions[i] for i in sorted(predictions)]

    def evaluate(self, X: ProbeData, name: str | None = None) -> ProbeEvaluation:
        """Predictions with the gold trees: UAS, UAS by relation, per-sentence heads.

        :param X: the data.
        :param name: the evaluation's name; the probe's Table 3 label by default.
        :returns: the evaluation.
        """
        X = _check_data(X)
        self._check_fitted()
        return ProbeEvaluation.of(name or self.label or type(self).__name__, X, self._predictions(X))

    def score(self, X: ProbeData, y: object = None) -> float:
        """UAS on ``X`` (punctuation left out), scikit-learn's ``score``.

        :param X: the data.
        :param y: ignored (the gold trees are ``X``'s).
        :returns: the UAS, a fraction.
        """
        return self.evaluate(X).uas


class RightBranching(ProbeBase):
    """Baseline: each word's head is the next word; the last word is the root.

    Clark et al.'s "right-branching" row (26 UAS on WSJ), the same as their best fixed offset (+1)
    over all words. Nothing is learned; ``fit`` only records the data's size.
    """

    label = "Right-branching"

    def __init__(self) -> None:
        pass

    def fit(self, X: ProbeData, y: object = None, dev: ProbeData | None = None) -> RightBranching:
        """Record the data's size; nothing is learned.

        :param X: the training data.
        :param y: ignored.
        :param dev: ignored.
        :returns: the probe.
        """
        X = _check_data(X)
        self.n_sentences_fit_ = len(X)
        return self

    def _predictions(self, X: ProbeData) -> dict[int, WordValues]:
        out = {}
        for i in X.indices:
            n = len(X.corpus[int(i)].words)
            heads = np.arange(2, n + 2, dtype=np.int64)
            heads[-1] = 0
            out[int(i)] = heads
        return out


class TrainedProbe(ProbeBase):
    """Probes trained by softmax cross-entropy over candidate heads, with early stopping on dev.

    Subclasses build the scorer (:mod:`~bertology_utils.analyses.probes.scorers`) and set the
    training parameters in ``__init__``.
    """

    def _build(self, X: ProbeData) -> torch.nn.Module:
        raise NotImplementedError

    def _check_params(self) -> None:
        for name in ("max_epochs", "batch_size", "max_pairs"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")
        if self.patience is not None and int(self.patience) < 1:
            raise ValueError(f"patience must be at least 1 or None, not {self.patience}")
        if not self.lr > 0:
            raise ValueError(f"lr must be positive, not {self.lr}")

    def _fit_device(self) -> torch.device:
        """The device ``device`` names (None: the CPU), checked; ``device_`` once fitted."""
        return probe_device(self.device)

    def _shape_of(self, X: ProbeData) -> tuple[int, int]:
        """(L, H) of X's attention, reading one item when it is not known yet."""
        if X.shape is None:
            next(iter(X.batches(1, attention=True)), None)
        if X.shape is None:
            raise BertologyError(f"could not read any attention from {X.name}")
        return X.shape

    def _batch_options(self, shuffle: bool, epoch: int) -> dict[str, Any]:
        return dict(
            batch_size=self.batch_size,
            max_pairs=self.max_pairs,
            attention=self.uses_attention,
            vectors=self.uses_vectors,
            shuffle=shuffle,
            seed=(int(self.seed) * 1_000_003 + epoch),
        )

    def _steps(self, X: ProbeData, shuffle: bool = False, epoch: int = 0) -> Iterator[tuple[Batch, Batch]]:
        """X's batches as ``(on the host, on device_)`` pairs (the batch itself twice on the CPU).

        Elsewhere the features are gathered on the device (:meth:`ProbeData.batches` with ``device``), and
        a thread prepares the next batch while the device computes this one, in the same order; on the
        CPU that thread would take a core from the fit (fit_probes runs a fit per core), so there is none.
        """
        options = self._batch_options(shuffle, epoch)
        if self.device_.type == "cpu":
            yield from ((batch, batch) for batch in X.batches(**options))
            return
        batches = X.batches(**options, device=self.device_)
        with ThreadPoolExecutor(max_workers=1) as pool:
            pending = pool.submit(next, batches, None)
            while (batch := pending.result()) is not None:
                pending = pool.submit(next, batches, None)
                assert batch.host is not None  # a batch gathered on a device has its host copy
                yield batch.host, batch

    def _check_compatible(self, X: ProbeData) -> None:
        if self.uses_attention:
            shape = self._shape_of(X)
            if tuple(shape) != tuple(self.attention_shape_):
                raise BertologyError(
                    f"this probe was fit on {self.attention_shape_[0]} x {self.attention_shape_[1]} "
                    f"layers x heads of attention; {X.name} has {shape[0]} x {shape[1]}"
                )
        if self.uses_vectors:
            if X.vectors is None:
                raise BertologyError("this probe needs word vectors: build the ProbeData with vectors=...")
            if X.vectors.dim != self.vector_dim_:
                raise BertologyError(
                    f"this probe was fit on word vectors of dimension {self.vector_dim_}; "
                    f"{X.name}'s have {X.vectors.dim}"
                )

    def fit(
        self,
        X: ProbeData,
        y: object = None,
        dev: ProbeData | None = None,
        verbose: bool = False,
        progress: bool | Callable[[dict[str, float]], object] = False,
        desc: str | None = None,
    ) -> TrainedProbe:
        """Train on ``X``; ``dev`` picks the epoch to keep.

        Without ``dev`` every one of ``max_epochs`` epochs runs and the last is kept. ``history_``
        lists each epoch's mean training loss, dev UAS and seconds.

        :param X: the training data.
        :param y: ignored (the gold trees are ``X``'s).
        :param dev: the data whose UAS picks the epoch (and stops early).
        :param verbose: print each epoch's loss and dev UAS.
        :param progress: a bar of the epochs with the last epoch's loss and dev UAS; it stops short of
            ``max_epochs`` when early stopping ends the fit. A function instead is called with each epoch's row of
            ``history_`` as it ends (how :func:`fit_probes` follows a fit in another process), and no bar is shown.
        :param desc: the bar's label; the class name by default.
        :returns: the probe, fitted.
        """
        X = _check_data(X)
        if dev is not None:
            dev = _check_data(dev)
        self._check_params()
        with (
            torch_threads(self.n_jobs),
            tqdm(
                total=int(self.max_epochs),
                desc=desc or type(self).__name__,
                unit="epoch",
                disable=not progress or callable(progress),
            ) as bar,
        ):
            return self._fit(X, dev, verbose, bar, progress if callable(progress) else None)

    def _fit(
        self,
        X: ProbeData,
        dev: ProbeData | None,
        verbose: bool,
        bar: tqdm,
        on_epoch: Callable[[dict[str, float]], object] | None,
    ) -> TrainedProbe:
        started = time.perf_counter()
        self.device_ = self._fit_device()
        if self.uses_attention:
            self.attention_shape_ = self._shape_of(X)
        if self.uses_vectors:
            if X.vectors is None:
                raise BertologyError(
                    f"{type(self).__name__} needs word vectors: build the ProbeData with vectors=... "
                    "(bertology_utils.analyses.word_vectors.default_word_vectors)"
                )
            self.vector_dim_ = X.vectors.dim
        if dev is not None:
            self._check_compatible(dev)
        with _SEEDING:  # the initial weights come from torch's global generator
            torch.manual_seed(int(self.seed))
            module = self._build(X)
        # Drawn on the CPU, then moved: one seed gives one start on every device.
        self.module_ = module = module.to(self.device_)
        optimizer = torch.optim.Adam(module.parameters(), lr=float(self.lr), weight_decay=float(self.weight_decay))
        history: list[dict[str, float]] = []
        best_uas, best_state, best_epoch, stale = -math.inf, None, 0, 0
        n_sentences = 0
        for epoch in range(int(self.max_epochs)):
            tick = time.perf_counter()
            module.train()
            # The loss summed on the device (float64, as Python's floats were) and read once per epoch.
            total = torch.zeros((), dtype=torch.float64, device=self.device_)
            words, n_sentences = 0, 0
            for _, batch in self._steps(X, shuffle=True, epoch=epoch):
                scores = module(batch).masked_fill(~batch.candidates, _MASKED)
                real = batch.positions  # the rows a boolean mask would pick, without the device saying how many
                assert real is not None  # every collated batch has them
                loss = torch.nn.functional.cross_entropy(
                    scores.flatten(0, 1).index_select(0, real), batch.heads.flatten().index_select(0, real)
                )
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total += loss.detach().double() * real.numel()
                words += real.numel()
                n_sentences += len(batch.indices)
            row = {"epoch": epoch + 1, "train_loss": float(total) / max(words, 1)}
            if dev is not None:
                row["dev_uas"] = ProbeEvaluation.of("dev", dev, self._run(dev)).uas
            row["seconds"] = time.perf_counter() - tick
            history.append(row)
            bar.update()
            bar.set_postfix(epoch_postfix(row))
            if on_epoch is not None:
                on_epoch(row)
            if verbose:
                print(
                    f"{type(self).__name__} epoch {epoch + 1}: loss {row['train_loss']:.4f}"
                    + (f", dev UAS {100 * row['dev_uas']:.2f}" if dev is not None else "")
                    + f" ({row['seconds']:.1f} s)",
                    flush=True,
                )
            if dev is None:
                best_epoch, best_state = epoch + 1, None
                continue
            if row["dev_uas"] > best_uas:
                best_uas, best_epoch, stale = row["dev_uas"], epoch + 1, 0
                best_state = copy.deepcopy(module.state_dict())
            else:
                stale += 1
                if self.patience is not None and stale >= int(self.patience):
                    break
        if best_state is not None:
            module.load_state_dict(best_state)
        module.eval()
        self.history_ = history
        self.best_epoch_ = best_epoch
        self.n_sentences_fit_ = n_sentences
        self.fit_seconds_ = time.perf_counter() - started
        self._fitted_hook()
        return self

    def _fitted_hook(self) -> None:
        pass

    @torch.no_grad()
    def _run(self, X: ProbeData) -> dict[int, np.ndarray]:
        self.module_.eval()
        best: list[torch.Tensor] = []
        sentences: list[tuple[int, int]] = []  # (corpus index, words) of each sentence, in order
        for host, batch in self._steps(X):
            scores = self.module_(batch).masked_fill(~batch.candidates, _MASKED)
            assert batch.positions is not None  # every collated batch has them
            best.append(scores.argmax(-1).flatten().index_select(0, batch.positions))  # its real words, in order
            sentences += zip(host.indices.tolist(), host.lengths.tolist())
        if not best:
            return {}
        heads = torch.cat(best).cpu().numpy()  # the one read from the device
        ends = np.cumsum([n for _, n in sentences])
        return {i: heads[end - n : end] for (i, n), end in zip(sentences, ends)}

    def _predictions(self, X: ProbeData) -> dict[int, WordValues]:
        self._check_compatible(X)
        with torch_threads(self.n_jobs):
            return self._run(X)

    def save_fitted(self, folder: Path) -> None:
        """Store the fitted probe: its weights (safetensors) and the rest of its fitted state (JSON).

        :param folder: an existing folder, written into.
        """
        record = {name: getattr(self, name) for name in _FITTED_STATE}
        if self.uses_attention:
            record["attention_shape_"] = list(self.attention_shape_)
        if self.uses_vectors:
            record["vector_dim_"] = self.vector_dim_
        state = {k: v.detach().cpu().contiguous() for k, v in self.module_.state_dict().items()}  # any device's fit
        safetensors.torch.save_file(state, folder / "weights.safetensors")
        (folder / "probe.json").write_text(json.dumps(record, indent=1, default=float), encoding="utf-8")

    def load_fitted(self, folder: Path, X: ProbeData) -> TrainedProbe:
        """Make this probe the fitted one :meth:`save_fitted` wrote.

        :param folder: where it was written.
        :param X: the data it was fitted on.
        :returns: the probe, fitted.
        """
        record = json.loads((folder / "probe.json").read_text(encoding="utf-8"))
        if self.uses_attention:
            self.attention_shape_ = tuple(record["attention_shape_"])
        if self.uses_vectors:
            self.vector_dim_ = int(record["vector_dim_"])
        self.device_ = self._fit_device()
        module = self._build(X)
        module.load_state_dict(safetensors.torch.load_file(folder / "weights.safetensors"))  # CPU tensors
        self.module_ = module.to(self.device_).eval()
        for name in _FITTED_STATE:
            setattr(self, name, record[name])
        self._fitted_hook()
        return self


class AttentionProbe(TrainedProbe):
    """Table 3 "Attn": ``p(i | j) ∝ exp(Σ_k w_k a_k[j, i] + u_k a_k[i, j])`` over every head k.

    After ``fit``: ``w_`` and ``u_`` are ``(L, H)`` arrays (``w``: the dependent attends to the
    candidate; ``u``: the candidate attends to the dependent), ``root_scale_`` is ``(r_cls, r_sep)``
    (the package docstring, "ROOT, exactly").

    :param lr: Adam's learning rate.
    :param max_epochs: epochs at most.
    :param patience: epochs without a better dev UAS before stopping; None: never stop early.
    :param batch_size: sentences per batch.
    :param max_pairs: padded dependent x candidate pairs per batch.
    :param weight_decay: Adam's weight decay.
    :param seed: initialisation and data order.
    :param n_jobs: torch threads while fitting and predicting; None leaves torch's setting. The batches
        are small: one thread is as fast as two here, and far faster on a busy machine.
    :param device: where to fit and predict (``"cuda"``, ``"cuda:1"``, a ``torch.device``); None: the CPU.
        The initial weights and the data order are drawn on the CPU from ``seed`` whatever the device.
    """

    uses_attention = True
    label = "Attn"
    module_: AttentionScorer  # what _build makes: _fitted_hook reads its weights

    def __init__(
        self,
        *,
        lr: float = 0.01,
        max_epochs: int = 10,
        patience: int | None = 2,
        batch_size: int = 32,
        max_pairs: int = 16384,
        weight_decay: float = 0.0,
        seed: int = 0,
        n_jobs: int | None = 1,
        device: str | torch.device | None = None,
    ) -> None:
        self.lr = lr
        self.max_epochs = max_epochs
        self.patience = patience
        self.batch_size = batch_size
        self.max_pairs = max_pairs
        self.weight_decay = weight_decay
        self.seed = seed
        self.n_jobs = n_jobs
        self.device = device

    def _build(self, X: ProbeData) -> AttentionScorer:
        L, H = self.attention_shape_
        return AttentionScorer(2 * L * H)

    def _fitted_hook(self) -> None:
        L, H = self.attention_shape_
        theta = self.module_.theta.detach().cpu().numpy().copy()
        self.w_ = theta[: L * H].reshape(L, H)
        self.u_ = theta[L * H :].reshape(L, H)
        self.root_scale_ = self.module_.root_scale.detach().cpu().numpy().copy()


class AttentionWordsProbe(TrainedProbe):
    """Table 3 "Attn + GloVe": ``w_k`` and ``u_k`` are linear in the two words' vectors.

    ``p(i | j) ∝ exp(Σ_k (W_k · (v_j ⊕ v_i) + b_k) a_k[j, i] + (U_k · (v_j ⊕ v_i) + c_k) a_k[i, j])``
    with fixed vectors ``v`` from the :class:`ProbeData`'s ``vectors``. Use
    :meth:`effective_weights` to see which heads it relies on (the weights depend on the words).
    Run on the maps of a randomly initialised copy of the model, it is the random-init baseline.

    :param lr: Adam's learning rate.
    :param max_epochs: epochs at most.
    :param patience: epochs without a better dev UAS before stopping; None: never stop early.
    :param batch_size: sentences per batch.
    :param max_pairs: padded dependent x candidate pairs per batch.
    :param weight_decay: Adam's weight decay.
    :param seed: initialisation and data order.
    :param n_jobs: torch threads while fitting and predicting; None leaves torch's setting. The batches
        are small: one thread is as fast as two here, and far faster on a busy machine.
    :param device: where to fit and predict (``"cuda"``, ``"cuda:1"``, a ``torch.device``); None: the CPU.
        The initial weights and the data order are drawn on the CPU from ``seed`` whatever the device.
    """

    uses_attention = True
    uses_vectors = True
    label = "Attn + words"
    module_: AttentionWordsScorer  # what _build makes: effective_weights reads its per-pair weights

    def __init__(
        self,
        *,
        lr: float = 0.005,
        max_epochs: int = 10,
        patience: int | None = 2,
        batch_size: int = 32,
        max_pairs: int = 16384,
        weight_decay: float = 0.0,
        seed: int = 0,
        n_jobs: int | None = 1,
        device: str | torch.device | None = None,
    ) -> None:
        self.lr = lr
        self.max_epochs = max_epochs
        self.patience = patience
        self.batch_size = batch_size
        self.max_pairs = max_pairs
        self.weight_decay = weight_decay
        self.seed = seed
        self.n_jobs = n_jobs
        self.device = device

    def _build(self, X: ProbeData) -> AttentionWordsScorer:
        L, H = self.attention_shape_
        return AttentionWordsScorer(2 * L * H, self.vector_dim_)

    def _fitted_hook(self) -> None:
        self.root_scale_ = self.module_.root_scale.detach().cpu().numpy().copy()

    @torch.no_grad()
    def effective_weights(self, X: ProbeData, relations: Sequence[str] = ()) -> dict[str, np.ndarray]:
        """Mean head weights over the gold arcs of ``X``: which heads the probe relies on.

        For each gold arc (dependent j, head i) the weights the probe gives that pair are averaged, over
        all arcs and over the arcs of each relation in ``relations``. Punctuation arcs are left out.

        :param X: the data.
        :param relations: relations to average over separately.
        :returns: ``{"all": (2, L, H), relation: (2, L, H)...}`` for those with arcs; entry 0 of the first
            axis is ``w`` (the dependent attends to its head), 1 is ``u`` (the head attends to its dependent).
        """
        X = _check_data(X)
        self._check_fitted()
        self._check_compatible(X)
        L, H = self.attention_shape_
        sums = {name: torch.zeros(2 * L * H, dtype=torch.float64, device=self.device_) for name in ("all", *relations)}
        counts = dict.fromkeys(sums, 0)
        with torch_threads(self.n_jobs):
            self._sum_arc_weights(X, relations, sums, counts)
        return {
            name: (sums[name] / max(counts[name], 1)).cpu().numpy().reshape(2, L, H) for name in sums if counts[name]
        }

    def _sum_arc_weights(
        self, X: ProbeData, relations: Sequence[str], sums: dict[str, torch.Tensor], counts: dict[str, int]
    ) -> None:
        for host, batch in self._steps(X):
            weights = self.module_.weights(batch)  # (B, N, N + 1, 2K)
            gold = batch.heads.clamp(min=0)
            arc = weights.gather(2, gold[:, :, None, None].expand(-1, -1, 1, weights.shape[-1])).squeeze(2)
            # Which arcs each sum takes is known on the host: (name, rows of arc.flatten(0, 1)) groups, all
            # the batch's in one index, so the device is sent one index a batch and never asked how many.
            keep = host.scored & host.words
            groups = [("all", torch.nonzero(keep.flatten()).squeeze(1))]
            N = keep.shape[1]
            for b, i in enumerate(host.indices):
                rel = np.asarray(X.corpus[int(i)].relations, dtype=object)
                for name in relations:
                    where = torch.from_numpy(rel == name) & keep[b, : len(rel)]
                    if where.any():  # per sentence, as the sums always were
                        groups.append((name, b * N + torch.nonzero(where).squeeze(1)))
            rows = arc.flatten(0, 1).index_select(0, torch.cat([g for _, g in groups]).to(arc.device))
            start = 0
            for name, group in groups:
                sums[name] += rows[start : start + len(group)].sum(0).double()
                counts[name] += len(group)
                start += len(group)


class DistanceWordsProbe(TrainedProbe):
    """Baseline "Distances + GloVe": one hidden layer over both words' vectors and distance features.

    Score of candidate i for dependent j: ``o · tanh(A v_j + B v_i + C d(j, i) + a) + c`` with the
    distance features of :func:`~bertology_utils.analyses.probes.scorers.distance_features` (ROOT: zero
    vector, ROOT indicator). No attention.

    :param hidden_size: the hidden layer's size.
    :param lr: Adam's learning rate.
    :param max_epochs: epochs at most.
    :param patience: epochs without a better dev UAS before stopping; None: never stop early.
    :param batch_size: sentences per batch.
    :param max_pairs: padded dependent x candidate pairs per batch.
    :param weight_decay: Adam's weight decay.
    :param seed: initialisation and data order.
    :param n_jobs: torch threads while fitting and predicting; None leaves torch's setting. The batches
        are small: one thread is as fast as two here, and far faster on a busy machine.
    :param device: where to fit and predict (``"cuda"``, ``"cuda:1"``, a ``torch.device``); None: the CPU.
        The initial weights and the data order are drawn on the CPU from ``seed`` whatever the device.
    """

    uses_vectors = True
    label = "Distances + words"

    def __init__(
        self,
        *,
        hidden_size: int = 256,
        lr: float = 0.005,
        max_epochs: int = 10,
        patience: int | None = 2,
        batch_size: int = 32,
        max_pairs: int = 16384,
        weight_decay: float = 0.0,
        seed: int = 0,
        n_jobs: int | None = 1,
        device: str | torch.device | None = None,
    ) -> None:
        self.hidden_size = hidden_size
        self.lr = lr
        self.max_epochs = max_epochs
        self.patience = patience
        self.batch_size = batch_size
        self.max_pairs = max_pairs
        self.weight_decay = weight_decay
        self.seed = seed
        self.n_jobs = n_jobs
        self.device = device

    def _build(self, X: ProbeData) -> DistanceWordsScorer:
        if int(self.hidden_size) < 1:
            raise ValueError(f"hidden_size must be at least 1, not {self.hidden_size}")
        return DistanceWordsScorer(self.vector_dim_, int(self.hidden_size))
