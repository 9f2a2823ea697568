"""The lecture: one reveal.js deck of a run's findings, figures first, for a teacher to present.

Every number on it comes from what the run recorded (each notebook's ``claims.json``, ``metrics.json``,
``skipped.json`` and ``figures/``); nothing is typed in. The slides follow
:data:`~bertology_utils.present.lecture_outline.LECTURE`, an outline of topics in the order of a talk: each
:class:`~bertology_utils.present.lecture_outline.Topic` names the claims it shows (patterns over claim ids)
and the figure that shows them. A topic has two slides, one below the other: its figure alone, shown at the
size its text was fitted for (16 px labels at that size, :mod:`~bertology_utils.core.figure_text`), then the
paper's finding in one line, the verdict per model as badges, and the paper's numbers beside ours; the speaker
notes (``s``) of both hold every claim with its rule of thumb's note. Around them: a title slide (model, data, date), the question
with the verdicts counted per paper, claims no topic names (so a new claim is never dropped), and a
closing slide of what differs and why.

Given several runs (one per model), badges and tables show each model; the figures are the first run's
(another run's where the first has none, captioned with its model). Where a run lacks what a slide
needs (the notebook did not run, failed, skipped the section, or saved no figure), the slide says so
and why, from the run's own records.

:mod:`~bertology_utils.present.lecture_run` reads the runs, :mod:`~bertology_utils.present.lecture_slides` builds the
slides; this module writes the page.

The deck is 16:9 (:data:`~bertology_utils.present.reveal.SLIDE_SIZE`), numbers are rounded for people
(three significant digits; p-values below 0.001 read ``p < 0.001``), no path of this machine appears,
and it carries the presenting tools of every deck (speaker view, chalkboard, menu), all inlined.
"""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from pathlib import Path

from bertology_utils.core.errors import BertologyError
from bertology_utils.core.files import atomic_write_text
from bertology_utils.present.lecture_outline import LECTURE
from bertology_utils.present.lecture_run import LectureRun, read_lecture_run
from bertology_utils.present.lecture_slides import (
    closing_slides,
    other_slides,
    question_slide,
    title_slide,
    topic_slide,
)
from bertology_utils.present.readable import machine_places
from bertology_utils.present.reveal import (
    SLIDE_SIZE,
    network_references,
    presenting_tools,
    reveal_config,
    reveal_start,
    reveal_styles,
)

__all__ = ["LECTURE_FILE", "lecture_html", "build_lecture"]

#: The lecture's file name, in the (first) run's folder or in ``out_dir``.
LECTURE_FILE = "lecture.slides.html"


# Each topic's claims slide shows the rows of its paper-vs-ours table that fit, measured from
# the layout (row lengths vary by model and run); the rest are counted, and all are in the speaker notes.
_FIT_JS = """
<script>
function bertologyFit(section) {
  section.querySelectorAll(".side").forEach(function (side) {
    var rows = side.querySelectorAll(".fit-row");
    var more = side.querySelector(".more");
    var shown = rows.length;
    var note = function (n) { return n + " more in the speaker notes (s)"; };
    if (more) { more.textContent = note(rows.length); }  // the line the count will take, measured with the rows
    rows.forEach(function (row) { row.style.display = ""; });  // fitted afresh each time the slide shows
    while (shown > 0 && side.scrollHeight > side.clientHeight + 1) { rows[--shown].style.display = "none"; }
    var hidden = rows.length - shown + Number(more ? more.dataset.unlisted : 0);
    if (more) { more.textContent = hidden ? note(hidden) : ""; }
  });
}
Reveal.on("ready", function () { document.querySelectorAll(".reveal .slides section").forEach(bertologyFit); });
Reveal.on("slidechanged", function (event) { bertologyFit(event.currentSlide); });
</script>
"""

