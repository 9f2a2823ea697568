"""Run the notebooks with papermill and record what they measure.

Notebook convention
-------------------
Every notebook lives in ``notebooks/`` and is named ``NN_topic.ipynb`` (``00_tour.ipynb``).
It has exactly one code cell tagged ``parameters`` that sets at least::

    output_dir = None   # where results go; the harness injects the notebook's results folder
    model_name = None   # None means the default model

plus the notebook's own knobs (``n_sentences = 500``...). As papermill does, the harness adds a
cell after it that sets ``output_dir`` (absolute path of the notebook's results folder) and the
user's parameters. The notebook reports what it found with::

    from bertology_utils.run import record_claims, record_metrics, record_skipped, save_figure
    record_metrics({"tour.max_cls_attention": value}, output_dir=output_dir)
    record_claims(claims, "tour.claims", output_dir=output_dir)   # papers.claims.Claim objects
    save_figure(fig, "cls_attention", output_dir=output_dir)
    record_skipped("coref", "GAP not found; ...", output_dir=output_dir)  # a section without its data

A notebook whose data is missing does not fail: each section it cannot compute is recorded with
:func:`record_skipped` (one printed line, the metric ``<topic>.skipped``, and ``skipped.json``),
and the rest runs (:func:`bertology_utils.run.tasks.fine_tune_task` does so for a task parameter
whose data is missing). A notebook that can compute nothing records ``everything=True`` and
finishes; its status is then ``skipped``. A run's notebooks are ``ok``, ``skipped`` or
``failed``, and only ``failed`` makes ``bertology run`` exit 1.

Metric names are flat, dotted strings, ``"<topic>.<quantity>"``, unique across notebooks;
values are numbers or strings (arrays become lists). Run by hand in JupyterLab, ``output_dir``
stays None and both functions write to ``results/interactive/``.

Results layout
--------------
::

    results/<run-name>/run.json                what ran: parameters, status, timings, versions
    results/<run-name>/check.json              metrics against references (--check; see regression)
    results/<run-name>/<stem>/<stem>.ipynb     the executed notebook (partial when it failed)
    results/<run-name>/<stem>/metrics.json     written by record_metrics (and record_claims)
    results/<run-name>/<stem>/claims.json      written by record_claims: the "paper vs ours" claims
    results/<run-name>/<stem>/skipped.json     written by record_skipped: sections not computed, and why
    results/<run-name>/<stem>/figures/         written by save_figure

The results root is ``results/`` in the project, or ``$BERTOLOGY_RESULTS_DIR``. Running a run
name again replaces the folders of the notebooks it runs.

A notebook that reads the others' results (``09_atlas``) says so in its metadata,
``{"bertology": {"after_others": true}}``: it starts only once every other notebook of the run has
finished, however many run at a time.

Interrupted (Ctrl-C; SIGTERM too under ``bertology run``), a run stops the kernels of the notebooks
running, writes run.json with the notebooks that finished, those it stopped (``interrupted``, failed)
and those it never started (``not_run``), and raises :class:`RunInterrupted`. Every file and cache
entry is written whole (:mod:`bertology_utils.core.files`), so nothing is left half written; running
the same run again runs each notebook again, and the steps whose results are cached (fine-tuned
checkpoints, fitted probes, stored results, attention stores) read them back instead of computing them.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path, PurePath
from typing import TYPE_CHECKING

from bertology_utils.core import library_versions, machine_environment, settings, threads
from bertology_utils.core.errors import BertologyError, DataFormatError
from bertology_utils.core.files import atomic_remove, atomic_write_text
from bertology_utils.papers.metrics import REGISTRY, MetricRegistry
from bertology_utils.run.display import RunDisplay, expected_seconds, notebook_sections

if TYPE_CHECKING:
    from bertology_utils.papers.claims import Claim

__all__ = [
    "RESULTS_DIR_ENV",
    "DEFAULT_NOTEBOOKS_DIR",
    "INTERACTIVE_DIR",
    "METRICS_FILE",
    "CLAIMS_FILE",
    "RUN_FILE",
    "UNLISTED",
    "list_notebooks",
    "resolve_notebooks",
    "default_run_name",
    "results_dir",
    "NotebookResult",
    "RunReport",
    "RunInterrupted",
    "run_notebooks",
    "StageTimes",
    "record_metrics",
    "record_claims",
    "load_claims",
    "record_skipped",
    "load_skipped",
    "SKIPPED_FILE",
    "STATUSES",
    "save_figure",
    "FIGURE_FORMATS",
    "find_run",
    "run_entries",
    "run_versions",
    "run_environment",
    "load_metrics",
    "read_json",
]

#: What :func:`save_figure` writes by default: each figure costs about twice the time of a PNG alone.
FIGURE_FORMATS = ("png", "svg")
#: Environment variable overriding the results root.
RESULTS_DIR_ENV = "BERTOLOGY_RESULTS_DIR"
#: Where ``bertology run`` looks for notebooks.
DEFAULT_NOTEBOOKS_DIR = settings.PROJECT_ROOT / "notebooks"
#: Folder (under the results root) used when a notebook runs outside the harness.
INTERACTIVE_DIR = "interactive"
METRICS_FILE = "metrics.json"
CLAIMS_FILE = "claims.json"
RUN_FILE = "run.json"
SKIPPED_FILE = "skipped.json"
#: A notebook's status in a run: it ran; it ran but its data was missing for all of it; it raised.
STATUSES = ("ok", "skipped", "failed")

_NOTEBOOK_NAME = re.compile(r"(\d+)_.+\.ipynb")
_RUN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_UNSAFE_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")


# --------------------------------------------------------------------------- finding notebooks


def list_notebooks(notebooks_dir: str | os.PathLike | None = None) -> list[Path]:
    """The numbered notebooks (``NN_topic.ipynb``) in ``notebooks_dir``, sorted by name."""
    folder = Path(notebooks_dir) if notebooks_dir is not None else DEFAULT_NOTEBOOKS_DIR
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_file() and _NOTEBOOK_NAME.fullmatch(p.name))


def resolve_notebooks(names: Iterable[str | os.PathLike], notebooks_dir: str | os.PathLike | None = None) -> list[Path]:
    """Turn user-given names into notebook paths, in order, without duplicates.

    A name is a path to an existing file, or names a notebook of ``notebooks_dir`` by file name
    (``00_tour.ipynb``), stem (``00_tour``) or number (``00`` or ``0``). Raises BertologyError
    for an unknown or ambiguous name.
    """
    folder = Path(notebooks_dir) if notebooks_dir is not None else DEFAULT_NOTEBOOKS_DIR
    available = list_notebooks(folder)
    resolved: list[Path] = []
    for name in names:
        path = _resolve_one(str(name), available, folder)
        if path not in resolved:
            resolved.append(path)
    return resolved


def _resolve_one(name: str, available: list[Path], folder: Path) -> Path:
    given = Path(name).expanduser()
    if given.is_file():
        return given.resolve()
    matches = [nb for nb in available if name in (nb.name, nb.stem)]
    if not matches and name.isdigit():
        numbered = ((nb, _NOTEBOOK_NAME.fullmatch(nb.name)) for nb in available)
        matches = [nb for nb, match in numbered if match is not None and int(match.group(1)) == int(name)]
    if len(matches) == 1:
        return matches[0].resolve()
    if matches:
        raise BertologyError(f"notebook {name!r} is ambiguous: it matches {', '.join(nb.stem for nb in matches)}")
    listing = ", ".join(nb.stem for nb in available) if available else "none"
    raise BertologyError(f"unknown notebook {name!r}; notebooks in {folder}: {listing}")


# --------------------------------------------------------------------------- running


def default_run_name() -> str:
    """A run name from the local time, e.g. ``20261121-235959``."""
    return dt.datetime.now().strftime("%Y%m%d-%H%M%S")


def results_dir() -> Path:
    """The results root: ``$BERTOLOGY_RESULTS_DIR``, else ``results/`` in the project."""
    value = os.environ.get(RESULTS_DIR_ENV)
    return Path(value).expanduser() if value else settings.PROJECT_ROOT / "results"


@dataclass
class NotebookResult:
    """How one notebook ran."""

    name: str  # the notebook's stem, also its results folder
    source: str  # the notebook that was run
    status: str  # one of STATUSES
    duration_s: float
    executed_notebook: str | None  # the executed copy; partial when the notebook failed
    metrics: str | None  # its metrics.json, if it wrote one
    error: dict | None = None  # cell_index, exec_count, ename, evalue
    parameters: dict | None = None  # the parameters it was given (without output_dir)
    skipped: list[dict] | None = None  # the sections it recorded with record_skipped: section, reason
    started: str | None = None  # when it started (ISO 8601): with duration_s, the run's timeline

    @property
    def ok(self) -> bool:
        """Nothing failed: the notebook ran, with or without skipped sections."""
        return self.status != "failed"

    def describe_error(self) -> str:
        """One line naming the failing cell and the error; empty for a notebook that ran."""
        if self.error is None:
            return ""
        err = self.error
        evalue = (err["evalue"] or "").strip().splitlines()
        message = f"{err['ename']}: {evalue[0]}" if evalue else err["ename"]
        if err["cell_index"] is None:
            return f"notebook {self.name} failed: {message}"
        return f"notebook {self.name} failed in cell {err['cell_index']} (exec count {err['exec_count']}): {message}"


@dataclass
class RunReport:
    """What ``run_notebooks`` did; also written to ``<run dir>/run.json``."""

    run_name: str
    run_dir: Path
    started: str
    finished: str
    parameters: dict
    notebooks: list[NotebookResult]
    versions: dict
    #: An interrupted run: the notebooks stopped while they ran (in ``notebooks`` as failed), and those never started.
    interrupted: list[str] = field(default_factory=list)
    not_run: list[str] = field(default_factory=list)
    #: The machine: CPU and its features, cores, GPU, kernel-picking variables (core.machine_environment)
    environment: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(nb.ok for nb in self.notebooks) and not self.not_run

    @property
    def failures(self) -> list[NotebookResult]:
        return [nb for nb in self.notebooks if not nb.ok]

    def to_dict(self) -> dict:
        data = asdict(self)
        data["run_dir"] = str(self.run_dir)
        return data

    def summary(self) -> str:
        """One line per notebook (ok, skipped or FAILED, time, the failing cell and error), and one
        indented line per skipped section saying why."""
        width = max(len(nb.name) for nb in self.notebooks)
        lines = []
        for nb in self.notebooks:
            line = f"{'FAILED' if nb.status == 'failed' else nb.status:7}  {nb.name:{width}}  {nb.duration_s:7.1f} s"
            lines.append(f"{line}  {nb.describe_error()}" if nb.error else line)
            lines += [f"{'':9}skipped {s['section']}: {s['reason']}" for s in nb.skipped or []]
        return "\n".join(lines)


def run_notebooks(
    notebooks: Iterable[str | os.PathLike],
    *,
    run_name: str | None = None,
    parameters: Mapping | None = None,
    notebook_parameters: Mapping[str, Mapping] | None = None,
    results_root: str | os.PathLike | None = None,
    kernel_name: str = "python3",
    progress: bool = True,
    cell_timeout: int | None = None,
    jobs: int = 1,
) -> RunReport:
    """Execute ``notebooks`` with papermill into ``<results_root>/<run_name>/<stem>/``.

    ``parameters`` go to every notebook, plus its ``output_dir``; ``notebook_parameters`` maps
    a notebook's stem to parameters for it alone (``parameters`` win; stems not run are
    ignored). A notebook that fails is recorded (cell, error) and its partial executed copy
    kept; the others still run. Cell indices are 0-based positions in the source notebook;
    the exec count is the ``In [N]`` of the executed copy. ``cell_timeout`` (seconds) fails a
    cell that runs longer. Raises BertologyError before running anything when the request
    cannot work. ``progress`` prints a line as each notebook starts and ends and, meanwhile, its
    section, elapsed time and the time the latest earlier run of it with the same parameters took
    (:mod:`bertology_utils.run.display`).

    ``jobs`` notebooks run at a time, each kernel with ``cores // jobs`` threads (at least one):
    on a machine whose cores one notebook leaves partly idle (single-threaded stages, small
    batches) two at a time finish sooner. Once no notebook is left to start, the kernels still
    running take the cores of those that finished (a kernel follows the change once it has
    imported this package: :mod:`bertology_utils.core.threads`). The notebooks expected to take longest
    (:func:`_longest_first`) start first; cache entries two notebooks share are built once (the other
    waits, :func:`bertology_utils.core.cache.cache_lock`). A notebook whose metadata says ``after_others``
    starts once every other notebook has finished, whatever ``jobs``. The report lists notebooks in the
    order given, whatever order they ran in. A KeyboardInterrupt (Ctrl-C) stops the kernels running, records
    what finished in run.json and raises :class:`RunInterrupted` (see the module's docstring).
    """
    paths = list(dict.fromkeys(Path(nb).expanduser().resolve() for nb in notebooks))
    if not paths:
        raise BertologyError("no notebooks to run")
    for path in paths:
        if not path.is_file():
            raise BertologyError(f"no notebook at {path}")
    stems = [p.stem for p in paths]
    clashes = sorted({s for s in stems if stems.count(s) > 1})
    if clashes:
        raise BertologyError(f"notebooks share a name and would share a results folder: {', '.join(clashes)}")
    params = dict(parameters or {})
    per_notebook = {stem: dict(p) for stem, p in (notebook_parameters or {}).items()}
    if "output_dir" in params or any("output_dir" in p for p in per_notebook.values()):
        raise BertologyError("output_dir is set by the harness; it cannot be passed as a parameter")
    run_name = run_name or default_run_name()
    if not _RUN_NAME.fullmatch(run_name):
        raise BertologyError(
            f"bad run name {run_name!r}: use letters, digits, '_', '.' and '-', not starting with '.' or '-'"
        )
    _check_kernel(kernel_name)

    if int(jobs) < 1:
        raise BertologyError(f"jobs must be at least 1, not {jobs}")
    jobs = min(int(jobs), len(paths))

    root = Path(results_root).expanduser() if results_root is not None else results_dir()
    run_dir = root.resolve() / run_name

    def params_of(path: Path) -> dict:
        return {**per_notebook.get(path.stem, {}), **params}

    later = [path for path in paths if _notebook_metadata(path).get("after_others")]
    first = [path for path in paths if path not in later]
    # each phase starts once the one before has finished: the notebooks that read the others' results come last
    phases = [_longest_first(first, run_dir.parent, params_of) if jobs > 1 else first, later]
    started = _now()
    machine = machine_environment()

    kernels = _Kernels()
    display = RunDisplay(sys.stderr) if progress else None

    def run(path: Path) -> NotebookResult:
        label = f"[{paths.index(path) + 1}/{len(paths)}] {path.stem}"
        if display is not None:
            display.started(path.stem, label, expected_seconds(run_dir.parent, path.stem, params_of(path)))
        result = _run_one(path, run_dir / path.stem, params_of(path), kernel_name, cell_timeout, kernels, display)
        if display is not None:
            display.finished(path.stem, f"{label} {result.status} ({result.duration_s:.1f} s)")
        return result

    def write(done: dict[Path, NotebookResult], **interrupted) -> RunReport:
        results = [done[path] for path in paths if path in done]
        report = RunReport(
            run_name, run_dir, started, _now(), params, results, library_versions(), **interrupted, environment=machine
        )
        atomic_write_text(
            run_dir / RUN_FILE, json.dumps(report.to_dict(), indent=2, sort_keys=True, default=str) + "\n"
        )
        return report

    done: dict[Path, NotebookResult] = {}
    # Notebooks run in worker threads even one at a time: the main thread stays free to take Ctrl-C (on the
    # main thread, nbclient would take SIGINT and SIGTERM over to stop that notebook and go on to the next).
    with (
        display if display is not None else contextlib.nullcontext(),
        _SharedCores(jobs, len(paths)) if jobs > 1 else contextlib.nullcontext() as cores,
        ThreadPoolExecutor(jobs) as pool,
    ):
        futures: dict = {}
        try:
            for phase in phases:
                submitted = {pool.submit(cores.run, run, p) if cores else pool.submit(run, p): p for p in phase}
                futures.update(submitted)
                for future in as_completed(submitted):
                    done[futures[future]] = future.result()
        except KeyboardInterrupt as exc:
            for future in futures:
                future.cancel()
            kernels.stop()
            for future, path in futures.items():
                if not future.cancelled():
                    done[path] = future.result()  # soon: its kernel is gone
            stopped = kernels.stopped or set()
            done = {path: _interrupted(nb) if path.stem in stopped else nb for path, nb in done.items()}
            report = write(
                done,
                interrupted=[p.stem for p in paths if p.stem in stopped],
                not_run=[p.stem for p in paths if p not in done],
            )
            raise RunInterrupted(report) from exc
    return write(done)


class RunInterrupted(KeyboardInterrupt):
    """A run stopped by Ctrl-C (or SIGTERM, under ``bertology run``); ``report`` is what its run.json now says."""

    def __init__(self, report: RunReport) -> None:
        super().__init__(f"run {report.run_name} interrupted")
        self.report = report


def _interrupted(result: NotebookResult) -> NotebookResult:
    error = {"cell_index": None, "exec_count": None, "ename": "KeyboardInterrupt", "evalue": "the run was interrupted"}
    return replace(result, status="failed", error=error)


class _Kernels:
    """The kernels of a run's notebooks, so that an interrupted run can stop them: papermill stops a kernel only
    when its notebook's call returns, and until then the notebook runs on."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running: dict = {}  # a kernel's provisioner -> the notebook's stem
        self.stopped: set[str] | None = None  # after stop(): the notebooks whose kernels it killed

    def manager_class(self, stem: str) -> type:
        """nbclient's default kernel manager, reporting when the kernel of notebook ``stem`` starts and ends."""
        from jupyter_client import AsyncKernelManager

        kernels = self

        # jupyter_client types these as KernelManager's synchronous methods; AsyncKernelManager's are coroutines
        class Manager(AsyncKernelManager):
            async def start_kernel(self, **kw) -> None:  # type: ignore[override]
                await super().start_kernel(**kw)
                kernels.started(self.provisioner, stem)

            async def cleanup_resources(self, restart: bool = False) -> None:  # type: ignore[override]
                kernels.ended(self.provisioner)
                await super().cleanup_resources(restart=restart)

        return Manager

    def started(self, provisioner, stem: str) -> None:
        with self.lock:
            self.running[provisioner] = stem
            if self.stopped is not None:  # it started after stop(): it must not run either
                self._kill(provisioner)

    def ended(self, provisioner) -> None:
        with self.lock:
            self.running.pop(provisioner, None)

    def stop(self) -> None:
        """Kill the kernels running now and any that starts from now on."""
        with self.lock:
            self.stopped = set()
            for provisioner in self.running:
                self._kill(provisioner)

    def _kill(self, provisioner) -> None:
        assert self.stopped is not None
        self.stopped.add(self.running[provisioner])
        process = getattr(provisioner, "process", None)
        if process is not None and process.returncode is None:  # not reaped yet: its group id is still its own
            with contextlib.suppress(OSError):
                # the kernel leads its own process group: this stops what it started too; no half-written
                # cache entry is left behind (core.files)
                os.killpg(provisioner.pgid, signal.SIGKILL)


def _longest_first(paths: list[Path], results_root: Path, parameters_of: Callable[[Path], Mapping]) -> list[Path]:
    """``paths``, longest first: by how long the latest run under ``results_root`` with the same parameters
    took (:func:`~bertology_utils.run.display.expected_seconds`, the estimate the progress lines show), else
    by the ``typical_seconds`` their metadata states (``{"bertology": {"typical_seconds": 600}}``);
    notebooks known by neither go first, in the order given."""

    def expected(path: Path) -> float:
        seconds = expected_seconds(results_root, path.stem, parameters_of(path))
        if seconds is not None:
            return seconds
        try:
            return float(_notebook_metadata(path)["typical_seconds"])
        except (KeyError, TypeError, ValueError):
            return math.inf

    return sorted(paths, key=lambda path: -expected(path))


def _notebook_metadata(path: Path) -> dict:
    """The ``bertology`` entry of a notebook's metadata (``typical_seconds``, ``after_others``); {} when none."""
    try:
        found = json.loads(path.read_text(encoding="utf-8"))["metadata"]["bertology"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return found if isinstance(found, dict) else {}


class _SharedCores:
    """Kernels side by side share the cores: each starts with its share (``threads_per_job(jobs)``); once no
    notebook is left to start, the kernels still running split the cores of those that have finished,
    through a budget file they follow (:func:`bertology_utils.core.threads.follow_budget`)."""

    def __init__(self, jobs: int, notebooks: int) -> None:
        self.jobs, self.waiting, self.running = jobs, notebooks, 0
        self.lock = threading.Lock()

    def __enter__(self) -> _SharedCores:
        self.folder = Path(tempfile.mkdtemp(prefix="bertology-threads-"))
        self.file = self.folder / "threads"
        names = (*threads.THREAD_VARIABLES, threads.BUDGET_FILE_ENV)
        self.before = {name: os.environ.get(name) for name in names}
        share = threads.threads_per_job(self.jobs)
        threads.write_budget(self.file, share)
        # kernels inherit this process's environment when they start
        os.environ.update(
            {**dict.fromkeys(threads.THREAD_VARIABLES, str(share)), threads.BUDGET_FILE_ENV: str(self.file)}
        )
        return self

    def __exit__(self, *_exc) -> None:
        for name, value in self.before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(self.folder, ignore_errors=True)

    def run(self, run: Callable[[Path], NotebookResult], path: Path) -> NotebookResult:
        with self.lock:
            self.waiting -= 1
            self.running += 1
        try:
            return run(path)
        finally:
            with self.lock:
                self.running -= 1
                if not self.waiting and self.running:
                    threads.write_budget(self.file, threads.threads_per_job(self.running))


def _run_one(
    notebook: Path,
    folder: Path,
    params: dict,
    kernel_name: str,
    cell_timeout: int | None,
    kernels: _Kernels,
    display: RunDisplay | None = None,
) -> NotebookResult:
    import nbformat
    import papermill  # here, not at the top: notebooks import this module and need no papermill

    atomic_remove(folder)  # same run name again: this notebook's results start afresh
    folder.mkdir(parents=True)
    executed = folder / f"{notebook.stem}.ipynb"
    error = None
    hooks = {}
    if display is not None:
        try:
            cells = nbformat.read(notebook, as_version=4).cells
        except Exception:  # unreadable: no sections to show, and papermill's error is recorded below
            cells = []
        sections, tags = notebook_sections(cells), _cell_tags(cells)

        def on_cell_execute(cell, cell_index: int, **_) -> None:
            index = _source_index(tags, cell_index)
            if index is not None and index < len(sections):
                display.section(notebook.stem, sections[index])

        hooks["on_cell_execute"] = on_cell_execute
    started = _now()
    start = time.perf_counter()
    try:
        papermill.execute_notebook(
            notebook,
            executed,
            parameters={**params, "output_dir": str(folder)},
            kernel_name=kernel_name,
            language="python",  # so notebooks without kernel metadata run too
            cwd=notebook.parent,
            progress_bar=False,
            log_output=False,
            execution_timeout=cell_timeout,
            config=_kernel_config(),
            kernel_manager_class=kernels.manager_class(notebook.stem),
            **hooks,
        )
    except papermill.PapermillExecutionError as exc:
        error = {
            "cell_index": _source_cell_index(notebook, exc.cell_index),
            "exec_count": exc.exec_count,
            "ename": exc.ename,
            "evalue": exc.evalue,
        }
    except Exception as exc:  # a cell timeout, a dead kernel, an unreadable notebook: record it, run the rest
        error = {"cell_index": None, "exec_count": None, "ename": type(exc).__name__, "evalue": str(exc)}
    duration = time.perf_counter() - start
    metrics = folder / METRICS_FILE
    skipped = load_skipped(folder)
    return NotebookResult(
        name=notebook.stem,
        source=str(notebook),
        status="failed" if error else "skipped" if skipped["everything"] else "ok",
        duration_s=round(duration, 3),
        executed_notebook=str(executed) if executed.exists() else None,
        metrics=str(metrics) if metrics.exists() else None,
        error=error,
        parameters=params,
        skipped=skipped["sections"],
        started=started,
    )


def _source_cell_index(notebook: Path, executed_index: int) -> int | None:
    """Map papermill's cell index (in the parameterized notebook) back to the source notebook.

    papermill inserts its injected-parameters cell right after the cell tagged ``parameters``
    (at the top when there is none), or replaces an injected cell the notebook already has.
    None when the injected cell itself failed.
    """
    import nbformat

    return _source_index(_cell_tags(nbformat.read(notebook, as_version=4).cells), executed_index)


def _cell_tags(cells) -> list[list[str]]:
    return [cell.metadata.get("tags", []) for cell in cells]


def _source_index(tags: list[list[str]], executed_index: int) -> int | None:
    """:func:`_source_cell_index` from the source notebook's cell tags."""
    if any("injected-parameters" in t for t in tags):
        return executed_index
    injected_at = next((i + 1 for i, t in enumerate(tags) if "parameters" in t), 0)
    if executed_index == injected_at:
        return None
    return executed_index - 1 if executed_index > injected_at else executed_index


def _kernel_config():
    """Encrypt the kernel's traffic where pyzmq can (ipykernel warns on every start otherwise)."""
    import zmq
    from traitlets.config import Config

    return Config({"KernelManager": {"transport_encryption": "auto"}}) if zmq.has("curve") else Config()


def _check_kernel(kernel_name: str) -> None:
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    manager = KernelSpecManager()
    try:
        manager.get_kernel_spec(kernel_name)
    except NoSuchKernel:
        available = ", ".join(sorted(manager.find_kernel_specs())) or "none"
        raise BertologyError(f"no Jupyter kernel named {kernel_name!r}; available kernels: {available}") from None


def _now() -> str:
    return dt.datetime.now().astimezone().isoformat(timespec="seconds")


# --------------------------------------------------------------------------- inside notebooks


class StageTimes(dict):
    """Wall-clock seconds a notebook spends per ``(task, stage)``, added up over every ``with`` block::

        seconds = StageTimes()
        with seconds.timed("SST-2", "fine-tune"):
            ...
        seconds.of("SST-2")   # {"fine-tune": 47.1}
        seconds.total()

    A dict of ``(task, stage) -> seconds``, so it records as metrics like any mapping.
    """

    @contextlib.contextmanager
    def timed(self, task: str, stage: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self[(task, stage)] = self.get((task, stage), 0.0) + time.perf_counter() - start

    def of(self, task: str) -> dict[str, float]:
        """Seconds per stage of one task, in the order the stages first ran."""
        return {stage: s for (t, stage), s in self.items() if t == task}

    def total(self) -> float:
        return float(sum(self.values()))

    def flat(self) -> dict[str, float]:
        """``{"task: stage": seconds}``, in the order the stages first ran: one mapping for a table or a metric."""
        return {f"{task}: {stage}": s for (task, stage), s in self.items()}


def record_metrics(
    metrics: Mapping | None = None,
    output_dir: str | os.PathLike | None = None,
    *,
    declared: MetricRegistry | None = REGISTRY,
    **more,
) -> dict:
    """Merge metrics into ``<output_dir>/metrics.json`` and return everything recorded there.

    Existing keys are kept unless given again. numpy and torch values, pandas objects and
    paths become plain JSON; NaN and infinities become null. ``output_dir=None`` writes to
    ``results/interactive/`` (a notebook run by hand). Every key must be declared in ``declared``
    (:data:`bertology_utils.papers.metrics.REGISTRY`: its kind decides how a regression check compares
    it); an undeclared one raises UndeclaredMetricError before anything is written. ``declared=None``
    records without that check (a notebook of your own, whose keys no check reads).
    """
    new = {**(metrics or {}), **more}
    bad_keys = [k for k in new if not isinstance(k, str)]
    if bad_keys:
        raise TypeError(f"metric names must be strings, got {bad_keys!r}")
    if declared is not None:
        declared.check(new)
    path = _output_folder(output_dir) / METRICS_FILE
    recorded = read_json(path) if path.exists() else {}
    recorded.update(_to_json(new))
    atomic_write_text(path, json.dumps(recorded, indent=2, sort_keys=True, allow_nan=False) + "\n")
    return recorded


def record_claims(
    claims: Iterable[Claim],
    prefix: str,
    output_dir: str | os.PathLike | None = None,
    *,
    declared: MetricRegistry | None = REGISTRY,
) -> list[Claim]:
    """Record checked claims: into ``<output_dir>/claims.json`` and, as metrics, :meth:`Claim.to_metrics`.

    ``prefix`` names the metrics (``"tour.claims"`` gives ``tour.claims.<id>.verdict``) and keys each
    claim in the file, so a claim recorded again under the same prefix and id replaces the old
    one. Returns every claim recorded in the folder, in order.
    """
    from bertology_utils.papers.claims import Claim

    claims = list(claims)
    keys = [f"{prefix}.{c.id}" for c in claims]
    if len(set(keys)) != len(keys):
        raise BertologyError(
            f"claims recorded under {prefix!r} share an id: {sorted(k for k in keys if keys.count(k) > 1)}"
        )
    values = {k: v for c in claims for k, v in c.to_metrics(prefix).items()}
    if declared is not None:
        declared.check(values)  # before claims.json is written, so that it never holds a claim metrics.json lacks
    path = _output_folder(output_dir) / CLAIMS_FILE
    recorded = {entry["key"]: entry for entry in (read_json(path).get("claims", []) if path.exists() else [])}
    recorded.update({key: {"key": key, **_to_json(c.to_dict())} for key, c in zip(keys, claims)})
    atomic_write_text(path, json.dumps({"claims": list(recorded.values())}, indent=2, allow_nan=False) + "\n")
    record_metrics(values, output_dir=output_dir, declared=None)
    return [Claim.from_dict(entry) for entry in recorded.values()]


def load_claims(notebook_dir: str | os.PathLike) -> list[Claim]:
    """The claims a notebook recorded in ``<notebook_dir>/claims.json`` (none without the file)."""
    from bertology_utils.papers.claims import Claim

    path = Path(notebook_dir) / CLAIMS_FILE
    if not path.is_file():
        return []
    entries = read_json(path).get("claims")
    if not isinstance(entries, list) or not all(isinstance(e, dict) and "key" in e for e in entries):
        raise DataFormatError("'claims' must be a list of objects with a 'key'", path)
    try:
        return [Claim.from_dict(entry) for entry in entries]
    except (TypeError, ValueError) as exc:
        raise DataFormatError(f"not a claim ({exc})", path) from None


def record_skipped(
    section: str, reason: str, output_dir: str | os.PathLike | None = None, *, everything: bool = False
) -> dict:
    """Record that ``section`` of a notebook is not computed, and why (its data is missing...).

    ``section`` is dotted like a metric (``"pruning.RTE"``, ``"coref"``); its first part names the
    metric ``<topic>.skipped``, the list of the topic's skipped sections. ``everything=True``
    says the notebook computed nothing, so the harness gives it the status ``skipped``. Prints
    the one line a reader sees and returns what ``skipped.json`` now holds.
    """
    if not section or not reason:
        raise BertologyError("record_skipped needs a section name and a reason")
    print(f"skipped {section}: {reason}")
    folder = _output_folder(output_dir)
    recorded = load_skipped(folder)
    sections = [s for s in recorded["sections"] if s["section"] != section] + [{"section": section, "reason": reason}]
    recorded = {"everything": recorded["everything"] or everything, "sections": sections}
    atomic_write_text(folder / SKIPPED_FILE, json.dumps(recorded, indent=2) + "\n")
    topic = section.split(".")[0]
    names = [s["section"] for s in sections if s["section"].split(".")[0] == topic]
    record_metrics({f"{topic}.skipped": names}, output_dir=folder)
    return recorded


def load_skipped(notebook_dir: str | os.PathLike) -> dict:
    """What a notebook recorded with :func:`record_skipped`: ``{"everything": bool, "sections": [...]}``."""
    path = Path(notebook_dir) / SKIPPED_FILE
    if not path.is_file():
        return {"everything": False, "sections": []}
    data = read_json(path)
    sections = data.get("sections")
    if not isinstance(sections, list) or not all(
        isinstance(s, dict) and {"section", "reason"} <= set(s) for s in sections
    ):
        raise DataFormatError("'sections' must be a list of objects with a 'section' and a 'reason'", path)
    return {"everything": bool(data.get("everything")), "sections": sections}


def save_figure(
    fig,
    name: str,
    output_dir: str | os.PathLike | None = None,
    formats: Iterable[str] | str = FIGURE_FORMATS,
    dpi: int = 150,
) -> list[Path]:
    """Save a matplotlib figure as ``<output_dir>/figures/<name>.<format>`` for each format (png, svg, pdf).

    By default a PNG (for the report and the decks) and an SVG beside it, with its text as text (for
    ``bertology slides --figures``). ``name`` is reduced to letters, digits, ``_``, ``.`` and ``-``;
    ``output_dir=None`` as in ``record_metrics``. Returns the written paths.
    """
    from bertology_utils.core.figures import save_image  # matplotlib: not for the command line's start

    stem = _UNSAFE_CHARS.sub("_", name).strip(".")
    if not stem:
        raise BertologyError(f"figure name {name!r} has no usable characters")
    folder = _output_folder(output_dir) / "figures"
    folder.mkdir(parents=True, exist_ok=True)
    formats = [formats] if isinstance(formats, str) else formats
    return [save_image(fig, folder / f"{stem}.{fmt.lstrip('.')}", dpi=dpi) for fmt in formats]


def find_run(run_dir: str | os.PathLike) -> Path:
    """A run's folder: ``run_dir`` itself, or a run name under results_dir()."""
    folder = Path(run_dir).expanduser()
    if not folder.is_dir() and (results_dir() / folder).is_dir():
        folder = results_dir() / folder
    if not folder.is_dir():
        raise BertologyError(f"no run folder {run_dir} (looked in {Path.cwd()} and {results_dir()})")
    return folder


#: Status of a notebook folder with results that run.json does not list (a run without run.json, a copied folder).
UNLISTED = "not in run.json"


def run_entries(run_dir: str | os.PathLike) -> list[dict]:
    """The notebooks of a run, sorted by name: run.json's entries (name, status, parameters, error...),
    plus each notebook folder with results that run.json does not list, with status :data:`UNLISTED`."""
    folder = find_run(run_dir)
    path = folder / RUN_FILE
    entries = read_json(path).get("notebooks", []) if path.is_file() else []
    if not isinstance(entries, list) or not all(isinstance(nb, dict) and "name" in nb for nb in entries):
        raise DataFormatError("'notebooks' must be a list of objects with a 'name'", path)
    entries = [dict(nb) for nb in entries]
    listed = {nb["name"] for nb in entries}
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and p.name not in listed):
        if (sub / f"{sub.name}.ipynb").is_file() or (sub / METRICS_FILE).is_file():
            entries.append({"name": sub.name, "status": UNLISTED})
    return sorted(entries, key=lambda nb: nb["name"])


def run_versions(run_dir: str | os.PathLike) -> dict | None:
    """What a run was made with (``library_versions()`` as run.json records it); None without run.json."""
    path = find_run(run_dir) / RUN_FILE
    versions = read_json(path).get("versions") if path.is_file() else None
    if versions is not None and not isinstance(versions, dict):
        raise DataFormatError("'versions' must be an object: library -> version", path)
    return versions


def run_environment(run_dir: str | os.PathLike) -> dict | None:
    """The machine a run ran on (run.json's ``environment``); None for a run that did not record it."""
    path = find_run(run_dir) / RUN_FILE
    environment = read_json(path).get("environment") if path.is_file() else None
    return environment if isinstance(environment, dict) and environment else None


def load_metrics(run_dir: str | os.PathLike) -> dict[str, dict]:
    """Metrics of a run, notebook stem -> metrics; ``run_dir`` is a folder or a run name under results_dir()."""
    return {p.parent.name: read_json(p) for p in sorted(find_run(run_dir).glob(f"*/{METRICS_FILE}"))}


def _output_folder(output_dir: str | os.PathLike | None) -> Path:
    folder = Path(output_dir).expanduser() if output_dir is not None else results_dir() / INTERACTIVE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _to_json(value):
    """A plain-JSON copy of ``value``."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_json(v) for v in value]
    if hasattr(value, "to_dict"):  # pandas Series and DataFrame: keep the index
        return _to_json(value.to_dict())
    if hasattr(value, "tolist"):  # numpy and torch arrays and scalars
        return _to_json(value.tolist())
    raise TypeError(f"cannot record a {type(value).__name__} as a metric; use numbers, strings, lists or dicts")


def read_json(path: Path) -> dict:
    """A JSON object from ``path``; anything else raises DataFormatError naming the file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataFormatError(f"not valid JSON ({exc})", path) from None
    if not isinstance(data, dict):
        raise DataFormatError("expected a JSON object", path)
    return data
