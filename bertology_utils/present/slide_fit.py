"""Fitting a notebook's cells to slides: prose too long for one slide cut between its blocks, outputs taller than
a slide spread over several (a long table by its rows), a table much wider than a slide turned, a "paper vs
ours" table without its explaining columns, and a cell that would overflow a full slide moved to the next one.

Heights and widths are estimated from the text (the deck's fonts and sizes, see ``_DECK_CSS`` in
:mod:`bertology_utils.present.slides`), not measured; the deck's script shrinks or scrolls what still overflows.
"""

from __future__ import annotations

import copy
import math
import re
from typing import TYPE_CHECKING

from bertology_utils.present.readable import joined

if TYPE_CHECKING:
    from bs4 import Tag
    from nbformat import NotebookNode

__all__ = ["fit_to_slides", "slide_type"]

#: About what a slide's prose holds at the deck's font (0.7em of the theme's 42 px, line height 1.4): lines
#: of text, and characters in a line of a 1280 px slide.
_SLIDE_LINES, _LINE_CHARS = 13, 80
#: The height, in pixels, that outputs may fill on one slide of 720, and what each kind takes: a table's row per
#: line of its tallest cell (18 px type: about 90 characters across the slide shared by the columns, as measured
#: in Chromium on the default run's decks: the widest columns take more than their share), a figure (at most
#: 540 px, see the decks' CSS), a line of printed text.
_OUTPUT_PX, _ROW_PX, _EXTRA_LINE_PX, _TABLE_CHARS, _FIGURE_PX, _TEXT_LINE_PX = 620, 29, 22, 90, 540, 27
#: A table of at most this many rows (header rows included) wider than a slide is shown turned when that is narrower; the
#: width a character and a cell's padding take at the tables' 18 px, and the width of a slide less its margins.
_WIDE_TABLE_ROWS, _CHAR_PX, _CELL_PAD_PX, _SLIDE_WIDTH_PX = 12, 10, 13, 1180
#: A slide's height, less its margins, and a line of its prose.
_SLIDE_PX, _MARKDOWN_LINE_PX = 690, 41


def fit_to_slides(cells: list[NotebookNode]) -> list[NotebookNode]:
    """``cells`` (a notebook's, after its removals) with each one too long or too tall for a slide split into
    several, and any that would overflow a full slide opening the next one."""
    cells = [part for cell in cells for part in _split_long_markdown(cell)]
    cells = [part for cell in cells for part in _split_tall_outputs(cell)]
    _break_full_slides(cells)
    return cells


