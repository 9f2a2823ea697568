"""The findings lecture in Chromium, offline, at a projector's 1280 x 720.

Lectures of synthetic runs (``tests/lecture_runs.py``: a full run with long values and a claim no topic
names, and a second model's partial run with a notebook skipped and figures missing) and of a real run of
the tour: they open with nothing from the network, every slide fits the screen, the chalkboard opens, the
speaker notes name every claim, the PDF has one page per slide, no path of this machine shows, and a
slide says what a run lacks.
"""

import json
import re
import subprocess
import sys
from fnmatch import fnmatchcase
from pathlib import Path

import pytest
from deck_checks import assert_presentable, pdf_pages, toggle_chalkboard
from lecture_runs import PARTIAL_NOTEBOOKS, make_lecture_run

from bertology_utils.core import settings
from bertology_utils.present.lecture import build_lecture
from bertology_utils.present.lecture_outline import LECTURE
from bertology_utils.run.results import results_dir

pytestmark = [pytest.mark.slow, pytest.mark.browser]

READY = "() => window.Reveal !== undefined && Reveal.isReady()"
VIEWPORT = {"width": 1280, "height": 720}
FIRST, SECOND = "org/tiny-bert", "org/another-encoder-with-a-long-name"
SHORT = ["tiny-bert", "another-encoder-with-a-long-name"]
#: A figure neither run saved, and one only the second run lacks.
NO_FIGURE, SECOND_LACKS = "coreference_head", "best_head_vs_baseline"

# The current slide's problems: an element or a line of text outside the slide's area (the 1280 x 720 slide
# as reveal scales it into the window: .slides' box, within the viewport), or a box that hides content
# (overflow other than visible, content larger than the box). Speaker notes are not shown on the slide;
# reveal's own controls, progress bar, menu and chalkboard are outside the sections, so not looked at.
PROBLEMS = """() => {
  const slide = Reveal.getCurrentSlide();
  const area = document.querySelector(".reveal .slides").getBoundingClientRect();
  const box = {left: Math.max(0, area.left), top: Math.max(0, area.top),
               right: Math.min(innerWidth, area.right), bottom: Math.min(innerHeight, area.bottom)};
  const out = [];
  const name = el => el.tagName.toLowerCase() + (typeof el.className === "string" && el.className.trim()
    ? "." + el.className.trim().split(/\\s+/).join(".") : "");
  const at = r => `[${[r.left, r.top, r.right, r.bottom].map(Math.round)}]`;
  const outside = r => r.left < box.left - 1 || r.top < box.top - 1 || r.right > box.right + 1 || r.bottom > box.bottom + 1;
  const walker = document.createTreeWalker(slide, NodeFilter.SHOW_ELEMENT | NodeFilter.SHOW_TEXT);
  for (let node = slide; node; node = walker.nextNode()) {
    const el = node.nodeType === Node.ELEMENT_NODE ? node : node.parentElement;
    if (el.closest("aside.notes")) continue;
    if (el.getClientRects().length === 0 || getComputedStyle(el).visibility !== "visible") continue;
    if (node.nodeType === Node.TEXT_NODE) {
      if (!node.data.trim()) continue;
      const range = document.createRange();
      range.selectNodeContents(node);
      const r = Array.from(range.getClientRects()).find(outside);
      if (r) out.push(`text "${node.data.trim().slice(0, 50)}" of ${name(el)} at ${at(r)}`);
      continue;
    }
    const r = el.getBoundingClientRect();
    if ((r.width || r.height) && outside(r)) out.push(`${name(el)} at ${at(r)}`);
    const style = getComputedStyle(el);
    if (`${style.overflowX} ${style.overflowY}` !== "visible visible"
        && (el.scrollHeight > el.clientHeight + 1 || el.scrollWidth > el.clientWidth + 1)) {
      out.push(`${name(el)} hides content: ${el.scrollWidth}x${el.scrollHeight} in ${el.clientWidth}x${el.clientHeight}`);
    }
  }
  if (out.length) out.unshift(`slide area ${at(box)}`);
  return out;
}"""

# The current topic slide's picture: a figure whose image is drawn at a readable size, or the box saying why
# there is none, never an empty space. And the rows of its table that did not fit are counted, not lost.
PICTURE_AND_ROWS = """() => {
  const slide = Reveal.getCurrentSlide();
  const picture = slide.querySelector(".picture");
  if (!picture && !slide.querySelector(".side")) return null;
  const img = picture && picture.querySelector("figure img"), missing = picture && picture.querySelector(".missing");
  const rows = Array.from(slide.querySelectorAll(".fit-row"));
  const more = slide.querySelector(".more");
  return {
    picture: picture !== null,
    image: img ? {loaded: img.complete && img.naturalWidth > 0, width: img.getBoundingClientRect().width,
                  height: img.getBoundingClientRect().height} : null,
    missing: missing ? {text: missing.innerText, height: missing.getBoundingClientRect().height} : null,
    rows: rows.length,
    hidden: rows.filter(r => getComputedStyle(r).display === "none").length,
    unlisted: more ? Number(more.dataset.unlisted) : 0,
    more: more ? more.innerText : "",
  };
}"""


