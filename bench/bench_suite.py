"""The whole suite: each notebook's time and the total, against a committed baseline.

Runs `bertology run --jobs 2` at default parameters (what `make run` runs) twice: first with an empty cache folder (cold:
every extraction and fine-tuning is done), then again on that cache (warm: stores and
checkpoints reused). Prints each notebook's seconds next to bench/suite_baseline.json (an
earlier release's cold run, with its machine and commit), the ratio baseline / now, and the
stages of notebooks 04, 06 and 07: the cells that took longest (papermill's per-cell durations)
and the stage timings 06 and 07 record, and the run's timeline: when each notebook started and
ended, and how long the last one ran alone (with --jobs N it then has every core).

    python bench/bench_suite.py [--jobs 2] [--record] cold and warm runs into results/bench-suite-* (--record: both)
    python bench/bench_suite.py --cold-only --limit 480   the cold run alone, stopped after 480 s (a lent GPU's time)
    python bench/bench_suite.py --from results/default   report an existing run, run nothing
    python bench/bench_suite.py --from RUN --write-baseline   make RUN's times the baseline
    python bench/bench_suite.py --from results/default --record --cache cold
        record RUN's wall time in bench/results/suite-runs.json, one entry per kind of machine and cache, which
        the README lists and docs/benchmarks.md sets against issue #54's targets; and a cold run's profile
        (bench/results/suite.json and its table in docs/benchmarks.md);
        a cold run on a CPU also sets each notebook's typical_seconds (its metadata), by which a first run of the
        suite, with no run of its own to go by, starts the longest notebooks first
    ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 python bench/bench_suite.py --cold-only
        an AVX2-only CPU's kernels on this one (fp32 under precision="auto"): recorded as a kind of machine of its
        own, named with its caps, and setting no typical_seconds

A number means something only on a quiet machine: other jobs on the cores slow every
notebook (see the README's benchmark section).
"""

from __future__ import annotations

import argparse
import ast
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "bench" / "suite_baseline.json"
RECORD = ROOT / "bench" / "results" / "suite.json"
PAGE = ROOT / "docs" / "benchmarks.md"
BLOCK = "suite"
#: Every recorded run's wall time, one per kind of machine and cache, and the README's block listing them.
RUNS = ROOT / "bench" / "results" / "suite-runs.json"
README = ROOT / "README.md"
#: The notebooks whose metadata a recorded cold CPU run times.
NOTEBOOKS = ROOT / "notebooks"
README_BLOCK = "make-run"
CACHES = ("cold", "warm")
#: The block of docs/benchmarks.md that sets each recorded run against issue #54's targets.
TARGETS_BLOCK = "suite-targets"
SAMPLES = "gpu-samples.json"
PROFILED = ("04_probes", "06_pruning", "07_head_roles")
#: nvidia-smi's reading of one GPU: utilisation in percent, memory used in MiB.
SMI = ["nvidia-smi", "--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader,nounits"]
#: A sample above this utilisation (percent) counts as busy.
BUSY_ABOVE = 50.0


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


def run_suite(name: str, cache: Path, jobs: int, limit: float | None = None) -> Path:
    """``bertology run`` of every notebook into results/``name`` with ``cache`` as its cache folder.

    :param limit: seconds after which the run is stopped with SIGTERM, as a kill would: it then writes what finished
        into its run.json, which the profile reads (a device lent for a fixed time still yields a record).
    """
    env = dict(os.environ, BERTOLOGY_CACHE_DIR=str(cache))
    # the module, not the console script: a checkout put on PYTHONPATH without installing has no script
    command = [sys.executable, "-m", "bertology_utils", "run", "--run-name", name, "--jobs", str(jobs)]
    print("$", " ".join(command), f"(BERTOLOGY_CACHE_DIR={cache})", flush=True)
    process = subprocess.Popen(command, env=env, cwd=ROOT)
    try:
        status = process.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        print(f"stopping the run after its limit of {limit:.0f} s", flush=True)
        process.terminate()
        status = process.wait()
    if status != 0 and not (ROOT / "results" / name / "run.json").is_file():
        raise SystemExit(f"bertology run exited with {status} and wrote no run.json")
    return ROOT / "results" / name


