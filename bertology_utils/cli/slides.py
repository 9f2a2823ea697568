"""``bertology slides``: turn a run's executed notebooks into offline reveal.js slide decks."""

from __future__ import annotations

import argparse
from pathlib import Path

from bertology_utils.cli._command import EXIT_OK, Command

__all__ = ["COMMAND"]

SLIDES_DESCRIPTION = """\
Turn the executed notebooks of a run into reveal.js slide decks: one HTML file per notebook
that opens offline (reveal.js, its theme, jQuery and require.js are inlined; figures are
embedded). The cells' slideshow metadata makes the slides, as RISE does live in JupyterLab.
Code is hidden unless --show-code. With --figures, every figure the run saved also goes, as an SVG
sized for a slide, into one folder: RUN_DIR/figures-for-slides/<stem>-<figure>.svg.
With --pdf, each deck is also printed to PDF beside it (<stem>.slides.pdf, one page per slide) by
Chromium through Playwright. In a deck: b chalkboard, c draw on the slide, m menu, s speaker view.
With --lecture, one deck of the whole run's findings instead, for a talk (RUN_DIR/lecture.slides.html):
a slide per finding with its key figure, the verdict as a badge and the paper's numbers beside ours;
--with RUN adds another model's run to its badges and tables.
"""

SLIDES_EPILOG = """\
examples:
  bertology slides results/default             every notebook of the run
  bertology slides default 00 03 --show-code   a run by name; two notebooks, with their code
  bertology slides results/default --out decks
  bertology slides default --figures           the decks, and every figure as SVG for slides
  bertology slides default 00 --pdf            the tour's deck, and the deck as a PDF
  bertology slides default --lecture --pdf     the findings lecture, and its PDF
  bertology slides minilm --lecture --with mpnet   one lecture, both models' verdicts

Decks go to RUN_DIR/<stem>/<stem>.slides.html, or DIR/<stem>.slides.html with --out; figures to
RUN_DIR/figures-for-slides/, or DIR/figures-for-slides/ with --out; the lecture to
RUN_DIR/lecture.slides.html, or DIR/lecture.slides.html with --out.
Exit status: 0, or 2 when the run folder, a notebook or the JavaScript libraries are missing
(or, with --pdf, Playwright or Chromium).
"""


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run folder (results/NAME) or a run name")
    parser.add_argument(
        "notebooks",
        nargs="*",
        metavar="NOTEBOOK",
        help="only these notebooks, by stem (00_tour) or number (00); default: every one",
    )
    parser.add_argument(
        "--out", type=Path, metavar="DIR", help="write the decks (and figures-for-slides/) into DIR instead"
    )
    parser.add_argument("--show-code", action="store_true", help="show the code cells' input (hidden by default)")
    parser.add_argument(
        "--figures",
        action="store_true",
        help="also write every saved figure as an SVG sized for a slide into figures-for-slides/",
    )
    parser.add_argument(
        "--pdf", action="store_true", help="also print each deck to PDF beside it (needs Playwright and Chromium)"
    )
    parser.add_argument(
        "--lecture",
        action="store_true",
        help="one deck of the run's findings for a talk (lecture.slides.html) instead of a deck per notebook",
    )
    parser.add_argument(
        "--with",
        dest="with_runs",
        action="append",
        default=[],
        metavar="RUN",
        help="with --lecture: another model's run, shown beside it (repeatable)",
    )


def _handle(args: argparse.Namespace) -> int:
    from bertology_utils.core.errors import BertologyError
    from bertology_utils.present.slides import deck_to_pdf, run_slides, slide_figures

    if args.with_runs and not args.lecture:
        raise BertologyError("--with adds a run to the lecture: use it with --lecture")
    if args.lecture:
        if args.notebooks or args.show_code or args.figures:
            raise BertologyError(
                "the lecture is made from the whole run: leave out NOTEBOOK, --show-code and --figures"
            )
        from bertology_utils.present.lecture import build_lecture

        lecture = build_lecture([args.run_dir, *args.with_runs], args.out)
        print(lecture)
        if args.pdf:
            print(deck_to_pdf(lecture))
        return EXIT_OK
    for path in run_slides(args.run_dir, args.notebooks, out_dir=args.out, show_code=args.show_code):
        print(path)
        if args.pdf:
            print(deck_to_pdf(path))
    if args.figures:
        for path in slide_figures(args.run_dir, args.notebooks, out_dir=args.out):
            print(path)
    return EXIT_OK


COMMAND = Command(
    "slides",
    "turn a run's executed notebooks into offline reveal.js slide decks",
    _add_arguments,
    _handle,
    SLIDES_EPILOG,
    SLIDES_DESCRIPTION,
)
