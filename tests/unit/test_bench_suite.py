"""bench/bench_suite.py's device profile: the GPU samples per notebook and cell, its table and its record."""

from __future__ import annotations

import datetime
import json
import sys
import time
from pathlib import Path

import pytest

from bertology_utils.present.generated import read_block

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(ROOT / "bench"))
    return pytest.importorskip("bench_suite")


@pytest.fixture(autouse=True)
def notebooks(bench, tmp_path, monkeypatch):
    """The notebooks a recorded cold CPU run times: copies of two of the project's, so that no test writes the real
    ones."""
    folder = tmp_path / "notebooks"
    folder.mkdir()
    for stem in ("00_tour", "04_probes"):
        (folder / f"{stem}.ipynb").write_bytes((ROOT / "notebooks" / f"{stem}.ipynb").read_bytes())
    monkeypatch.setattr(bench, "NOTEBOOKS", folder)
    return folder


def _typical(folder: Path) -> dict[str, object]:
    return {p.stem: json.loads(p.read_text())["metadata"]["bertology"].get("typical_seconds") for p in folder.iterdir()}


T0 = datetime.datetime(2026, 11, 27, 12, 0, 0, tzinfo=datetime.timezone.utc)


def _stamp(seconds: float) -> str:
    return (T0 + datetime.timedelta(seconds=seconds)).isoformat()


def _run(tmp_path: Path, gpu: str | None) -> Path:
    """A run of two notebooks, 00 over seconds 0-10 and 04 over 10-14, and 04's notebook with two timed cells."""
    run = tmp_path / "run"
    notebooks = [("00_tour", 0.0, 10.0), ("04_probes", 10.0, 4.0)]
    record = {
        "run_name": "synthetic",
        "started": _stamp(0),
        "finished": _stamp(15),
        "environment": {"cpu": "Test CPU", "cores": 2, "cpu_flags": ["avx2"], "gpu": gpu},
        "versions": {"torch": "2.0"},
        "notebooks": [
            {"name": name, "started": _stamp(start), "duration_s": seconds, "status": "ok"}
            for name, start, seconds in notebooks
        ],
    }
    (run / "04_probes").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps(record))

    def cell(source: str, start: float, end: float) -> dict:
        meta = {"duration": end - start, "start_time": _stamp(start), "end_time": _stamp(end)}
        return {"cell_type": "code", "source": source, "metadata": {"papermill": meta}}

    cells = [cell("import torch\nfit(probe)", 10.0, 13.0), cell("plot()", 13.0, 14.0)]
    (run / "04_probes" / "04_probes.ipynb").write_text(json.dumps({"cells": cells}))
    return run


def test_busy_shares_of_a_span(bench):
    t = T0.timestamp()
    samples = [[t + 0, 20.0, 1.0], [t + 1, 60.0, 1.0], [t + 2, 100.0, 1.0], [t + 3, 0.0, 1.0], [t + 9, 90.0, 1.0]]
    shares = bench.busy(samples, t, t + 3)
    assert shares == {"busy_pct": 45.0, "over_half_pct": 50.0, "host_pct": 55.0, "samples": 4}
    assert bench.busy(samples, t + 4, t + 8)["busy_pct"] is None  # a span with no sample
    assert bench.busy(None, t, t + 3) == {"busy_pct": None, "over_half_pct": None, "host_pct": None, "samples": 0}


def test_the_sampler_reads_the_gpu_until_stopped(bench, monkeypatch):
    fake = [sys.executable, "-c", "print('42, 512')"]  # nvidia-smi's answer for one GPU
    monkeypatch.setattr(bench, "SMI", fake)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert bench.GpuSampler().command == fake
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert bench.GpuSampler().command == [*fake, "--id=2"]  # the GPU torch's cuda:0 is
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    deadline = time.monotonic() + 30
    with bench.GpuSampler(interval=0.05) as sampler:
        while len(sampler.samples) < 3 and time.monotonic() < deadline:
            sampler.join(0.05)
    count = len(sampler.samples)
    sampler.join(0.2)
    assert len(sampler.samples) == count  # stopped
    times = [t for t, _, _ in sampler.samples]
    assert times == sorted(times) and all(row[1:] == [42.0, 512.0] for row in sampler.samples)