# reveal's presenting tools (arrows, slide number, progress bar, menu button) on the screen, and no line of the
# current slide's text under one of them.
TOOLS = """() => {
  const tools = Array.from(document.querySelectorAll(
      ".reveal .controls button, .reveal .slide-number, .reveal .progress, .slide-menu-button"))
    .filter(el => el.getClientRects().length && getComputedStyle(el).visibility === "visible"
      && getComputedStyle(el).opacity !== "0");
  const out = [];
  const boxes = tools.map(el => [el, el.getBoundingClientRect()]).filter(([, r]) => r.width && r.height);
  for (const [el, r] of boxes) {
    if (r.left < -1 || r.top < -1 || r.right > innerWidth + 1 || r.bottom > innerHeight + 1) out.push(`${el.className} off the screen`);
  }
  const walker = document.createTreeWalker(Reveal.getCurrentSlide(), NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (!node.data.trim() || node.parentElement.closest("aside.notes")) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    for (const t of range.getClientRects()) {
      for (const [el, r] of boxes) {
        if (t.left < r.right && r.left < t.right && t.top < r.bottom && r.top < t.bottom) {
          out.push(`text "${node.data.trim().slice(0, 50)}" under ${el.className}`);
        }
      }
    }
  }
  return [boxes.length, out];
}"""


def _long_text(folder: Path) -> str:
    """About 150 characters of an "ours" value, with paths of this machine in it, as a notebook may print."""
    paths = f" (read from {folder / '01_patterns' / 'attention.npz'}, cached in {settings.cache_dir() / 'models'})"
    filler = ", measured over every sentence of the treebank and every layer and head of the model"
    return (paths + filler)[: max(150, len(paths) + 20)]


@pytest.fixture(scope="module")
def lectures(tmp_path_factory):
    """The runs, a two-run lecture (full run, then the second model's partial run) and a one-run lecture."""
    root = tmp_path_factory.mktemp("lecture")
    results = root / "results"
    full = make_lecture_run(
        results / "full", FIRST, long_text=_long_text(results / "full"), extra_claim=True, without_figures={NO_FIGURE}
    )
    partial = make_lecture_run(
        results / "partial",
        SECOND,
        notebooks=PARTIAL_NOTEBOOKS,
        without_figures={NO_FIGURE, SECOND_LACKS},
        skipped={"06_pruning": f"no GLUE data at {settings.cache_dir() / 'glue'} and the network is off"},
        verdict_shift=1,
    )
    return {
        "root": root,
        "runs": {"one": [full], "two": [full, partial]},
        "one": build_lecture(full, root / "one"),
        "two": build_lecture([full, partial], root / "two" / "talk.html"),
    }


def _open(offline_page, deck: Path):
    page = offline_page.page
    page.set_viewport_size(VIEWPORT)
    page.goto(deck.as_uri())
    page.wait_for_function(READY, timeout=30_000)
    # The slides' places after a transition are those without one; walking 29 slides at 0.8 s each would
    # make these tests slow, so the transitions are turned off (the wait below still holds).
    page.evaluate("() => Reveal.configure({transition: 'none', backgroundTransition: 'none'})")
    return page


def _go(page, index: int) -> str:
    """Show slide ``index`` (of every slide, a topic's two one below the other) once it is in place (its
    transition over); its data-slide name."""
    page.evaluate("i => { const at = Reveal.getIndices(Reveal.getSlides()[i]); Reveal.slide(at.h, at.v); }", index)
    page.wait_for_function(
        """i => {
          const slide = Reveal.getCurrentSlide(), here = slide.getBoundingClientRect();
          const area = document.querySelector(".reveal .slides").getBoundingClientRect();
          return slide === Reveal.getSlides()[i] && Math.abs(here.left - area.left) < 0.5
            && Math.abs(here.top - area.top) < 0.5 && getComputedStyle(slide).opacity === "1";
        }""",
        arg=index,
        polling="raf",
        timeout=10_000,
    )
    return page.evaluate("() => Reveal.getCurrentSlide().dataset.slide")


#: A topic's slides: its figure, then its claims.
FIGURE, CLAIMS = 0, 1


