"""The findings lecture in Chromium, offline, at a projector's 1280 x 720: it opens with nothing from the
network, every slide fits, the chalkboard and speaker notes are there, the PDF has a page per slide."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from deck_checks import pdf_pages
from lecture_runs import PARTIAL_SKIP, make_lecture_run, make_partial_run

from bertology_utils.core import settings
from bertology_utils.present.lecture import LECTURE, build_lecture
from bertology_utils.run.harness import results_dir

pytestmark = [pytest.mark.slow, pytest.mark.browser]

READY = "() => window.Reveal !== undefined && Reveal.isReady()"
VIEWPORT = {"width": 1280, "height": 720}

# Per slide: elements of the slide (notes and reveal's own controls aside) outside the viewport, and boxes
# whose content is cut off (more content than height where overflow hides it).
OVERFLOWS = """() => {
  const slide = Reveal.getCurrentSlide();
  const out = [];
  for (const el of [slide, ...slide.querySelectorAll("*")]) {
    if (el.closest("aside.notes")) continue;
    const box = el.getBoundingClientRect();
    if (box.width === 0 && box.height === 0) continue;
    if (box.left < -1 || box.top < -1 || box.right > innerWidth + 1 || box.bottom > innerHeight + 1) {
      out.push(`${el.tagName}.${el.className} at ${[box.left, box.top, box.right, box.bottom].map(Math.round)}`);
    }
    const style = getComputedStyle(el);
    if (style.overflowY !== "visible" && el.scrollHeight > el.clientHeight + 1) {
      out.push(`${el.tagName}.${el.className} cut: ${el.scrollHeight} > ${el.clientHeight}`);
    }
  }
  return out;
}"""


@pytest.fixture(scope="module")
def decks(tmp_path_factory):
    """A lecture of one full run with long values, and one of that run beside a partial run of another model."""
    root = tmp_path_factory.mktemp("lecture-runs")
    long_text = ", measured over many sentences and layers with a tail that a slide cannot hold" * 2
    full = make_lecture_run(root / "full", extra_claim=True, long_text=long_text)
    partial = make_partial_run(root / "partial")
    return {
        "runs": (full, partial),
        "one": build_lecture(full, root / "one"),
        "two": build_lecture([full, partial], root / "two"),
    }


def _open(offline_page, deck: Path):
    page = offline_page.page
    page.set_viewport_size(VIEWPORT)
    page.goto(deck.as_uri())
    page.wait_for_function(READY, timeout=30_000)
    return page


def _walk(page):
    """Each slide in turn, laid out where it shows: yields (index, its data-slide name)."""
    page.evaluate("() => Reveal.configure({transition: 'none'})")  # measured in place, not mid-transition
    for index in range(page.evaluate("() => Reveal.getTotalSlides()")):
        page.evaluate("i => Reveal.slide(i)", index)
        page.wait_for_function("i => Reveal.getIndices().h === i", arg=index)
        page.wait_for_timeout(100)
        yield index, page.evaluate("() => Reveal.getCurrentSlide().dataset.slide")


def _assert_every_slide_fits(page) -> int:
    cut = {f"{i} {name}": found for i, name in _walk(page) if (found := page.evaluate(OVERFLOWS))}
    assert cut == {}, f"slides that do not fit 1280 x 720: {cut}"
    return page.evaluate("() => Reveal.getTotalSlides()")


@pytest.mark.parametrize("which", ["one", "two"])
def test_every_slide_fits_a_projector_with_nothing_from_the_network(decks, offline_page, which):
    page = _open(offline_page, decks[which])
    slides = _assert_every_slide_fits(page)
    assert 20 <= slides <= 32
    # Rows that did not fit were hidden and counted, never cut.
    hidden = page.evaluate(
        "() => Array.from(document.querySelectorAll('.fit-row')).filter(r => r.style.display === 'none').length"
    )
    counted = page.evaluate(
        "() => Array.from(document.querySelectorAll('.more[data-unlisted]')).reduce((n, m) => n + (parseInt(m.textContent) || 0), 0)"
    )
    unlisted = page.evaluate(
        "() => Array.from(document.querySelectorAll('.more[data-unlisted]')).reduce((n, m) => n + Number(m.dataset.unlisted), 0)"
    )
    assert counted == hidden + unlisted
    assert offline_page.blocked == [], f"the lecture tried the network: {offline_page.blocked}"
    assert offline_page.errors == []


def test_chalkboard_opens_and_every_claim_is_in_the_speaker_notes(decks, offline_page):
    page = _open(offline_page, decks["two"])
    assert {"notes", "RevealChalkboard", "menu"} <= set(page.evaluate("() => Object.keys(Reveal.getPlugins())"))
    page.locator(".reveal").click(position={"x": 5, "y": 5})
    page.keyboard.press("b")
    page.wait_for_function(
        "() => getComputedStyle(document.getElementById('chalkboard')).visibility === 'visible'", timeout=10_000
    )
    page.keyboard.press("b")
    notes = page.evaluate(
        """() => Object.fromEntries(Reveal.getSlides().map(s => [s.dataset.slide, Reveal.getSlideNotes(s) || ""]))"""
    )
    claims = [
        c for run in decks["runs"] for f in run.glob("*/claims.json") for c in json.loads(f.read_text())["claims"]
    ]
    for topic in LECTURE:
        mine = [c for c in claims if any(re.fullmatch(p.replace("*", ".*"), c["id"]) for p in topic.claims)]
        for claim in mine:
            assert claim["claim"] in notes[topic.title], (topic.title, claim["claim"])
        if topic.claims:
            assert notes[topic.title].strip(), topic.title


def test_two_runs_show_both_models_and_what_the_second_lacks(decks, offline_page):
    page = _open(offline_page, decks["two"])

    def slide(title: str):
        return page.locator(f'.reveal .slides > section[data-slide="{title}"]')

    models = slide("Heads that follow syntax").locator(".verdicts .model").all_inner_texts()
    assert models == ["tiny-bert", "another-encoder-with-a-long-name"]
    page.evaluate("i => Reveal.slide(i)", [t.title for t in LECTURE].index("Heads cluster") + 2)
    page.wait_for_timeout(900)
    clustering = slide("Heads cluster").inner_text()
    assert "05_clustering did not run in partial" in clustering
    pruning = slide("Are sixteen heads better than one?").text_content()
    assert PARTIAL_SKIP in pruning


def test_no_path_of_this_machine_and_a_pdf_page_per_slide(decks, offline_page, tmp_path):
    page = _open(offline_page, decks["two"])
    text = page.evaluate(
        "() => document.querySelector('.reveal .slides').innerText + Reveal.getSlides().map(Reveal.getSlideNotes).join(' ')"
    )
    for folder in {*decks["runs"], decks["runs"][0].parent, results_dir(), settings.cache_dir()}:
        for spelling in {str(folder), str(Path(folder).resolve())}:
            assert spelling not in text, f"{spelling} is shown on a slide"
    assert not re.search(r"(?<![\w<>~.])/(?:tmp|root|home)/\w", text), re.search(r"/(?:tmp|root|home)/\S+", text)
    slides = page.evaluate("() => Reveal.getTotalSlides()")
    # The command, in a process of its own (Playwright's sync API does not nest in this one's browser).
    run, other = decks["runs"]
    done = subprocess.run(
        [sys.executable, "-m", "bertology_utils", "slides", str(run), "--lecture", "--with", str(other)]
        + ["--pdf", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    pdf = tmp_path / "lecture.slides.pdf"
    assert str(pdf) in done.stdout.splitlines()
    assert pdf_pages(pdf) == slides


def test_the_lecture_of_a_real_run_of_one_notebook(tour_run, offline_page, tmp_path):
    deck = build_lecture(tour_run["run"], tmp_path)
    page = _open(offline_page, deck)
    _assert_every_slide_fits(page)
    assert offline_page.blocked == [] and offline_page.errors == []
    syntax = page.locator('.reveal .slides > section[data-slide="Heads that follow syntax"]').text_content()
    assert "03_syntax_coref did not run in browser" in syntax
    where = page.locator('.reveal .slides > section[data-slide="[CLS], [SEP] and punctuation draw attention"]')
    assert where.locator(".verdicts .badge").count() >= 1  # the tour checks two of these claims itself
