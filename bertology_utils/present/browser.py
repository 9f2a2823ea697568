"""The headless Chromium that prints decks to PDF and audits pages: one place that finds it, says what to install
when it or Playwright is missing, and closes it whatever happens."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from bertology_utils.core.errors import BertologyError

if TYPE_CHECKING:
    from playwright.sync_api import Browser

__all__ = ["CHROMIUM", "chromium"]

#: Debian's Chromium, which Playwright drives (its own downloads need the internet); else ``chromium`` on PATH.
CHROMIUM = "/usr/bin/chromium"


@contextmanager
def chromium(purpose: str) -> Iterator[Browser]:
    """A headless Chromium, closed on exit.

    :param purpose: what it is for, to begin the error (``"printing decks to PDF"``).
    :returns: a context manager giving a Playwright ``Browser``.
    :raises BertologyError: naming what to install when Playwright or Chromium is missing.
    """
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        raise BertologyError(f"{purpose} needs Playwright: pip install playwright") from None
    path = CHROMIUM if Path(CHROMIUM).is_file() else shutil.which("chromium")
    if path is None:
        raise BertologyError(f"{purpose} needs Chromium at {CHROMIUM}: apt-get install chromium")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=path, args=["--no-sandbox", "--disable-gpu"])
        try:
            yield browser
        finally:
            browser.close()