def _show(page, name: str, part: int = FIGURE):
    """Go to the slide named ``name`` (its data-slide; of a topic's, ``part``); its locator."""
    index = page.evaluate(
        "([name, part]) => Reveal.getSlides().map((s, i) => [s, i]).filter(([s]) => s.dataset.slide === name)"
        ".map(([, i]) => i)[part] ?? -1",
        [name, part],
    )
    assert index >= 0, f"no slide {name!r}"
    _go(page, index)
    return page.locator(".reveal .slides section.present:not(.stack)")


def _assert_every_slide_fits(page) -> int:
    """Walk the deck: every slide fits the slide area, no box hides content, each topic slide shows its figure
    or says why not, and its table's rows that did not fit are counted. Returns the number of slides."""
    total = page.evaluate("() => Reveal.getTotalSlides()")
    assert total >= len(LECTURE) + 3
    problems, pictures = {}, {}
    for index in range(total):
        name = _go(page, index)
        tools, under = page.evaluate(TOOLS)
        if found := page.evaluate(PROBLEMS) + under:
            problems[f"{index} {name}"] = found
        assert tools >= 3, f"{index} {name}: reveal's controls, slide number or menu button are not shown"
        if (picture := page.evaluate(PICTURE_AND_ROWS)) is not None:
            pictures[f"{index} {name}"] = picture
    assert problems == {}, f"slides that do not fit {VIEWPORT}: {json.dumps(problems, indent=1)}"
    assert len([p for p in pictures.values() if p["picture"]]) == len(LECTURE)
    for slide, p in pictures.items():
        if p["picture"] and p["image"] is not None:  # a topic's figure slide (its claims slide has no picture)
            assert p["missing"] is None, slide
            assert p["image"]["loaded"] and p["image"]["width"] > 200 and p["image"]["height"] > 100, (slide, p)
        elif p["picture"]:
            assert p["missing"] is not None and p["missing"]["text"].strip() and p["missing"]["height"] > 20, slide
        not_shown = p["hidden"] + p["unlisted"]
        assert p["hidden"] < p["rows"] or p["rows"] == 0, f"{slide}: none of its rows fit"
        assert p["more"] == (f"{not_shown} more in the speaker notes (s)" if not_shown else ""), (slide, p)
    return total


def _slide_texts(page) -> dict[str, dict[str, str]]:
    """Each slide's shown text and its speaker notes, by data-slide name (the closing slides joined)."""
    texts: dict[str, dict[str, str]] = {}
    for item in page.evaluate(
        """() => Reveal.getSlides().map(s => ({name: s.dataset.slide,
            text: Array.from(s.children).filter(c => !c.matches("aside.notes")).map(c => c.textContent).join(" "),
            notes: (s.querySelector("aside.notes") || {textContent: ""}).textContent}))"""
    ):
        entry = texts.setdefault(item["name"], {"text": "", "notes": ""})
        entry["text"] += item["text"] + "\n"
        entry["notes"] += item["notes"] + "\n"
    return texts


def _claims(run: Path) -> list[dict]:
    return [c for path in sorted(run.glob("*/claims.json")) for c in json.loads(path.read_text())["claims"]]


def _topic_of(claim: dict):
    return next((t for t in LECTURE if any(fnmatchcase(claim["id"], p) for p in t.claims)), None)


def _assert_no_path_of_this_machine(page, deck: Path, folders) -> str:
    text = page.evaluate(
        """() => document.querySelector(".reveal .slides").innerText + "\\n"
            + Array.from(document.querySelectorAll(".reveal .slides aside.notes")).map(a => a.textContent).join("\\n")"""
    )
    html = deck.read_text(encoding="utf-8")
    places = {*folders, results_dir(), settings.cache_dir(), settings.PROJECT_ROOT}
    for folder in places:
        for spelling in {str(folder), str(Path(folder).resolve())}:
            assert spelling not in text, f"{spelling} is shown on a slide or in the notes"
            assert spelling not in html, f"{spelling} is in the deck's page"
    # Nothing that looks like a temporary or home folder either.
    assert not re.search(r"(?<![\w<>~.])/(?:tmp|root|home)/\w", text), re.search(r"/(?:tmp|root|home)/\S+", text)
    return text


@pytest.mark.parametrize("which", ["one", "two"])
def test_lecture_opens_offline_and_every_slide_fits(lectures, offline_page, which):
    page = _open(offline_page, lectures[which])
    _assert_every_slide_fits(page)
    assert offline_page.blocked == [], f"the lecture tried the network: {offline_page.blocked}"
    assert offline_page.errors == []


