"""The benchmarks' timer: the fastest of a few calls after one warm-up call."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_of(repeats: int, fn: Callable[[], object]) -> float:
    """Seconds of the fastest of ``repeats`` calls of ``fn``, after one call that is not timed (caches, allocators)."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best
