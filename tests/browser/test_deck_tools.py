"""The decks' presenting tools offline in a real browser: chalkboard (b), menu (m), speaker notes; the PDF."""

import re
import subprocess
import sys

import pytest
from deck_checks import pdf_pages, toggle_chalkboard

from bertology_utils.core import settings

pytestmark = [pytest.mark.slow, pytest.mark.browser]

READY = "() => window.Reveal !== undefined && Reveal.isReady()"


def _open(offline_page, deck):
    page = offline_page.page
    page.goto(deck.as_uri())
    page.wait_for_function(READY, timeout=30_000)
    return page


def test_chalkboard_menu_and_notes_work_offline(tour_run, offline_page):
    page = _open(offline_page, tour_run["deck"])
    plugins = page.evaluate("() => Object.keys(Reveal.getPlugins())")
    assert {"notes", "RevealChalkboard", "menu"} <= set(plugins)
    # The menu builds once its (inlined, so empty) stylesheet has loaded.
    page.wait_for_function("() => Reveal.getPlugin('menu').isMenuInitialised()", timeout=30_000)

    board = page.locator("#chalkboard")
    assert not board.is_visible()
    page.locator(".reveal").click(position={"x": 5, "y": 5})
    toggle_chalkboard(page, shown=True)
    assert board.is_visible()
    # The board's background is the inlined picture, not a file beside the deck.
    assert "data:image/png" in page.evaluate(
        "() => getComputedStyle(document.getElementById('chalkboard')).backgroundImage"
    )
    offline_page.screenshot("deck-chalkboard")
    toggle_chalkboard(page, shown=False)
    page.keyboard.press("c")  # the notes canvas over the slide
    page.wait_for_function(
        "() => getComputedStyle(document.getElementById('notescanvas')).pointerEvents !== 'none'", timeout=10_000
    )
    page.keyboard.press("c")

    page.keyboard.press("m")
    page.wait_for_function("() => Reveal.getPlugin('menu').isOpen()", timeout=10_000)
    assert page.locator("nav.slide-menu .slide-menu-item").count() >= 5
    assert page.locator("nav.slide-menu").is_visible()
    # The icons' font is the inlined one (Font Awesome's own faces, added by the widget renderer, do not load).
    font = '900 16px "Bertology Icons"'
    assert page.evaluate(f"async () => (await document.fonts.load('{font}')).length > 0")
    family = page.evaluate("() => getComputedStyle(document.querySelector('nav.slide-menu .fas')).fontFamily")
    assert "Bertology Icons" in family
    page.wait_for_timeout(600)  # the menu slides in
    offline_page.screenshot("deck-menu")
    page.keyboard.press("m")

    assert page.evaluate("() => typeof Reveal.getPlugin('notes').open") == "function"
    assert offline_page.blocked == [], f"the deck tried the network: {offline_page.blocked}"
    assert offline_page.errors == []


def test_speaker_view_opens_offline(tour_run, offline_page):
    page = _open(offline_page, tour_run["deck"])
    page.locator(".reveal").click(position={"x": 5, "y": 5})
    with page.context.expect_page(timeout=15_000) as popup:
        page.keyboard.press("s")
    speaker = popup.value
    speaker.wait_for_selector("#current-slide iframe", state="attached", timeout=15_000)
    speaker.wait_for_selector("#speaker-controls", state="attached", timeout=15_000)
    speaker.close()
    assert offline_page.blocked == [], f"the speaker view tried the network: {offline_page.blocked}"
    assert offline_page.errors == []


def test_deck_shows_no_path_of_this_machine(tour_run, offline_page):
    page = _open(offline_page, tour_run["deck"])
    text = page.locator(".reveal .slides").inner_text()
    html = tour_run["deck"].read_text(encoding="utf-8")
    folders = {tour_run["run"].parent, tour_run["run"], tour_run["cache"], settings.PROJECT_ROOT}
    for folder in folders:
        for spelling in {str(folder), str(folder.resolve())}:
            assert spelling not in text, f"{spelling} is shown on a slide"
    # Nothing that looks like a temporary or home folder either, in what the slides show.
    assert not re.search(r"(?<![\w<>~.])/(?:tmp|root|home)/\w", text), re.search(r"/(?:tmp|root|home)/\S+", text)
    assert str(tour_run["run"]) not in html


def test_pdf_has_one_page_per_slide(tour_run, offline_page, tmp_path, chromium_path):
    page = _open(offline_page, tour_run["deck"])
    slides = page.evaluate("() => Reveal.getTotalSlides()")
    # The command, in a process of its own (Playwright's sync API does not nest in this one's browser).
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bertology_utils",
            "slides",
            str(tour_run["run"]),
            "00",
            "--pdf",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    pdf = tmp_path / "00_tour.slides.pdf"
    assert str(pdf) in done.stdout.splitlines()
    assert pdf_pages(pdf) == slides