def test_parse_smi_reads_the_first_gpu_and_refuses_the_unreadable(bench):
    assert bench.parse_smi("37, 1024\n5, 10\n") == (37.0, 1024.0)
    assert bench.parse_smi("[N/A], 1024\n") is None
    assert bench.parse_smi("") is None


def test_profile_per_notebook_and_cell(bench, tmp_path):
    run = _run(tmp_path, gpu="GPU 0: NVIDIA H100")
    t = T0.timestamp()
    # 00 (0-10 s): 10% and 30%; 04's fit cell (10-13 s): 80%, 90%, 40%; its plot cell (13-14 s): nothing
    samples = [
        [t + 2, 10.0, 0.0],
        [t + 6, 30.0, 0.0],
        [t + 10.5, 80.0, 0.0],
        [t + 11.5, 90.0, 0.0],
        [t + 12.5, 40.0, 0.0],
    ]
    (run / bench.SAMPLES).write_text(json.dumps({"samples": samples}))
    got = bench.profile(run, bench.read_samples(run))
    assert got["wall_s"] == 15.0 and got["notebooks_s"] == 14.0
    assert got["notebooks"]["00_tour"] == {
        "wall_s": 10.0,
        "busy_pct": 20.0,
        "over_half_pct": 0.0,
        "host_pct": 80.0,
        "samples": 2,
    }
    assert got["notebooks"]["04_probes"]["busy_pct"] == 70.0
    assert got["notebooks"]["04_probes"]["over_half_pct"] == pytest.approx(66.7)
    fit, plot = got["stages"]["04_probes"]
    assert (fit["cell"], fit["code"], fit["wall_s"], fit["busy_pct"]) == (1, "fit(probe)", 3.0, 70.0)
    assert (plot["cell"], plot["code"], plot["samples"], plot["busy_pct"]) == (2, "plot()", 0, None)
    assert got["whole run"]["samples"] == 5 and got["whole run"]["busy_pct"] == 50.0

    table = bench.doc_block({"commit": "abc", "machine": bench.run_machine(run), **got})
    assert "| `00_tour` | 10.0 | 20% | 0% | 80% |" in table
    assert "| 04, cell 2: `plot()` | 1.0 | no samples | no samples | no samples |" in table


def test_without_a_gpu_the_busy_columns_say_so(bench, tmp_path):
    run = _run(tmp_path, gpu=None)
    assert bench.read_samples(run) is None
    record = {"commit": "abc", "machine": bench.run_machine(run), **bench.profile(run, None)}
    table = bench.doc_block(record)
    assert "| `00_tour` | 10.0 | no GPU | no GPU | no GPU |" in table
    assert "GPU: none" in table and "nan" not in table.lower()
    assert record["machine"] == {"cpu": "Test CPU", "cores": 2, "cpu_flags": ["avx2"], "gpu": None, "torch": "2.0"}


