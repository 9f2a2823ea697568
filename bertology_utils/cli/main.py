"""The ``bertology`` command (also ``python -m bertology_utils``): the parser and the dispatch.

Each subcommand is a module of this folder defining ``COMMAND``, a :class:`Command`: a name, a
one-line help, a function that adds its arguments to an argparse parser, a handler that returns
the exit status, examples, and optionally a paragraph describing it. Adding one means writing
that module and listing its ``COMMAND`` in ``COMMANDS``. Command modules import the package's
heavy modules (torch, transformers, zarr) inside their handlers, so that `bertology --help`,
`bertology run` and `bertology info --no-model` stay fast.

Exit status: 0 success, 1 the work ran but something failed (a notebook), 2 usage error.
Expected errors (``BertologyError``) print ``bertology: error: ...`` without a traceback.
"""

from __future__ import annotations

import argparse
import sys

from bertology_utils.cli import (
    assets,
    atlas,
    audit,
    check,
    extract,
    findings,
    info,
    merge,
    report,
    run,
    setup_model,
    slides,
)
from bertology_utils.cli._command import EXIT_USAGE, Command
from bertology_utils.core import __version__
from bertology_utils.core.errors import BertologyError

__all__ = ["COMMANDS", "build_parser", "main"]

COMMANDS: list[Command] = [
    module.COMMAND
    for module in (run, extract, info, merge, check, slides, report, findings, atlas, assets, audit, setup_model)
]

DESCRIPTION = "See what the attention heads of BERT-style encoders do: run the notebooks, record results."
EPILOG = """\
examples:
  bertology run                  run every notebook
  bertology run 00 -p n_sentences 8
  bertology extract --dataset ud-english-ewt --split dev --store results/ewt-dev.zarr
  bertology info --no-model      data sets found, versions, settings
  bertology COMMAND --help       the options of one command
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bertology", description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        sub = subparsers.add_parser(
            command.name,
            help=command.help,
            description=command.description or command.help,
            epilog=command.epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
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
