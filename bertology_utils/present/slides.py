"""Slide decks from executed notebooks: one self-contained reveal.js HTML file per notebook.

A deck follows the cells' slideshow metadata (``slide``, ``subslide``, ``fragment``, ``skip``,
``notes``), the same metadata RISE uses to present a notebook live in JupyterLab. nbconvert's
``SlidesExporter`` writes the deck; it has no option to inline its libraries, so a small
template override puts reveal.js, its stylesheet and theme, jQuery and require.js (and the
widget renderer when the notebook saved widget state) into the page from the npm-installed
copies (see :mod:`bertology_utils.present.assets`). nbconvert's own MathJax and mermaid tags are left
out (offline they would not load, and reveal's slide-change handler would throw); a deck whose
markdown has LaTeX gets MathJax 3's SVG build inlined instead, which needs no web fonts.
Figures are embedded by nbconvert as ``data:`` URIs, so the file opens with no network.

By default a deck reads as a talk: code is hidden, and so are stderr streams (warnings,
text progress bars), tqdm's progress-bar widgets, and code cells that then show nothing. ``show_code=True`` keeps the code.
Whatever the mode, cells tagged ``remove-cell`` are dropped, ``remove-input`` / ``hide-input``
(or collapsed in JupyterLab) lose their code and ``remove-output`` their outputs;
papermill's injected-parameters cell is skipped.

A deck is ready when ``Reveal.isReady()`` is true (reveal.js also adds the class ``ready``
to the ``div.reveal`` element).

:func:`slide_figures` ("figures for slides", ``bertology slides --figures``) gathers every figure a
run saved into one folder, ``<run>/figures-for-slides/<notebook>-<name>.svg``, each sized to fill a
slide (:data:`SLIDE_SIZE`, the decks' size; aspect kept). The SVGs are those ``save_figure`` wrote
beside each PNG from the live figure (vector, text as text); a PNG cannot be turned back into one.
"""

from __future__ import annotations

import base64
import copy
import html
import json
import math
import os
import re
import shutil
import tempfile
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bertology_utils.core.errors import BertologyError
from bertology_utils.core.files import atomic_write_text

__all__ = [
    "SLIDES_SUFFIX",
    "SLIDE_SIZE",
    "REVEAL",
    "REMOVE_CELL_TAGS",
    "REMOVE_INPUT_TAGS",
    "REMOVE_OUTPUT_TAGS",
    "has_math",
    "is_progress_output",
    "network_references",
    "slides_path",
    "notebook_to_slides",
    "prepare_for_slides",
    "run_slides",
    "format_table_numbers",
    "format_number",
    "machine_places",
    "scrub_paths",
    "for_people",
    "MISSING",
    "reveal_config",
    "reveal_start",
    "presenting_tools",
    "reveal_styles",
    "CHROMIUM",
    "deck_to_pdf",
    "SLIDE_FIGURES_DIR",
    "slide_figures",
]

#: Suffix of a deck beside its notebook: ``<stem>/<stem>.slides.html``.
SLIDES_SUFFIX = ".slides.html"

#: Width and height of a slide in CSS pixels (16:9, a projector's shape), before reveal.js scales it to the window.
SLIDE_SIZE = (1280, 720)
#: reveal.js settings.
REVEAL = {"width": SLIDE_SIZE[0], "height": SLIDE_SIZE[1], "margin": 0.04, "transition": "slide", "theme": "simple"}

#: Folder of a run (or of ``out_dir``) that :func:`slide_figures` fills.
SLIDE_FIGURES_DIR = "figures-for-slides"

#: Cell tags honoured in every deck (Jupyter Book and nbconvert spellings).
REMOVE_CELL_TAGS = frozenset({"remove-cell", "remove_cell"})
REMOVE_INPUT_TAGS = frozenset({"remove-input", "remove_input", "hide-input", "hide_input"})
REMOVE_OUTPUT_TAGS = frozenset({"remove-output", "remove_output", "hide-output", "hide_output"})

#: Placeholder for reveal.js's URL in the exported page; its two stylesheet links are replaced by inline styles
#: (nbconvert re-serializes the page, so they are found by their href, not as literal tags).
_REVEAL_PREFIX = "bertology-inline:reveal.js"
_STYLESHEET_LINKS = {
    asset: re.compile(rf"""<link\b[^>]*\bhref=["']{re.escape(_REVEAL_PREFIX + path)}["'][^>]*>""")
    for asset, path in (("reveal_css", "/dist/reveal.css"), ("reveal_theme", f"/dist/theme/{REVEAL['theme']}.css"))
}

# Figures (image outputs, not the pictures inside interactive views) as large as the slide allows,
# scaled up with their aspect kept; prose, tables and printed output smaller than nbconvert's
# defaults so that a slide holds a heading, a figure and a caption.
_DECK_CSS = """
.reveal .slides section .jp-RenderedImage > img,
.reveal .slides section .jp-RenderedSVG > svg {
  display: block; margin: 0.2em auto; width: 100%; height: auto; max-height: 540px; object-fit: contain;
}
.reveal .slides section .jp-RenderedMarkdown { font-size: 0.7em; line-height: 1.4; }
.reveal .slides section .jp-RenderedMarkdown li { line-height: 1.35; }
.reveal .slides section .jp-OutputArea-output { overflow-x: auto; }
.reveal .slides section .jp-RenderedHTMLCommon table { font-size: 18px; margin: 0.3em auto; }
.reveal .slides section .jp-RenderedHTMLCommon td,
.reveal .slides section .jp-RenderedHTMLCommon th { padding: 0.2em 0.6em; line-height: 1.25; }
.reveal .slides section .jp-OutputArea-output pre { font-size: 0.5em; line-height: 1.3; white-space: pre-wrap; }
.reveal .slides section h1 { font-size: 2.4em; }
.reveal .slides section h2 { font-size: 1.9em; }
.reveal .slides section h3 { font-size: 1.5em; }
.jp-OutputPrompt, .jp-InputPrompt { display: none; }
"""

# Printed (?print-pdf), the presenting tools are not drawn and the last page is not followed by a blank one.
_PRINT_CSS = """
html.print-pdf .slide-menu-wrapper, html.print-pdf .slide-menu-button, html.print-pdf #chalkboard,
html.print-pdf #notescanvas, html.print-pdf .pause-overlay { display: none !important; }
html.print-pdf .reveal .slides .pdf-page:last-of-type { page-break-after: avoid !important; break-after: avoid !important; }
"""