def test_record_round_trips_into_the_docs_block(bench, tmp_path, monkeypatch):
    run = _run(tmp_path, gpu=None)
    page = tmp_path / "benchmarks.md"
    page.write_text(
        f"# Benchmarks\n\n<!-- {bench.TARGETS_BLOCK}: generated by x; do not edit -->\n<!-- {bench.TARGETS_BLOCK}: end -->\n"
        f"<!-- {bench.BLOCK}: generated by x; do not edit -->\nold\n<!-- {bench.BLOCK}: end -->\n"
    )
    readme = tmp_path / "README.md"
    readme.write_text(
        f"# x\n<!-- {bench.README_BLOCK}: generated by x; do not edit -->\n<!-- {bench.README_BLOCK}: end -->\n"
    )
    monkeypatch.setattr(bench, "PAGE", page)
    monkeypatch.setattr(bench, "RECORD", tmp_path / "suite.json")
    monkeypatch.setattr(bench, "RUNS", tmp_path / "suite-runs.json")
    monkeypatch.setattr(bench, "README", readme)
    written = bench.record_run(run, "cold", commit="abc")
    assert json.loads((tmp_path / "suite.json").read_text()) == {"profiles": [written]}
    assert written["cache"] == "cold" and written["commit"] == "abc" and written["jobs"] is None
    assert read_block(page, bench.BLOCK) == bench.doc_block(written).strip()
    assert "(cold cache)" in read_block(page, bench.BLOCK)
    kind = "2 cores of Test CPU (AVX2 only)"
    assert read_block(readme, bench.README_BLOCK) == (
        f"On {kind}: **0 min** with a cold cache (2 notebooks, `abc`, 2026-11-27); on a GPU: not recorded yet."
    )
    # the same kind of machine and cache replaces its entry; another cache adds one
    bench.record_run(run, "cold", commit="def")
    bench.record_run(run, "warm", commit="def")
    # a warm run's wall time joins the README, while the docs keep the cold run's profile
    assert [p["cache"] for p in bench.read_profiles()] == ["cold"]
    assert "(cold cache)" in read_block(page, bench.BLOCK)
    entries = json.loads((tmp_path / "suite-runs.json").read_text())
    assert [(e["kind"], e["cache"], e["commit"]) for e in entries] == [(kind, "cold", "def"), (kind, "warm", "def")]
    assert read_block(readme, bench.README_BLOCK) == bench.runs_block(entries)
    assert read_block(page, bench.TARGETS_BLOCK) == bench.targets_block(entries)
    assert bench.runs_block(entries).startswith(f"On {kind}: **0 min** with a cold cache (2 notebooks, `def`")
    assert ", **0 min** with a warm cache (2 notebooks, `def`" in bench.runs_block(entries)
    with pytest.raises(SystemExit, match="cold or warm"):
        bench.record_run(run, "lukewarm")
    record = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**record, "interrupted": ["04_probes"], "not_run": ["09_atlas"]}))
    with pytest.raises(SystemExit, match="stopped before it finished"):  # --limit cut it: not the suite's time
        bench.record_run(run, "cold", commit="ghi")
    assert bench.read_profiles()[0]["commit"] == "def"


@pytest.fixture
def pages(bench, tmp_path, monkeypatch) -> tuple[Path, Path]:
    """The benchmarks page and the README a recorded run writes, and the records beside them: copies in tmp_path."""
    page = tmp_path / "benchmarks.md"
    page.write_text(
        "".join(
            f"<!-- {name}: generated by x; do not edit -->\n<!-- {name}: end -->\n"
            for name in (bench.TARGETS_BLOCK, bench.BLOCK)
        )
    )
    readme = tmp_path / "README.md"
    readme.write_text(
        f"<!-- {bench.README_BLOCK}: generated by x; do not edit -->\n<!-- {bench.README_BLOCK}: end -->\n"
    )
    for name, value in (
        ("PAGE", page),
        ("RECORD", tmp_path / "s.json"),
        ("RUNS", tmp_path / "r.json"),
        ("README", readme),
    ):
        monkeypatch.setattr(bench, name, value)
    return page, readme