def test_b_opens_the_chalkboard(lectures, offline_page):
    page = _open(offline_page, lectures["two"])
    assert {"notes", "RevealChalkboard", "menu"} <= set(page.evaluate("() => Object.keys(Reveal.getPlugins())"))
    board = page.locator("#chalkboard")
    assert not board.is_visible()
    page.locator(".reveal").click(position={"x": 5, "y": 5})
    toggle_chalkboard(page, shown=True)
    assert board.is_visible()
    toggle_chalkboard(page, shown=False)
    assert offline_page.blocked == [] and offline_page.errors == []


@pytest.mark.parametrize("which", ["one", "two"])
def test_speaker_notes_name_every_claim(lectures, offline_page, which):
    page = _open(offline_page, lectures[which])
    texts = _slide_texts(page)
    runs = lectures["runs"][which]
    for topic in LECTURE:
        notes = texts[topic.title]["notes"]
        mine = [c for run in runs for c in _claims(run) if _topic_of(c) is topic]
        if mine:
            assert notes.strip(), f"{topic.title}: no speaker notes"
        missing = [c["claim"] for c in mine if c["claim"] not in notes]
        assert missing == [], f"{topic.title}: its notes leave out {missing}"
    # A claim no topic names is on a slide of its own, and in its notes.
    extra = "A claim no topic of the lecture names"
    assert extra in texts["more claims"]["text"] and extra in texts["more claims"]["notes"]
    # Nothing recorded is left out of the talk.
    every_note = "".join(t["notes"] for t in texts.values())
    assert [c["claim"] for run in runs for c in _claims(run) if c["claim"] not in every_note] == []


