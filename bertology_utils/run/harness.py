"""Run the notebooks with papermill, each into its own results folder.

Notebook convention
-------------------
Every notebook lives in ``notebooks/`` and is named ``NN_topic.ipynb`` (``00_tour.ipynb``).
It has exactly one code cell tagged ``parameters`` that sets at least::

    output_dir = None   # where results go; the harness injects the notebook's results folder
    model_name = None   # None means the default model

plus the notebook's own knobs (``n_sentences = 500``...). As papermill does, the harness adds a
cell after it that sets ``output_dir`` (absolute path of the notebook's results folder) and the
user's parameters. The notebook reports what it found with :mod:`bertology_utils.run.record`
(metrics, claims, skipped sections, figures), into the layout :mod:`bertology_utils.run.results`
describes. A run's notebooks are ``ok``, ``skipped`` (a notebook that recorded that it computed
nothing) or ``failed``, and only ``failed`` makes ``bertology run`` exit 1. Running a run name again
replaces the folders of the notebooks it runs.

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
from pathlib import Path
from typing import TYPE_CHECKING

from bertology_utils.core import library_versions, machine_environment, settings, threads
from bertology_utils.core.allocator import allocator_environment
from bertology_utils.core.errors import BertologyError
from bertology_utils.core.files import atomic_remove, atomic_write_text
from bertology_utils.run.display import RunDisplay, expected_seconds, notebook_sections
from bertology_utils.run.results import METRICS_FILE, RUN_FILE, default_run_name, load_skipped, results_dir

if TYPE_CHECKING:
    from jupyter_client.provisioning import KernelProvisionerBase
    from nbformat import NotebookNode
    from traitlets.config import Config

__all__ = [
    "DEFAULT_NOTEBOOKS_DIR",
    "list_notebooks",
    "resolve_notebooks",
    "NotebookResult",
    "RunReport",
    "RunInterrupted",
    "run_notebooks",
]

#: Where ``bertology run`` looks for notebooks.
DEFAULT_NOTEBOOKS_DIR = settings.PROJECT_ROOT / "notebooks"

_NOTEBOOK_NAME = re.compile(r"(\d+)_.+\.ipynb")
_RUN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


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


@dataclass
class NotebookResult:
    """How one notebook ran."""

    name: str  # the notebook's stem, also its results folder
    source: str  # the notebook that was run
    status: str  # one of results.STATUSES
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
    #: Notebooks run at a time (``--jobs``): with the machine, what the run's wall time depends on.
    jobs: int = 1

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

    def write(done: dict[Path, NotebookResult], **interrupted: list[str]) -> RunReport:
        results = [done[path] for path in paths if path in done]
        report = RunReport(
            run_name,
            run_dir,
            started,
            _now(),
            params,
            results,
            library_versions(),
            **interrupted,
            environment=machine,
            jobs=jobs,
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
        allocator_environment(),  # the kernels keep freed memory for reuse (core.allocator)
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
        self.running: dict[KernelProvisionerBase | None, str] = {}  # a kernel's provisioner -> the notebook's stem
        self.stopped: set[str] | None = None  # after stop(): the notebooks whose kernels it killed

    def manager_class(self, stem: str) -> type:
        """nbclient's default kernel manager, reporting when the kernel of notebook ``stem`` starts and ends.

        On POSIX it talks to its kernel over Unix sockets in a folder of its own (zmq's ``ipc`` transport): TCP
        ports are picked free and taken later by the kernel, and another process may take one in between, which
        failed a notebook with "Address already in use" when kernels started side by side.
        """
        from jupyter_client import AsyncKernelManager
        from traitlets import CaselessStrEnum, default

        kernels = self

        # jupyter_client types these as KernelManager's synchronous methods; AsyncKernelManager's are coroutines
        class Manager(AsyncKernelManager):
            transport = CaselessStrEnum(["tcp", "ipc"], default_value="ipc" if os.name == "posix" else "tcp")
            sockets_dir: str | None = None

            @default("ip")
            def _ip_default(self) -> str:
                if self.transport != "ipc":
                    return super()._ip_default()
                # the sockets' path prefix: ipc's default is one name in the working folder, shared by all kernels
                self.sockets_dir = tempfile.mkdtemp(prefix="bertology-kernel-")
                return os.path.join(self.sockets_dir, "k")

            async def start_kernel(self, **kw: object) -> None:  # type: ignore[override]
                await super().start_kernel(**kw)
                kernels.started(self.provisioner, stem)

            async def cleanup_resources(self, restart: bool = False) -> None:  # type: ignore[override]
                kernels.ended(self.provisioner)
                await super().cleanup_resources(restart=restart)
                if self.sockets_dir is not None and not restart:
                    shutil.rmtree(self.sockets_dir, ignore_errors=True)

        return Manager

    def started(self, provisioner: KernelProvisionerBase | None, stem: str) -> None:
        with self.lock:
            self.running[provisioner] = stem
            if self.stopped is not None:  # it started after stop(): it must not run either
                self._kill(provisioner)

    def ended(self, provisioner: KernelProvisionerBase | None) -> None:
        with self.lock:
            self.running.pop(provisioner, None)

    def stop(self) -> None:
        """Kill the kernels running now and any that starts from now on."""
        with self.lock:
            self.stopped = set()
            for provisioner in self.running:
                self._kill(provisioner)

    def _kill(self, provisioner: KernelProvisionerBase | None) -> None:
        assert self.stopped is not None
        self.stopped.add(self.running[provisioner])
        # a local kernel's process and group (LocalProvisioner's; the base class has neither)
        process, pgid = getattr(provisioner, "process", None), getattr(provisioner, "pgid", None)
        if process is not None and process.returncode is None and pgid is not None:  # not reaped: the group is its own
            with contextlib.suppress(OSError):
                # the kernel leads its own process group: this stops what it started too; no half-written
                # cache entry is left behind (core.files)
                os.killpg(pgid, signal.SIGKILL)


def _longest_first(paths: list[Path], results_root: Path, parameters_of: Callable[[Path], Mapping]) -> list[Path]:
    """``paths``, longest first by :func:`~bertology_utils.run.display.expected_seconds`: the time the latest run
    under ``results_root`` with the same parameters took, else the ``typical_seconds`` their metadata states
    (``{"bertology": {"typical_seconds": 600}}``); notebooks known by neither go first, in the order given."""

    def expected(path: Path) -> float:
        seconds = expected_seconds(results_root, path.stem, parameters_of(path), stated=_stated_seconds(path))
        return math.inf if seconds is None else seconds

    return sorted(paths, key=lambda path: -expected(path))


def _stated_seconds(path: Path) -> float | None:
    """The ``typical_seconds`` a notebook's metadata states; None when it states none."""
    try:
        return float(_notebook_metadata(path)["typical_seconds"])
    except (KeyError, TypeError, ValueError):
        return None


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
        share = threads.threads_per_job(self.jobs)
        threads.write_budget(self.file, share)
        # kernels inherit this process's environment when they start
        self.environment = settings.environment(
            {**dict.fromkeys(threads.THREAD_VARIABLES, str(share)), threads.BUDGET_FILE_ENV: str(self.file)}
        )
        self.environment.__enter__()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.environment.__exit__(None, None, None)
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

        def on_cell_execute(cell: NotebookNode, cell_index: int, **_: object) -> None:
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


def _cell_tags(cells: list[NotebookNode]) -> list[list[str]]:
    return [cell.metadata.get("tags", []) for cell in cells]


def _source_index(tags: list[list[str]], executed_index: int) -> int | None:
    """:func:`_source_cell_index` from the source notebook's cell tags."""
    if any("injected-parameters" in t for t in tags):
        return executed_index
    injected_at = next((i + 1 for i, t in enumerate(tags) if "parameters" in t), 0)
    if executed_index == injected_at:
        return None
    return executed_index - 1 if executed_index > injected_at else executed_index


def _kernel_config() -> Config:
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
