"""``bertology report``: write one self-contained HTML page summarising a run."""

from __future__ import annotations

import argparse
from pathlib import Path

from bertology_utils.cli._command import EXIT_OK, Command

__all__ = ["COMMAND"]

REPORT_DESCRIPTION = """\
Write one self-contained HTML page for a run: model, data, versions and parameters, each
notebook's status, "paper vs ours" tables and figures, every metric, the failing cells, and
the differences found by `bertology check` when the run folder has a check.json.
"""

REPORT_EPILOG = """\
examples:
  bertology report results/default             writes results/default/report.html
  bertology report default --out report.html

Exit status: 0, or 2 when the run folder is missing or holds no run.
"""


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run folder (results/NAME) or a run name")
    parser.add_argument(
        "--out", type=Path, metavar="FILE", help="where to write the page (default: RUN_DIR/report.html)"
    )


def _handle(args: argparse.Namespace) -> int:
    from bertology_utils.present.report import build_report

    print(build_report(args.run_dir, args.out))
    return EXIT_OK


COMMAND = Command(
    "report",
    "write one self-contained HTML page summarising a run",
    _add_arguments,
    _handle,
    REPORT_EPILOG,
    REPORT_DESCRIPTION,
)
