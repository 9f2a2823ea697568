"""The page audit (present.page_audit) in Chromium: each defect planted, on a deck the project's deck builder
makes from a synthetic notebook or on a plain page, is caught with its kind; clean ones have none."""

import base64
import json
import subprocess
import sys

import nbformat
import pytest

from bertology_utils.core.figure_text import FigureText, png_with_text
from bertology_utils.present.page_audit import VIEWPORT, audit_page
from bertology_utils.present.slides import notebook_to_slides

pytestmark = [pytest.mark.slow, pytest.mark.browser]

READY = "() => window.Reveal !== undefined && Reveal.isReady()"
#: A 1 x 1 PNG, drawn at the size its <img> says.
PIXEL = (
    "data:image/png;base64,"
    + base64.b64encode(
        bytes.fromhex(
            "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
            "1f15c4890000000d49444154789c6360f8ffff3f0005fe02fea7d605a40000000049454e44ae426082"
        )
    ).decode()
)


def _figure(boxes: list, width: int = 640) -> str:
    """An image 1000 x 500 in its own pixels, drawn ``width`` px wide, carrying ``boxes``."""
    spec = json.dumps({"size": [1000, 500], "boxes": boxes})
    return f"<img src='{PIXEL}' width='{width}' height='{width // 2}' alt='figure' data-text-boxes='{spec}'>"


def _png_figure(boxes: list, width: int = 640) -> str:
    """As :func:`_figure`, the boxes in the PNG's own tEXt chunk (as a widget's output carries them)."""
    text = FigureText.from_json(json.dumps({"size": [1000, 500], "boxes": boxes}))
    png = png_with_text(base64.b64decode(PIXEL.split(",", 1)[1]), text)
    src = "data:image/png;base64," + base64.b64encode(png).decode()
    return f"<img src='{src}' width='{width}' height='{width // 2}' alt='figure'>"