def sampled_suite(name: str, cache: Path, jobs: int, limit: float | None = None) -> Path:
    """:func:`run_suite`, with the GPU sampled meanwhile where there is one (the samples go into the run)."""
    if not gpu_present():
        return run_suite(name, cache, jobs, limit)
    with GpuSampler() as sampler:
        run = run_suite(name, cache, jobs, limit)
    (run / SAMPLES).write_text(json.dumps({"samples": sampler.samples}) + "\n")
    return run


def durations(run: Path) -> dict[str, float]:
    record = json.loads((run / "run.json").read_text())
    return {nb["name"]: nb["duration_s"] for nb in record["notebooks"] if nb["status"] == "ok"}


def slowest_cells(run: Path, stem: str, top: int = 4) -> list[tuple[float, str, int, float | None, float | None]]:
    """The notebook's ``top`` longest code cells: seconds, first line, the cell's number in the notebook
    (from 1, markdown counted) and when it started and ended (Unix time)."""
    path = run / stem / f"{stem}.ipynb"
    if not path.is_file():
        return []
    cells = json.loads(path.read_text())["cells"]
    timed = []
    for number, cell in enumerate(cells, 1):
        meta = cell.get("metadata", {}).get("papermill", {})
        if cell["cell_type"] == "code" and meta.get("duration"):
            first = _first_statement("".join(cell["source"]).strip())[:70]
            when = [_unix(meta[key]) if meta.get(key) else None for key in ("start_time", "end_time")]
            timed.append((meta["duration"], first, number, *when))
    return sorted(timed, key=lambda cell: cell[0], reverse=True)[:top]


def _first_statement(source: str) -> str:
    """The first line of a cell's first statement that is not an import: what names the cell best."""
    lines = source.splitlines() or [""]
    try:
        body = ast.parse(source).body
    except SyntaxError:  # an IPython magic
        return lines[0]
    said = [node for node in body if not isinstance(node, (ast.Import, ast.ImportFrom))]
    return lines[said[0].lineno - 1] if said else lines[0]


def _unix(stamp: str) -> float:
    return datetime.datetime.fromisoformat(stamp).timestamp()


def gpu_present() -> bool:
    """Whether there is a GPU to sample: nvidia-smi on the PATH and CUDA in torch."""
    import torch

    return shutil.which(SMI[0]) is not None and torch.cuda.is_available()


def parse_smi(text: str) -> tuple[float, float] | None:
    """The first GPU's ``(utilisation %, memory MiB)`` from one nvidia-smi reading; None when unreadable."""
    try:
        util, memory = text.strip().splitlines()[0].split(",")[:2]
        return float(util), float(memory)
    except (IndexError, ValueError):  # "[N/A]", an empty answer
        return None


