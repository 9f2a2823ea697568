"""What the browser tests of decks share."""

import re
from pathlib import Path


def pdf_pages(pdf: Path) -> int:
    """Pages of a PDF file (pypdf's count, or its page objects counted where pypdf is not installed)."""
    data = pdf.read_bytes()
    assert data.startswith(b"%PDF"), f"{pdf} is not a PDF"
    try:
        from pypdf import PdfReader
    except ImportError:
        return len(re.findall(rb"/Type\s*/Page(?!s)", data))
    return len(PdfReader(pdf).pages)


#: Whether the chalkboard (reveal.js-plugins) is drawn over the deck.
_BOARD_SHOWN = "() => getComputedStyle(document.getElementById('chalkboard')).visibility === 'visible'"


def toggle_chalkboard(page, *, shown: bool) -> None:
    """Press ``b`` on the deck in ``page`` and wait until the chalkboard is ``shown`` (or hidden)."""
    page.keyboard.press("b")
    page.wait_for_function(_BOARD_SHOWN if shown else f"() => !({_BOARD_SHOWN})()", timeout=10_000)


def assert_presentable(page, *, slides: bool, measured: bool = False) -> None:
    """The page audit (present.page_audit) finds nothing on ``page`` (a deck: on any slide); figures whose text
    is not measured (``figure-unmeasured``) count only when ``measured`` (pages made from a real run carry it,
    pictures drawn by a test do not)."""
    from bertology_utils.present.page_audit import VIEWPORT, audit_page

    page.set_viewport_size(VIEWPORT)
    defects = [d for d in audit_page(page, slides=slides) if measured or d.kind != "figure-unmeasured"]
    assert defects == [], "not presentable:\n" + "\n".join(map(str, defects))
