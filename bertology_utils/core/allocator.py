"""The C allocator's settings a notebook kernel starts with: freed memory kept for the next allocation.

glibc's malloc serves a block above its mmap threshold (128 kB at first, raised as such blocks are freed, never above
32 MB) with a mapping of its own and unmaps it when it is freed, so the next block of that size faults every page in
again and the system zeroes each one. The training and attribution loops free and allocate the same large blocks
at every step: MiniLM's word-embedding gradient alone is 30,522 x 384 floats, 47 MB, above any threshold, and
fine-tuning allocates it afresh at each step. :data:`ALLOCATOR_VARIABLES` make glibc serve every block from its
heap (``MALLOC_MMAP_MAX_=0``) and keep up to 256 MB of freed memory at the heap's top for reuse
(``MALLOC_TRIM_THRESHOLD_``) instead of handing it back: the same arithmetic on memory already mapped
(``bench/bench_allocator.py`` compares the two settings' seconds and peak memory, and checks that the results are
bit for bit the same). glibc reads them when a process starts; other C libraries ignore them.

``bertology run`` starts its kernels with them (:func:`allocator_environment`), unless the variables are already set;
to have them in JupyterLab, export them before starting it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from bertology_utils.core.settings import environment

__all__ = ["ALLOCATOR_VARIABLES", "allocator_environment"]

#: glibc's malloc settings the kernels start with (see the module docstring).
ALLOCATOR_VARIABLES = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(256 * 2**20)}


@contextlib.contextmanager
def allocator_environment() -> Iterator[dict[str, str]]:
    """:data:`ALLOCATOR_VARIABLES` in this process's environment, which the processes it starts inherit, restored
    after; a variable already set keeps its value (a user's own choice).

    :returns: a context manager yielding the variables it set.
    """
    added = {name: value for name, value in ALLOCATOR_VARIABLES.items() if name not in os.environ}
    with environment(added):
        yield added