class GpuSampler(threading.Thread):
    """Reads the GPU's utilisation every ``interval`` seconds until stopped: ``samples`` holds
    ``[unix time, utilisation %, memory MiB]``. A context manager: the suite runs inside it."""

    def __init__(self, interval: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.interval = interval
        # the GPU torch calls cuda:0: the first one CUDA_VISIBLE_DEVICES names (nvidia-smi takes an index or UUID)
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
        self.command = SMI + ([f"--id={visible}"] if visible else [])
        self.samples: list[list[float]] = []
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            now = time.time()
            try:
                answer = subprocess.run(self.command, capture_output=True, text=True, timeout=10).stdout
            except (OSError, subprocess.TimeoutExpired):
                answer = ""
            reading = parse_smi(answer)
            if reading is not None:
                self.samples.append([now, *reading])
            self._stop_event.wait(max(0.0, self.interval - (time.time() - now)))

    def __enter__(self) -> GpuSampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop_event.set()
        self.join()


def busy(samples: list[list[float]] | None, start: float | None, end: float | None) -> dict:
    """The device's share of a span ``[start, end]`` (Unix times) from the sampler's readings.

    :param samples: ``[time, utilisation %, memory MiB]`` rows, or None on a machine without a GPU.
    :returns: ``busy_pct`` (mean utilisation), ``over_half_pct`` (share of samples above 50%),
        ``host_pct`` (100 less the mean) and ``samples``; the shares are None without a GPU or samples.
    """
    if samples is None or start is None or end is None:
        return {"busy_pct": None, "over_half_pct": None, "host_pct": None, "samples": 0}
    util = [u for t, u, _ in samples if start <= t <= end]
    if not util:
        return {"busy_pct": None, "over_half_pct": None, "host_pct": None, "samples": 0}
    mean = sum(util) / len(util)
    over = 100.0 * sum(u > BUSY_ABOVE for u in util) / len(util)
    return {
        "busy_pct": round(mean, 1),
        "over_half_pct": round(over, 1),
        "host_pct": round(100.0 - mean, 1),
        "samples": len(util),
    }


def read_samples(run: Path) -> list[list[float]] | None:
    """The GPU samples the bench took during ``run``; None when it had no GPU (or was not run by the bench)."""
    path = run / SAMPLES
    return json.loads(path.read_text())["samples"] if path.is_file() else None


def profile(run: Path, samples: list[list[float]] | None) -> dict:
    """Each notebook's wall seconds and device share, the profiled notebooks' slowest cells', and the run's."""
    record = json.loads((run / "run.json").read_text())
    notebooks = {}
    for nb in record["notebooks"]:
        if nb["status"] != "ok":
            continue
        start = _unix(nb["started"]) if nb.get("started") else None
        end = start + nb["duration_s"] if start is not None else None
        notebooks[nb["name"]] = {"wall_s": round(nb["duration_s"], 1), **busy(samples, start, end)}
    stages = {
        stem: [
            {"cell": number, "code": text, "wall_s": round(seconds, 1), **busy(samples, start, end)}
            for seconds, text, number, start, end in slowest_cells(run, stem)
        ]
        for stem in PROFILED
        if stem in notebooks
    }
    start, end = _unix(record["started"]), _unix(record["finished"])
    return {
        "run": record.get("run_name", run.name),
        "started": record["started"],
        "wall_s": round(end - start, 1),
        "notebooks_s": round(sum(nb["wall_s"] for nb in notebooks.values()), 1),
        "whole run": busy(samples, start, end),
        "notebooks": notebooks,
        "stages": stages,
    }


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
            print(f"{stem}, slowest cells: " + "; ".join(f"{s:.0f} s {text!r}" for s, text, *_ in cells))
    for stem in PROFILED:
        metrics = run / stem / "metrics.json"
        values = json.loads(metrics.read_text()) if metrics.is_file() else {}
        for key, stages in values.items():
            if key.count(".") == 1 and key.endswith(".seconds"):  # "<topic>.seconds": the notebook's StageTimes
                print(f"{stem[:2]} stages: " + ", ".join(f"{k} {v:.0f} s" for k, v in stages.items()))
    return now


def run_machine(run: Path) -> dict:
    """The machine ``run`` ran on, as its run.json recorded it: CPU, cores, the CPU flags that pick
    kernels (those the run's instruction-set caps left it, and the caps where it set any), the GPU's model (None
    without one) and torch's version."""
    from bertology_utils.core import gpu_name
    from bertology_utils.run.perturb import capped_flags

    record = json.loads((run / "run.json").read_text())
    env, here = record.get("environment", {}), machine()
    flags, caps = capped_flags(env)
    return {
        "cpu": env.get("cpu", here["cpu"]),
        "cores": env.get("cores", here["cores"]),
        "cpu_flags": flags,
        **({"caps": caps} if caps else {}),
        "gpu": gpu_name(env["gpu"]) if env.get("gpu") else None,  # runs before gpu_name kept the card's UUID
        "torch": record.get("versions", {}).get("torch", here["torch"]),
    }


def run_jobs(run: Path, said: int | None = None) -> int | None:
    """Notebooks ``run`` ran at a time: its run.json's ``jobs``, else ``said`` (runs from before it was recorded)."""
    return json.loads((run / "run.json").read_text()).get("jobs", said)


def _share(row: dict, key: str, gpu: object) -> str:
    if not gpu:
        return "no GPU"
    return "no samples" if row[key] is None else f"{row[key]:.0f}%"


def machine_kind(m: dict) -> str:
    """What sets a suite's speed on the machine ``m`` (:func:`run_machine`), in words: its GPU, or its cores and
    the widest kernels its CPU runs (bfloat16 units decide ``precision="auto"``)."""
    if m.get("gpu"):
        return f"one {m['gpu']}"
    flags = set(m.get("cpu_flags", []))
    if "amx_bf16" in flags:
        units = "AMX: bfloat16 units"
    elif "avx512_bf16" in flags:
        units = "AVX-512 with bfloat16"
    elif "avx512f" in flags:
        units = "AVX-512, no bfloat16 units"
    else:
        units = "AVX2 only" if "avx2" in flags else "no AVX2"
    return f"{m['cores']} cores of {m['cpu']} ({units}{_held(m)})"


def _held(m: dict) -> str:
    """How a run held the CPU to fewer kernels than it has (:func:`run_machine`'s caps), in words; "" if it did not."""
    from bertology_utils.run.perturb import caps_said

    caps = m.get("caps") or {}
    return f", held to it by {caps_said(caps)}" if caps else ""


def runs_block(entries: list[dict]) -> str:
    """The README's line: per kind of machine (the slowest first), each recorded run's wall time, cache, commit and
    date, the cold run first."""
    kinds: dict[str, list[dict]] = {}
    for e in sorted(entries, key=lambda e: (CACHES.index(e["cache"]), -e["wall_s"])):
        kinds.setdefault(e["kind"], []).append(e)
    parts = [
        f"on {kind}: "
        + ", ".join(
            f"**{e['wall_s'] / 60:.0f} min** with a {e['cache']} cache ({e['notebooks']} notebooks"
            + (f", {e['jobs']} at a time" if e.get("jobs") else "")
            + f", `{e['commit']}`, {e['started'][:10]})"
            for e in runs
        )
        for kind, runs in sorted(kinds.items(), key=lambda item: -max(e["wall_s"] for e in item[1]))
    ]
    if not any(e["machine"].get("gpu") for e in entries):
        parts.append("on a GPU: not recorded yet")
    line = "; ".join(parts) + "."
    return line[0].upper() + line[1:]


def target(entry: dict) -> tuple[float, str, bool] | None:
    """Issue #54's target for a recorded run (:data:`RUNS`' entry): seconds, words and whether it counts ``make
    setup`` (which the recorded runs do not), or None where it sets none: a cold ``make run`` at its defaults under
    90 s on one H100 or H200, and under 15 minutes on 2 cores with bfloat16 units, setup included."""
    if entry["cache"] != "cold":
        return None
    m = entry["machine"]
    if m.get("gpu"):
        return (90.0, "under 90 s", False) if any(card in m["gpu"] for card in ("H100", "H200")) else None
    from bertology_utils.run.perturb import BF16_FLAGS  # the package's list of the CPU flags for bfloat16 units

    if m.get("cores") == 2 and BF16_FLAGS & set(m.get("cpu_flags", [])):
        return 900.0, "under 15 min, setup included", True
    return None


def targets_block(entries: list[dict]) -> str:
    """The docs' table of every recorded run against its target (:func:`target`), the slowest kind of machine first."""
    rows = ["| machine | `make run`, wall clock | target | against it |", "|---|---|---|---|"]
    for e in sorted(entries, key=lambda e: (-e["wall_s"] if e["cache"] == "cold" else 0, CACHES.index(e["cache"]))):
        goal = target(e)
        if goal is None:
            said, against = "none set", "—"
        else:
            seconds, said, with_setup = goal
            setup = " without the setup" if with_setup else ""
            against = f"{e['wall_s'] / seconds:.1f}x the target{setup}" if e["wall_s"] > seconds else f"met{setup}"
        wall = f"{e['wall_s'] / 60:.1f} min" if e["wall_s"] >= 600 else f"{e['wall_s']:.0f} s"
        jobs = f", {e['jobs']} notebooks at a time" if e.get("jobs") else ""
        run = f"**{wall}**, {e['cache']} cache{jobs} (`{e['commit']}`, {e['started'][:10]})"
        rows.append(f"| {e['kind']} | {run} | {said} | {against} |")
    return "\n".join(rows)


def doc_block(record: dict) -> str:
    """The docs' table of a recorded suite profile (bench/results/suite.json)."""
    m = record["machine"]
    gpu = m["gpu"]
    head = f"| {{}} | wall (s) | GPU busy: mean utilisation | samples over {BUSY_ABOVE:.0f}% busy | host share |"
    rows = [head.format("notebook"), "|---|---|---|---|---|"]

    def row(name: str, values: dict) -> str:
        shares = " | ".join(_share(values, key, gpu) for key in ("busy_pct", "over_half_pct", "host_pct"))
        return f"| {name} | {values['wall_s']:.1f} | {shares} |"

    rows += [row(f"`{name}`", values) for name, values in record["notebooks"].items()]
    rows.append(
        row(
            f"whole run, wall clock (notebooks' sum {record['notebooks_s']:.1f} s)",
            {"wall_s": record["wall_s"], **record["whole run"]},
        )
    )
    cells = [head.format("slowest cells"), "|---|---|---|---|---|"]
    for stem, stages in record["stages"].items():
        cells += [row(f"{stem[:2]}, cell {s['cell']}: `{s['code'].replace('|', '/')}`", s) for s in stages]
    flags = ", ".join(m["cpu_flags"]) or "none recorded"
    said = [f"{record['cache']} cache"] if record.get("cache") else []
    said += [f"{record['jobs']} notebooks at a time"] if record.get("jobs") else []
    how = f" ({', '.join(said)})" if said else ""
    return (
        f"Run `{record['run']}` of {record['started'][:10]}{how}, recorded at {record['commit']}: {m['cpu']}, "
        f"{m['cores']} cores (kernel-picking CPU flags: {flags}{_held(m)}), GPU: {gpu or 'none'}, torch {m['torch']}. "
        f"GPU busy is nvidia-smi's utilisation sampled once a second during the notebook or cell; the host share "
        f"is 100% less that mean.\n\n" + "\n".join(rows) + "\n\n" + "\n".join(cells)
    )


def read_profiles() -> list[dict]:
    """The recorded cold runs' profiles (bench/results/suite.json), one per kind of machine."""
    return json.loads(RECORD.read_text())["profiles"] if RECORD.is_file() else []


def profiles_block(profiles: list[dict]) -> str:
    """The docs' tables of the recorded profiles, the slowest kind of machine first."""
    return "\n\n".join(doc_block(p) for p in sorted(profiles, key=lambda p: -p["wall_s"]))


def write_typical_seconds(seconds: dict[str, float]) -> list[str]:
    """Set each notebook's ``bertology.typical_seconds`` metadata to its time in a recorded run: what the harness
    orders a first run by, longest first, before any run of its own (``run.harness._longest_first``).

    :param seconds: notebook stem -> seconds; stems with no notebook in :data:`NOTEBOOKS` are passed over.
    :returns: the stems whose metadata changed.
    """
    changed = []
    for stem, taken in seconds.items():
        path = NOTEBOOKS / f"{stem}.ipynb"
        if not path.is_file():
            continue
        notebook = json.loads(path.read_text(encoding="utf-8"))
        meta = notebook["metadata"].setdefault("bertology", {})
        if meta.get("typical_seconds") != (rounded := max(1, round(taken))):
            meta["typical_seconds"] = rounded
            path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
            changed.append(stem)
    return changed


def record_run(run: Path, cache: str, commit: str | None = None, jobs: int | None = None) -> dict:
    """Record ``run``'s wall time in bench/results/suite-runs.json (replacing the entry of the same kind of machine and
    cache) and the README; and a cold run's profile in bench/results/suite.json (replacing that of the same kind of
    machine) and the tables in docs/benchmarks.md (a warm run's cells mostly read the cache: the profile says where
    the time goes when they do not). A cold run on a CPU running its own kernels (no caps) sets the notebooks'
    typical seconds (:func:`write_typical_seconds`).

    :param run: a finished run of the whole suite (one stopped early, by ``--limit`` say, is refused).
    :param cache: ``"cold"`` when the run started from an empty cache folder, else ``"warm"``.
    :param commit: the commit the run was made at (default: HEAD).
    :param jobs: notebooks the run ran at a time, for a run.json from before it recorded them.
    """
    from bertology_utils.present.generated import write_block

    if cache not in CACHES:
        raise SystemExit(f"--cache: say {' or '.join(CACHES)}, not {cache!r}")
    written = json.loads((run / "run.json").read_text())
    stopped = {key: written[key] for key in ("interrupted", "not_run") if written.get(key)}
    if stopped:  # a suite's time is that of every notebook
        raise SystemExit(f"{run} was stopped before it finished ({stopped}): its profile is printed, not recorded")
    if commit is None:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
        commit = head.stdout.strip()
    record = {
        "commit": commit,
        "cache": cache,
        "jobs": run_jobs(run, jobs),
        "machine": run_machine(run),
        **profile(run, read_samples(run)),
    }
    kind = machine_kind(record["machine"])
    if cache == "cold":
        profiles = [p for p in read_profiles() if machine_kind(p["machine"]) != kind] + [record]
        RECORD.write_text(json.dumps({"profiles": profiles}, indent=1) + "\n")
        write_block(PAGE, BLOCK, profiles_block(profiles))
    entry = {
        "kind": kind,
        "cache": cache,
        "commit": commit,
        "started": record["started"],
        "wall_s": record["wall_s"],
        "notebooks": len(record["notebooks"]),
        "jobs": record["jobs"],
        "machine": record["machine"],
    }
    if cache == "cold" and record["machine"].get("gpu") is None and not record["machine"].get("caps"):
        # the order of a first run comes from a CPU running its own kernels
        write_typical_seconds({stem: n["wall_s"] for stem, n in record["notebooks"].items()})
    entries = json.loads(RUNS.read_text()) if RUNS.is_file() else []
    entries = [e for e in entries if (e["kind"], e["cache"]) != (entry["kind"], cache)] + [entry]
    RUNS.write_text(json.dumps(entries, indent=1) + "\n")
    write_block(README, README_BLOCK, runs_block(entries))
    write_block(PAGE, TARGETS_BLOCK, targets_block(entries))
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--from", dest="source", type=Path, help="report this finished run instead of running the suite"
    )
    parser.add_argument(
        "--write-baseline", action="store_true", help="write the run's times to bench/suite_baseline.json"
    )
    parser.add_argument(
        "--jobs",
        type=int,
        help="notebooks at a time (default: 2, as make run); with --from --record: those of a run.json that has none",
    )
    parser.add_argument(
        "--record",
        action="store_true",
        help="record each run's wall time (README) and the cold run's profile (the documentation's table)",
    )
    parser.add_argument(
        "--cache", choices=CACHES, help="with --from and --record: whether RUN started from an empty cache folder"
    )
    parser.add_argument("--commit", help="with --from and --record: the commit RUN was made at (default: HEAD)")
    parser.add_argument("--cold-only", action="store_true", help="run the suite with a cold cache only")
    parser.add_argument(
        "--limit",
        type=float,
        metavar="SECONDS",
        help="stop each run after this long: its run.json keeps what finished, which is profiled but not recorded",
    )
    args = parser.parse_args()
    if args.record and args.source is not None and args.cache is None:
        parser.error("--record --from RUN needs --cache cold (RUN started from an empty cache folder) or --cache warm")
    if args.source is not None:
        runs = {"run": args.source}
    else:
        jobs = args.jobs or 2  # make run's
        with tempfile.TemporaryDirectory(prefix="bench-suite-cache-") as cache:
            runs = {"cold cache": sampled_suite("bench-suite-cold", Path(cache), jobs, args.limit)}
            if not args.cold_only:
                runs["warm cache"] = sampled_suite("bench-suite-warm", Path(cache), jobs, args.limit)
    results = {label: report(run, label) for label, run in runs.items()}
    for label, run in runs.items():
        print(
            f"\n{label}, device profile:\n"
            + doc_block(
                {"commit": "now", "jobs": run_jobs(run), "machine": run_machine(run), **profile(run, read_samples(run))}
            )
        )
    if args.record:
        caches = [args.cache] if args.source is not None else CACHES  # the suite runs cold, then warm
        for cache_state, run in zip(caches, runs.values()):
            record_run(run, cache_state, args.commit, args.jobs)
        print(f"wrote {RUNS} and the README's {README_BLOCK!r} block; the cold run's profile: {RECORD}, {PAGE}")
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
