"""Building the locked environment: uv installing the lock against pip installing it, from cold caches.

Each variant runs this checkout's ``make setup`` into a new virtual environment in a temporary folder
(``VENV=...``), with a download cache of its own that starts empty, so each fetches every wheel as a fresh clone
does. Both install the same pins with the same hashes (requirements/lock-linux-py311-cpu.txt), this package
editable and the default model; the views' JavaScript is left out (``npm ci`` is the same for both).

  pip   INSTALLER=pip: pip installs the lock, byte-compiling as it goes (the setup before)
  uv    INSTALLER=uv: pip installs uv (requirements/uv.txt, hash-checked), uv installs the lock and
        byte-compiles it on every core (the setup now)

Prints each variant's seconds, that its environment imports torch and this package, and the ratio. The variants
alternate for --rounds rounds; the fastest of each is kept. Needs the package index (and, on this project's
machines, pip's find-links folder for the +cpu torch wheel); downloads are part of what is timed.

    python bench/bench_setup.py [--rounds 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from _machine import machine  # noqa: E402

VARIANTS = ("pip", "uv")


def build(variant: str, folder: Path) -> float:
    """``make setup`` with ``variant`` into a new environment under ``folder``; the seconds it took."""
    venv = folder / "venv"
    env = dict(os.environ)
    env.pop("VIRTUAL_ENV", None)
    # each variant's cache starts empty: pip keeps none, uv's is a new folder
    env |= {"PIP_NO_CACHE_DIR": "1", "UV_CACHE_DIR": str(folder / "uv-cache")}
    start = time.perf_counter()
    done = subprocess.run(
        ["make", "--no-print-directory", f"VENV={venv}", f"INSTALLER={variant}", str(venv / ".setup-lock.stamp")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"{variant}: make setup failed\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    check = "import torch, bertology_utils; print(torch.__version__, bertology_utils.__version__)"
    versions = subprocess.run([str(venv / "bin" / "python"), "-c", check], capture_output=True, text=True, check=True)
    print(f"  {variant}: {seconds:.1f} s (torch {versions.stdout.split()[0]})", flush=True)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=1, help="rounds of both variants, alternating")
    args = parser.parse_args()
    print(f"make setup's lock install, cold caches ({machine()})")
    best: dict[str, float] = {}
    for round_ in range(args.rounds):
        order = VARIANTS if round_ % 2 == 0 else VARIANTS[::-1]
        for variant in order:
            with tempfile.TemporaryDirectory(prefix=f"bench-setup-{variant}-") as folder:
                seconds = build(variant, Path(folder))
            best[variant] = min(best.get(variant, float("inf")), seconds)
    ratio = best["pip"] / best["uv"]
    print(f"pip {best['pip']:.1f} s, uv {best['uv']:.1f} s: {ratio:.2f}x")
    print(json.dumps({"machine": machine(), "seconds": best, "ratio": round(ratio, 3)}))


if __name__ == "__main__":
    main()
