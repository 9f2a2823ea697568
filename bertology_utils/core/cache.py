"""What every cache entry shares: a name from its key, one builder at a time, whole-or-nothing writes.

Extraction stores, fine-tuned checkpoints, fitted probes and stored results live in folders
under :func:`bertology_utils.core.settings.cache_dir`, each named by a digest of everything its
content depends on (:func:`entry_name`), so a change of model, data, settings or code version
gives a new entry instead of a stale one.

* :func:`cache_lock`: notebooks run side by side (``bertology run --jobs 2``, two JupyterLab
  kernels) can ask for the same entry at once; the second waits for the first and then finds
  the entry complete, instead of both building it into the same folder. Asked not to wait, it
  raises :class:`EntryBusy`, so a caller with other entries to build can build those first
  (:func:`busy_last`).
* an entry is written into a temporary folder beside it and renamed into place
  (:func:`bertology_utils.core.files.atomic_path`), so a crash never leaves half an entry.
* :func:`cached`: a value computed once, written with its key and read back on later runs when
  the key matches; an entry that cannot be read is computed again with a :class:`CacheWarning`.
  :func:`cached_arrays` is that for numpy arrays (npz, no pickle), :func:`cached_frames` for tables.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from bertology_utils.core.files import atomic_path, atomic_remove

try:
    import fcntl
except ImportError:  # not POSIX: no cross-process locking, as before
    fcntl = None  # type: ignore[assignment]

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "cache_lock",
    "key_digest",
    "entry_name",
    "cached",
    "cached_arrays",
    "cached_frames",
    "CacheWarning",
    "EntryBusy",
    "busy_last",
]

T = TypeVar("T")


class CacheWarning(UserWarning):
    """A cache entry was corrupt (or unreadable) and is being built again."""


def key_digest(key: Mapping) -> str:
    """16 hex digits of the sha256 of ``key`` as canonical JSON (what a cache entry depends on)."""
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]


def entry_name(label: str, key: Mapping, max_label: int = 80) -> str:
    """``<label>-<digest of key>``, the label reduced to characters safe in a file name."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", label)[:max_label].strip("._") or "entry"
    return f"{slug}-{key_digest(key)}"


class EntryBusy(Exception):
    """Another process holds the lock of a cache entry, and :func:`cache_lock` was asked not to wait for it.

    Not a :class:`~bertology_utils.core.errors.BertologyError`: it says "later", not that anything failed."""


