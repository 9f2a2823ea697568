"""Dask distributed clusters for the jobs that spread over workers (the optional ``[distributed]`` extra).

A cluster is named as ``--cluster`` takes it: ``local:N`` starts a local cluster of N single-threaded
worker processes for the job and stops it afterwards; anything else is the address of a running
scheduler (``tcp://host:8786`` or ``host:8786``); a ``distributed.Client`` is used as it is and left
open. Nothing here is imported by single-machine code paths, so the extra stays optional.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import TYPE_CHECKING, Any

from bertology_utils.core.errors import BertologyError

if TYPE_CHECKING:
    from distributed import Client, LocalCluster

__all__ = [
    "INSTALL_HINT",
    "require_distributed",
    "parse_cluster",
    "connect",
    "local_cluster",
    "n_workers",
    "worker_threads",
]

INSTALL_HINT = 'pip install "bertology-utils[distributed]" (Dask distributed)'
_LOCAL = re.compile(r"local:(\d+)")


def require_distributed() -> ModuleType:
    """The ``distributed`` module, or a BertologyError saying how to install it."""
    try:
        import distributed
    except ImportError:
        raise BertologyError(
            f"running on a cluster needs Dask distributed, which is not installed: {INSTALL_HINT}"
        ) from None
    return distributed


def parse_cluster(text: str) -> str:
    """Check a ``--cluster`` value: ``local:N`` with N >= 1, or a scheduler address; returns it stripped."""
    text = str(text).strip()
    local = _LOCAL.fullmatch(text)
    if local is not None:
        if int(local.group(1)) < 1:
            raise ValueError(f"{text!r}: a local cluster needs at least one worker (local:1, local:2, ...)")
        return text
    if not text or text.startswith("local") or " " in text:
        raise ValueError(f"{text!r}: give local:N (N workers on this machine) or a scheduler address (tcp://host:8786)")
    return text


@contextmanager
def connect(cluster: Any) -> Iterator[Any]:
    """A ``distributed.Client`` for ``cluster`` (see the module docstring), closed on exit unless it was given."""
    distributed = require_distributed()
    if isinstance(cluster, distributed.Client):
        yield cluster
        return
    spec = parse_cluster(cluster)
    local = _LOCAL.fullmatch(spec)
    if local is not None:
        # Single-threaded worker processes: torch in each runs on one core, and a lost process
        # loses only its own shard.
        with local_cluster(int(local.group(1))) as started, distributed.Client(started) as client:
            yield client
        return
    try:
        client = distributed.Client(spec, timeout="30s")
    except OSError as exc:
        raise BertologyError(f"cannot reach a Dask scheduler at {spec}: {exc}") from exc
    with client:
        yield client


def local_cluster(workers: int, threads_per_worker: int = 1) -> LocalCluster:
    """A ``distributed.LocalCluster`` of worker processes set up for torch: no dashboard (it would need bokeh
    and a free port), and without the ``MALLOC_TRIM_THRESHOLD_`` Dask gives its workers by default. Setting
    that variable turns off glibc's adaptive mmap threshold, so every large tensor is mapped and unmapped
    again: on this project's machines extraction then spent half its time in the kernel and ran 1.7x slower."""
    distributed = require_distributed()
    import dask.config

    environ = dict(dask.config.get("distributed.nanny.pre-spawn-environ", default={}))
    environ.pop("MALLOC_TRIM_THRESHOLD_", None)
    with dask.config.set({"distributed.nanny.pre-spawn-environ": environ}):
        return distributed.LocalCluster(
            n_workers=workers,
            threads_per_worker=threads_per_worker,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        )


def n_workers(client: Client) -> int:
    """Workers the scheduler knows now (at least 1, so plans stay defined while workers join)."""
    return max(1, len(client.scheduler_info(n_workers=-1).get("workers", {})))


def worker_threads() -> int:
    """Threads of the Dask worker running the current task (1 outside a worker)."""
    distributed = require_distributed()
    try:
        return max(1, int(distributed.get_worker().state.nthreads))
    except ValueError:  # not inside a worker
        return 1
