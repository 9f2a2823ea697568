"""``bertology audit``: are pages presentable as they come out? Defects of decks and pages, in Chromium."""

from __future__ import annotations

import argparse
from pathlib import Path

from bertology_utils.cli._command import EXIT_FAILED, EXIT_OK, Command

__all__ = ["COMMAND"]

AUDIT_DESCRIPTION = """\
Open each HTML page offline in Chromium at 1280 x 720 and list what keeps it from being shown as it is:
on a slide deck, slide by slide, text or boxes beyond the slide, text under 16 px at slide size, overlapping
text; on any page, NaN/None/null shown as values, Python reprs, paths of a machine, numbers cut by an
ellipsis, and figures' measured text (their data-text-boxes) too small or overlapping. A figure whose text
is not measured is listed as figure-unmeasured.
"""

AUDIT_EPILOG = """\
examples:
  bertology audit results/default/lecture.slides.html
  bertology audit results/default/*/*.slides.html --ignore figure-unmeasured
  bertology audit results/default/report.html results/default/atlas.html

Exit status: 0 when no page has a defect, 1 when one has, 2 when a file is missing or Playwright or
Chromium is not installed.
"""


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pages", nargs="+", type=Path, metavar="FILE", help="HTML pages or slide decks")
    parser.add_argument(
        "--ignore", action="append", default=[], metavar="KIND", help="leave out defects of this kind (repeatable)"
    )


def _handle(args: argparse.Namespace) -> int:
    from bertology_utils.present.page_audit import audit_files

    failed = False
    for path, defects in audit_files(args.pages).items():
        kept = [d for d in defects if d.kind not in args.ignore]
        failed = failed or bool(kept)
        print(f"{path}: {len(kept)} defect{'' if len(kept) == 1 else 's'}")
        for defect in kept:
            print(f"  {defect}")
    return EXIT_FAILED if failed else EXIT_OK


COMMAND = Command(
    "audit",
    "list what keeps decks and pages from being presentable (offline, in Chromium)",
    _add_arguments,
    _handle,
    AUDIT_EPILOG,
    AUDIT_DESCRIPTION,
)
