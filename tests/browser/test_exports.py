"""The exported slide deck and the run report in a real browser, with the network cut off."""

import nbformat
import pytest

from bertology_utils.present.slides import notebook_to_slides

pytestmark = [pytest.mark.slow, pytest.mark.browser]

IMAGES_LOADED = """() => Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)"""


def test_slide_deck_initialises_offline_and_every_slide_shows(tour_run, offline_page):
    page = offline_page.page
    page.goto(tour_run["deck"].as_uri())
    page.wait_for_function("() => window.Reveal !== undefined && Reveal.isReady()", timeout=30_000)
    assert page.locator("div.reveal.ready").count() == 1
    total = page.evaluate("() => Reveal.getTotalSlides()")
    assert total >= 5
    # Walk the whole talk, fragments included: a broken slide-change handler throws here.
    steps = page.evaluate("""() => { let n = 0;
        while ((!Reveal.isLastSlide() || Reveal.availableFragments().next) && n < 1000) { Reveal.next(); n++; }
        return n; }""")
    assert page.evaluate("() => Reveal.isLastSlide()") and steps >= total - 1
    page.wait_for_function(IMAGES_LOADED, timeout=30_000)
    assert page.locator("img[src^='data:image/png']").count() >= 3
    # The bertviz views inside the deck draw too.
    page.wait_for_function(
        "() => document.querySelectorAll('.bertology-head-view svg #attention line').length > 0", timeout=30_000
    )
    page.evaluate("() => Reveal.slide(0)")
    offline_page.screenshot("slides-tour")
    assert offline_page.blocked == [], f"the deck tried the network: {offline_page.blocked}"
    assert offline_page.errors == []


def test_latex_in_a_deck_renders_offline(tmp_path, offline_page):
    """Notebook 04 explains its probe in LaTeX: the deck typesets it with the inlined MathJax."""
    cells = [
        nbformat.v4.new_markdown_cell("# Probes\n\nHead $k$ puts weight $\\alpha_k[j,i]$ on word $i$."),
        nbformat.v4.new_markdown_cell("## Display\n\n$$p(i \\mid j) = \\sum_k w_k \\alpha_k[j,i]$$"),
    ]
    for cell in cells:
        cell.metadata["slideshow"] = {"slide_type": "slide"}
    path = tmp_path / "04_math.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    page = offline_page.page
    page.goto(notebook_to_slides(path).as_uri())
    page.wait_for_function("() => window.Reveal !== undefined && Reveal.isReady()", timeout=30_000)
    page.wait_for_function("() => document.querySelectorAll('mjx-container svg').length >= 4", timeout=30_000)
    assert "$" not in page.locator(".reveal .slides").inner_text()  # no LaTeX left as source
    page.evaluate("() => { Reveal.next(); Reveal.prev(); }")
    offline_page.screenshot("slides-latex")
    assert offline_page.blocked == [], f"the deck tried the network: {offline_page.blocked}"
    assert offline_page.errors == []


def test_report_opens_offline_with_its_figures(tour_run, offline_page):
    page = offline_page.page
    page.goto(tour_run["report"].as_uri())
    page.wait_for_function(IMAGES_LOADED, timeout=30_000)
    assert page.locator("#nb-00_tour img").count() >= 3
    assert page.locator("#metrics").count() == 1
    assert "tour.num_heads" in page.locator("#metrics").inner_text()
    offline_page.screenshot("report")
    assert offline_page.blocked == [], f"the report tried the network: {offline_page.blocked}"
    assert offline_page.errors == []
