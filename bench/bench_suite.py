"""The whole suite: each notebook's time and the total, against a committed baseline.

Runs `bertology run --jobs 2` at default parameters (what `make run` runs) twice: first with an empty cache folder (cold:
every extraction and fine-tuning is done), then again on that cache (warm: stores and
checkpoints reused). Prints each notebook's seconds next to bench/suite_baseline.json (an
earlier release's cold run, with its machine and commit), the ratio baseline / now, and the
stages of notebooks 04, 06 and 07: the cells that took longest (papermill's per-cell durations)
and the stage timings 06 and 07 record, and the run's timeline: when each notebook started and
ended, and how long the last one ran alone (with --jobs N it then has every core).

    python bench/bench_suite.py [--jobs 2]            cold and warm runs into results/bench-suite-*
    python bench/bench_suite.py --from results/default   report an existing run, run nothing
    python bench/bench_suite.py --from RUN --write-baseline   make RUN's times the baseline

A number means something only on a quiet machine: other jobs on the cores slow every
notebook (see the README's benchmark section).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "bench" / "suite_baseline.json"
PROFILED = ("04_probes", "06_pruning", "07_head_roles")


def machine() -> dict:
    import torch

    cpuinfo = Path("/proc/cpuinfo")
    names = (
        [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines() if "model name" in line]
        if cpuinfo.exists()
        else []
    )
    return {
        "cores": len(os.sched_getaffinity(0)),
        "cpu": names[0] if names else platform.processor(),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }


def run_suite(name: str, cache: Path, jobs: int) -> Path:
    env = dict(os.environ, BERTOLOGY_CACHE_DIR=str(cache))
    command = [str(Path(sys.executable).parent / "bertology"), "run", "--run-name", name, "--jobs", str(jobs)]
    print("$", " ".join(command), f"(BERTOLOGY_CACHE_DIR={cache})", flush=True)
    subprocess.run(command, env=env, check=True, cwd=ROOT)
    return ROOT / "results" / name


def durations(run: Path) -> dict[str, float]:
    record = json.loads((run / "run.json").read_text())
    return {nb["name"]: nb["duration_s"] for nb in record["notebooks"] if nb["status"] == "ok"}


def slowest_cells(run: Path, stem: str, top: int = 4) -> list[tuple[float, str]]:
    path = run / stem / f"{stem}.ipynb"
    if not path.is_file():
        return []
    cells = json.loads(path.read_text())["cells"]
    timed = []
    for cell in cells:
        seconds = cell.get("metadata", {}).get("papermill", {}).get("duration")
        if cell["cell_type"] == "code" and seconds:
            first = "".join(cell["source"]).strip().splitlines()[0][:70]
            timed.append((seconds, first))
    return sorted(timed, reverse=True)[:top]


def timeline(record: dict, wall: float) -> str:
    """When each notebook ran (seconds from the run's start), and how long the last one ran alone."""
    start = datetime.datetime.fromisoformat(record["started"])
    spans = sorted(
        ((datetime.datetime.fromisoformat(nb["started"]) - start).total_seconds(), nb["duration_s"], nb["name"])
        for nb in record["notebooks"]
        if nb.get("started")  # runs before the harness recorded start times have none
    )
    if not spans:
        return "timeline: not recorded in this run"
    ends = sorted(begin + seconds for begin, seconds, _ in spans)
    alone = ends[-1] - ends[-2] if len(ends) > 1 else ends[-1]
    parts = ", ".join(f"{name[:2]} {begin:.0f}-{begin + seconds:.0f}" for begin, seconds, name in spans)
    return f"timeline (s from the start): {parts}; the last notebook ran alone for {alone:.0f} s of {wall:.0f} s"


def report(run: Path, label: str) -> dict[str, float]:
    now = durations(run)
    base = json.loads(BASELINE.read_text()) if BASELINE.is_file() else {"notebooks": {}}
    old = base["notebooks"]
    print(f"\n{label}: {run}")
    if old:
        print(
            f"baseline: {base.get('commit', '?')} on {base.get('machine', {}).get('cores', '?')} cores, {base.get('date', '?')}"
        )
    print(f"{'notebook':18s} {'baseline s':>10s} {'now s':>8s} {'baseline/now':>12s}")
    for stem in sorted(set(now) | set(old)):
        a, b = old.get(stem), now.get(stem)
        ratio = f"{a / b:11.2f}x" if a and b else ""
        print(
            f"{stem:18s} {a if a is not None else float('nan'):10.1f} {b if b is not None else float('nan'):8.1f} {ratio}"
        )
    total_old, total_now = sum(old.values()), sum(now.values())
    print(
        f"{'total':18s} {total_old:10.1f} {total_now:8.1f} "
        + (f"{total_old / total_now:11.2f}x" if old and now else "")
    )
    record = json.loads((run / "run.json").read_text())
    wall = (
        datetime.datetime.fromisoformat(record["finished"]) - datetime.datetime.fromisoformat(record["started"])
    ).total_seconds()
    print(
        f"{'wall clock':18s} {total_old:10.1f} {wall:8.1f} "
        + (f"{total_old / wall:11.2f}x" if old and wall else "")
        + "  (the baseline ran one notebook at a time: its wall clock is its total)"
    )
    print(timeline(record, wall))
    for stem in PROFILED:
        cells = slowest_cells(run, stem)
        if cells:
            print(f"{stem}, slowest cells: " + "; ".join(f"{s:.0f} s {text!r}" for s, text in cells))
    for stem in PROFILED:
        metrics = run / stem / "metrics.json"
        values = json.loads(metrics.read_text()) if metrics.is_file() else {}
        for key, stages in values.items():
            if key.count(".") == 1 and key.endswith(".seconds"):  # "<topic>.seconds": the notebook's StageTimes
                print(f"{stem[:2]} stages: " + ", ".join(f"{k} {v:.0f} s" for k, v in stages.items()))
    return now


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--from", dest="source", type=Path, help="report this finished run instead of running the suite"
    )
    parser.add_argument(
        "--write-baseline", action="store_true", help="write the run's times to bench/suite_baseline.json"
    )
    parser.add_argument("--jobs", type=int, default=2, help="notebooks at a time (default: 2, as make run)")
    args = parser.parse_args()
    if args.source is not None:
        runs = {"run": args.source}
    else:
        with tempfile.TemporaryDirectory(prefix="bench-suite-cache-") as cache:
            runs = {
                "cold cache": run_suite("bench-suite-cold", Path(cache), args.jobs),
                "warm cache": run_suite("bench-suite-warm", Path(cache), args.jobs),
            }
    results = {label: report(run, label) for label, run in runs.items()}
    print(json.dumps({label: {"total_s": round(sum(t.values()), 1), **t} for label, t in results.items()}))
    if args.write_baseline:
        first = next(iter(runs.values()))
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
        ).stdout.strip()
        BASELINE.write_text(
            json.dumps(
                {
                    "_comment": "cold-cache `make run` at default parameters; bench/bench_suite.py compares against it",
                    "commit": commit,
                    "date": datetime.date.today().isoformat(),
                    "machine": machine(),
                    "notebooks": durations(first),
                },
                indent=2,
            )
            + "\n"
        )
        print(f"wrote {BASELINE}")


if __name__ == "__main__":
    main()
