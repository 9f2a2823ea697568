"""Fitting several probes side by side, and the disk cache of fitted probes.

The probes are those of Clark et al. (2019, `What Does BERT Look At? <https://arxiv.org/abs/1906.04341>`_,
Section 5 and Table 3).
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing
import os
import pickle
import queue
import threading
from collections.abc import Iterator, Mapping
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from bertology_utils.analyses.probes.data import ProbeData
from bertology_utils.analyses.probes.estimators import ProbeBase, TrainedProbe, epoch_postfix
from bertology_utils.analyses.word_vectors import WordVectors
from bertology_utils.core import settings
from bertology_utils.core.cache import cached, entry_name
from bertology_utils.core.errors import BertologyError
from bertology_utils.core.threads import torch_threads

__all__ = ["PROBE_VERSION", "fit_probes"]


def fit_probes(
    jobs: Mapping[str, tuple[ProbeBase, ProbeData, ProbeData | None]],
    *,
    n_jobs: int | None = None,
    cache: bool = False,
    cache_dir: str | os.PathLike | None = None,
    progress: bool = True,
    device: str | torch.device | None = None,
    processes: bool | None = None,
) -> dict[str, ProbeBase]:
    """Fit several probes side by side: ``{name: (probe, train, dev)}`` -> ``{name: fitted probe}``.

    Each probe trains on one torch thread (its ``n_jobs`` must be 1 or None), ``n_jobs`` of them
    at a time in threads (None: torch's thread count, one per core unless the process was given
    fewer, as ``bertology run --jobs`` does), in the order given: put the slowest first. Every
    fit is the one ``probe.fit(train, dev=dev)`` would give alone (same seed, same data order,
    same thread count), and probes on the same :class:`ProbeData` share its prepared blocks.
    The probes are fitted in place and returned by name. With ``device`` every trained probe fits
    there (its ``device`` parameter is set); on a GPU they share it.

    On a GPU a fit's step is mostly host Python (a batch's small tensors, a few dozen kernel launches,
    Adam), which threads of one process take turns at: there each trained probe fits in a process of its
    own (``processes``), started by ``spawn``, which reads its data anew (the kept blocks stay here), and
    the fitted probe comes back here with its epochs' bars and its word-vector lookups counted.

    With ``cache``, a trained probe is stored (weights in safetensors, the rest in JSON) under
    ``cache_dir`` (default ``$BERTOLOGY_CACHE_DIR/probes``), keyed by its class and parameters,
    the fingerprints of its train and dev data (:meth:`ProbeData.fingerprint`: corpus, attention
    store, word vectors), the device's type when it is not the CPU (a GPU's fit differs in the last
    digits) and :data:`PROBE_VERSION`; a later call with the same key loads it
    (``from_cache_`` is True) instead of training. Probes whose data have no fingerprint are
    trained every time; a corrupt entry is trained again with a
    :class:`~bertology_utils.core.cache.CacheWarning`.

    :param jobs: ``{name: (probe, train, dev)}``; ``dev`` may be None.
    :param n_jobs: probes fitted at a time; None: torch's thread count.
    :param cache: read and store trained probes on disk.
    :param cache_dir: where; ``$BERTOLOGY_CACHE_DIR/probes`` by default.
    :param progress: a bar of each trained probe's epochs, labelled with its name (none for a probe
        read from the cache).
    :param device: where every trained probe fits (``"cuda"``, a model's ``device``...); None: each
        probe's own ``device``.
    :param processes: fit each trained probe in a process of its own; None: where two or more fit on a
        device other than the CPU. Every fit is the one a thread would give.
    :returns: ``{name: fitted probe}``, the probes given, fitted in place.
    """
    for name, (probe, _, _) in jobs.items():
        if getattr(probe, "n_jobs", None) not in (1, None):
            raise ValueError(
                f"{name}: fit_probes trains each probe on one thread; set its n_jobs to 1, not {probe.n_jobs}"
            )
    workers = torch.get_num_threads() if n_jobs is None else int(n_jobs)
    if workers < 1:
        raise ValueError(f"n_jobs must be at least 1 or None, not {n_jobs}")
    root = Path(cache_dir) if cache_dir is not None else settings.cache_dir() / "probes"
    if device is not None:
        for probe, _, _ in jobs.values():
            if isinstance(probe, TrainedProbe):
                probe.set_params(device=device)

    trained = [probe for probe, _, _ in jobs.values() if isinstance(probe, TrainedProbe)]
    if processes is None:
        processes = len(trained) > 1 and any(probe._fit_device().type != "cpu" for probe in trained)
    apart = _ProcessFits(min(workers, len(trained)), progress) if processes and trained else None

    def fit(name: str, probe: ProbeBase, train: ProbeData, dev: ProbeData | None) -> ProbeBase:
        if not isinstance(probe, TrainedProbe):
            return probe.fit(train, dev=dev)
        if apart is None:
            train_it = functools.partial(probe.fit, train, dev=dev, progress=progress, desc=f"probe {name}")
        else:
            train_it = functools.partial(apart.fit, name, probe, train, dev)
        entry = _cache_entry(root, probe, train, dev) if cache else None
        if entry is None:
            return train_it()
        _, probe.from_cache_ = cached(
            *entry,
            train_it,
            TrainedProbe.save_fitted,
            lambda folder: probe.load_fitted(folder, train),
        )
        return probe

    # the threads end before the processes they follow are shut down
    with (
        apart if apart is not None else contextlib.nullcontext(),
        torch_threads(1),
        ThreadPoolExecutor(max_workers=min(workers, max(len(jobs), 1))) as pool,
    ):
        futures = {name: pool.submit(fit, name, probe, train, dev) for name, (probe, train, dev) in jobs.items()}
        return {name: future.result() for name, future in futures.items()}


class _ProcessFits:
    """Trained probes fitted in processes of their own, each followed from a thread here (:func:`fit_probes`).

    The processes, and the manager whose queues bring each fit's epochs here, start with the first fit: probes
    all read from the cache start none.
    """

    def __init__(self, workers: int, progress: bool) -> None:
        self.workers, self.progress = workers, progress
        self.context = multiprocessing.get_context("spawn")  # a process forked from one that uses CUDA cannot
        self.lock = threading.Lock()
        self.stack = contextlib.ExitStack()
        self.pool: Executor | None = None
        self.manager: Any = None

    def __enter__(self) -> _ProcessFits:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stack.close()  # the pool and the manager, where the first fit started them

    def _started(self) -> tuple[Executor, Any]:
        with self.lock:
            if self.pool is None:
                if self.progress:  # a queue per fit, for its epochs: a manager's queues can be handed to a task
                    self.manager = self.stack.enter_context(self.context.Manager())
                self.pool = self.stack.enter_context(ProcessPoolExecutor(self.workers, mp_context=self.context))
            return self.pool, self.manager

    def fit(self, name: str, probe: TrainedProbe, train: ProbeData, dev: ProbeData | None) -> TrainedProbe:
        """``probe`` fitted on ``train`` in a process, in place, as ``probe.fit(train, dev=dev)`` would."""
        pool, manager = self._started()
        epochs = manager.Queue() if manager is not None else None
        future = pool.submit(_fit_here, probe, train, dev, epochs)
        with tqdm(total=int(probe.max_epochs), desc=f"probe {name}", unit="epoch", disable=not self.progress) as bar:
            for row in _rows(epochs, future):
                bar.update()
                bar.set_postfix(epoch_postfix(row))
        try:
            fitted, counts = future.result()
        except (pickle.PicklingError, TypeError, AttributeError) as error:  # how pickling says what it cannot send
            if "pickle" not in str(error).lower():
                raise  # the fit's own error
            raise BertologyError(
                f"probe {name}: its probe or data could not be sent to a process of its own ({error}); "
                "fit_probes(..., processes=False) fits it in a thread of this one"
            ) from error
        probe.__dict__.update(vars(fitted))
        probe.module_ = probe.module_.to(probe.device_)
        for vectors, (lookups, unknown) in zip(_vector_tables(train, dev), counts, strict=True):
            vectors.add_counts(lookups, unknown)
        return probe


def _rows(epochs: Any, future: Future) -> Iterator[dict[str, float]]:
    """Each epoch's row as the fit in ``future`` sends it, until the fit ends (none without a queue)."""
    if epochs is None:
        return
    while True:
        try:
            yield epochs.get(timeout=0.2)
        except queue.Empty:
            if future.done() and epochs.empty():
                return


def _vector_tables(train: ProbeData, dev: ProbeData | None) -> list[WordVectors]:
    """The word vectors the data look words up in, each once (train and dev usually share one)."""
    tables = [train.vectors] + ([dev.vectors] if dev is not None else [])
    return list({id(t): t for t in tables if t is not None}.values())


def _fit_here(
    probe: TrainedProbe, train: ProbeData, dev: ProbeData | None, epochs: Any
) -> tuple[TrainedProbe, list[tuple[int, int]]]:
    """A process's fit, on one thread as fit_probes' threads fit: the probe fitted, its weights on the host,
    and the word-vector lookups it made in each of :func:`_vector_tables`."""
    tables = _vector_tables(train, dev)
    before = [(t.lookups, t.unknown) for t in tables]
    with torch_threads(1):
        probe.fit(train, dev=dev, progress=epochs.put if epochs is not None else False)
    probe.module_ = probe.module_.cpu()  # weights travel through the host, whatever the device
    return probe, [(t.lookups - n, t.unknown - u) for t, (n, u) in zip(tables, before, strict=True)]


#: Bump when training changes in a way that changes fitted probes: old cache entries stop matching.
PROBE_VERSION = 1


def _cache_entry(
    root: Path, probe: TrainedProbe, train: ProbeData, dev: ProbeData | None
) -> tuple[Path, dict[str, Any]] | None:
    """Folder and key of ``probe`` fitted on ``train`` (choosing its epoch on ``dev``); None: not cacheable.

    The key names the probe's class, not its module, and the entry holds no pickle: moving the code keeps entries valid.
    """
    uses = {"attention": probe.uses_attention, "vectors": probe.uses_vectors}
    data = {"train": train.fingerprint(**uses), "dev": None if dev is None else dev.fingerprint(**uses)}
    if data["train"] is None or (dev is not None and data["dev"] is None):
        return None
    # Threads do not change the fit; a CPU fit's key names no device (the keys of the fits before there was one).
    params = {k: v for k, v in probe.get_params().items() if k not in ("n_jobs", "device")}
    key = {
        "probe": type(probe).__name__,
        "params": params,
        **data,
        "version": PROBE_VERSION,
        "torch": torch.__version__,
    }
    if (device := probe._fit_device()).type != "cpu":
        key["device"] = device.type
    return root / entry_name(f"{type(probe).__name__}-{train.name}", key), key
