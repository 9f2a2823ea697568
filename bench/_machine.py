"""What a benchmark's record says of the machine it ran on (timings compare only within one machine)."""

from __future__ import annotations

import os
from pathlib import Path


def machine() -> str:
    """The CPU's model name and the number of cores, e.g. "AMD EPYC, 2 cores"."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return f"{names[0] if names else 'unknown CPU'}, {os.cpu_count()} cores"
