"""The allocator settings notebook kernels start with: set for child processes, restored, the user's kept."""

import os
import platform
import subprocess
import sys
import textwrap

import pytest

from bertology_utils.core import allocator

# A child allocates and touches a 96 MB block, frees it, and prints how much of it its resident memory still holds.
_KEPT_AFTER_FREE = textwrap.dedent(
    """
    import numpy as np
    from pathlib import Path

    def rss_mb():
        line = next(l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith("VmRSS:"))
        return float(line.split()[1]) / 1024

    before = rss_mb()
    block = np.ones(96 * 2**20 // 8)
    del block
    print(rss_mb() - before)
    """
)


def test_the_variables_are_set_for_child_processes_and_restored(monkeypatch):
    for name in allocator.ALLOCATOR_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "12345")  # the user's own choice
    with allocator.allocator_environment() as added:
        assert added == {"MALLOC_MMAP_MAX_": "0"}
        seen = subprocess.run(
            [
                sys.executable,
                "-c",
                "import os; print(os.environ['MALLOC_MMAP_MAX_'], os.environ['MALLOC_TRIM_THRESHOLD_'])",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
    assert seen == ["0", "12345"]
    assert "MALLOC_MMAP_MAX_" not in os.environ and os.environ["MALLOC_TRIM_THRESHOLD_"] == "12345"


@pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc's malloc reads these variables"
)
def test_a_process_started_with_them_keeps_a_large_freed_block_for_reuse(monkeypatch):
    for name in allocator.ALLOCATOR_VARIABLES:
        monkeypatch.delenv(name, raising=False)

    def kept_mb() -> float:
        done = subprocess.run([sys.executable, "-c", _KEPT_AFTER_FREE], capture_output=True, text=True, check=True)
        return float(done.stdout)

    unmapped = kept_mb()
    with allocator.allocator_environment():
        kept = kept_mb()
    assert unmapped < 16 < 80 < kept  # glibc's default hands the block back; with the variables it stays mapped