def test_each_kind_of_machine_keeps_its_profile(bench, tmp_path, notebooks, pages):
    page, readme = pages
    before = {p.name: p.read_text() for p in notebooks.iterdir()}
    bench.record_run(_run(tmp_path / "warm", gpu=None), "warm", commit="abc")
    assert {p.name: p.read_text() for p in notebooks.iterdir()} == before  # a warm run's times read the cache
    cpu = bench.record_run(_run(tmp_path / "cpu", gpu=None), "cold", commit="abc")
    # a cold CPU run's times order a first run's notebooks; only the metadata changed, in the notebooks' own layout
    assert _typical(notebooks) == {"00_tour": 10, "04_probes": 4}
    for path in notebooks.iterdir():
        text = path.read_text()
        assert text == json.dumps(json.loads(text), indent=1, ensure_ascii=False) + "\n"
        assert json.loads(text)["cells"] == json.loads(before[path.name])["cells"]
    # a run.json of a GPU machine from before jobs were recorded: the card's index and UUID, no jobs
    gpu_run = _run(tmp_path / "gpu", gpu="GPU 0: NVIDIA H200 (UUID: GPU-c4893557-7f5e)")
    record = json.loads((gpu_run / "run.json").read_text())
    faster = [{**n, "duration_s": n["duration_s"] / 2} for n in record["notebooks"]]  # not the CPU's times
    (gpu_run / "run.json").write_text(json.dumps({**record, "notebooks": faster}))
    gpu = bench.record_run(gpu_run, "cold", commit="def", jobs=4)
    assert gpu["machine"]["gpu"] == "NVIDIA H200" and gpu["jobs"] == 4
    assert bench.read_profiles() == [cpu, gpu]
    block = read_block(page, bench.BLOCK)
    assert block == bench.profiles_block([cpu, gpu]).strip()
    assert "Run `synthetic` of 2026-11-27 (cold cache, 4 notebooks at a time), recorded at def" in block
    assert "UUID" not in block and "UUID" not in read_block(readme, bench.README_BLOCK)
    assert "on one NVIDIA H200: **0 min** with a cold cache (2 notebooks, 4 at a time, `def`, 2026-11-27)." in (
        read_block(readme, bench.README_BLOCK)
    )
    # the record says its jobs where the run.json has them; a later run of the same kind replaces its profile
    record = json.loads((gpu_run / "run.json").read_text())
    (gpu_run / "run.json").write_text(json.dumps({**record, "jobs": 8}))
    again = bench.record_run(gpu_run, "cold", commit="ghi", jobs=4)
    assert again["jobs"] == 8 and bench.read_profiles() == [cpu, again]
    assert _typical(notebooks) == {"00_tour": 10, "04_probes": 4}  # a GPU's times do not reorder a CPU's run
    assert bench.write_typical_seconds({"04_probes": 4.2, "99_none": 5.0}) == []  # unchanged; no such notebook