@contextlib.contextmanager
def cache_lock(path: str | Path, wait: bool = True) -> Iterator[None]:
    """Hold an exclusive lock for the cache entry ``path`` while building or reading it.

    The lock is an advisory ``flock`` on ``.locks/<name>.lock`` beside the entry, released when
    the process dies; lock files stay (removing one while another process waits on it would let
    a third take it too).

    :param path: the entry's folder.
    :param wait: wait while another process holds it; else raise :class:`EntryBusy` at once.
    """
    path = Path(path)
    if fcntl is None:
        yield
        return
    folder = path.parent / ".locks"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{path.name}.lock", "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                raise EntryBusy(f"another process is building {path.name}") from None
            start = time.perf_counter()
            print(f"waiting for another process to finish {path.name}", file=sys.stderr, flush=True)
            fcntl.flock(handle, fcntl.LOCK_EX)
            print(f"... done after {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


K = TypeVar("K")


def busy_last(keys: Iterable[K], build: Callable[[K, bool], T]) -> Iterator[tuple[K, T]]:
    """``(key, build(key, wait))`` for every key, in order, except that a key whose entry another process is building
    (``build(key, False)`` raises :class:`EntryBusy`) comes after the others, built then with ``wait=True``. Two
    notebooks side by side that need the same entries (02 and 08 the same SST-2 classifiers) thus build different
    ones and reuse each other's, where the second waited idle for the first to build them all.

    :param keys: what to build, in order.
    :param build: builds one; with ``wait`` False it raises ``EntryBusy`` where another process holds the entry.
    :returns: an iterator of each key with what ``build`` gave, the busy ones last; stopping it builds no more.
    """
    busy = []
    for key in keys:
        try:
            value = build(key, False)
        except EntryBusy:
            busy.append(key)
            continue
        yield key, value
    for key in busy:
        yield key, build(key, True)


def _plain(key: Mapping) -> dict:
    """``key`` as it reads back from JSON (tuples become lists), to compare with a stored one."""
    return json.loads(json.dumps(key, sort_keys=True, default=str))


def cached(
    folder: str | Path,
    key: Mapping,
    compute: Callable[[], T],
    write: Callable[[T, Path], None],
    read: Callable[[Path], T],
) -> tuple[T, bool]:
    """``compute()``, or ``read(folder)`` when ``folder`` holds it for ``key``; and whether it was read.

    ``folder`` should be named by ``key`` (:func:`entry_name`); the key is also stored in the
    entry (``key.json``) and checked on reading. A new value is written by ``write(value,
    partial_folder)`` whole or not at all, one process at a time. Any error while reading means
    the entry cannot be used: it is computed again, with a :class:`CacheWarning`.
    """
    folder = Path(folder)
    with cache_lock(folder):
        if (folder / "key.json").is_file():
            try:
                if json.loads((folder / "key.json").read_text(encoding="utf-8")) != _plain(key):
                    raise ValueError("its recorded key is not the one asked for")
                return read(folder), True
            except Exception as exc:  # whatever the reader met, the entry is unusable
                warnings.warn(CacheWarning(f"corrupt cache entry {folder} ({exc}); computing it again"), stacklevel=3)
                atomic_remove(folder)
        value = compute()
        with atomic_path(folder, folder=True) as partial:
            write(value, partial)
            (partial / "key.json").write_text(json.dumps(_plain(key), indent=1), encoding="utf-8")
        return value, False


def cached_arrays(
    folder: str | Path, key: Mapping, compute: Callable[[], Mapping[str, np.ndarray]]
) -> tuple[dict[str, np.ndarray], bool]:
    """:func:`cached` for a dict of numpy arrays, stored as ``arrays.npz`` (no pickle)."""

    def write(arrays: dict[str, np.ndarray], partial: Path) -> None:
        np.savez(partial / "arrays.npz", allow_pickle=False, **arrays)

    def read(entry: Path) -> dict[str, np.ndarray]:
        with np.load(entry / "arrays.npz", allow_pickle=False) as stored:
            return {name: stored[name] for name in stored.files}

    return cached(folder, key, lambda: {name: np.asarray(v) for name, v in compute().items()}, write, read)


def cached_frames(
    folder: str | Path, key: Mapping, compute: Callable[[], Mapping[str, pd.DataFrame]]
) -> tuple[dict[str, pd.DataFrame], bool]:
    """:func:`cached` for named tables: each column one array of ``frames.npz`` (text as unicode, no pickle).

    A table reads back with its columns in order and every value exact (floats are stored as they are, not
    printed); its index is not kept.

    :param folder: the entry, named by ``key`` (:func:`entry_name`).
    :param key: what the tables depend on.
    :param compute: makes the tables, name -> table (names and columns without ``/``).
    :returns: (name -> table, whether they were read).
    """
    import pandas as pd

    def write(frames: Mapping[str, pd.DataFrame], partial: Path) -> None:
        arrays = {"names": np.array(list(frames), dtype=str)}
        for name, frame in frames.items():
            arrays[f"{name}/columns"] = np.array(list(frame.columns), dtype=str)
            for k, column in enumerate(frame.columns):
                values = frame[column].to_numpy()
                arrays[f"{name}/{k}"] = values.astype(str) if values.dtype.kind in "OUT" else values
        np.savez(partial / "frames.npz", allow_pickle=False, **arrays)

    def read(entry: Path) -> dict[str, pd.DataFrame]:
        with np.load(entry / "frames.npz", allow_pickle=False) as stored:
            return {
                name: pd.DataFrame(
                    {column: stored[f"{name}/{k}"] for k, column in enumerate(stored[f"{name}/columns"].tolist())}
                )
                for name in stored["names"].tolist()
            }

    return cached(folder, key, lambda: dict(compute()), write, read)
