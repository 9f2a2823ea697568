"""Extraction and store statistics on a Dask cluster (the optional ``[distributed]`` extra).

:func:`extract_on_cluster` cuts a corpus into contiguous shards whose bounds fall on the extraction's
block bounds, creates their groups in the store, and hands one task per shard to the cluster. A worker
loads the model once (per process, by name), checks the store's metadata against its own model and
settings, and fills its shard exactly as :func:`~bertology_utils.attention.extraction.extract_attention`
would: same blocks, same batches, so the store holds the same values bit for bit. A lost worker's task
is rerun by the scheduler and resumes the shard from its last commit. The store must be on a file
system every worker can reach (a shared disk on a multi-machine cluster).

Large arguments (the corpus, gold arrays) reach the workers as the result of a task that returns them,
not by ``Client.scatter``: scattered data dies with the last worker holding it, and a worker killed
during a broadcast scatter can leave the scatter waiting for ever, while a task's result is recomputed
by the scheduler on a live worker.

:func:`map_store` runs a function over contiguous item ranges of a store on a cluster; the analyses'
``cluster=`` options use it for their map-reduce.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from bertology_utils.attention.extraction import ExtractionJob
from bertology_utils.attention.store import AttentionStore
from bertology_utils.core.cluster import connect, n_workers, require_distributed, worker_threads
from bertology_utils.core.errors import StoreError
from bertology_utils.core.models import LoadedModel, load_model
from bertology_utils.data import Corpus

__all__ = ["shard_plan", "extract_on_cluster", "map_store"]

# Per worker process: model name -> LoadedModel, so a worker loads each model once for all its tasks.
_MODELS: dict[str, LoadedModel] = {}
# Extraction hooks the shared model, so a worker process runs one extraction task at a time, with torch
# on all the worker's threads, and always from the same thread: OpenMP keeps a thread team per calling
# thread, and tasks arriving on a worker's other threads made a second team that fought the first (a
# 2-thread worker ran 1.7x slower).
_EXTRACTOR: ThreadPoolExecutor | None = None
_EXTRACTOR_LOCK = threading.Lock()


def shard_plan(start: int, stop: int, shards: int, block_size: int) -> list[tuple[int, int]]:
    """At most ``shards`` contiguous ranges covering ``[start, stop)``, cut only at multiples of ``block_size``
    (counted from 0), so each shard's blocks are the ones a single extraction of the whole corpus runs."""
    if stop <= start:
        return []
    cuts = np.arange((start // block_size + 1) * block_size, stop, block_size)
    if len(cuts) + 1 > shards:  # keep shards - 1 cuts, spread evenly over the available ones
        cuts = cuts[np.linspace(0, len(cuts), shards + 1)[1:-1].astype(int)] if shards > 1 else cuts[:0]
    bounds = [start, *(int(c) for c in cuts), stop]
    return list(zip(bounds[:-1], bounds[1:]))


def _worker_model(name: str) -> LoadedModel:
    if name not in _MODELS:
        _MODELS[name] = load_model(name)
    return _MODELS[name]


def _fill_shard(
    corpus: Corpus, store_path: str, model_name: str, settings: dict, max_tokens: int | None, lo: int, hi: int
) -> int:
    """One task: fill ``[lo, hi)`` of the store (resuming it); returns the items committed there."""
    global _EXTRACTOR
    with _EXTRACTOR_LOCK:
        if _EXTRACTOR is None:
            _EXTRACTOR = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bertology-extract")
    threads = worker_threads()
    return _EXTRACTOR.submit(_fill, corpus, store_path, model_name, settings, max_tokens, lo, hi, threads).result()


def _fill(
    corpus: Corpus,
    store_path: str,
    model_name: str,
    settings: dict,
    max_tokens: int | None,
    lo: int,
    hi: int,
    threads: int,
) -> int:
    import torch

    torch.set_num_threads(threads)
    job = ExtractionJob(corpus, _worker_model(model_name), **settings)
    store = job.open_store(store_path, max_tokens)  # refuses a worker whose model or settings differ
    job.fill(store, lo, hi, progress=False)
    store.refresh()
    return sum(s.committed for s in store.shards if lo <= s.start and s.stop <= hi)


def extract_on_cluster(
    items: Iterable,
    store_path: str | os.PathLike,
    model: LoadedModel | str | os.PathLike | None = None,
    *,
    cluster: Any = "local:2",
    shards: int | None = None,
    max_tokens: int | None = None,
    overwrite: bool = False,
    progress: bool = True,
    **settings: Any,
) -> AttentionStore:
    """:func:`~bertology_utils.attention.extraction.extract_attention` with the shards run on a Dask cluster.

    ``cluster``: ``"local:N"``, a scheduler address or a ``distributed.Client`` (see
    :mod:`bertology_utils.core.cluster`). ``shards``: how many tasks (default four per worker, at most one
    per block), so a lost worker costs little. ``settings``: ``extract_attention``'s (``batch_size``,
    ``block_size``, ``max_batch_weights``, ``from_rule``, ``keep_tokens``, ``too_long``, ``maps``), with its
    defaults. Workers load ``model`` by its name (a Hub id, an alias or a folder every worker can read); the
    store written is the one a single process writes, and a store left by an interrupted run, sharded or
    not, is resumed. Progress is the whole job's, read from the store.
    """
    distributed = require_distributed()

    corpus, loaded = Corpus.of(items), LoadedModel.of(model)
    unknown = set(settings) - {f.name for f in fields(ExtractionJob)} | ({"corpus", "loaded"} & set(settings))
    if unknown:
        raise TypeError(f"extract_on_cluster got unknown settings: {', '.join(sorted(unknown))}")
    block_size = int(settings.get("block_size", ExtractionJob.block_size))
    keep_tokens = bool(settings.get("keep_tokens", ExtractionJob.keep_tokens))
    store = ExtractionJob(corpus, loaded, **settings).open_store(store_path, max_tokens, overwrite=overwrite)
    with connect(cluster) as client:
        count = shards if shards is not None else 4 * n_workers(client)
        if count < 1:
            raise ValueError(f"shards must be at least 1, not {count}")
        tasks = [(s.start, s.stop) for s in store.shards if not s.complete]
        for a, b in store.missing_ranges():
            for lo, hi in shard_plan(a, b, count, block_size):
                store.add_shard(lo, hi, keep_tokens)  # the driver makes the groups: one task, one shard
                tasks.append((lo, hi))
        store.refresh()
        todo, before = store.n_items - store.done, store.done
        if not tasks:
            tqdm.write(f"reusing the complete store at {store.path} ({store.n_items} items)")
        elif before:
            tqdm.write(f"resuming: {before} of {store.n_items} items already in the store at {store.path}")
        if tasks:
            path = str(Path(store_path).resolve())
            shared = _held(client, corpus)
            running = [
                client.submit(
                    _fill_shard,
                    shared,
                    path,
                    loaded.name,
                    settings,
                    max_tokens,
                    lo,
                    hi,
                    pure=False,
                    key=f"extract-{lo}-{hi}-{time.time_ns()}",
                )
                for lo, hi in sorted(tasks)
            ]
            try:
                with tqdm(
                    total=todo, desc=f"extract {corpus.name} ({len(running)} shards)", unit="item", disable=not progress
                ) as bar:
                    while running:
                        try:
                            distributed.wait(running, timeout=0.5, return_when="FIRST_COMPLETED")
                        except distributed.TimeoutError:
                            pass
                        for f in [f for f in running if f.done()]:
                            f.result()  # a worker's error (a metadata mismatch, a too-long item) surfaces at once
                            running.remove(f)
                        store.refresh()
                        bar.update(store.done - before - bar.n)
            finally:  # an error or an interrupt: stop the other tasks too (their shards stay resumable)
                client.cancel([f for f in running if not f.done()])
    store.refresh()
    if not store.is_complete:
        raise StoreError(f"the cluster finished but {store.path} is missing items {store.missing_ranges()}")
    return store


def _held(client: Any, value: object) -> Any:
    """A future of ``value`` computed by a task, for tasks to depend on (see the module's docstring)."""
    return client.submit(_identity, value, pure=False, key=f"argument-{type(value).__name__}-{time.time_ns()}")


def _identity(value: object) -> object:
    return value


def map_store(
    store: AttentionStore,
    function: Callable,
    *args: Any,
    cluster: Any,
    ranges: list[tuple[int, int]] | None = None,
) -> list:
    """``function(store_path, lo, hi, *args)`` for contiguous item ranges of ``store`` on ``cluster``, in range order.

    Default ranges: four per worker, cut on 256-item bounds (the store's read span). ``args`` are
    sent to each worker once.
    """
    with connect(cluster) as client:
        if ranges is None:
            ranges = shard_plan(0, store.n_items, 4 * n_workers(client), 256)
        shared = [_held(client, a) if _large(a) else a for a in args]
        path = str(Path(store.path).resolve())
        futures = [client.submit(function, path, lo, hi, *shared, pure=False) for lo, hi in ranges]
        return client.gather(futures)


def _large(value: object) -> bool:
    """Worth sending once rather than with every task (corpora, gold arrays)."""
    return not isinstance(value, (int, float, str, bool, type(None), tuple))
