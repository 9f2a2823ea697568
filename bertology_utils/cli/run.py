"""``bertology run``: execute notebooks with papermill and record their metrics and figures."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

from bertology_utils.cli._command import EXIT_FAILED, EXIT_OK, Command, interrupting_signal, sigterm_as_ctrl_c
from bertology_utils.cli.check import check_and_print
from bertology_utils.core import settings
from bertology_utils.core.errors import BertologyError
from bertology_utils.run import harness, perturb, results

__all__ = ["COMMAND", "parse_parameter_value", "absolute_paths"]

RUN_EPILOG = """\
examples:
  bertology run                        run every notebook into results/<date-time>/
  bertology run --run-name default     ... into results/default/ (replacing what it held)
  bertology run 00 02_heads            run notebooks by number or name
  bertology run 00 -p n_sentences 8 -p model_name bert-base-uncased
  bertology run --list                 list the notebooks
  bertology run -j 2                   two notebooks at a time (what `make run` does)

regression checks (a reference folder holds <notebook>.json; see bertology_utils.run.regression):
  bertology run --check my-refs/       compare each notebook's metrics with my-refs/<notebook>.json
                                       under the tolerances stated there; print the diff and
                                       write <results>/<run-name>/check.json
  bertology run --update-reference my-refs/
                                       (re)write my-refs/ from this run, on purpose: values and
                                       parameters change, stated tolerances are kept
  bertology check RUN REFERENCE_DIR    check a finished run
  make refresh-references              the test suite's references (tests/references/small)

While notebooks run, each has a status line: its section (the markdown heading of the cell it runs),
the time since it started and, when an earlier run under the results root ran it with the same
parameters, the time that run took. On a terminal the lines are redrawn in place; in a log they come
every minute. The notebooks show a progress bar on every long step; -p progress False hides them.

-p values are read like papermill's: 8 is an int, 0.5 a float, True/False/None,
JSON such as '[1, 2]' or '{"a": 1}'; anything else is a string. Notebooks run in notebooks/, so
a string (also inside JSON) naming an existing file or folder here is made absolute.
Your own data, for example:
  bertology run 03 -p treebank my_treebank/ -p n_sentences None
  bertology run 04 -p treebank '{"train": "a.conllu", "dev": "b.conllu", "test": "c.conllu"}'
  bertology run 06 -p tasks '[{"path": "reviews/", "text": "review", "label": "stars"}]' A --params-file is a JSON
