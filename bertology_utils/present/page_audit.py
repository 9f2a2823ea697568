"""Is a page presentable as it comes out? One audit of the pages the project makes, in a real browser.

:func:`audit_page` looks at a page open in Playwright, :func:`audit_files` opens HTML files offline in
Chromium at a projector's 1280 x 720 and audits each; ``bertology audit FILE...`` prints what they find.
The measurements are made in the page by ``page_audit.js`` (beside this module); the wording rules are
:data:`TEXT_RULES`. A defect's ``kind`` is one of:

- ``outside``: on a slide, text or a box beyond the 1280 x 720 slide, or a box that scrolls to show it;
- ``small-text``: on a slide, text under :data:`MIN_PX` px at slide size (its CSS font size times the
  ``zoom`` the deck fitter gave it or its ancestors; reveal.js's scaling of the whole slide to the window
  does not count: it scales every slide alike);
- ``overlap``: the boxes of two different pieces of text share more than :data:`OVERLAP` of the smaller;
- ``missing-value``, ``repr``, ``path``, ``cut-number``: visible text matching :data:`TEXT_RULES`
  (``cut-number`` also for a number cut by CSS's ``text-overflow: ellipsis``);
- ``figure-small-text``, ``figure-overlap``: an ``<img>`` whose ``data-text-boxes`` (its text boxes, in
  its own pixels: ``{"size": [W, H], "boxes": [[x0, y0, x1, y1, font_px, "text"], ...]}``), or, for a PNG
  inlined as a ``data:`` URI, the same in its ``tEXt`` chunk (``core.figure_text.png_with_text``), holds, at
  the width it is drawn, text under :data:`MIN_PX` px on a slide, or two boxes overlapping as above;
- ``figure-unmeasured``: on a slide, an ``<img>`` with neither, whose text cannot be measured (a kind of
  its own, so that a test may require measured figures or not).

A slide deck (reveal.js) is checked slide by slide, each with its fragments shown, for every kind; any
other page (the report, the atlas, the docs' pages) as a whole for the text rules, overlaps and figures'
overlaps (its size and its text's size are the reader's window's). Speaker notes and code cells' input
(hidden on slides, code rather than results on the docs' pages) are not looked at.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertology_utils.core.errors import BertologyError
from bertology_utils.core.figure_text import TEXT_KEY
from bertology_utils.present.browser import chromium

__all__ = ["Defect", "TEXT_RULES", "MIN_PX", "OVERLAP", "VIEWPORT", "audit_page", "audit_files"]

#: The smallest text a slide may show, in CSS px at the slide's size (1280 x 720): readable from the back.
MIN_PX = 16.0
#: Two text boxes overlap when they share more than this fraction of the smaller one's area (lines of one
#: paragraph touch by a pixel or two of their glyphs' boxes; labels drawn over each other share most).
OVERLAP = 0.25
#: The window pages are audited in: a projector's size, the decks' own.
VIEWPORT = {"width": 1280, "height": 720}

#: What visible text must never hold, by defect kind, searched in each text node's whitespace-collapsed text.
TEXT_RULES: dict[str, re.Pattern[str]] = {
    # A value that was not computed shows as readable.MISSING ("—"), not as Python's or pandas' word for it.
    # Whole-value words (a cell or a printed value that is only "None"), so that English ("None of the
    # heads...") passes; NaN, <NA> and NaT are no English word and are caught anywhere (a printed table).
    "missing-value": re.compile(r"^(?:None|null|nan|NaN)$|(?<![\w<])(?:NaN|<NA>|NaT)(?![\w>])"),
    # Python's repr of an object instead of its value: numpy / torch arrays and scalars, a dataclass or
    # named tuple (scipy's TtestResult(statistic=...)), an object's memory address.
    "repr": re.compile(
        r"\b(?:array|tensor)\(|\bnp\.\w+\(|\bdtype=|\b[A-Z]\w*\([a-z_]\w*=|<[\w.]+ object at|\b0x[0-9a-fA-F]{6,}\b"
    ),
    # A path of some machine: absolute POSIX (a folder and more: "/tmp/x", not "a/b" or a URL's "//host/x"),
    # Windows ("C:\..."), the home folder ("~/"), readable.scrub_paths' shortened places ("<cache>/..."),
    # and file:// addresses. Relative paths ("notebooks/00_tour.ipynb") name the project's own files.
    "path": re.compile(r"(?<![\w.:/~<>-])/(?:[\w.@+-]+/)+[\w.@+-]*|\b[A-Za-z]:\\\w|(?<![\w/])~/|<[a-z]+>/|\bfile://"),
    # A number cut short by an ellipsis ("0.4…", "12..."): the reader cannot know the value. A range
    # ("1…12", "−3…+3") is not cut.
    "cut-number": re.compile(r"\d(?:…|\.\.\.)(?!\s*[-+−]?\d)"),
}

#: What is never audited as shown text: speaker notes, code cells' input (nbconvert's decks, the docs'
#: highlighted Python), and what is not drawn.
_NOT_SHOWN = (
    "aside.notes, .jp-CodeCell .jp-InputArea, .code_cell .input_area, .language-python, .language-ipython3, "
    ".highlight code span, "  # Pygments' tokens: the docs' code (a printed output is plain text in <code>)
    "mjx-assistive-mml"  # MathJax's copy of a formula for screen readers, clipped to nothing on screen
)
_SCRIPT = Path(__file__).with_name("page_audit.js")
_READY = "() => window.Reveal !== undefined && Reveal.isReady()"


@dataclass(frozen=True)
class Defect:
    """One thing that keeps a page from being presentable.

    :param kind: what is wrong (see the module docstring).
    :param where: the slide's index in the deck, or (a page) the element's tag, id and classes.
    :param text: the text concerned, cut to 80 characters.
    :param detail: a measurement: the size, the boxes, the rule.
    """

    kind: str
    where: int | str
    text: str
    detail: str

    def __str__(self) -> str:
        at = f"slide {self.where}" if isinstance(self.where, int) else self.where
        return f"{self.kind} at {at}: {self.text!r} ({self.detail})"


def _text_defects(texts: list[dict[str, str]], where: int | None) -> list[Defect]:
    return [
        Defect(kind, item["at"] if where is None else where, item["text"][:80], f"{match.group(0)!r} in {item['at']}")
        for item in texts
        for kind, rule in TEXT_RULES.items()
        if (match := rule.search(item["text"]))
    ]


def _measure(page: Any, *, slide: bool, where: int | None) -> list[Defect]:
    options = {"slide": slide, "skip": _NOT_SHOWN, "minPx": MIN_PX, "overlap": OVERLAP, "textKey": TEXT_KEY}
    found = page.evaluate("options => window.bertologyAudit(options)", options)
    measured = [
        Defect(
            d["kind"],
            d["at"] if where is None else where,
            d["text"],
            d["detail"] + ("" if where is None else f" ({d['at']})"),
        )
        for d in found["defects"]
    ]
    return measured + _text_defects(found["texts"], where)


def _show_slide(page: Any, index: int) -> None:
    """Show slide ``index`` (every fragment too), and let the deck fitter run."""
    page.evaluate(
        """k => { const s = Reveal.getSlides()[k], i = Reveal.getIndices(s); Reveal.slide(i.h, i.v);
                  s.querySelectorAll(".fragment").forEach(f => f.classList.add("visible")); }""",
        index,
    )
    # transitions are off (audit_page): once current and opaque, it stands where it is shown
    page.wait_for_function(
        """k => { const s = Reveal.getCurrentSlide();
                  return s === Reveal.getSlides()[k] && getComputedStyle(s).opacity === "1"; }""",
        arg=index,
        polling="raf",
        timeout=10_000,
    )
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")


def audit_page(page: Any, *, slides: bool) -> list[Defect]:
    """The defects of the page open in ``page`` (a Playwright page, loaded; a deck ready).

    :param page: a ``playwright.sync_api.Page``.
    :param slides: whether it is a reveal.js deck, to audit slide by slide (each at slide size) rather
        than as one page.
    :returns: the defects found, in slide (or page) order.
    """
    if not page.evaluate("() => typeof window.bertologyAudit === 'function'"):
        page.add_script_tag(content=_SCRIPT.read_text(encoding="utf-8"))
    if not slides:
        return _measure(page, slide=False, where=None)
    page.evaluate("() => Reveal.configure({transition: 'none', backgroundTransition: 'none'})")
    defects: list[Defect] = []
    for index in range(page.evaluate("() => Reveal.getTotalSlides()")):
        _show_slide(page, index)
        defects += _measure(page, slide=True, where=index)
    return defects


def audit_files(paths: list[str | os.PathLike[str]], *, timeout_s: float = 60) -> dict[Path, list[Defect]]:
    """Open each HTML file offline in Chromium at :data:`VIEWPORT` and audit it (a deck slide by slide).

    Requests that would leave the machine are aborted. Needs Playwright and Chromium (``/usr/bin/chromium``).

    :param paths: the HTML files.
    :param timeout_s: how long a page may take to load (a deck to be ready).
    :returns: each file's defects, by path.
    """
    found: dict[Path, list[Defect]] = {}
    with chromium("auditing pages") as browser:
        context = browser.new_context(viewport={"width": VIEWPORT["width"], "height": VIEWPORT["height"]})
        context.route(
            "**/*",
            lambda route: (
                route.continue_()
                if route.request.url.startswith(("file:", "data:", "blob:", "about:"))
                else route.abort()
            ),
        )
        page = context.new_page()
        for path in map(Path, paths):
            if not path.is_file():
                raise BertologyError(f"no page at {path}")
            page.goto(path.resolve().as_uri(), timeout=timeout_s * 1000)
            deck = page.evaluate("() => window.Reveal !== undefined")
            if deck:
                page.wait_for_function(_READY, timeout=timeout_s * 1000)
            page.wait_for_function("() => Array.from(document.images).every(i => i.complete)", timeout=timeout_s * 1000)
            found[path] = audit_page(page, slides=deck)
    return found