# Reveal is a global (its UMD build runs before require.js is defined). A slide taller than
# the deck scrolls instead of being cut off (nbconvert's reveal_scroll, without jQuery).
_FOOTER_JS = """
<script>
// nbconvert's heading anchors ("¶") would end every title in the slide menu.
document.querySelectorAll(".reveal a.anchor-link").forEach(function (a) { a.remove(); });
var bertologyConfig = %(config)s;
// Speaker view (s), chalkboard (b, c) and slide menu (m), where their scripts are in the page.
bertologyConfig.plugins = [window.RevealNotes, window.RevealChalkboard, window.RevealMenu].filter(Boolean);
Reveal.initialize(bertologyConfig);
// A slide a little taller than the deck is shrunk to fit (text stays readable down to 3/4 of its size); one
// taller than that scrolls.
function bertologyScrollTallSlides() {
  var limit = Reveal.getConfig().height;
  document.querySelectorAll(".reveal .slides section").forEach(function (section) {
    if (section.querySelector("section") !== null || section.dataset.bertologyFitted) return;
    // a table a little wider than the slide is shrunk to its width (to 0.7); a wider one scrolls across
    section.querySelectorAll(".jp-OutputArea-output").forEach(function (area) {
      var over = area.scrollWidth, room = area.clientWidth;
      if (room > 0 && over > room + 2) area.firstElementChild.style.zoom = String(Math.max(0.7, room / over));
    });
    var height = section.scrollHeight;
    if (height <= limit) return;
    section.dataset.bertologyFitted = "1";
    if (height * 0.75 <= limit) {
      section.style.zoom = String(limit / height);
    } else {
      section.style.maxHeight = limit + "px";
      section.style.overflowY = "auto";
    }
  });
}
Reveal.on("ready", bertologyScrollTallSlides);
Reveal.on("slidechanged", bertologyScrollTallSlides);
</script>
"""

_TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js -%}{{ resources.bertology_scripts }}{%- endblock html_head_js -%}
{%- block jupyter_widgets -%}
{%- if "widgets" in nb.metadata -%}{{ resources.bertology_widgets }}{%- endif -%}
{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{{ resources.bertology_mathjax }}{%- endblock html_head_js_mathjax -%}
{%- block html_head_css -%}<style type="text/css">{{ resources.bertology_css }}</style>{%- endblock html_head_css -%}
{%- block footer_js -%}{{ resources.bertology_footer }}{%- endblock footer_js -%}
"""

#: <script src=...> and <link href=...> that reach the network; CSS @import inside <style> elements.
_NETWORK_TAG = re.compile(
    r"""<(?:script\b[^>]*\bsrc|link\b[^>]*\bhref)\s*=\s*["']?(?:https?:)?//[^"'\s>]+""", re.IGNORECASE
)
_SCRIPT_BODY = re.compile(r"(<script\b[^>]*>).*?(</script\s*>)", re.IGNORECASE | re.DOTALL)
_STYLE_ELEMENT = re.compile(r"<style\b[^>]*>(.*?)</style>", re.IGNORECASE | re.DOTALL)
_CSS_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
_REMOTE_IMPORT = re.compile(r"""@import\s+(?:url\()?\s*["']?(?:https?:)?//[^"')\s;]+""", re.IGNORECASE)


#: LaTeX in markdown, as Jupyter renders it: $...$, $$...$$, \(...\), \[...\] or an environment.
_MATH = re.compile(r"\$\$.+?\$\$|(?<![\\$])\$[^$\s](?:[^$]*[^$\s])?\$|\\\(.+?\\\)|\\\[.+?\\\]|\\begin\{", re.DOTALL)

# Typeset the same delimiters Jupyter does, once the page has loaded (hidden slides included).
_MATHJAX_CONFIG = """<script>
window.MathJax = {tex: {inlineMath: [["$", "$"], ["\\\\(", "\\\\)"]], processEscapes: true}, svg: {fontCache: "global"}};
</script>"""


def has_math(nb) -> bool:
    """Whether any markdown cell of ``nb`` holds LaTeX that MathJax would typeset."""
    return any(cell.cell_type == "markdown" and _MATH.search(cell.source) for cell in nb.cells)


def network_references(html: str) -> list[str]:
    """What in ``html`` would load from the network: ``<script src>``, ``<link href>``, ``@import`` in a ``<style>``.

    The text of inline scripts is left out: a library's strings and comments mention URLs it does not load.
    """
    html = _SCRIPT_BODY.sub(r"\1\2", html)
    found = [m.group(0) for m in _NETWORK_TAG.finditer(html)]
    for style in _STYLE_ELEMENT.finditer(html):
        found += [m.group(0) for m in _REMOTE_IMPORT.finditer(_CSS_COMMENT.sub("", style.group(1)))]
    return found


def slides_path(executed_ipynb: str | os.PathLike) -> Path:
    """Where a notebook's deck goes by default: beside it, ``<stem>.slides.html``."""
    path = Path(executed_ipynb)
    return path.with_name(path.stem + SLIDES_SUFFIX)


def notebook_to_slides(
    executed_ipynb: str | os.PathLike, out_html: str | os.PathLike | None = None, *, show_code: bool = False
) -> Path:
    """Write the deck of one executed notebook to ``out_html`` (default: :func:`slides_path`); returns it.

    Raises :class:`~bertology_utils.core.errors.AssetMissingError` when reveal.js and the other
    libraries are not installed and the user is offline (online they load from CDNs, with a warning).
    """
    import nbformat

    source = Path(executed_ipynb)
    if not source.is_file():
        raise BertologyError(f"no notebook at {source}")
    out = Path(out_html) if out_html is not None else slides_path(source)
    nb = nbformat.read(source, as_version=4)
    _add_skipped_slide(nb, source.parent)
    nb = prepare_for_slides(nb, show_code=show_code)
    for_people(nb, machine_places(source))
    html = _export(nb, title=source.stem, show_code=show_code)
    remote = network_references(html)
    if remote:  # from the notebook's own outputs (e.g. a view that loads a CDN library), or assets not installed
        warnings.warn(
            f"{out} will not be complete offline: it loads {len(remote)} resource(s) from the network, "
            f"e.g. {remote[0]!r}",
            stacklevel=2,
        )
    atomic_write_text(out, html)
    return out


def _add_skipped_slide(nb, folder: Path) -> None:
    """After the title slide, a slide listing the sections the run did not compute and why."""
    import nbformat

    from bertology_utils.run.harness import load_skipped

    skipped = load_skipped(folder)
    if not skipped["sections"]:
        return
    lead = "Nothing in this notebook was computed" if skipped["everything"] else "Not computed in this run"
    # Reasons hold paths such as "<dir>/glue/...": escaped, or markdown would read them as HTML tags.
    lines = [f"### {lead}", ""] + [
        f"* **{html.escape(s['section'])}**: {html.escape(s['reason'])}" for s in skipped["sections"]
    ]
    cell = nbformat.v4.new_markdown_cell("\n".join(lines), metadata={"slideshow": {"slide_type": "slide"}})
    nb.cells.insert(min(1, len(nb.cells)), cell)


def prepare_for_slides(nb, *, show_code: bool = False):
    """A copy of notebook ``nb`` with the removals described in the module docstring applied."""
    nb = copy.deepcopy(nb)
    nb.cells = [cell for cell in nb.cells if not REMOVE_CELL_TAGS.intersection(cell.metadata.get("tags", []))]
    for cell in nb.cells:
        tags = set(cell.metadata.get("tags", []))
        hidden = cell.metadata.get("jupyter", {})
        if "injected-parameters" in tags:
            cell.metadata.setdefault("slideshow", {})["slide_type"] = "skip"
        if cell.cell_type != "code":
            continue
        if tags & REMOVE_INPUT_TAGS or hidden.get("source_hidden"):
            cell.metadata["transient"] = {"remove_source": True}
        if tags & REMOVE_OUTPUT_TAGS or hidden.get("outputs_hidden"):
            cell.outputs = []
        if not show_code:
            cell.outputs = [o for o in cell.outputs if not is_progress_output(o)]
    _skip_empty_code_cells(nb.cells, show_code)
    nb.cells = [part for cell in nb.cells for part in _split_long_markdown(cell)]
    nb.cells = [part for cell in nb.cells for part in _split_tall_outputs(cell)]
    _break_full_slides(nb.cells)
    return nb


#: About what a slide's prose holds at the deck's font (0.7em of the theme's 42 px, line height 1.4): lines
#: of text, and characters in a line of a 1280 px slide.
_SLIDE_LINES, _LINE_CHARS = 13, 80
#: The height, in pixels, that outputs may fill on one slide of 720, and what each kind takes: a table's row per
#: line of its tallest cell (18 px type: about 90 characters across the slide shared by the columns, as measured
#: in Chromium on the default run's decks: the widest columns take more than their share), a figure (at most
#: 540 px, see _DECK_CSS), a line of printed text.
_OUTPUT_PX, _ROW_PX, _EXTRA_LINE_PX, _TABLE_CHARS, _FIGURE_PX, _TEXT_LINE_PX = 620, 29, 22, 90, 540, 27
#: A table of at most this many rows (header rows included) wider than a slide is shown turned when that is narrower; the
#: width a character and a cell's padding take at the tables' 18 px, and the width of a slide less its margins.
_WIDE_TABLE_ROWS, _CHAR_PX, _CELL_PAD_PX, _SLIDE_WIDTH_PX = 12, 10, 20, 1180
#: A slide's height, less its margins, and a line of its prose.
_SLIDE_PX, _MARKDOWN_LINE_PX = 690, 41


def _table_rows_px(table) -> tuple[int, list[int]]:
    """The estimated height of a table's header and of each of its body rows (a BeautifulSoup table)."""
    rows = table.find_all("tr")
    columns = max((len(r.find_all(["th", "td"])) for r in rows), default=1)
    chars = max(6, _TABLE_CHARS // columns)

    def height(row) -> int:
        lines = max(
            (math.ceil(len(c.get_text(" ", strip=True)) / chars) for c in row.find_all(["th", "td"])), default=1
        )
        return _ROW_PX + _EXTRA_LINE_PX * max(0, lines - 1)

    head_rows, body = _head_and_body(table)
    return sum(height(r) for r in head_rows), [height(r) for r in body]


def _head_and_body(table) -> tuple[list, list]:
    """A BeautifulSoup table's header rows (its ``thead``'s) and body rows."""
    head = table.find("thead")
    head_rows = head.find_all("tr") if head is not None else []
    return head_rows, [r for r in table.find_all("tr") if r not in head_rows]


def _output_px(output) -> int:
    """About how tall an output shows on a slide."""
    data = output.get("data", {})
    if any(mime.startswith("image/") for mime in data):
        return _FIGURE_PX
    page = _joined(data.get("text/html", ""))
    if "<table" in page:
        from bs4 import BeautifulSoup

        tables = [_table_rows_px(t) for t in BeautifulSoup(page, "html.parser").find_all("table")]
        return sum(head + sum(body) for head, body in tables)
    text = _joined(output.get("text", "")) or _joined(data.get("text/plain", ""))
    return _TEXT_LINE_PX * sum(max(1, math.ceil(len(line) / 150)) for line in text.splitlines())


def _without_claim_details(output):
    """``output`` with a "paper vs ours" table (:func:`~bertology_utils.papers.claims.claims_table`) shown without
    the columns that explain its verdicts (:data:`~bertology_utils.papers.claims.CLAIMS_DETAIL_COLUMNS`), its
    index of claim ids (names for code, and a third of a slide's width) cut to what tells one case of a claim
    from another (``heads_prunable.SST-2`` -> ``SST-2``), or left out where no claim has cases."""
    from bertology_utils.papers.claims import CLAIMS_DETAIL_COLUMNS, claim_case

    page = _joined(output.get("data", {}).get("text/html", ""))
    if "<table" not in page or not all(f">{name}<" in page for name in ("claim", "verdict", *CLAIMS_DETAIL_COLUMNS)):
        return output
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(page, "html.parser")
    for table in soup.find_all("table"):
        header = [c.get_text(strip=True) for c in table.find("tr").find_all(["th", "td"])]
        if not {"claim", "verdict", *CLAIMS_DETAIL_COLUMNS} <= set(header):
            continue
        rows = table.find_all("tr")
        for row in rows[1:]:
            cells = row.find_all(["th", "td"])
            if not any(cell.name == "td" or cell.get_text(strip=True) for cell in cells[1:]):
                row.decompose()  # pandas' row naming the index ("id")
        rows = [row for row in rows if row.parent is not None]
        firsts = [row.find(["th", "td"]) for row in rows]
        cases = [claim_case(cell.get_text(strip=True)) for cell in firsts[1:]]
        drop = {i for i, name in enumerate(header) if name in CLAIMS_DETAIL_COLUMNS} | (set() if any(cases) else {0})
        if any(cases):
            firsts[0].string = "case"
            for cell, case in zip(firsts[1:], cases):
                cell.string = case
        for row in rows:
            cells = row.find_all(["th", "td"])
            if len(cells) == len(header):
                for i in drop:
                    cells[i].decompose()
    output = copy.deepcopy(output)
    output["data"]["text/html"] = str(soup)
    return output


def _table_grid(table) -> list[list]:
    """A BeautifulSoup table as a grid of its cells, a cell spanning several rows or columns in each of them."""
    grid: dict[tuple[int, int], object] = {}
    for r, row in enumerate(table.find_all("tr")):
        c = 0
        for cell in row.find_all(["th", "td"]):
            while (r, c) in grid:
                c += 1
            for dr in range(int(cell.get("rowspan", 1) or 1)):
                for dc in range(int(cell.get("colspan", 1) or 1)):
                    grid[(r + dr, c + dc)] = cell
            c += int(cell.get("colspan", 1) or 1)
    rows = 1 + max((r for r, _ in grid), default=-1)
    columns = 1 + max((c for _, c in grid), default=-1)
    return [[grid.get((r, c)) for c in range(columns)] for r in range(rows)]


def _grid_width(grid: list[list]) -> int:
    """About how wide a table grid shows: each column as wide as its longest text."""
    texts = [[cell.get_text(strip=True) if cell is not None else "" for cell in row] for row in grid]
    return sum(_CHAR_PX * max(map(len, column)) + _CELL_PAD_PX for column in zip(*texts))


def _transposed_wide_tables(output):
    """``output`` with each table much wider than a slide and only a few rows shown turned: its columns as rows
    (a table of two tasks by fifteen measures reads down a slide instead of across two)."""
    page = _joined(output.get("data", {}).get("text/html", ""))
    if "<table" not in page:
        return output
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(page, "html.parser")
    changed = False
    for table in soup.find_all("table"):
        grid = _table_grid(table)
        if not grid or len(grid) > _WIDE_TABLE_ROWS:
            continue
        width, turned_width = _grid_width(grid), _grid_width([list(column) for column in zip(*grid)])
        if width <= _SLIDE_WIDTH_PX or turned_width >= width:
            continue
        turned = soup.new_tag("table", attrs={"class": table.get("class", ["dataframe"])})
        body = soup.new_tag("tbody")
        for column in zip(*grid):
            row = soup.new_tag("tr")
            for cell in column:
                new = soup.new_tag("th" if cell is None or cell.name == "th" else "td")
                new.string = cell.get_text(" ", strip=True) if cell is not None else ""
                row.append(new)
            body.append(row)
        turned.append(body)
        table.replace_with(turned)
        changed = True
    if not changed:
        return output
    output = copy.deepcopy(output)
    output["data"]["text/html"] = str(soup)
    return output


def _table_parts(output) -> list:
    """An output holding one table taller than a slide as several outputs, each the table's header and the rows
    that fit, the later ones captioned with the rows they show; any other output as it is."""
    page = _joined(output.get("data", {}).get("text/html", ""))
    if page.count("<table") != 1 or _output_px(output) <= _OUTPUT_PX:
        return [output]
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(page, "html.parser")
    head_px, rows_px = _table_rows_px(soup.find("table"))
    chunks: list[list[int]] = [[]]
    used = head_px
    for i, px in enumerate(rows_px):
        if chunks[-1] and used + px > _OUTPUT_PX:
            chunks.append([])
            used = head_px
        chunks[-1].append(i)
        used += px
    if len(chunks) > 1 and len(chunks[-1]) <= 2:  # a row or two on a slide of their own: shrink the last slide
        last = chunks.pop()
        chunks[-1] += last
    if len(chunks) == 1:
        return [output]
    parts = []
    for chunk in chunks:
        keep = set(chunk)
        part_soup = BeautifulSoup(page, "html.parser")
        part_table: Any = part_soup.find("table")
        for i, row in enumerate(_head_and_body(part_table)[1]):
            if i not in keep:
                row.decompose()
        caption = part_soup.new_tag("caption")
        caption.string = f"rows {chunk[0] + 1}–{chunk[-1] + 1} of {len(rows_px)}"
        part_table.insert(0, caption)
        part = copy.deepcopy(output)
        part["data"]["text/html"] = str(part_soup)
        parts.append(part)
    return parts


def _break_full_slides(cells) -> None:
    """A cell that would continue a slide already full (prose and outputs above it) opens the next slide."""
    used = 0.0
    for cell in cells:
        kind = _slide_type(cell)
        if kind in ("skip", "notes"):
            continue
        if cell.cell_type == "markdown":
            px = _MARKDOWN_LINE_PX * sum(_block_lines(b) for b in _markdown_blocks(cell.source))
        else:
            px = sum(_output_px(o) for o in cell.get("outputs", []))
        if kind in ("slide", "subslide"):
            used = 0.0
        elif used and used + px > _SLIDE_PX:
            cell.metadata.setdefault("slideshow", {})["slide_type"] = "slide"
            used = 0.0
        used += px


def _split_tall_outputs(cell) -> list:
    """A code cell whose outputs are taller than a slide as several cells, each opening a slide with the outputs
    that fit (a table taller than a slide split by its rows); the code shows, if at all, with the first."""
    if cell.cell_type != "code" or _slide_type(cell) in ("skip", "notes") or not cell.outputs:
        return [cell]
    outputs = []  # each with whether it must open a slide: every part of a table split by its rows does
    for output in cell.outputs:
        parts = _table_parts(_transposed_wide_tables(_without_claim_details(output)))
        outputs += [(part, len(parts) > 1) for part in parts]
    groups: list[list] = [[]]
    used = 0
    for output, opens in outputs:
        px = _output_px(output)
        if groups[-1] and (opens or (used + px > _OUTPUT_PX and (px > 3 * _TEXT_LINE_PX or used > _OUTPUT_PX))):
            groups.append([])
            used = 0
        groups[-1].append(output)
        used += px
    cells = []
    for i, group in enumerate(groups):
        part = _continued(cell, i)
        part.outputs = group
        if i:
            part.metadata["transient"] = {"remove_source": True}
        cells.append(part)
    return cells


def _block_lines(block: str) -> float:
    """About how many lines of a slide a markdown block takes: headings two, each paragraph or list item its
    wrapped length, code one per line."""
    if block.lstrip().startswith("```"):
        return len(block.splitlines()) * 0.8
    lines, item = 0.0, ""
    for line in [*block.splitlines(), ""]:
        text = line.strip()
        starts_item = bool(re.match(r"(?:[*+-]|\d+[.)])\s", text)) or text.startswith(("#", "|", ">"))
        if (starts_item or not text) and item:
            lines += math.ceil(len(item) / _LINE_CHARS)
            item = ""
        if text.startswith("#"):
            lines += 2
        elif text:
            item = f"{item} {text}" if item else text
    return lines + 0.5  # the gap after a block


def _markdown_blocks(source: str) -> list[str]:
    """A markdown text's blocks (paragraphs, lists, fenced code), as blank lines outside code separate them."""
    blocks: list[str] = []
    current: list[str] = []
    fenced = False
    for line in source.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if not line.strip() and not fenced:
            if current:
                blocks.append("\n".join(current))
            current = []
        else:
            current.append(line)
    if current:
        blocks.append("\n".join(current))
    return blocks


def _split_long_markdown(cell) -> list:
    """A markdown cell too long for one slide as several cells, cut between its blocks (paragraphs, lists,
    code), each opening a slide; a part after the first repeats the cell's heading, marked "(continued)"."""
    if cell.cell_type != "markdown" or _slide_type(cell) in ("skip", "notes"):
        return [cell]
    blocks = _markdown_blocks(cell.source)
    if sum(_block_lines(b) for b in blocks) <= _SLIDE_LINES or len(blocks) < 2:
        return [cell]
    heading = re.match(r"#{1,6} .+", blocks[0])
    parts: list[list[str]] = [[]]
    used = 0.0
    for block in blocks:
        lines = _block_lines(block)
        if parts[-1] and used + lines > _SLIDE_LINES:
            carried = [parts[-1].pop()] if re.fullmatch(r"#{1,6} .+", parts[-1][-1]) and len(parts[-1]) > 1 else []
            parts.append(carried)
            used = sum(_block_lines(b) for b in carried)
        parts[-1].append(block)
        used += lines
    cells = []
    for i, blocks_of_part in enumerate(parts):
        part = _continued(cell, i)
        if i and heading and not re.match(r"#{1,6} ", blocks_of_part[0]):
            level = heading.group(0).split(" ", 1)[0]
            title = heading.group(0).split(" ", 1)[1]
            blocks_of_part = [f"{'#' * max(len(level), 3)} {title} (continued)", *blocks_of_part]
        part.source = "\n\n".join(blocks_of_part)
        cells.append(part)
    return cells


def _continued(cell, part: int):
    """A copy of ``cell`` for the ``part``-th slide of what it shows: each part after the first opens a slide and
    has an id of its own (nbformat asks ids to be unique)."""
    copied = copy.deepcopy(cell)
    if part:
        copied.metadata.setdefault("slideshow", {})["slide_type"] = "slide"
        if "id" in copied:
            copied["id"] = f"{cell['id'][:56]}-part{part}"
    return copied


#: tqdm's notebook bar as text: "desc: 100%|#####| 8/8 [00:01<00:00, ...]".
_PROGRESS_TEXT = re.compile(r"\d+%\|.*\|\s*\d+/\d+\s*\[")


def is_progress_output(output) -> bool:
    """What a static page (a deck, the docs) leaves out: stderr (warnings, text bars) and tqdm's bar widgets."""
    return (output.get("output_type") == "stream" and output.get("name") == "stderr") or _is_progress_bar(output)


def _is_progress_bar(output) -> bool:
    """A tqdm progress-bar widget (its plain-text form is the bar): noise in a talk."""
    data = output.get("data", {})
    text = data.get("text/plain", "")
    return "application/vnd.jupyter.widget-view+json" in data and bool(
        _PROGRESS_TEXT.search(text if isinstance(text, str) else "".join(text))
    )


def _slide_type(cell) -> str:
    return cell.metadata.get("slideshow", {}).get("slide_type", "-")


def _skip_empty_code_cells(cells, show_code: bool) -> None:
    """Mark code cells that show nothing (no outputs, and code hidden) 'skip'.

    A skipped cell that opened a slide or subslide hands that over to the next shown cell when
    that cell would only have continued it ('-' or 'fragment'), so the slide structure stays.
    """
    opens = {"slide": 2, "subslide": 1}
    for i, cell in enumerate(cells):
        code_shown = show_code and not cell.metadata.get("transient", {}).get("remove_source")
        if cell.cell_type != "code" or cell.outputs or code_shown or _slide_type(cell) in ("skip", "notes"):
            continue
        kind = _slide_type(cell)
        following = next((c for c in cells[i + 1 :] if _slide_type(c) not in ("skip", "notes")), None)
        if kind in opens and following is not None and opens.get(_slide_type(following), 0) < opens[kind]:
            following.metadata.setdefault("slideshow", {})["slide_type"] = kind
        cell.metadata.setdefault("slideshow", {})["slide_type"] = "skip"


def _export(nb, *, title: str, show_code: bool) -> str:
    from nbconvert import SlidesExporter

    from bertology_utils.present.assets import script_tag, style_tag

    exporter = SlidesExporter(
        raw_template=_TEMPLATE,
        reveal_url_prefix=_REVEAL_PREFIX,
        reveal_theme=REVEAL["theme"],
        reveal_transition=REVEAL["transition"],
        reveal_width=str(REVEAL["width"]),
        reveal_height=str(REVEAL["height"]),
        exclude_input=not show_code,
        exclude_input_prompt=True,
        exclude_output_prompt=True,
        embed_images=True,
    )
    if "title" not in nb.metadata:
        nb.metadata["title"] = title
    resources = {
        # reveal.js first: its UMD build would register an anonymous AMD module once require.js exists.
        "bertology_scripts": presenting_tools() + "\n" + "\n".join(script_tag(name) for name in ("jquery", "require")),
        "bertology_widgets": script_tag("widgets") if "widgets" in nb.metadata else "",
        "bertology_mathjax": _MATHJAX_CONFIG + "\n" + script_tag("mathjax") if has_math(nb) else "",
        "bertology_css": _DECK_CSS,
        "bertology_footer": reveal_start(reveal_config()),
    }
    html, _ = exporter.from_notebook_node(nb, resources=resources)
    for asset, link in _STYLESHEET_LINKS.items():
        style = _without_remote_imports(style_tag(asset))
        html, count = link.subn(lambda _: style, html)  # noqa: B023 (called within this iteration)
        if count != 1:  # nbconvert's reveal template changed: fail loudly rather than ship a broken deck
            raise BertologyError(f"nbconvert's slide template no longer links {asset} as expected")
    return html


def reveal_config(size: tuple[int, int] = SLIDE_SIZE) -> dict:
    """The settings every deck starts reveal.js with: the slide size, print layout, chalkboard and menu."""
    return {
        "controls": True,
        "progress": True,
        "history": True,
        "slideNumber": "c/t",
        "transition": REVEAL["transition"],
        "width": size[0],
        "height": size[1],
        "margin": REVEAL["margin"],
        # Printing (?print-pdf): one page per slide, a slide taller than the page is cut, not continued.
        "pdfMaxPagesPerSlide": 1,
        "pdfSeparateFragments": False,
        "chalkboard": {"theme": "whiteboard", "boardmarkerWidth": 4},
        # The menu fetches its stylesheet from ``path``: inlined here, so it is given an empty data: URL.
        "menu": {"path": _menu_path(), "loadIcons": False, "themes": False, "transitions": False, "numbers": True},
    }


def reveal_start(config: dict) -> str:
    """The script that starts reveal.js with ``config`` and the presenting tools that are in the page."""
    return _FOOTER_JS % {"config": json.dumps(config)}


def presenting_tools() -> str:
    """reveal.js with the speaker view (s), chalkboard (b, c) and slide menu (m), inlined as HTML tags, and the
    style that leaves them out of a printed deck.

    The plugins are UMD builds, so they become globals: RevealNotes, RevealChalkboard, RevealMenu.
    """
    from bertology_utils.present.assets import script_tag, style_tag

    return "\n".join(
        [script_tag("reveal"), script_tag("reveal_notes"), _chalkboard_script(), script_tag("menu")]
        + [_without_remote_imports(style_tag(name)) for name in ("chalkboard_css", "menu_css")]
        + [_fontawesome_style(), f"<style>{_PRINT_CSS}</style>"]
    )


def reveal_styles() -> str:
    """reveal.js's stylesheet and the decks' theme as inline ``<style>`` elements (no web fonts)."""
    from bertology_utils.present.assets import style_tag

    return "\n".join(_without_remote_imports(style_tag(asset)) for asset in _STYLESHEET_LINKS)


def _without_remote_imports(css: str) -> str:
    """Drop ``@import url(https://...);`` (reveal's themes fetch web fonts; the fallback fonts serve)."""
    return re.sub(_REMOTE_IMPORT.pattern + r"""["']?\)?\s*;?""", "", css, flags=re.IGNORECASE)


def _menu_path() -> str:
    """Where reveal.js-menu fetches ``menu.css`` from: nothing to fetch when the stylesheet is inlined."""
    from bertology_utils.present.assets import ASSETS, asset_path

    if asset_path("menu_css") is not None:
        return "data:text/css,"  # the menu waits for this (empty) stylesheet to load before it builds
    return ASSETS["menu_css"].cdn.rsplit("/", 1)[0] + "/"


def _data_uri(path: Path, mime: str) -> str:
    return f"data:{mime};base64," + base64.b64encode(path.read_bytes()).decode("ascii")


#: The chalkboard's pictures (pen cursors, sponge, board backgrounds), which it loads from beside its script.
#: ``path + 'img/sponge.png'`` and ``'url(' + path + 'img/chalk-red.png), auto'``: the string goes on after the name.
_CHALKBOARD_IMAGE = re.compile(r"""path\s*\+\s*(["'])(img/[\w.-]+\.png)""")


def _chalkboard_script() -> str:
    """The chalkboard plugin with its pictures inlined as ``data:`` URLs (an inline script has no folder)."""
    from bertology_utils.present.assets import asset_path, inline_script, script_tag

    path = asset_path("chalkboard")
    if path is None:
        return script_tag("chalkboard")  # from the CDN (with a warning), or AssetMissingError offline
    folder = path.parent
    text, count = _CHALKBOARD_IMAGE.subn(
        lambda m: m.group(1) + _data_uri(folder / m.group(2), "image/png"), path.read_text(encoding="utf-8")
    )
    if count == 0:  # the plugin changed how it finds its pictures: fail loudly rather than draw without them
        raise BertologyError(f"{path} no longer loads its pictures as path + 'img/...'")
    return inline_script(text)


_FONT_FACE = re.compile(r"@font-face\s*\{[^}]*\}")


#: The family name the inlined Font Awesome faces go by.
_ICON_FONT = "Bertology Icons"


def _fontawesome_style() -> str:
    """Font Awesome (the menu's and the chalkboard's icons) with its two free web fonts inlined."""
    from bertology_utils.present.assets import asset_path, style_tag

    path = asset_path("fontawesome_css")
    if path is None:
        return style_tag("fontawesome_css")
    fonts = path.parent.parent / "webfonts"
    faces = "".join(
        f'@font-face{{font-family:"{_ICON_FONT}";font-style:normal;font-weight:{weight};font-display:block;'
        f'src:url({_data_uri(fonts / name, "font/woff2")}) format("woff2")}}'
        for weight, name in ((400, "fa-regular-400.woff2"), (900, "fa-solid-900.woff2"))
    )
    css = _FONT_FACE.sub("", path.read_text(encoding="utf-8"))
    # The widget renderer adds Font Awesome's own faces later, pointing at files that are not there: the icons
    # are drawn with the inlined faces under a name of their own.
    icons = f'.fa,.fas,.far{{font-family:"{_ICON_FONT}" !important}}'
    return f"<style>\n{faces}\n{css}\n{icons}\n</style>"


# ---------------------------------------------------------------------------------------------------------------
# Outputs made for people: numbers in tables to three significant digits, no paths of this machine.

#: What a table shows for a value that is missing or was not computed.
MISSING = "—"
_MISSING_CELLS = frozenset({"NaN", "nan", "<NA>", "None", "NaT"})
_FLOAT = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+(?=[eE]))(?:[eE][-+]?\d+)?")
#: A p-value column: "p", "p-value", "p_val", "pvalue", "wilcoxon_p", "p (one-sided)"; not "top", "p_head".
_P_COLUMN = re.compile(r"(?:^|[\s_(-])p(?:[-_ ]?val(?:ue)?s?)?(?:$|[\s)])", re.IGNORECASE)
#: Below this a p-value reads "< 0.001".
P_FLOOR = 0.001


def format_number(value: float, *, p_value: bool = False) -> str:
    """``value`` to three significant digits (0.659223 -> 0.659, 0.019808 -> 0.0198, 1234.5 -> 1234).

    With ``p_value`` a value below 0.001 reads ``< 0.001``; a missing value (NaN) reads ``—``.
    """
    if math.isnan(value):
        return MISSING
    if p_value and 0 <= value < P_FLOOR:
        return f"< {P_FLOOR:g}"
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    text = f"{value:.3g}"
    return f"{value:.0f}" if "e+" in text else text


def format_table_numbers(page: str) -> str:
    """The HTML ``page`` with every decimal number that fills a table cell shown by :func:`format_number`.

    Integers and text are left as they are; a column whose header names a p-value (``p``, ``p-value``,
    ``pval``, ``..._p``) shows values below 0.001 as ``< 0.001``; a cell pandas left missing (``NaN``,
    ``<NA>``, ``None``, ``NaT``) shows ``—``.
    """
    if "<table" not in page:
        return page
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(page, "html.parser")
    changed = False
    for table in soup.find_all("table"):
        head = table.find("thead")
        header_rows = head.find_all("tr") if head is not None else []
        headers = [c.get_text(" ", strip=True) for c in header_rows[-1].find_all(["th", "td"])] if header_rows else []
        body = table.find("tbody") or table
        for row in body.find_all("tr"):
            cells = row.find_all(["th", "td"])
            for i, cell in enumerate(cells):
                text = cell.get_text().strip()
                if cell.name == "td" and text in _MISSING_CELLS:
                    cell.string = MISSING
                    changed = True
                    continue
                if cell.name != "td" or len(cell.contents) != 1 or not _FLOAT.fullmatch(text):
                    continue
                column = len(headers) - len(cells) + i  # aligned from the right: index columns come first
                is_p = 0 <= column < len(headers) and bool(_P_COLUMN.search(headers[column]))
                cell.string = format_number(float(text), p_value=is_p)
                changed = True
    return str(soup) if changed else page


def machine_places(executed_ipynb: str | os.PathLike | None = None) -> list[tuple[str, str]]:
    """The folders of this machine a deck must not show, each with what it shows instead, most specific first.

    The results folder (``<results>``; with ``executed_ipynb``, the folder above its run too), the cache
    (``<cache>``), the repository (``<repo>``), the data folders (``$BERTOLOGY_DATA_DIR`` and the project's own,
    ``<data>``), the temporary folder (``<tmp>``) and the home folder (``~``).
    """
    from bertology_utils.core import settings
    from bertology_utils.run.harness import results_dir

    places = [(results_dir(), "<results>"), (settings.cache_dir(), "<cache>"), (settings.PROJECT_ROOT, "<repo>")]
    places += [
        (folder, "<data>") for folder in (settings.data_dir(), settings.project_data_dir()) if folder is not None
    ]
    notebook = Path(executed_ipynb).resolve() if executed_ipynb is not None else None
    if notebook is not None and notebook.parent.name == notebook.stem and len(notebook.parents) > 3:
        places.insert(0, (notebook.parents[2], "<results>"))  # <results>/<run>/<stem>/<stem>.ipynb
    places += [(Path(tempfile.gettempdir()), "<tmp>"), (Path.home(), "~")]
    found: dict[str, str] = {}
    for folder, label in places:
        for spelling in {str(folder), str(Path(folder).resolve())}:
            if len(spelling) > 1:  # never "/"
                found.setdefault(spelling.rstrip("/"), label)
    return sorted(found.items(), key=lambda item: -len(item[0]))


def scrub_paths(text: str, places: Iterable[tuple[str, str]] | None = None) -> str:
    """``text`` with each absolute path under one of ``places`` (default :func:`machine_places`) shortened.

    ``/home/ann/.cache/bertology/models/x`` reads ``<cache>/models/x``; the most specific folder wins.
    """
    places = machine_places() if places is None else list(places)
    if not places:
        return text
    pattern = re.compile("|".join(f"(?:file://)?{re.escape(folder)}(?![\\w.-])" for folder, _ in places))
    labels = dict(places)
    return pattern.sub(lambda m: labels[m.group(0).removeprefix("file://")], text)


_TEXT_MIME = ("text/plain", "text/html", "text/markdown", "text/latex")


def for_people(nb, places: list[tuple[str, str]] | None = None) -> None:
    """Tables' numbers formatted (:func:`format_table_numbers`) and this machine's paths shortened
    (:func:`scrub_paths`, default places :func:`machine_places`) in every cell: its source (papermill's injected
    ``output_dir``) and its outputs. Decks and the docs' notebook pages show notebooks through it."""
    places = machine_places() if places is None else places
    for cell in nb.cells:
        cell.source = scrub_paths(cell.source, places)
        for output in cell.get("outputs", []):
            if "text" in output:
                output["text"] = scrub_paths(_joined(output["text"]), places)
            data = output.get("data", {})
            for mime in _TEXT_MIME:
                if mime in data:
                    value = scrub_paths(_joined(data[mime]), places)
                    data[mime] = format_table_numbers(value) if mime == "text/html" else value


def _joined(value) -> str:
    return value if isinstance(value, str) else "".join(value)


# ---------------------------------------------------------------------------------------------------------------
# PDF

#: The Chromium that prints decks to PDF (Debian's package).
CHROMIUM = "/usr/bin/chromium"


def deck_to_pdf(deck: str | os.PathLike, pdf: str | os.PathLike | None = None, *, timeout_s: float = 120) -> Path:
    """Print ``deck`` (a deck's HTML) to ``pdf`` (default: beside it, ``.pdf``) with Chromium; returns the path.

    reveal.js lays the deck out for print (``?print-pdf``): one page per slide, each page the deck's size.
    Raises :class:`BertologyError` saying what to install when Playwright or Chromium is missing.
    """
    deck = Path(deck)
    out = Path(pdf) if pdf is not None else deck.with_name(deck.name.removesuffix(".html") + ".pdf")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        raise BertologyError("printing decks to PDF needs Playwright: pip install playwright") from None
    chromium = CHROMIUM if Path(CHROMIUM).is_file() else shutil.which("chromium")
    if chromium is None:
        raise BertologyError(f"printing decks to PDF needs Chromium at {CHROMIUM}: apt-get install chromium")
    out.parent.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page()
            page.goto(deck.resolve().as_uri() + "?print-pdf", timeout=timeout_s * 1000)
            page.wait_for_function(
                "() => window.Reveal !== undefined && Reveal.isReady() && document.querySelector('.pdf-page')",
                timeout=timeout_s * 1000,
            )
            page.wait_for_function("() => Array.from(document.images).every(i => i.complete)", timeout=timeout_s * 1000)
            page.pdf(path=str(out), prefer_css_page_size=True, print_background=True)
        finally:
            browser.close()
    return out


def run_slides(
    run_dir: str | os.PathLike,
    notebooks: Iterable[str] = (),
    *,
    out_dir: str | os.PathLike | None = None,
    show_code: bool = False,
) -> list[Path]:
    """Decks for the executed notebooks of a run (all, or those named by stem, number or file name).

    Each goes beside its notebook, or into ``out_dir`` as ``<stem>.slides.html``. Returns the paths.
    """
    outputs = []
    for path in _chosen(run_dir, notebooks)[1]:
        out = Path(out_dir) / (path.stem + SLIDES_SUFFIX) if out_dir is not None else None
        outputs.append(notebook_to_slides(path, out, show_code=show_code))
    return outputs


def _chosen(run_dir: str | os.PathLike, notebooks: Iterable[str]) -> tuple[Path, list[Path]]:
    """The run's folder and the executed notebooks named (by stem, number or file name; none: all of them)."""
    from bertology_utils.present.report import executed_notebooks
    from bertology_utils.run.harness import find_run

    folder = find_run(run_dir)
    available = executed_notebooks(folder)
    if not available:
        raise BertologyError(f"no executed notebooks in {folder} (expected <stem>/<stem>.ipynb)")
    chosen = [_pick(name, available, folder) for name in notebooks] or list(available.values())
    return folder, list(dict.fromkeys(chosen))


def _pick(name: str, available: dict[str, Path], folder: Path) -> Path:
    """The executed notebook a user means by ``name``: its stem, number, file name or path."""
    given = Path(name)
    if given.suffix == ".ipynb" and given.is_file():
        return given
    stem = given.name.removesuffix(".ipynb")
    matches = [
        p
        for s, p in available.items()
        if stem == s or (stem.isdigit() and s.split("_")[0].isdigit() and int(s.split("_")[0]) == int(stem))
    ]
    if len(matches) == 1:
        return matches[0]
    listing = ", ".join(available) or "none"
    what = "is ambiguous" if matches else "is not in this run"
    raise BertologyError(f"notebook {name!r} {what}; executed notebooks in {folder}: {listing}")


#: The root element of an SVG, and the size attributes :func:`_fit_to_slide` reads and replaces.
_SVG_ROOT = re.compile(r"<svg\b[^>]*>", re.DOTALL)
_SVG_SIZE = re.compile(r"""\s(width|height|viewBox)\s*=\s*["']([^"']*)["']""")
#: CSS pixels per unit of an SVG length (matplotlib writes points).
_PX_PER = {"": 1.0, "px": 1.0, "pt": 96 / 72, "in": 96.0, "cm": 96 / 2.54, "mm": 96 / 25.4}


def _fit_to_slide(svg: str, source: Path) -> str:
    """``svg`` with its width and height set (in px) to fill a slide of :data:`SLIDE_SIZE`, aspect kept.

    Only the root element changes: the drawing scales through its viewBox (added when missing), so
    lines and text stay sharp at any size.
    """
    root = _SVG_ROOT.search(svg)
    size = dict(_SVG_SIZE.findall(root.group(0))) if root else {}
    lengths = [re.fullmatch(r"([\d.]+)\s*([a-z]*)", size.get(k, "").strip()) for k in ("width", "height")]
    if root is None or not all(m and m.group(2) in _PX_PER for m in lengths):
        raise BertologyError(f"{source} is not an SVG with a width and height in px, pt, in, cm or mm")
    width, height = (float(m.group(1)) * _PX_PER[m.group(2)] for m in lengths if m)
    view_box = size.get("viewBox") or f"0 0 {width:g} {height:g}"
    scale = min(SLIDE_SIZE[0] / width, SLIDE_SIZE[1] / height)
    tag = _SVG_SIZE.sub("", root.group(0))
    tag = f'{tag[:4]} width="{width * scale:.0f}px" height="{height * scale:.0f}px" viewBox="{view_box}"{tag[4:]}'
    return svg[: root.start()] + tag + svg[root.end() :]


def slide_figures(
    run_dir: str | os.PathLike, notebooks: Iterable[str] = (), *, out_dir: str | os.PathLike | None = None
) -> list[Path]:
    """Every figure the run's notebooks saved (all, or those named as for :func:`run_slides`) as an SVG
    sized for a slide, into ``<out_dir or run>/figures-for-slides/<notebook>-<name>.svg``; returns the paths.

    A figure saved as PNG only (a run made before ``save_figure`` wrote SVGs, or ``formats="png"``) is
    named in a warning: its SVG can only come from running the notebook again. Raster parts of a figure
    (``imshow`` panels) keep the resolution they were saved at (``save_figure``'s dpi, 150).
    """
    folder, chosen = _chosen(run_dir, notebooks)
    target = Path(out_dir if out_dir is not None else folder) / SLIDE_FIGURES_DIR
    written, without_svg = [], []
    for notebook in chosen:
        figures = notebook.parent / "figures"
        svgs = sorted(figures.glob("*.svg"))
        for svg in svgs:
            out = target / f"{notebook.stem}-{svg.name}"
            atomic_write_text(out, _fit_to_slide(svg.read_text(encoding="utf-8"), svg))
            written.append(out)
        has_svg = {svg.stem for svg in svgs}
        without_svg += [
            f"{notebook.stem}/{png.name}" for png in sorted(figures.glob("*.png")) if png.stem not in has_svg
        ]
    if without_svg:
        warnings.warn(
            f"{len(without_svg)} figure(s) were saved as PNG only and are not in {target}: "
            f"{', '.join(without_svg)}; run their notebooks again to have them as SVG",
            stacklevel=2,
        )
    return written