_LECTURE_CSS = """
.reveal { font-size: 26px; }
.reveal .slides section { text-align: left; height: 100%; }
/* the PDF lays a slide out as the screen does, from the top: reveal's print layout centres it by a height it
   measures before the page's print styles apply, which can push a full slide's foot off the page */
html.print-pdf .reveal .slides section { top: 0 !important; }
.reveal h1 { font-size: 1.9em; line-height: 1.15; margin: 0 0 0.4em 0; text-transform: none; }
.reveal h2 { font-size: 1.45em; margin: 0 0 0.3em 0; text-transform: none; }
.reveal .title-slide h1 { margin-top: 110px; }
.reveal .paper { font-size: 0.75em; color: #666; margin: 0; }
.reveal .subtitle { font-size: 1.05em; color: #444; }
.reveal .keys { font-size: 0.7em; color: #777; margin-top: 1.5em; }
.reveal table { border-collapse: collapse; margin: 0.4em 0; }
.reveal table th, .reveal table td { border-bottom: 1px solid #ddd; padding: 0.2em 0.45em; vertical-align: top; text-align: left; }
.reveal table.facts { font-size: 0.8em; }
.reveal table.pvo { font-size: 0.7em; line-height: 1.25; width: 100%; }
.reveal .lead { font-size: 0.92em; line-height: 1.3; margin: 0 0 0.4em 0; }
.reveal .lead .found { color: #666; font-style: italic; }
.reveal .topic .side { height: 570px; overflow: hidden; }
/* reveal's down arrow (a topic's claims slide) has a hit area reaching below the window; the same arrow, within it */
.reveal .controls .navigate-down { bottom: 0; padding-bottom: 0; }
.reveal figure { margin: 0; }
.reveal figure img { display: block; max-width: 100%; height: auto; margin: 0 auto; }
.reveal figcaption { font-size: 16px; color: #666; text-align: center; }
.reveal .verdicts { margin: 0.15em 0; font-size: 0.8em; }
.reveal .verdicts .model { font-weight: bold; margin-right: 0.4em; }
.reveal .badge { display: inline-block; border-radius: 0.8em; padding: 0.05em 0.6em; margin: 0.1em 0.25em 0.1em 0; color: #fff; font-size: 0.9em; }
.reveal .dot { display: inline-block; width: 0.7em; height: 0.7em; border-radius: 50%; margin-right: 0.35em; }
.reveal .v-holds { background: #1a7f37; }
.reveal .v-partly { background: #b58100; }
.reveal .v-differs { background: #c62828; }
.reveal .v-inconclusive { background: #6f42c1; }
.reveal .v-not-testable, .reveal .not-run { background: #6e7781; }
.reveal .pvo .ci { font-size: 16px; color: #666; }
.reveal .missing { border: 2px dashed #aaa; color: #555; padding: 1em; font-size: 0.8em; }
.reveal .more, .reveal .why { font-size: 0.65em; color: #666; margin: 0.3em 0; }
.reveal ul.differs { font-size: 0.74em; line-height: 1.3; margin-left: 1em; }
.reveal ul.differs li { margin-bottom: 0.45em; }
.reveal ul.differs .note { color: #666; font-size: 0.9em; }
"""


def lecture_html(runs: Sequence[LectureRun]) -> str:
    """The lecture deck of ``runs`` (one per model) as one self-contained HTML page."""
    if not runs:
        raise BertologyError("a lecture needs at least one run")
    # Each run's parent folder is <results> too (a run given by path, outside results/).
    parents = {
        (str(folder), "<results>") for run in runs for folder in (run.folder.parent, run.folder.parent.resolve())
    }
    places = sorted(set(machine_places()) | parents, key=lambda place: -len(place[0]))
    slides = [title_slide(runs, places), question_slide(runs)]
    slides += [topic_slide(topic, runs, places) for topic in LECTURE]
    slides += other_slides(runs, places) + closing_slides(runs, places)
    title = "Lecture: " + " vs ".join(run.short_model for run in runs)
    page = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{html.escape(title)}</title>'
        f"{reveal_styles()}\n{presenting_tools()}\n<style>{_LECTURE_CSS}</style></head>"
        f'<body><div class="reveal"><div class="slides">{"".join(slides)}</div></div>'
        f"{reveal_start(reveal_config(SLIDE_SIZE))}{_FIT_JS}</body></html>\n"
    )
    return page


def build_lecture(
    run_dirs: str | os.PathLike | Sequence[str | os.PathLike], out: str | os.PathLike | None = None
) -> Path:
    """Write the lecture of one run, or of several runs side by side, to ``out`` (default: the first run's
    folder, :data:`LECTURE_FILE`); returns its path."""
    given = [run_dirs] if isinstance(run_dirs, str | os.PathLike) else list(run_dirs)
    runs = [read_lecture_run(run) for run in given]
    target = Path(out) if out is not None else runs[0].folder / LECTURE_FILE
    if target.is_dir() or target.suffix != ".html":
        target = target / LECTURE_FILE
    page = lecture_html(runs)
    remote = network_references(page)
    if remote:
        raise BertologyError(f"the lecture would load {len(remote)} resource(s) from the network, e.g. {remote[0]!r}")
    atomic_write_text(target, page)
    return target
