"""Cache entries built by one process at a time.

Notebooks run side by side (``bertology run --jobs 2``, two JupyterLab kernels) can ask for the
same cached extraction or fine-tuned checkpoint at once. :func:`cache_lock` makes the second
wait for the first and then find the entry complete, instead of both building it into the same
folder.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # not POSIX: no cross-process locking, as before
    fcntl = None  # type: ignore[assignment]

__all__ = ["cache_lock"]


@contextlib.contextmanager
def cache_lock(path: str | Path) -> Iterator[None]:
    """Hold an exclusive lock for the cache entry ``path`` while building or reading it.

    The lock is an advisory ``flock`` on ``.locks/<name>.lock`` beside the entry, released when
    the process dies; lock files stay (removing one while another process waits on it would let
    a third take it too).
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
            start = time.perf_counter()
            print(f"waiting for another process to finish {path.name}", file=sys.stderr, flush=True)
            fcntl.flock(handle, fcntl.LOCK_EX)
            print(f"... done after {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
