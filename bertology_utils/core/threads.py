"""Thread counts: what a process starts with, what a block of code pins, and what a notebook
kernel takes over when the notebooks beside it finish.

* :data:`THREAD_VARIABLES` and :func:`threads_per_job`: the environment torch, NumPy's BLAS and
  OpenMP read when a process starts, and each of N side-by-side jobs' share of the cores.
* :func:`torch_threads`: a block run with n torch threads, the setting restored after.
* :func:`follow_budget` and :func:`write_budget`: ``bertology run --jobs N`` starts N kernels
  with a share of the cores each; once no notebook is left to start, the kernels still running
  take the cores of those that finished. The harness writes the new count to a file named by
  :data:`BUDGET_FILE_ENV`; a kernel that imported the package polls it on a helper thread and
  applies a change on its main thread, where torch's setting lives (OpenMP keeps one per thread).

Imports nothing heavy: torch is set only once something else has imported it.
"""

from __future__ import annotations

import _thread
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

from bertology_utils.core.files import atomic_write_text

__all__ = [
    "THREAD_VARIABLES",
    "BUDGET_FILE_ENV",
    "threads_per_job",
    "torch_threads",
    "follow_budget",
    "write_budget",
    "read_budget",
]

#: What torch, NumPy's BLAS and OpenMP read for their thread counts when a process starts.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
#: Environment variable naming the file a kernel reads its thread budget from (set by the harness).
BUDGET_FILE_ENV = "BERTOLOGY_THREAD_BUDGET_FILE"
#: How often a following kernel reads the budget file (seconds).
POLL_SECONDS = 1.0

# The kernel's own state: the budget last applied, what a new one asks for, how deep the main thread is
# inside torch_threads blocks (a budget arriving there waits for the outermost one to end), and whether a
# request came while torch was being imported (the helper then asks again).
_state: dict = {"budget": None, "requested": None, "depth": 0, "following": False, "again": False}
_lock = threading.Lock()


def threads_per_job(jobs: int) -> int:
    """Each of ``jobs`` processes side by side gets this many threads: its share of the cores this process may use."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cores // max(1, int(jobs)))


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run with ``n`` torch threads (None: leave the setting alone), restoring the setting after.

    On the main thread of a kernel following a budget, a budget that arrives inside the block
    is applied when the outermost such block ends, instead of the setting from before.
    """
    if n is None:
        yield
        return
    if int(n) < 1:
        raise ValueError(f"n_jobs must be at least 1 or None, not {n}")
    import torch

    main = threading.current_thread() is threading.main_thread()
    before = torch.get_num_threads()
    with _lock:
        budget_before = _state["budget"]
        if main:
            _state["depth"] += 1
    torch.set_num_threads(int(n))
    try:
        yield
    finally:
        with _lock:
            if main:
                _state["depth"] -= 1
            outermost = main and _state["depth"] == 0
            budget = _state["budget"]
        torch.set_num_threads(budget if outermost and budget != budget_before else before)


def write_budget(path: str | os.PathLike, threads: int) -> None:
    """Ask the kernels following ``path`` to run with ``threads`` threads (written whole: a reader never sees half)."""
    atomic_write_text(path, f"{int(threads)}\n")


def read_budget(path: str | os.PathLike) -> int | None:
    """The thread count in ``path``; None when it is missing or not a positive integer."""
    try:
        value = int(Path(path).read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None
    return value if value >= 1 else None


def follow_budget(path: str | os.PathLike | None = None) -> bool:
    """Make this process take the thread count in ``path`` (default: ``$BERTOLOGY_THREAD_BUDGET_FILE``)
    whenever it changes. Returns whether it follows.

    It does only on a platform with ``SIGUSR1``, from the main thread, and when nothing else has
    a handler for that signal: the helper thread that reads the file hands each change to the
    main thread as a simulated ``SIGUSR1`` (no signal is sent), whose handler sets torch's thread
    count between two Python instructions. The environment variable is removed, so processes this
    one starts keep their own thread settings. Called when the package is imported (without the
    variable it does nothing); it follows once per process.
    """
    path = path if path is not None else os.environ.pop(BUDGET_FILE_ENV, None)
    if not path or _state["following"] or not hasattr(signal, "SIGUSR1"):
        return False
    if threading.current_thread() is not threading.main_thread():
        return False
    if signal.getsignal(signal.SIGUSR1) not in (signal.SIG_DFL, None):
        return False
    signal.signal(signal.SIGUSR1, _on_request)
    _state["following"] = True
    threading.Thread(target=_poll, args=(Path(path),), name="bertology-thread-budget", daemon=True).start()
    return True


def _poll(path: Path) -> None:
    seen = None
    while True:
        threads = read_budget(path)
        with _lock:
            again, _state["again"] = _state["again"], False
        if threads is not None and (threads != seen or again):
            seen = threads
            with _lock:
                _state["requested"] = threads
            _thread.interrupt_main(signal.SIGUSR1)
        time.sleep(POLL_SECONDS)


def _on_request(_signum: int, _frame: FrameType | None) -> None:
    """On the main thread: apply the requested budget, now or when the outermost torch_threads block ends.

    The main thread may be inside ``import torch`` (the handler runs between any two Python instructions): torch is
    then in ``sys.modules`` half made, so the request waits and the helper thread asks again at its next poll.
    """
    torch = sys.modules.get("torch")
    with _lock:
        threads = _state["requested"]
        if threads is None:
            return
        if torch is not None and _importing(torch):
            _state["again"] = True
            return
        _state["budget"] = threads
        pinned = _state["depth"] > 0
    os.environ.update(dict.fromkeys(THREAD_VARIABLES, str(threads)))  # torch imported later starts with it
    if torch is not None and not pinned:
        torch.set_num_threads(threads)


def _importing(module: object) -> bool:
    """Whether ``module`` is still being imported: the import system's own mark on its spec while its code runs."""
    return bool(getattr(getattr(module, "__spec__", None), "_initializing", False)) or not hasattr(
        module, "set_num_threads"
    )
