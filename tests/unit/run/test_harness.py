"""The notebook harness and the `bertology run` command, on tiny notebooks built here."""

import datetime
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from bertology_utils.cli import main
from bertology_utils.cli.run import absolute_paths, parse_parameter_value
from bertology_utils.core import library_versions
from bertology_utils.core.errors import BertologyError
from bertology_utils.core.files import is_partial
from bertology_utils.run import harness, results

PARAMETERS = "output_dir = None\nmodel_name = None\nn = 1"


def write_notebook(path: Path, *sources: str, parameters: str = PARAMETERS) -> Path:
    """A notebook with a `parameters` cell followed by one code cell per source."""
    params = nbformat.v4.new_code_cell(parameters)
    params.metadata["tags"] = ["parameters"]
    nb = nbformat.v4.new_notebook(cells=[params, *map(nbformat.v4.new_code_cell, sources)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


GOOD_CELLS = (
    "import numpy as np\n"
    "import matplotlib\n"
    "matplotlib.use('Agg')\n"
    "import matplotlib.pyplot as plt\n"
    "from bertology_utils.run.record import record_metrics, save_figure",
    "record_metrics({'test.n': n, 'test.model': model_name, 'test.mean': np.float32(0.5),\n"
    "                'test.counts': np.arange(3), 'test.missing': float('nan')}, output_dir=output_dir, declared=None)\n"
    "fig, ax = plt.subplots(figsize=(2, 2))\n"
    "ax.plot([0, 1], [0, 1])\n"
    "save_figure(fig, 'line plot', output_dir=output_dir)",
)
# Raises in its 3rd cell (index 2); the cell after it must not run.
BAD_CELLS = ("x = 1", "raise ValueError('boom')", "y = 2")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One harness run: a failing notebook first, then a good one."""
    folder = tmp_path_factory.mktemp("notebooks")
    bad = write_notebook(folder / "01_bad.ipynb", *BAD_CELLS)
    good = write_notebook(folder / "00_good.ipynb", *GOOD_CELLS)
    root = tmp_path_factory.mktemp("results")
    report = harness.run_notebooks(
        [bad, good], run_name="t", parameters={"n": 3, "model_name": "tiny"}, results_root=root, progress=False
    )
    return report, root / "t"


@pytest.mark.notebook
def test_good_notebook_ran_and_recorded(run):
    report, run_dir = run
    good = report.notebooks[1]
    assert good.ok and good.error is None
    assert Path(good.executed_notebook) == run_dir / "00_good" / "00_good.ipynb"
    assert Path(good.executed_notebook).is_file()
    metrics = json.loads((run_dir / "00_good" / "metrics.json").read_text())
    assert metrics == {
        "test.counts": [0, 1, 2],
        "test.mean": 0.5,
        "test.missing": None,
        "test.model": "tiny",
        "test.n": 3,
    }
    assert good.metrics == str(run_dir / "00_good" / "metrics.json")
    assert (run_dir / "00_good" / "figures" / "line_plot.png").stat().st_size > 0


@pytest.mark.notebook
def test_failure_is_recorded_and_partial_notebook_kept(run):
    report, run_dir = run
    bad = report.notebooks[0]
    assert bad.status == "failed"
    assert bad.error == {"cell_index": 2, "exec_count": 4, "ename": "ValueError", "evalue": "boom"}
    assert bad.metrics is None
    executed = nbformat.read(bad.executed_notebook, as_version=4)
    code = [c for c in executed.cells if c.cell_type == "code"]
    assert [c.source for c in code[-2:]] == list(BAD_CELLS[-2:])
    assert code[-2].outputs[0].ename == "ValueError"
    assert code[-1].execution_count is None  # never ran
    assert not report.ok
    assert report.failures == [bad]
    lines = report.summary().splitlines()
    assert lines[0].startswith("FAILED") and lines[0].endswith(
        "notebook 01_bad failed in cell 2 (exec count 4): ValueError: boom"
    )
    assert lines[1].startswith("ok") and "00_good" in lines[1]


@pytest.mark.notebook
def test_run_json(run):
    report, run_dir = run
    data = json.loads((run_dir / "run.json").read_text())
    assert data == json.loads(json.dumps(report.to_dict()))
    assert data["run_name"] == "t"
    assert data["parameters"] == {"n": 3, "model_name": "tiny"}
    assert [(nb["name"], nb["status"]) for nb in data["notebooks"]] == [("01_bad", "failed"), ("00_good", "ok")]
    assert data["versions"] == library_versions()
    assert data["started"] <= data["finished"]
    assert data["jobs"] == 1  # one notebook at a time, the default


@pytest.mark.notebook
def test_load_metrics(run, monkeypatch):
    _, run_dir = run
    assert set(results.load_metrics(run_dir)) == {"00_good"}
    monkeypatch.setenv(results.RESULTS_DIR_ENV, str(run_dir.parent))
    assert results.load_metrics("t")["00_good"]["test.n"] == 3
    with pytest.raises(BertologyError):
        results.load_metrics("no-such-run")


# --------------------------------------------------------------------------- CLI


@pytest.mark.notebook
def test_cli_run_passes_typed_parameters_and_replaces_old_results(tmp_path, capsys):
    nb = write_notebook(
        tmp_path / "05_params.ipynb",
        "from bertology_utils.run.record import record_metrics\n"
        "record_metrics({f'p.{k}': [v, type(v).__name__] for k, v in dict(i=i, f=f, s=s, b=b).items()},\n"
        "               output_dir=output_dir, declared=None)",
        parameters="output_dir = None\nmodel_name = None\ni = 0\nf = 0.0\ns = ''\nb = False",
    )
    stale = tmp_path / "res" / "cli" / "05_params" / "stale.txt"
    stale.parent.mkdir(parents=True)
    stale.write_text("from an earlier run")
    argv = [
        "run",
        str(nb),
        "-p",
        "i",
        "3",
        "-p",
        "f",
        "0.25",
        "-p",
        "s",
        "hello",
        "-p",
        "b",
        "True",
        "--run-name",
        "cli",
        "--results-dir",
        str(tmp_path / "res"),
    ]
    assert main(argv) == 0
    metrics = json.loads((tmp_path / "res" / "cli" / "05_params" / "metrics.json").read_text())
    assert metrics == {"p.i": [3, "int"], "p.f": [0.25, "float"], "p.s": ["hello", "str"], "p.b": [True, "bool"]}
    assert not stale.exists()
    out = capsys.readouterr().out
    assert out.startswith("ok") and f"results: {tmp_path / 'res' / 'cli'}" in out


@pytest.mark.notebook
def test_cli_run_exits_1_when_a_notebook_fails(tmp_path, capsys):
    nb = write_notebook(tmp_path / "01_bad.ipynb", *BAD_CELLS)
    assert main(["run", str(nb), "--run-name", "x", "--results-dir", str(tmp_path)]) == 1
    assert "notebook 01_bad failed in cell 2 (exec count 4): ValueError: boom" in capsys.readouterr().out


SKIP_SOME = (
    "from bertology_utils.run.record import record_metrics, record_skipped",
    "record_skipped('topic.part_b', 'data B not found; to get it: set X', output_dir=output_dir)\n"
    "record_metrics({'topic.a': 1}, output_dir=output_dir, declared=None)",
)
SKIP_ALL = (
    "from bertology_utils.run.record import record_skipped",
    "record_skipped('other', 'no data at all', output_dir=output_dir, everything=True)",
)


@pytest.mark.notebook
def test_skipped_sections_and_notebooks_are_a_state_not_a_failure(tmp_path, capsys):
    from bertology_utils.present.report import build_report

    some = write_notebook(tmp_path / "01_some.ipynb", *SKIP_SOME)
    nothing = write_notebook(tmp_path / "02_nothing.ipynb", *SKIP_ALL)
    assert main(["run", str(some), str(nothing), "--run-name", "s", "--results-dir", str(tmp_path / "res")]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("ok") and "01_some" in lines[0]
    assert lines[1].strip() == "skipped topic.part_b: data B not found; to get it: set X"
    assert lines[2].startswith("skipped") and "02_nothing" in lines[2]
    assert lines[3].strip() == "skipped other: no data at all"
    assert "each line says how to get it" in out
    run_dir = tmp_path / "res" / "s"
    data = json.loads((run_dir / "run.json").read_text())
    assert [(nb["name"], nb["status"]) for nb in data["notebooks"]] == [("01_some", "ok"), ("02_nothing", "skipped")]
    assert data["notebooks"][0]["skipped"] == [
        {"section": "topic.part_b", "reason": "data B not found; to get it: set X"}
    ]
    metrics = results.load_metrics(run_dir)
    assert metrics["01_some"] == {"topic.a": 1, "topic.skipped": ["topic.part_b"]}
    assert metrics["02_nothing"] == {"other.skipped": ["other"]}
    page = build_report(run_dir).read_text()
    assert '<span class="status status-skipped">skipped</span>' in page
    assert "<li><strong>topic.part_b</strong>: data B not found; to get it: set X</li>" in page


def test_relative_paths_in_parameters_become_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.conllu").write_text("")
    (tmp_path / "task").mkdir()
    given = ["mine.conllu", {"path": "task", "text": "review"}, "SST-2", "", 3, "/abs/none"]
    assert absolute_paths(given) == [
        str(tmp_path / "mine.conllu"),
        {"path": str(tmp_path / "task"), "text": "review"},
        "SST-2",
        "",
        3,
        "/abs/none",
    ]


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "required: COMMAND"),
        (["run", "--no-such-option"], "unrecognized arguments"),
        (["run", "-p", "n"], "expected 2 arguments"),
        (["run", "no_such_notebook"], "bertology: error: unknown notebook 'no_such_notebook'"),
        (["run", "{nb}", "-p", "not a name", "1"], "bertology: error: -p not a name"),
        (["run", "{nb}", "-p", "output_dir", "/tmp"], "bertology: error: output_dir is set by the harness"),
        (["run", "{nb}", "--kernel", "no-such-kernel"], "bertology: error: no Jupyter kernel named 'no-such-kernel'"),
        (["run", "{nb}", "--run-name", "../up"], "bertology: error: bad run name"),
    ],
)
def test_cli_usage_errors_exit_2(argv, message, tmp_path, capsys):
    nb = write_notebook(tmp_path / "00_x.ipynb", "pass")
    argv = [a.format(nb=nb) for a in argv] + ["--results-dir", str(tmp_path)] * bool(argv)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err
    assert not list(tmp_path.glob("*/run.json"))  # nothing ran


@pytest.mark.parametrize(
    "text, value",
    [
        ("3", 3),
        ("-2", -2),
        ("0.25", 0.25),
        ("1e3", 1000.0),
        ("True", True),
        ("False", False),
        ("None", None),
        ("true", True),
        ("[1, 2]", [1, 2]),
        ('{"a": 1}', {"a": 1}),
        ('"3"', "3"),
        ("hello", "hello"),
        ("bert-base-uncased", "bert-base-uncased"),
        ("", ""),
    ],
)
def test_parse_parameter_value(text, value):
    parsed = parse_parameter_value(text)
    assert parsed == value and type(parsed) is type(value)


def test_help_exits_0(capsys):
    assert main(["--help"]) == 0
    assert main(["run", "--help"]) == 0
    assert "examples:" in capsys.readouterr().out


# 00_b caches an entry, then (the first time) tells its kernel's pid and waits to be stopped.
RESUMABLE = (
    "import os, pathlib, time\n"
    "import numpy as np\n"
    "from bertology_utils.core import settings\n"
    "from bertology_utils.core.cache import cached_arrays\n"
    "from bertology_utils.run.record import record_metrics",
    "_, reused = cached_arrays(settings.cache_dir() / 'entry', {'n': n}, lambda: {'a': np.arange(n)})\n"
    "record_metrics({'b.reused': reused}, output_dir=output_dir, declared=None)",
    "if not pathlib.Path(marker).exists():\n"
    "    from bertology_utils.core.files import atomic_write_text\n"
    "    atomic_write_text(marker, str(os.getpid()))\n"
    "    time.sleep(300)",
)


@pytest.mark.notebook
def test_sigterm_stops_the_run_and_its_kernel_and_the_same_command_resumes(tmp_path):
    marker = tmp_path / "kernel.pid"
    notebooks = [
        write_notebook(tmp_path / "00_b.ipynb", *RESUMABLE, parameters=PARAMETERS + "\nmarker = None"),
        write_notebook(tmp_path / "01_c.ipynb", "x = 1"),
    ]
    command = [sys.executable, "-m", "bertology_utils", "run", *map(str, notebooks), "-p", "marker", str(marker)]
    command += ["--run-name", "r", "--results-dir", str(tmp_path / "res")]
    env = {**os.environ, "BERTOLOGY_CACHE_DIR": str(tmp_path / "cache")}
    run = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while not marker.exists():  # 00_b has cached its entry and waits
        assert run.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    run.send_signal(signal.SIGTERM)
    out = run.communicate(timeout=60)[0]
    assert run.returncode == 143, out
    assert "interrupted by SIGTERM while 00_b ran; not run: 01_c" in out
    assert "To resume, run the same command again:" in out
    kernel = int(marker.read_text())
    while time.monotonic() < deadline:  # the kernel was killed, not left running
        try:
            os.kill(kernel, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"the kernel {kernel} still runs")
    assert not [p for p in tmp_path.rglob("*") if is_partial(p)]
    record = json.loads((tmp_path / "res" / "r" / results.RUN_FILE).read_text())
    assert [(nb["name"], nb["status"]) for nb in record["notebooks"]] == [("00_b", "failed")]
    assert (record["interrupted"], record["not_run"]) == (["00_b"], ["01_c"])

    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
    record = json.loads((tmp_path / "res" / "r" / results.RUN_FILE).read_text())
    assert [nb["status"] for nb in record["notebooks"]] == ["ok", "ok"] and not record["not_run"]
    assert results.load_metrics(tmp_path / "res" / "r")["00_b"] == {"b.reused": True}  # the cached entry


def test_python_dash_m():
    done = subprocess.run([sys.executable, "-m", "bertology_utils", "run", "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("usage: bertology run")


# --------------------------------------------------------------------------- finding notebooks


@pytest.fixture
def notebooks_dir(tmp_path):
    for name in ("00_tour", "01_heads", "10_probe", "notes"):
        write_notebook(tmp_path / f"{name}.ipynb", "pass")
    return tmp_path


def test_list_notebooks_only_numbered(notebooks_dir):
    assert [p.name for p in harness.list_notebooks(notebooks_dir)] == [
        "00_tour.ipynb",
        "01_heads.ipynb",
        "10_probe.ipynb",
    ]
    assert harness.list_notebooks(notebooks_dir / "missing") == []


@pytest.mark.parametrize(
    "name, stem",
    [
        ("00_tour", "00_tour"),
        ("00_tour.ipynb", "00_tour"),
        ("00", "00_tour"),
        ("0", "00_tour"),
        ("1", "01_heads"),
        ("10", "10_probe"),
    ],
)
def test_resolve_notebooks_by_name(notebooks_dir, name, stem):
    assert harness.resolve_notebooks([name], notebooks_dir) == [(notebooks_dir / f"{stem}.ipynb").resolve()]


def test_resolve_notebooks_paths_order_and_duplicates(notebooks_dir):
    other = str(notebooks_dir / "notes.ipynb")  # any existing file path works, numbered or not
    resolved = harness.resolve_notebooks(["01", other, "01_heads"], notebooks_dir)
    assert [p.stem for p in resolved] == ["01_heads", "notes"]


def test_resolve_unknown_notebook_lists_available(notebooks_dir):
    with pytest.raises(BertologyError, match="unknown notebook '7'.*00_tour, 01_heads, 10_probe"):
        harness.resolve_notebooks(["7"], notebooks_dir)


@pytest.mark.notebook
def test_kernels_start_with_the_allocator_settings_and_the_harness_environment_is_restored(tmp_path, monkeypatch):
    cells = (
        "import os\nfrom bertology_utils.run.record import record_metrics",
        "record_metrics({f't.{name}': os.environ.get(name) for name in ('MALLOC_MMAP_MAX_', 'MALLOC_TRIM_THRESHOLD_')},"
        " output_dir=output_dir, declared=None)",
    )
    path = write_notebook(tmp_path / "00_env.ipynb", *cells)
    monkeypatch.delenv("MALLOC_MMAP_MAX_", raising=False)
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "4096")  # set by the user: kept
    report = harness.run_notebooks([path], run_name="a", results_root=tmp_path / "results", progress=False)
    assert report.ok
    (seen,) = results.load_metrics(tmp_path / "results" / "a").values()
    assert (seen["t.MALLOC_MMAP_MAX_"], seen["t.MALLOC_TRIM_THRESHOLD_"]) == ("0", "4096")
    assert "MALLOC_MMAP_MAX_" not in harness.os.environ


@pytest.mark.notebook
def test_jobs_run_notebooks_side_by_side_with_their_share_of_the_threads(tmp_path, monkeypatch):
    cells = (
        "import os, time\nfrom bertology_utils.run.record import record_metrics",
        "start = time.time(); time.sleep(1.5)\n"
        "record_metrics({'t.start': start, 't.end': time.time(), 't.threads': os.environ.get('OMP_NUM_THREADS')},"
        " output_dir=output_dir, declared=None)",
    )
    paths = [write_notebook(tmp_path / f"0{i}_sleep.ipynb", *cells) for i in range(2)]
    monkeypatch.setattr(harness.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    report = harness.run_notebooks(paths, run_name="j", results_root=tmp_path / "results", progress=False, jobs=2)
    assert report.ok and [nb.name for nb in report.notebooks] == ["00_sleep", "01_sleep"]  # the order given
    runs = list(results.load_metrics(tmp_path / "results" / "j").values())
    assert [m["t.threads"] for m in runs] == ["2", "2"]  # 4 cores, 2 notebooks at a time
    assert max(m["t.start"] for m in runs) < min(m["t.end"] for m in runs)  # they overlapped
    started = [datetime.datetime.fromisoformat(nb.started) for nb in report.notebooks]  # the run's timeline
    first, last = (datetime.datetime.fromisoformat(t) for t in (report.started, report.finished))
    assert all(first <= t <= last for t in started)
    written = json.loads((report.run_dir / results.RUN_FILE).read_text())
    assert [nb["started"] for nb in written["notebooks"]] == [nb.started for nb in report.notebooks]
    assert written["jobs"] == report.jobs == 2  # with the machine, what the run's wall time depends on
    assert "OMP_NUM_THREADS" not in harness.os.environ  # the harness's own environment is restored
    with pytest.raises(BertologyError, match="jobs must be at least 1"):
        harness.run_notebooks(paths, run_name="j", results_root=tmp_path / "results", progress=False, jobs=0)


def test_cores_of_finished_notebooks_go_to_those_still_running_once_none_waits(monkeypatch):
    from bertology_utils.core import threads

    monkeypatch.setattr(harness.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.delenv(threads.BUDGET_FILE_ENV, raising=False)
    seen = {}

    def budget() -> int | None:
        return threads.read_budget(harness.os.environ[threads.BUDGET_FILE_ENV])

    def b(_path):
        seen["b alone"] = cores.run(lambda _: budget(), "c")  # c ends while b runs
        seen["b after c"] = budget()

    with harness._SharedCores(2, 3) as cores:
        file = Path(harness.os.environ[threads.BUDGET_FILE_ENV])
        assert budget() == 2 and harness.os.environ["OMP_NUM_THREADS"] == "2"
        cores.run(lambda _: None, "a")
        assert budget() == 2  # two notebooks still to start: their slots stay
        cores.run(b, "b")
    assert seen == {"b alone": 2, "b after c": 4}  # the last one running takes the 4 cores
    assert not file.parent.exists() and threads.BUDGET_FILE_ENV not in harness.os.environ


@pytest.mark.notebook
def test_the_last_notebook_running_takes_the_cores_of_the_one_that_finished(tmp_path, monkeypatch):
    # 00 ends once 01 has read its starting share (kernels run in the notebooks' folder)
    quick = write_notebook(
        tmp_path / "00_quick.ipynb",
        "import os, time\nuntil = time.time() + 60\nwhile not os.path.exists('started') and time.time() < until:\n"
        "    time.sleep(0.1)",
    )
    waits = write_notebook(
        tmp_path / "01_waits.ipynb",
        "import os, time, torch\nfrom bertology_utils.run.record import record_metrics\n"
        "start = torch.get_num_threads()\nopen('started', 'w').close()\nuntil = time.time() + 60\n"
        "while torch.get_num_threads() == start and time.time() < until:\n    time.sleep(0.1)\n"
        "record_metrics({'t.start': start, 't.end': torch.get_num_threads(), 't.env': os.environ['OMP_NUM_THREADS']},"
        " output_dir=output_dir, declared=None)",
    )
    monkeypatch.setattr(harness.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    report = harness.run_notebooks([quick, waits], run_name="j", results_root=tmp_path / "r", progress=False, jobs=2)
    assert report.ok
    metrics = results.load_metrics(tmp_path / "r" / "j")["01_waits"]
    assert (metrics["t.start"], metrics["t.end"], metrics["t.env"]) == (2, 4, "4")


def _with_metadata(path: Path, **bertology) -> Path:
    write_notebook(path, "pass")
    nb = nbformat.read(path, as_version=4)
    nb.metadata["bertology"] = bertology
    nbformat.write(nb, path)
    return path


def test_longest_notebooks_start_first_by_the_latest_run_with_their_parameters(tmp_path):
    paths = [_with_metadata(tmp_path / f"{stem}.ipynb") for stem in ("00_a", "01_b", "02_c", "03_new")]
    params = {"n": 1}
    assert harness._longest_first(paths, tmp_path / "none", lambda p: params) == paths  # no earlier run
    (tmp_path / "results" / "run").mkdir(parents=True)
    durations = {"00_a": 5.0, "01_b": 50.0, "02_c": 20.0}
    record = {
        "started": "2024-01-01T00:00:00+00:00",
        "notebooks": [{"name": k, "duration_s": v, "status": "ok", "parameters": params} for k, v in durations.items()],
    }
    (tmp_path / "results" / "run" / results.RUN_FILE).write_text(json.dumps(record))
    ordered = harness._longest_first(paths, tmp_path / "results", lambda p: params)
    assert [p.stem for p in ordered] == ["03_new", "01_b", "02_c", "00_a"]  # unknown ones first
    # other parameters: that run says nothing, as in the progress lines (display.expected_seconds)
    assert harness._longest_first(paths, tmp_path / "results", lambda p: {"n": 2}) == paths
    (tmp_path / "results" / "run" / results.RUN_FILE).write_text("{not json")
    assert harness._longest_first(paths, tmp_path / "results", lambda p: params) == paths
    # Without an earlier run, the typical durations the notebooks' metadata states.
    stated = [
        _with_metadata(tmp_path / "00_x.ipynb", typical_seconds=10),
        _with_metadata(tmp_path / "01_y.ipynb", typical_seconds=300),
        _with_metadata(tmp_path / "02_z.ipynb"),
    ]
    assert [p.stem for p in harness._longest_first(stated, tmp_path / "none", lambda p: {})] == [
        "02_z",
        "01_y",
        "00_x",
    ]


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_notebook_after_others_starts_once_every_other_has_finished(tmp_path, monkeypatch, jobs):
    # the kernels are faked: what is tested is when each notebook starts, not what it runs
    atlas = _with_metadata(tmp_path / "00_atlas.ipynb", after_others=True, typical_seconds=1)
    others = [_with_metadata(tmp_path / f"0{i}_other.ipynb", typical_seconds=i) for i in (1, 2, 3)]
    events: list[tuple[str, str]] = []

    def fake_run_one(notebook, folder, params, *args, **kw):
        events.append(("start", notebook.stem))
        time.sleep(0.05 * int(notebook.stem[1]))
        events.append(("end", notebook.stem))
        return harness.NotebookResult(notebook.stem, str(notebook), "ok", 0.1, None, None, parameters=params)

    monkeypatch.setattr(harness, "_run_one", fake_run_one)
    monkeypatch.setattr(harness.os, "sched_getaffinity", lambda pid: {0, 1})
    report = harness.run_notebooks(
        [atlas, *others], run_name="a", results_root=tmp_path / "r", progress=False, jobs=jobs
    )
    assert [nb.name for nb in report.notebooks] == ["00_atlas", "01_other", "02_other", "03_other"]  # order given
    assert events[-2:] == [("start", "00_atlas"), ("end", "00_atlas")]
    assert {stem for what, stem in events[:-2] if what == "end"} == {p.stem for p in others}
    if jobs == 2:  # the others still run side by side, longest first
        assert events[:2] == [("start", "03_other"), ("start", "02_other")]


@pytest.mark.skipif(os.name != "posix", reason="zmq's ipc transport is POSIX's")
def test_each_kernel_talks_over_sockets_of_its_own_not_tcp_ports(tmp_path):
    """TCP ports are picked free and taken by the kernel later, so kernels started side by side could collide
    ("Address already in use"); Unix sockets in a folder per kernel cannot."""
    from bertology_utils.run.harness import _Kernels

    managers = [_Kernels().manager_class("00_x")(kernel_name="python3") for _ in range(2)]
    prefixes = [manager.ip for manager in managers]
    assert [manager.transport for manager in managers] == ["ipc", "ipc"]
    assert prefixes[0] != prefixes[1] and all(Path(p).parent.name.startswith("bertology-kernel-") for p in prefixes)
    for manager in managers:
        Path(manager.sockets_dir).rmdir()