def _table_rows_px(table: Tag) -> tuple[int, list[int]]:
    """The estimated height of a table's header and of each of its body rows (a BeautifulSoup table)."""
    rows = table.find_all("tr")
    columns = max((len(r.find_all(["th", "td"])) for r in rows), default=1)
    chars = max(6, _TABLE_CHARS // columns)

    def height(row: Tag) -> int:
        lines = max(
            (math.ceil(len(c.get_text(" ", strip=True)) / chars) for c in row.find_all(["th", "td"])), default=1
        )
        return _ROW_PX + _EXTRA_LINE_PX * max(0, lines - 1)

    head_rows, body = _head_and_body(table)
    return sum(height(r) for r in head_rows), [height(r) for r in body]


def _head_and_body(table: Tag) -> tuple[list[Tag], list[Tag]]:
    """A BeautifulSoup table's header rows (its ``thead``'s) and body rows."""
    head = table.find("thead")
    head_rows = list(head.find_all("tr")) if head is not None else []
    return head_rows, [r for r in table.find_all("tr") if r not in head_rows]


def _output_px(output: NotebookNode) -> int:
    """About how tall an output shows on a slide."""
    data = output.get("data", {})
    if any(mime.startswith("image/") for mime in data):
        return _FIGURE_PX
    page = joined(data.get("text/html", ""))
    if "<table" in page:
        from bs4 import BeautifulSoup

        tables = [_table_rows_px(t) for t in BeautifulSoup(page, "html.parser").find_all("table")]
        return sum(head + sum(body) for head, body in tables)
    text = joined(output.get("text", "")) or joined(data.get("text/plain", ""))
    return _TEXT_LINE_PX * sum(max(1, math.ceil(len(line) / 150)) for line in text.splitlines())


def _without_claim_details(output: NotebookNode) -> NotebookNode:
    """``output`` with a "paper vs ours" table (:func:`~bertology_utils.papers.claims.claims_table`) shown without
    the columns that explain its verdicts (:data:`~bertology_utils.papers.claims.CLAIMS_DETAIL_COLUMNS`), its
    index of claim ids (names for code, and a third of a slide's width) cut to what tells one case of a claim
    from another (``heads_prunable.SST-2`` -> ``SST-2``), or left out where no claim has cases."""
    from bertology_utils.papers.claims import CLAIMS_DETAIL_COLUMNS, claim_case

    page = joined(output.get("data", {}).get("text/html", ""))
    if "<table" not in page or not all(f">{name}<" in page for name in ("claim", "verdict", *CLAIMS_DETAIL_COLUMNS)):
        return output
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(page, "html.parser")
    for table in soup.find_all("table"):
        top = table.find("tr")
        header = [c.get_text(strip=True) for c in top.find_all(["th", "td"])] if top is not None else []
        if not {"claim", "verdict", *CLAIMS_DETAIL_COLUMNS} <= set(header):
            continue
        rows = list(table.find_all("tr"))
        for row in rows[1:]:
            cells = row.find_all(["th", "td"])
            if not any(cell.name == "td" or cell.get_text(strip=True) for cell in cells[1:]):
                row.decompose()  # pandas' row naming the index ("id")
        rows = [row for row in rows if row.parent is not None]
        firsts = [first for row in rows if (first := row.find(["th", "td"])) is not None]
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


def _table_grid(table: Tag) -> list[list[Tag | None]]:
    """A BeautifulSoup table as a grid of its cells, a cell spanning several rows or columns in each of them."""
    grid: dict[tuple[int, int], Tag] = {}
    for r, row in enumerate(table.find_all("tr")):
        c = 0
        for cell in row.find_all(["th", "td"]):
            while (r, c) in grid:
                c += 1
            for dr in range(_span(cell, "rowspan")):
                for dc in range(_span(cell, "colspan")):
                    grid[(r + dr, c + dc)] = cell
            c += _span(cell, "colspan")
    rows = 1 + max((r for r, _ in grid), default=-1)
    columns = 1 + max((c for _, c in grid), default=-1)
    return [[grid.get((r, c)) for c in range(columns)] for r in range(rows)]


def _span(cell: Tag, attribute: str) -> int:
    """How many rows or columns (``rowspan``, ``colspan``) a table cell spans."""
    value = cell.get(attribute)
    return int(value) if isinstance(value, str) and value else 1


def _grid_width(grid: list[list[Tag | None]]) -> int:
    """About how wide a table grid shows: each column as wide as its longest text."""
    texts = [[cell.get_text(strip=True) if cell is not None else "" for cell in row] for row in grid]
    return sum(_CHAR_PX * max(map(len, column)) + _CELL_PAD_PX for column in zip(*texts))


def _transposed_wide_tables(output: NotebookNode) -> NotebookNode:
    """``output`` with each table much wider than a slide and only a few rows shown turned: its columns as rows
    (a table of two tasks by fifteen measures reads down a slide instead of across two)."""
    page = joined(output.get("data", {}).get("text/html", ""))
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
        classes = table.get("class") or ["dataframe"]
        turned = soup.new_tag("table", attrs={"class": classes if isinstance(classes, str) else " ".join(classes)})
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


def _table_parts(output: NotebookNode) -> list[NotebookNode]:
    """An output holding one table taller than a slide as several outputs, each the table's header and the rows
    that fit, the later ones captioned with the rows they show; any other output as it is."""
    page = joined(output.get("data", {}).get("text/html", ""))
    if page.count("<table") != 1 or _output_px(output) <= _OUTPUT_PX:
        return [output]
    from bs4 import BeautifulSoup

    table = BeautifulSoup(page, "html.parser").find("table")
    if table is None:  # "<table" in the text, not a table
        return [output]
    head_px, rows_px = _table_rows_px(table)
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
        part_table = part_soup.find("table")
        assert part_table is not None  # the page parsed above, again
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


def _break_full_slides(cells: list[NotebookNode]) -> None:
    """A cell that would continue a slide already full (prose and outputs above it) opens the next slide."""
    used = 0.0
    for cell in cells:
        kind = slide_type(cell)
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


def _split_tall_outputs(cell: NotebookNode) -> list[NotebookNode]:
    """A code cell whose outputs are taller than a slide as several cells, each opening a slide with the outputs
    that fit (a table taller than a slide split by its rows); the code shows, if at all, with the first."""
    if cell.cell_type != "code" or slide_type(cell) in ("skip", "notes") or not cell.outputs:
        return [cell]
    outputs = []  # each with whether it must open a slide: every part of a table split by its rows does
    for output in cell.outputs:
        parts = _table_parts(_transposed_wide_tables(_without_claim_details(output)))
        outputs += [(part, len(parts) > 1) for part in parts]
    groups: list[list[NotebookNode]] = [[]]
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


def _split_long_markdown(cell: NotebookNode) -> list[NotebookNode]:
    """A markdown cell too long for one slide as several cells, cut between its blocks (paragraphs, lists,
    code), each opening a slide; a part after the first repeats the cell's heading, marked "(continued)"."""
    if cell.cell_type != "markdown" or slide_type(cell) in ("skip", "notes"):
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


def _continued(cell: NotebookNode, part: int) -> NotebookNode:
    """A copy of ``cell`` for the ``part``-th slide of what it shows: each part after the first opens a slide and
    has an id of its own (nbformat asks ids to be unique)."""
    copied = copy.deepcopy(cell)
    if part:
        copied.metadata.setdefault("slideshow", {})["slide_type"] = "slide"
        if "id" in copied:
            copied["id"] = f"{cell['id'][:56]}-part{part}"
    return copied


def slide_type(cell: NotebookNode) -> str:
    """A cell's slideshow type (``slide``, ``subslide``, ``fragment``, ``skip``, ``notes``; ``-`` continues)."""
    return cell.metadata.get("slideshow", {}).get("slide_type", "-")
