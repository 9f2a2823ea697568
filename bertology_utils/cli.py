"""The ``bertology`` command (also ``python -m bertology_utils``).

Each subcommand is a ``Command``: a name, a one-line help, a function that adds its arguments
to an argparse parser, a handler that returns the exit status, and examples. Adding one means
writing those two functions and listing the Command in ``COMMANDS``.

Exit status: 0 success, 1 the work ran but something failed (a notebook), 2 usage error.
Expected errors (``BertologyError``) print ``bertology: error: ...`` without a traceback.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import __version__, harness
from .errors import BertologyError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


@dataclass(frozen=True)
class Command:
    name: str
    help: str                                               # one line, for `bertology --help`
    add_arguments: Callable[[argparse.ArgumentParser], None]
    handler: Callable[[argparse.Namespace], int]            # returns the exit status
    epilog: str = ""                                        # examples, for `bertology NAME --help`


# --------------------------------------------------------------------------- run

RUN_EPILOG = """\
examples:
  bertology run                        run every notebook into results/<date-time>/
  bertology run --run-name default     ... into results/default/ (replacing what it held)
  bertology run 00 02_heads            run notebooks by number or name
  bertology run 00 -p n_sentences 8 -p model_name bert-base-uncased
  bertology run --list                 list the notebooks

-p values are read like papermill's: 8 is an int, 0.5 a float, True/False/None,
JSON such as '[1, 2]' or '{"a": 1}'; anything else is a string.
Exit status: 0 every notebook ran, 1 a notebook failed (see the summary and
<results>/<run-name>/run.json), 2 usage error.
"""


def parse_parameter_value(text: str):
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


def _add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("notebooks", nargs="*", metavar="NOTEBOOK",
                        help="a notebook path, file name, stem (00_tour) or number (00); default: every notebook")
    parser.add_argument("-p", "--parameter", nargs=2, action="append", default=[], dest="parameters",
                        metavar=("KEY", "VALUE"), help="set a notebook parameter; repeatable")
    parser.add_argument("--run-name", metavar="NAME",
                        help="results go to RESULTS_DIR/NAME/ (default: the local date-time, e.g. 20261121-235959)")
    parser.add_argument("--results-dir", type=Path, metavar="DIR",
                        help=f"results root (default: ${harness.RESULTS_DIR_ENV}, else results/ in the project)")
    parser.add_argument("--kernel", default="python3", metavar="NAME", help="Jupyter kernel (default: %(default)s)")
    parser.add_argument("--cell-timeout", type=int, metavar="SECONDS",
                        help="fail a cell that runs longer than this (default: no limit)")
    parser.add_argument("--list", action="store_true", help="list the notebooks and exit")


def _cmd_run(args: argparse.Namespace) -> int:
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
        parameters[key] = parse_parameter_value(value)
    notebooks = harness.resolve_notebooks(args.notebooks) if args.notebooks else harness.list_notebooks()
    if not notebooks:
        raise BertologyError(f"no notebooks in {harness.DEFAULT_NOTEBOOKS_DIR}")
    report = harness.run_notebooks(notebooks, run_name=args.run_name, parameters=parameters,
                                   results_root=args.results_dir, kernel_name=args.kernel,
                                   cell_timeout=args.cell_timeout)
    print(report.summary())
    print(f"results: {report.run_dir}")
    return EXIT_OK if report.ok else EXIT_FAILED


# --------------------------------------------------------------------------- registry

COMMANDS: list[Command] = [
    Command("run", "execute notebooks with papermill and record their metrics and figures",
            _add_run_arguments, _cmd_run, RUN_EPILOG),
    # Room for `extract`, `info` and `merge` (to be added): one _add_*_arguments function,
    # one _cmd_* handler returning an exit status, and one Command line here.
]

DESCRIPTION = "See what the attention heads of BERT-style encoders do: run the notebooks, record results."
EPILOG = """\
examples:
  bertology run                  run every notebook
  bertology run 00 -p n_sentences 8
  bertology COMMAND --help       the options of one command
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bertology", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        sub = subparsers.add_parser(command.name, help=command.help, description=command.help,
                                    epilog=command.epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
        command.add_arguments(sub)
        sub.set_defaults(handler=command.handler)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default: sys.argv[1:]) and return the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version (0) or a usage error (2); argparse has printed why
        return int(exc.code or 0)
    try:
        return args.handler(args)
    except BertologyError as exc:
        print(f"bertology: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
