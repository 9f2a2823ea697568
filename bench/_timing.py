"""The benchmarks' timer: the fastest of a few calls after one warm-up call."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def best_of(repeats: int, fn: Callable[[], object]) -> float:
    """Seconds of the fastest of ``repeats`` calls of ``fn``, after one call that is not timed (caches, allocators)."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def fastest_call(repeats: int, fn: Callable[[], T]) -> tuple[float, T]:
    """Seconds of the fastest of ``repeats`` calls of ``fn`` (every call timed), and the last call's result."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result