object, notebook stem -> {parameter: value} ('-' reads it from stdin); -p values win.
Exit status: 0 no notebook failed (each ran, or recorded what it skipped for missing data) and
--check passed, 1 a notebook failed (see the summary
and <results>/<run-name>/run.json) or --check found a metric off or missing, 2 usage error
or a malformed reference or parameters file, 130 interrupted by Ctrl-C, 143 by SIGTERM: the
kernels are stopped, nothing is left half written, and the same command (with the run name it
prints) runs the notebooks again, reading back what they had cached.
"""


def parse_parameter_value(text: str) -> object:
    """Read a ``-p`` value: True/False/None, int or float as papermill's CLI does, then JSON, else the string.

    (papermill keeps its own version, ``papermill.cli._resolve_type``, private and without JSON.)
    """
    keywords = {"True": True, "False": False, "None": None}
    if text in keywords:
        return keywords[text]
    for convert in (int, float, json.loads):
        try:
            return convert(text)
        except ValueError:
            pass
    return text


def absolute_paths(value: object) -> object:
    """``value`` with every string that names an existing file or folder (relative to the current
    directory) made absolute, inside lists and dicts too: notebooks run in their own folder."""
    if isinstance(value, str):
        path = Path(value).expanduser()
        return str(path.resolve()) if value and not path.is_absolute() and path.exists() else value
    if isinstance(value, list):
        return [absolute_paths(v) for v in value]
    if isinstance(value, dict):
        return {k: absolute_paths(v) for k, v in value.items()}
    return value


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "notebooks",
        nargs="*",
        metavar="NOTEBOOK",
        help="a notebook path, file name, stem (00_tour) or number (00); default: every notebook",
    )
    parser.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        default=[],
        dest="parameters",
        metavar=("KEY", "VALUE"),
        help="set a notebook parameter; repeatable",
    )
    parser.add_argument(
        "--run-name",
        metavar="NAME",
        help="results go to RESULTS_DIR/NAME/ (default: the local date-time, e.g. 20261121-235959)",
    )
    parser.add_argument(
        "--results-dir",
        type=Path,
        metavar="DIR",
        help=f"results root (default: ${results.RESULTS_DIR_ENV}, else results/ in the project)",
    )
    parser.add_argument("--kernel", default="python3", metavar="NAME", help="Jupyter kernel (default: %(default)s)")
    parser.add_argument(
        "--cell-timeout", type=int, metavar="SECONDS", help="fail a cell that runs longer than this (default: no limit)"
    )
    parser.add_argument(
        "--jobs",
        "-j",
        type=int,
        default=1,
        metavar="N",
        help="notebooks run at a time, each kernel with cores/N threads (default: 1)",
    )
    parser.add_argument("--list", action="store_true", help="list the notebooks and exit")
    parser.add_argument(
        "--params-file",
        type=Path,
        metavar="FILE",
        help="parameters per notebook: a JSON object, notebook stem -> {parameter: value}",
    )
    reference = parser.add_mutually_exclusive_group()
    reference.add_argument(
        "--check",
        type=Path,
        metavar="REFERENCE_DIR",
        help="compare the metrics with REFERENCE_DIR/<notebook>.json; exit 1 on a regression",
    )
    reference.add_argument(
        "--update-reference",
        type=Path,
        metavar="REFERENCE_DIR",
        help="write the metrics to REFERENCE_DIR/<notebook>.json, keeping stated tolerances",
    )
    parser.add_argument(
        "--perturb",
        action="store_true",
        help="with --update-reference: run the notebooks again under each perturbation this machine offers "
        "(lower CPU instruction sets, one thread) and set every tolerance from how far each metric moved",
    )


def _read_params_file(path: Path, notebooks: list[Path]) -> dict[str, dict]:
    """Read a --params-file: notebook stem -> parameters, for stems of notebooks/ or of ``notebooks``."""
    from bertology_utils.core.errors import DataFormatError

    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BertologyError(f"--params-file: cannot read {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataFormatError(f"not valid JSON ({exc})", path) from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise DataFormatError("expected a JSON object: notebook stem -> {parameter: value}", path)
    known = {nb.stem for nb in [*harness.list_notebooks(), *notebooks]}
    unknown = sorted(set(data) - known)
    if unknown:
        raise DataFormatError(f"no notebook named {', '.join(unknown)}; notebooks: {', '.join(sorted(known))}", path)
    bad = sorted(f"{stem}: {key}" for stem, params in data.items() for key in params if not key.isidentifier())
    if bad:
        raise DataFormatError(f"parameter names must be Python identifiers: {', '.join(bad)}", path)
    return data


def _update_reference(run_dir: Path, reference_dir: Path, perturbed: dict[str, Path] | None = None) -> None:
    from bertology_utils.run.refresh import update_references

    verdicts_only = [p.name for p in perturb.standard_perturbations() if not p.numbers]
    refresh = update_references(run_dir, reference_dir, perturbed, verdicts_only)
    print(refresh.changes.report(heading="the old references in"))
    if refresh.unsettled:
        print("moved under a perturbation though their kind says they cannot (look into each):")
        print("\n".join(f"  {line}" for line in refresh.unsettled))
    for stem in refresh.not_written:
        print(f"not updated: {stem} failed; its reference is left as it was")
    print(
        f"wrote {len(refresh.written)} reference{'s' * (len(refresh.written) != 1)} in {reference_dir}"
        + ("; review them with git diff" if refresh.written else "")
    )


def _interrupted(args: argparse.Namespace, exc: KeyboardInterrupt) -> int:
    """Say what an interrupted run did and how to resume it; the exit status, 128 + the signal's number."""
    signum = interrupting_signal(exc)
    name = signal.Signals(signum).name
    if not isinstance(exc, harness.RunInterrupted):
        print(f"bertology run: interrupted by {name}", file=sys.stderr)
        return 128 + signum
    report = exc.report
    if report.notebooks:
        print(report.summary())
    stopped = f" while {', '.join(report.interrupted)} ran" if report.interrupted else ""
    not_run = f"; not run: {', '.join(report.not_run)}" if report.not_run else ""
    again = "" if args.run_name else f" with --run-name {report.run_name}"
    print(
        f"bertology run: interrupted by {name}{stopped}{not_run}. What finished is in {report.run_dir} "
        "(run.json); every cache entry written so far is whole and kept.\n"
        f"To resume, run the same command again{again}: its notebooks run again and read back what they "
        "cached (fine-tuned checkpoints, fitted probes, stored results, attention stores) instead of computing it.",
        file=sys.stderr,
    )
    return 128 + signum


