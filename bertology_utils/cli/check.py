"""``bertology check``: compare a run's metrics with reference metrics under their stated tolerances."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from bertology_utils.cli._command import EXIT_FAILED, EXIT_OK, Command
from bertology_utils.run import results

if TYPE_CHECKING:
    from bertology_utils.run.regression import Reference

__all__ = ["COMMAND", "check_and_print"]

CHECK_DESCRIPTION = """\
Compare the metrics of a finished run with reference metrics (REFERENCE_DIR/<notebook>.json),
each under the tolerance its reference states; print what regressed, went missing or is new
and write RUN_DIR/check.json. The same as `bertology run --check`, without running anything.
"""

CHECK_EPILOG = """\
examples:
  bertology check nightly my-refs/       results/nightly/ (a run name) against my-refs/<notebook>.json
  bertology check /data/runs/x tests/references/small

Exit status: 0 every metric within its tolerance, 1 a metric off or missing, 2 usage error
or a malformed reference file.
"""


def check_and_print(run_dir: Path, reference_dir: Path, references: dict[str, Reference] | None = None) -> int:
    """Compare a run with references, print the diff, write check.json; the exit status."""
    from bertology_utils.run import regression

    result = regression.check_run(run_dir, reference_dir, references)
    print(result.report())
    print(f"check: {regression.write_check(result, run_dir)}")
    return EXIT_OK if result.ok else EXIT_FAILED


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run_dir",
        type=Path,
        metavar="RUN_DIR",
        help=f"a run's folder, or a run name under the results root (${results.RESULTS_DIR_ENV})",
    )
    parser.add_argument(
        "reference_dir", type=Path, metavar="REFERENCE_DIR", help="a folder of <notebook>.json references"
    )


def _handle(args: argparse.Namespace) -> int:
    return check_and_print(results.find_run(args.run_dir), args.reference_dir)


COMMAND = Command(
    "check",
    "compare a run's metrics with reference metrics under their stated tolerances",
    _add_arguments,
    _handle,
    CHECK_EPILOG,
    CHECK_DESCRIPTION,
)