def _stream(text: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_output("stream", name="stdout", text=text)


#: Slide by slide: what it shows, and the defect kinds the audit must find there (nothing on the first).
PLANTED = [
    ("# A clean title\n\nNone of the heads is [cited](https://arxiv.org/abs/1906.04341): layers 1…12.", set()),
    ("<div style='position: relative; left: 1400px'>beyond the edge</div>", {"outside"}),
    ("<div style='font-size: 10px'>too small to read</div>", {"small-text"}),
    (
        "<div style='position: relative; height: 40px'><span>first label</span>"
        "<span style='position: absolute; left: 0; top: 0'>second label</span></div>",
        {"overlap"},
    ),
    (_stream("None\n"), {"missing-value"}),
    (_stream("TtestResult(statistic=1.5, pvalue=0.25)\n"), {"repr"}),
    (_stream("array([1, 2, 3])\n"), {"repr"}),
    (_stream("<object object at 0x7f3a2b1c0d90>\n"), {"repr"}),
    (_stream("read from /srv/data/ewt/train.conllu\n"), {"path"}),
    (_stream("read from C:\\Users\\ann\\train.conllu\n"), {"path"}),
    (_stream("read from <dir>/glue/train.tsv\n"), {"path"}),  # a shortened place the deck does not know
    (_stream("see file:///srv/report.html\n"), {"path"}),
    ("accuracy 0.4… of the heads", {"cut-number"}),
    ("12... heads", {"cut-number"}),
    (_figure([[10, 10, 300, 40, 14, "tick label"]]), {"figure-small-text"}),
    (_figure([[10, 10, 300, 60, 40, "legend"], [20, 15, 280, 55, 40, "title"]]), {"figure-overlap"}),
    (f"<img src='{PIXEL}' width='300' height='150' alt='not measured'>", {"figure-unmeasured"}),
    (_png_figure([[10, 10, 300, 60, 40, "legend"], [20, 15, 280, 55, 40, "title"]]), {"figure-overlap"}),
]


def _deck(folder, contents) -> object:
    """The deck of a notebook with one slide per item: markdown text, or a code cell's output. (Markdown's
    inline HTML loses its text to the tag's end, so styled text is planted in block elements.)"""
    cells = []
    for content in contents:
        if isinstance(content, str):
            cell = nbformat.v4.new_markdown_cell(content)
        else:
            cell = nbformat.v4.new_code_cell("print(value)", outputs=[content])
        cell.metadata["slideshow"] = {"slide_type": "slide"}
        cells.append(cell)
    path = folder / "demo" / "demo.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    return notebook_to_slides(path)


def _open(offline_page, path, *, deck: bool):
    page = offline_page.page
    page.set_viewport_size(VIEWPORT)
    page.goto(path.as_uri())
    if deck:
        page.wait_for_function(READY, timeout=30_000)
    return page


def test_every_planted_defect_on_a_deck_is_caught_with_its_kind(tmp_path, offline_page):
    deck = _deck(tmp_path, [content for content, _ in PLANTED])
    defects = audit_page(_open(offline_page, deck, deck=True), slides=True)
    found = {index: {d.kind for d in defects if d.where == index} for index in range(len(PLANTED))}
    assert found == {index: kinds for index, (_, kinds) in enumerate(PLANTED)}, "\n".join(map(str, defects))
    small = next(d for d in defects if d.kind == "small-text")
    assert small.text == "too small to read"
    # The figure's 14 px label is drawn at 640 / 1000 of its size: 9.0 px on the slide.
    assert next(d for d in defects if d.kind == "figure-small-text").detail.startswith("9.0 px")


def test_a_deck_shrunk_by_the_fitter_is_measured_at_its_zoom(tmp_path, offline_page):
    """A slide a little too tall is zoomed out by the deck's script: 20 px text drawn at 0.75 reads 15 px."""
    tall = "<div style='font-size: 20px; height: 900px'>a slide a little taller than the deck</div>"
    deck = _deck(tmp_path, [tall])
    page = _open(offline_page, deck, deck=True)
    defects = audit_page(page, slides=True)
    zoom = page.evaluate("() => parseFloat(Reveal.getSlides()[0].style.zoom)")
    assert 0.75 <= zoom < 0.8
    assert [d.kind for d in defects] == ["small-text"], defects
    assert defects[0].detail.startswith(f"{20 * zoom:.1f} px")


def test_a_clean_deck_has_no_defect(tmp_path, offline_page):
    boxes = [[10, 10, 400, 60, 40, "title"], [10, 400, 400, 460, 30, "axis label"]]
    table = "## Results\n\n| head | accuracy |\n|---|---|\n| 3-2 | 0.41 |"
    deck = _deck(tmp_path, [PLANTED[0][0], table, _figure(boxes), _png_figure(boxes)])
    assert audit_page(_open(offline_page, deck, deck=True), slides=True) == []


def test_a_page_is_checked_for_its_text_and_overlaps(tmp_path, offline_page):
    clean = """<p>None of the heads is <a href="https://arxiv.org/abs/1906.04341">cited</a> in notebooks/00_tour.ipynb.</p>
      <div class="language-python highlight"><pre><code>x = None; y = np.array([1]); open("/srv/x")</code></pre></div>
      <div class="highlight"><pre><code><span class="n">x</span> <span class="o">=</span> <span class="kc">None</span></code></pre></div>
      <div style="position: relative"><span>a shown title</span>
        <span style="position: absolute; left: 0; top: 0; opacity: 0"><span>a hidden title</span></span></div>
      <p style="font-size: 9px">small print is the reader's business on a page</p>"""
    planted = """<table><tr><td>NaN</td><td>&lt;NA&gt;</td><td>null</td></tr></table>
      <p>read from /srv/data/x.csv</p><p>notes in ~/notes.txt</p>
      <div style="width: 40px; overflow: hidden; white-space: nowrap; text-overflow: ellipsis">0.123456789</div>
      <div style="position: relative"><span>one label</span><span style="position: absolute; left: 0; top: 0">two</span></div>"""
    page_path = tmp_path / "page.html"
    page_path.write_text(f"<!doctype html><html><body>{clean}</body></html>", encoding="utf-8")
    assert audit_page(_open(offline_page, page_path, deck=False), slides=False) == []
    page_path.write_text(f"<!doctype html><html><body>{clean}{planted}</body></html>", encoding="utf-8")
    defects = audit_page(_open(offline_page, page_path, deck=False), slides=False)
    kinds = sorted(d.kind for d in defects)
    assert kinds == ["cut-number", "missing-value", "missing-value", "missing-value", "overlap", "path", "path"], (
        defects
    )
    assert {d.where for d in defects if d.kind == "missing-value"} == {"td"}


def test_the_command_lists_the_defects_and_fails(tmp_path):
    page_path = tmp_path / "page.html"
    page_path.write_text("<!doctype html><p>read from /srv/data/x.csv</p>", encoding="utf-8")
    clean = tmp_path / "clean.html"
    clean.write_text("<!doctype html><p>nothing wrong</p>", encoding="utf-8")
    command = [sys.executable, "-m", "bertology_utils", "audit"]
    done = subprocess.run([*command, str(page_path), str(clean)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines() == [
        f"{page_path}: 1 defect",
        "  path at p: 'read from /srv/data/x.csv' ('/srv/data/x.csv' in p)",
        f"{clean}: 0 defects",
    ]
    done = subprocess.run([*command, "--ignore", "path", str(page_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
