"""Peak resident memory of this process, for the benchmarks that measure it in a fresh child process.

Read from ``VmHWM`` (/proc/self/status), not from getrusage's ``ru_maxrss``: Linux keeps
``ru_maxrss`` across ``execve``, so a child started by a parent that holds a model reports at
least the parent's peak, which hides the child's own growth.
"""

from __future__ import annotations

import resource
from pathlib import Path


def status_kb(field: str) -> float | None:
    """A ``/proc/self/status`` field in kB (``VmHWM``, ``VmRSS``), None where there is none."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return float(line.split()[1])
    except OSError:
        pass
    return None


def peak_mb() -> float:
    """This process's peak RSS in MB: VmHWM, else (not Linux) ru_maxrss."""
    hwm = status_kb("VmHWM")
    return hwm / 1024 if hwm is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak() -> bool:
    """Start VmHWM again from the current RSS (Linux: ``5`` into /proc/self/clear_refs); False where it cannot."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False
