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