@pytest.mark.parametrize("which", ["one", "two"])
def test_pdf_has_one_page_per_slide(lectures, offline_page, tmp_path, which):
    deck = lectures[which]
    page = _open(offline_page, deck)
    slides = page.evaluate("() => Reveal.getTotalSlides()")
    # The print layout reveal makes for the PDF: a page per slide, and each page's content on it.
    page.goto(deck.as_uri() + "?print-pdf")
    page.wait_for_function(READY + " && document.querySelector('.pdf-page') !== null", timeout=30_000)
    page.emulate_media(media="print")
    spill = page.evaluate(
        """() => Array.from(document.querySelectorAll(".pdf-page")).flatMap((pdfPage, i) => {
          const box = pdfPage.getBoundingClientRect();
          return Array.from(pdfPage.querySelectorAll("section *")).filter(el => {
            if (el.closest("aside.notes") || el.getClientRects().length === 0) return false;
            const r = el.getBoundingClientRect(), style = getComputedStyle(el);
            return r.left < box.left - 1 || r.top < box.top - 1 || r.right > box.right + 1 || r.bottom > box.bottom + 1
              || (style.overflowY !== "visible" && el.scrollHeight > el.clientHeight + 1);
          }).map(el => `page ${i + 1}: ${el.tagName}.${el.className}`);
        })"""
    )
    assert spill == []
    assert page.locator(".pdf-page").count() == slides
    # Printed in a process of its own (Playwright's sync API does not nest in this one's browser): the two-run
    # lecture by the command, the one-run lecture by deck_to_pdf itself.
    if which == "two":
        full, partial = lectures["runs"]["two"]
        command = ["-m", "bertology_utils", "slides", str(full), "--lecture", "--with", str(partial), "--pdf"]
        command += ["--out", str(tmp_path)]
        pdf = tmp_path / "lecture.slides.pdf"
    else:
        pdf = tmp_path / "lecture.pdf"
        command = ["-c", "import sys; from bertology_utils.present.slides import deck_to_pdf; "]
        command[1] += "print(deck_to_pdf(sys.argv[1], sys.argv[2]))"
        command += [str(deck), str(pdf)]
    done = subprocess.run([sys.executable, *command], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert str(pdf) in done.stdout.splitlines()
    assert pdf_pages(pdf) == slides


@pytest.mark.parametrize("which", ["one", "two"])
def test_no_path_of_this_machine_shows(lectures, offline_page, tmp_path_factory, which):
    page = _open(offline_page, lectures[which])
    runs = lectures["runs"][which]
    folders = {*runs, runs[0].parent, lectures["root"], tmp_path_factory.getbasetemp()}
    text = _assert_no_path_of_this_machine(page, lectures[which], folders)
    # The values that held those paths are shown, each file by its name.
    assert "read from attention.npz" in text
    if which == "two":
        assert "no GLUE data at glue and the network is off" in text


def test_two_runs_name_both_models_on_every_topic(lectures, offline_page):
    page = _open(offline_page, lectures["two"])
    for topic in LECTURE:
        if topic.claims:
            models = page.locator(f'.reveal .slides > section[data-slide="{topic.title}"] .verdicts .model')
            assert models.all_text_contents() == SHORT, topic.title
    title = _show(page, "title").inner_text()
    assert FIRST in title and SECOND in title
    question = _show(page, "question").locator("table tr").first.inner_text()
    assert SHORT[0] in question and SHORT[1] in question


def test_a_notebook_the_second_run_lacks_is_said_not_to_have_run(lectures, offline_page):
    page = _open(offline_page, lectures["two"])
    lacking = [t for t in LECTURE if t.claims and t.figure[0] not in PARTIAL_NOTEBOOKS]
    assert len(lacking) > 5
    for topic in lacking:
        slide = _show(page, topic.title, CLAIMS)
        second = slide.locator(".verdicts").nth(1).inner_text()
        assert SHORT[1] in second and "not run" in second, topic.title
        text = slide.inner_text()
        assert f"{topic.figure[0]} did not run in partial" in text, (topic.title, text)
        # The first run's badges and figure are still there.
        assert "not run" not in slide.locator(".verdicts").first.inner_text(), topic.title
        assert _show(page, topic.title).locator(".picture figure img").count() == 1, topic.title


def test_a_missing_figure_is_said_to_be_missing(lectures, offline_page):
    page = _open(offline_page, lectures["two"])
    topic = next(t for t in LECTURE if t.figure[1] == NO_FIGURE)
    slide = _show(page, topic.title)
    picture = slide.locator(".picture")
    assert picture.locator("img").count() == 0
    box = picture.locator(".missing")
    assert box.is_visible()
    assert NO_FIGURE in box.inner_text()
    assert box.bounding_box()["height"] > 20
    # A figure only the second run lacks: the first run's is shown, named by its model.
    other = next(t for t in LECTURE if t.figure[1] == SECOND_LACKS)
    figure = _show(page, other.title).locator(".picture figure")
    assert figure.locator("img").count() == 1 and SHORT[0] in figure.locator("figcaption").inner_text()


def test_a_missing_figure_is_not_explained_by_missing_claims(lectures, offline_page):
    page = _open(offline_page, lectures["two"])
    topic = next(t for t in LECTURE if t.figure[1] == NO_FIGURE)
    slide = _show(page, topic.title, CLAIMS)
    assert slide.locator(".verdicts .badge.not-run").count() == 0  # both runs recorded its claims
    missing = _show(page, topic.title).locator(".picture .missing").inner_text()
    assert "recorded no claim" not in missing and f"saved no figure {NO_FIGURE} in full" in missing


def test_a_skipped_notebook_says_why(lectures, offline_page):
    page = _open(offline_page, lectures["two"])
    pruning = [t for t in LECTURE if t.claims and t.figure[0] == "06_pruning"]
    assert pruning
    for topic in pruning:
        slide = _show(page, topic.title, CLAIMS)
        assert "skipped" in slide.locator(".verdicts").nth(1).inner_text(), topic.title
        why = slide.locator(".why").inner_text()
        assert SHORT[1] in why and "no GLUE data at" in why and "the network is off" in why, (topic.title, why)
        notes = slide.locator("aside.notes").text_content()
        assert "no GLUE data at" in notes, topic.title


def test_the_lecture_of_a_real_tour_run(tour_run, offline_page, tmp_path, tmp_path_factory):
    run = tour_run["run"]
    deck = build_lecture(run, tmp_path)
    page = _open(offline_page, deck)
    _assert_every_slide_fits(page)
    assert offline_page.blocked == [], f"the lecture tried the network: {offline_page.blocked}"
    assert offline_page.errors == []
    ran = {entry["name"] for entry in json.loads((run / "run.json").read_text())["notebooks"]}
    texts = _slide_texts(page)
    lacking = [t for t in LECTURE if t.figure[0] not in ran]
    assert lacking
    for topic in lacking:
        assert f"{topic.figure[0]} did not run in {run.name}" in texts[topic.title]["text"], topic.title
    _assert_no_path_of_this_machine(page, deck, {run, run.parent, tmp_path, tmp_path_factory.getbasetemp()})


@pytest.mark.parametrize("which", ["one", "two", "tour"])
def test_the_lecture_is_presentable(lectures, offline_page, tmp_path, request, which):
    """The synthetic runs' lectures (long values, a second model's partial run) and a real tour run's."""
    deck = build_lecture(request.getfixturevalue("tour_run")["run"], tmp_path) if which == "tour" else lectures[which]
    assert_presentable(_open(offline_page, deck), slides=True)