def test_a_run_held_to_fewer_kernels_is_a_kind_of_machine_of_its_own(bench, tmp_path, notebooks, pages):
    page, readme = pages
    amx = _run(tmp_path / "amx", gpu=None)
    record = json.loads((amx / "run.json").read_text())
    flags = ["sse4_1", "avx", "avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16"]
    (amx / "run.json").write_text(json.dumps({**record, "environment": {**record["environment"], "cpu_flags": flags}}))
    own = bench.record_run(amx, "cold", commit="abc")
    assert _typical(notebooks) == {"00_tour": 10, "04_probes": 4}
    held = _run(tmp_path / "held", gpu=None)
    caps = {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
    slower = [{**n, "duration_s": n["duration_s"] * 3} for n in record["notebooks"]]
    environment = {**record["environment"], "cpu_flags": flags, **caps, "OMP_NUM_THREADS": "1"}
    (held / "run.json").write_text(json.dumps({**record, "environment": environment, "notebooks": slower}))
    capped = bench.record_run(held, "cold", commit="def")
    # the flags its kernels could use, the caps that held it there, and a kind of its own beside the CPU's
    assert capped["machine"]["cpu_flags"] == ["sse4_1", "avx", "avx2", "fma"]
    assert capped["machine"]["caps"] == caps
    kind = bench.machine_kind(capped["machine"])
    assert kind == "2 cores of Test CPU (AVX2 only, held to it by ONEDNN_MAX_CPU_ISA=AVX2 and ATEN_CPU_CAPABILITY=avx2)"
    assert bench.read_profiles() == [own, capped]
    assert "(kernel-picking CPU flags: sse4_1, avx, avx2, fma, held to it by ONEDNN_MAX_CPU_ISA=AVX2" in read_block(
        page, bench.BLOCK
    )
    assert f"on {kind}: **0 min** with a cold cache" in read_block(readme, bench.README_BLOCK)
    assert f"| {kind} | **15 s**, cold cache (`def`, 2026-11-27) | none set | — |" in read_block(  # no target
        page, bench.TARGETS_BLOCK
    )
    assert bench.target(json.loads(bench.RUNS.read_text())[-1]) is None
    assert _typical(notebooks) == {"00_tour": 10, "04_probes": 4}  # the order stays the CPU's own kernels'


def test_a_machine_is_named_by_what_sets_its_speed(bench):
    cpu = {"cpu": "X", "cores": 2, "gpu": None}
    assert bench.machine_kind({**cpu, "cpu_flags": ["avx2", "avx512f", "amx_tile", "amx_bf16"]}) == (
        "2 cores of X (AMX: bfloat16 units)"
    )
    assert bench.machine_kind({**cpu, "cpu_flags": ["avx2", "avx512f", "avx512_bf16"]}).endswith(
        "(AVX-512 with bfloat16)"
    )
    assert bench.machine_kind({**cpu, "cpu_flags": ["avx2", "avx512f"]}).endswith("(AVX-512, no bfloat16 units)")
    assert bench.machine_kind({**cpu, "cpu_flags": ["sse4_1"]}).endswith("(no AVX2)")
    assert bench.machine_kind({**cpu, "cpu_flags": ["avx2"], "gpu": "NVIDIA H200"}) == "one NVIDIA H200"
    gpu_run = {
        "kind": "one NVIDIA H200",
        "cache": "cold",
        "commit": "a",
        "started": "2026-11-29T00:00:00",
        "wall_s": 90.0,
        "notebooks": 11,
        "machine": {"gpu": "NVIDIA H200"},
    }
    assert (
        bench.runs_block([gpu_run])
        == "On one NVIDIA H200: **2 min** with a cold cache (11 notebooks, `a`, 2026-11-29)."
    )


def test_each_run_is_set_against_the_target_of_its_kind_of_machine(bench):
    def entry(wall: float, cache: str = "cold", **machine: object) -> dict:
        machine = {"cpu": "X", "cores": 2, "cpu_flags": ["avx2"], "gpu": None, **machine}
        kind = bench.machine_kind(machine)
        return {"kind": kind, "cache": cache, "commit": "c", "started": "2026-11-30T00:00", "wall_s": wall,
                "notebooks": 11, "jobs": 2, "machine": machine}  # fmt: skip

    amx = {"cpu_flags": ["avx2", "avx512f", "amx_bf16"]}
    assert bench.target(entry(1000, **amx)) == (900.0, "under 15 min, setup included", True)
    assert bench.target(entry(1000, cpu_flags=["avx512_bf16"])) == (900.0, "under 15 min, setup included", True)
    assert bench.target(entry(1000, "warm", **amx)) is None  # the targets are a cold run's
    assert bench.target(entry(1000, cores=4, **amx)) is None  # set for 2 cores
    assert bench.target(entry(1000)) is None  # an AVX2-only CPU: its figure said, no target
    assert bench.target(entry(80, gpu="NVIDIA H200")) == (90.0, "under 90 s", False)
    assert bench.target(entry(80, gpu="NVIDIA A10G")) is None
    table = bench.targets_block(
        [entry(400, gpu="NVIDIA H100 80GB HBM3"), entry(1800, **amx), entry(85, gpu="NVIDIA H200")]
    )
    lines = table.splitlines()
    assert lines[2] == (  # the slowest first
        "| 2 cores of X (AMX: bfloat16 units) | **30.0 min**, cold cache, 2 notebooks at a time (`c`, 2026-11-30) "
        "| under 15 min, setup included | 2.0x the target without the setup |"
    )
    assert lines[3] == (
        "| one NVIDIA H100 80GB HBM3 | **400 s**, cold cache, 2 notebooks at a time (`c`, 2026-11-30) | under 90 s "
        "| 4.4x the target |"
    )
    assert lines[4].startswith("| one NVIDIA H200 | **85 s**") and lines[4].endswith("| under 90 s | met |")


def test_the_documented_suite_profile_is_the_recorded_run(bench):
    profiles = bench.read_profiles()
    assert read_block(bench.PAGE, bench.BLOCK) == bench.profiles_block(profiles).strip(), (
        "run python bench/bench_suite.py --from RUN --record --cache cold"
    )
    entries = json.loads(bench.RUNS.read_text())
    assert read_block(bench.README, bench.README_BLOCK) == bench.runs_block(entries), (
        "run python bench/bench_suite.py --from RUN --record --cache cold"
    )
    assert read_block(bench.PAGE, bench.TARGETS_BLOCK) == bench.targets_block(entries), (
        "run python bench/bench_suite.py --from RUN --record --cache cold"
    )
    kinds = [bench.machine_kind(record["machine"]) for record in profiles]
    assert len(set(kinds)) == len(kinds)  # one profile per kind of machine
    for kind, record in zip(kinds, profiles):
        assert {e["commit"] for e in entries if (e["kind"], e["cache"]) == (kind, record["cache"])} == {
            record["commit"]
        }
