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


#: Per slide, visited as a presenter would: whether it scrolls (down, or a table across) and the zoom it was given.
SLIDE_FIT = """() => { const s = Reveal.getCurrentSlide(); let across = 0;
    s.querySelectorAll('.jp-OutputArea-output').forEach(a => { across = Math.max(across, a.scrollWidth - a.clientWidth); });
    return {scrolls: s.style.overflowY === 'auto' || across > 2, zoom: parseFloat(s.style.zoom) || 1}; }"""


def test_long_prose_and_tall_wide_and_claims_tables_fit_their_slides(tmp_path, offline_page):
    from bertology_utils.papers.claims import Claim, Verdict, claims_table

    def table(rows: int, columns: int, text: str) -> str:
        head = "".join(f"<th>{text}_{j}</th>" for j in range(columns))
        body = "".join(
            f"<tr><th>{i}</th>" + "".join(f"<td>{0.123456 * (i + j):.6f}</td>" for j in range(columns)) + "</tr>"
            for i in range(rows)
        )
        return f'<table class="dataframe"><thead><tr><th></th>{head}</tr></thead><tbody>{body}</tbody></table>'

    claims = [
        Claim(
            f"claim_{i}.SST-2",
            "Heads " + "attend to the next token " * 3,
            "Clark et al. 2019",
            "about half",
            "0.41, 95% CI [0.38, 0.45] over 200 sentences " * 2,
            Verdict.HOLDS,
            "rule " * 30,
            note="note " * 20,
        )
        for i in range(9)
    ]

    def output(page: str):
        return nbformat.v4.new_output("display_data", data={"text/html": page, "text/plain": "table"})

    cells = [
        nbformat.v4.new_markdown_cell(
            "# A long story\n\n" + "\n\n".join("A paragraph of prose. " * 25 for _ in range(6))
        ),
        nbformat.v4.new_code_cell("tall", outputs=[output(table(60, 4, "accuracy"))]),
        nbformat.v4.new_code_cell("wide", outputs=[output(table(2, 16, "share_heads_improve"))]),
        nbformat.v4.new_code_cell("claims", outputs=[output(claims_table(claims).to_html())]),
    ]
    for cell in cells:
        cell.metadata["slideshow"] = {"slide_type": "slide"}
    path = tmp_path / "fit.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    page = offline_page.page
    page.goto(notebook_to_slides(path).as_uri())
    page.wait_for_function("() => window.Reveal !== undefined && Reveal.isReady()", timeout=30_000)
    total = page.evaluate("() => Reveal.getTotalSlides()")
    assert total >= 8  # the prose, the tall table and the claims each took several slides
    fits = []
    for k in range(total):
        page.evaluate(f"() => {{ const i = Reveal.getIndices(Reveal.getSlides()[{k}]); Reveal.slide(i.h, i.v); }}")
        page.wait_for_timeout(50)
        fits.append(page.evaluate(SLIDE_FIT))
    assert not any(f["scrolls"] for f in fits), fits
    assert min(f["zoom"] for f in fits) >= 0.75, fits  # shrunk, if at all, no further than reads from the back
    text = page.locator(".reveal .slides").inner_text()
    assert "rule rule" not in text and "claim_0" not in text and "SST-2" in text
    offline_page.screenshot("slides-fit")
    assert offline_page.errors == []


def test_report_opens_offline_with_its_figures(tour_run, offline_page):
    page = offline_page.page
    page.goto(tour_run["report"].as_uri())
    page.wait_for_function(IMAGES_LOADED, timeout=30_000)
    assert page.locator("#nb-00_tour img").count() >= 3
    assert page.locator("#metrics").count() == 1
    metrics = page.locator("#metrics")
    assert "tour.num_heads" not in metrics.inner_text()  # folded by notebook: one click away
    metrics.locator("#metrics-00_tour summary").click()
    assert "tour.num_heads" in metrics.inner_text()
    offline_page.screenshot("report")
    assert offline_page.blocked == [], f"the report tried the network: {offline_page.blocked}"
    assert offline_page.errors == []


def test_the_report_is_presentable(tour_run, offline_page):
    """No NaN, None, repr, path or cut number in what the report shows, no text over other text."""
    page = offline_page.page
    page.goto(tour_run["report"].as_uri())
    from deck_checks import assert_presentable

    assert_presentable(page, slides=False)