def _handle(args: argparse.Namespace) -> int:
    with sigterm_as_ctrl_c():
        try:
            return _run(args)
        except KeyboardInterrupt as exc:
            return _interrupted(args, exc)


def _run(args: argparse.Namespace) -> int:
    if args.list:
        notebooks = harness.list_notebooks()
        if not notebooks:
            print(f"no notebooks in {harness.DEFAULT_NOTEBOOKS_DIR}", file=sys.stderr)
        for nb in notebooks:
            print(nb.stem)
        return EXIT_OK

    parameters = {}
    for key, value in args.parameters:
        if not key.isidentifier():
            raise BertologyError(f"-p {key}: a parameter name must be a Python identifier")
        parameters[key] = absolute_paths(parse_parameter_value(value))
    notebooks = harness.resolve_notebooks(args.notebooks) if args.notebooks else harness.list_notebooks()
    if not notebooks:
        raise BertologyError(f"no notebooks in {harness.DEFAULT_NOTEBOOKS_DIR}")
    per_notebook = _read_params_file(args.params_file, notebooks) if args.params_file else None
    # A malformed reference stops the run before it starts, not after an hour of notebooks.
    from bertology_utils.run import regression

    references = regression.read_references(args.check) if args.check else None
    if args.update_reference:
        regression.read_references(args.update_reference, allow_empty=True)
    if args.perturb and not args.update_reference:
        raise BertologyError("--perturb measures tolerances for --update-reference; give that too")
    report = harness.run_notebooks(
        notebooks,
        run_name=args.run_name,
        parameters=parameters,
        notebook_parameters=per_notebook,
        results_root=args.results_dir,
        kernel_name=args.kernel,
        cell_timeout=args.cell_timeout,
        jobs=args.jobs,
    )
    print(report.summary())
    if any(nb.skipped for nb in report.notebooks):
        print(
            "Sections above were skipped because their data is missing: each line says how to get it "
            f"(`bertology info` lists every data set and where it was looked for; ${settings.DATA_DIR_ENV} points "
            "to a data folder)."
        )
    print(f"results: {report.run_dir}")
    status = EXIT_OK if report.ok else EXIT_FAILED
    if args.check:
        status = max(status, check_and_print(report.run_dir, args.check, references))
    if args.update_reference:
        perturbed = _perturbed_runs(args, notebooks, parameters, per_notebook, report) if args.perturb else None
        if perturbed is not None and len(perturbed) < len(perturb.standard_perturbations()):
            print("not updated: a perturbed run failed (see above); the references are left as they were")
            return EXIT_FAILED
        _update_reference(report.run_dir, args.update_reference, perturbed)
    return status


def _perturbed_runs(
    args: argparse.Namespace,
    notebooks: list[Path],
    parameters: dict[str, object],
    per_notebook: dict[str, dict] | None,
    report: harness.RunReport,
) -> dict[str, Path]:
    """The same notebooks again under each perturbation this machine offers; the runs that did not fail."""
    runs = {}
    for perturbation in perturb.standard_perturbations():
        print(f"perturbed run: {perturbation.name}: {perturbation.why}")
        perturbed = perturb.run_perturbed(
            perturbation,
            notebooks,
            run_name=report.run_name,
            results_root=args.results_dir,
            parameters=parameters,
            notebook_parameters=per_notebook,
            kernel_name=args.kernel,
            cell_timeout=args.cell_timeout,
        )
        print(perturbed.summary())
        if perturbed.ok:
            runs[perturbation.name] = perturbed.run_dir
    return runs


COMMAND = Command(
    "run", "execute notebooks with papermill and record their metrics and figures", _add_arguments, _handle, RUN_EPILOG
)
