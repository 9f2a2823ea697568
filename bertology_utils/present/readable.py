"""Outputs made for people: numbers in tables to three significant digits, no paths of this machine.

Decks, the lecture, the report and the docs' notebook pages show results through these.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bs4 import BeautifulSoup, Tag
    from nbformat import NotebookNode

__all__ = [
    "MISSING",
    "P_FLOOR",
    "format_number",
    "format_table_numbers",
    "machine_places",
    "scrub_paths",
    "path_names",
    "for_people",
    "joined",
    "round_for_people",
]

#: What a table shows for a value that is missing or was not computed.
MISSING = "—"
_MISSING_CELLS = frozenset({"NaN", "nan", "<NA>", "None", "NaT"})
_FLOAT = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+(?=[eE]))(?:[eE][-+]?\d+)?")
#: A p-value column: "p", "p-value", "p_val", "pvalue", "wilcoxon_p", "p (one-sided)"; not "top", "p_head".
_P_COLUMN = re.compile(r"(?:^|[\s_(-])p(?:[-_ ]?val(?:ue)?s?)?(?:$|[\s)])", re.IGNORECASE)
#: pandas' cut of a long cell ("... in layers 6-10..."): the last word may be a number cut short, so it goes too.
_PANDAS_CUT = re.compile(r"\s*\S*\d\.?\.\.\.$")  # "6-10...", "82...." (82.x cut after its point)
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
    ``<NA>``, ``None``, ``NaT``) shows ``—``; a text pandas cut short just after a digit (``max_colwidth``:
    "in layers 6-10...") loses that last word, which may be a number cut ("in layers …"); a header's
    ``snake_case`` name may break after its underscores.
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
                if cell.name == "td" and len(cell.contents) == 1 and _PANDAS_CUT.search(text):
                    cell.string = _PANDAS_CUT.sub(" …", text)
                    changed = True
                    continue
                if cell.name != "td" or len(cell.contents) != 1 or not _FLOAT.fullmatch(text):
                    continue
                column = len(headers) - len(cells) + i  # aligned from the right: index columns come first
                is_p = 0 <= column < len(headers) and bool(_P_COLUMN.search(headers[column]))
                cell.string = format_number(float(text), p_value=is_p)
                changed = True
        changed = _breakable_names(soup, table) or changed  # after the headers are read
    return str(soup) if changed else page


def _breakable_names(soup: BeautifulSoup, table: Tag) -> bool:
    """Let a header's long name break after its underscores (``masked_<wbr>embedding``), so that a wide table's
    columns narrow to fit a slide rather than the table shrinking below readable; whether one did."""
    named = [c for c in table.find_all("th") if c.string is not None and "_" in c.string]
    for cell in named:
        parts = str(cell.string).split("_")
        cell.clear()
        for part in parts[:-1]:
            cell.append(part + "_")
            cell.append(soup.new_tag("wbr"))
        cell.append(parts[-1])
    return bool(named)


def machine_places(executed_ipynb: str | os.PathLike | None = None) -> list[tuple[str, str]]:
    """The folders of this machine a deck must not show, each with what it shows instead, most specific first.

    The results folder (``<results>``; with ``executed_ipynb``, the folder above its run too), the cache
    (``<cache>``), the repository (``<repo>``), the data folders (``$BERTOLOGY_DATA_DIR`` and the project's own,
    ``<data>``), the temporary folder (``<tmp>``) and the home folder (``~``).
    """
    from bertology_utils.core import settings
    from bertology_utils.run.results import results_dir

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


def path_names(text: str, places: Iterable[tuple[str, str]] | None = None) -> str:
    """``text`` with each path under one of ``places`` (default :func:`machine_places`) shown by its name alone.

    ``/home/ann/.cache/bertology/attention/x.zarr`` (or :func:`scrub_paths`' ``<cache>/attention/x.zarr``)
    reads ``x.zarr``: a slide or a page says which file, not where one machine keeps it. A folder named alone
    (``<cache>``) stays.
    """
    places = machine_places() if places is None else list(places)
    labels = {label for _, label in places}
    if not labels:
        return text
    shortened = "|".join(re.escape(label) for label in sorted(labels, key=len, reverse=True))
    pattern = re.compile(rf"(?<![\w.<>/-])(?:{shortened})(?:/[\w.@+-]+)*/([\w.@+-]+)")
    return pattern.sub(lambda m: m.group(1), scrub_paths(text, places))


_DECIMAL = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d+|\.\d+)(?:[eE][-+]?\d+)?(?![\w.])|(?<![\w.])\d+[eE][-+]?\d+(?![\w.])")
_P_VALUE = re.compile(r"\b(p\s*)(=|<=?)\s*(" + _DECIMAL.pattern + ")")


def round_for_people(text: str, places: Sequence[tuple[str, str]] = ()) -> str:
    """``text`` with this machine's paths shown by their names (:func:`path_names`) and each decimal to three
    significant digits; ``p = 0.00002`` reads ``p < 0.001``. Integers (counts, years, head numbers) are left alone."""

    def p_value(m: re.Match[str]) -> str:
        shown = format_number(float(m.group(3)), p_value=True)  # "< 0.001" below the floor
        return m.group(1) + (shown if shown.startswith("<") else f"{m.group(2)} {shown}")

    text = _P_VALUE.sub(p_value, path_names(str(text), places))
    return _DECIMAL.sub(lambda m: format_number(float(m.group(0))), text)


_TEXT_MIME = ("text/plain", "text/html", "text/markdown", "text/latex")


def for_people(nb: NotebookNode, places: list[tuple[str, str]] | None = None) -> None:
    """Tables' numbers formatted (:func:`format_table_numbers`) and this machine's paths left out of every cell:
    shown by their names (:func:`path_names`, default places :func:`machine_places`) in prose and outputs, and
    shortened (:func:`scrub_paths`) in code (papermill's injected ``output_dir``), which still says where.
    Decks and the docs' notebook pages show notebooks through it."""
    places = machine_places() if places is None else places
    for cell in nb.cells:
        cell.source = (scrub_paths if cell.cell_type == "code" else path_names)(cell.source, places)
        for output in cell.get("outputs", []):
            if "text" in output:
                output["text"] = path_names(joined(output["text"]), places)
            data = output.get("data", {})
            for mime in _TEXT_MIME:
                if mime in data:
                    value = path_names(joined(data[mime]), places)
                    data[mime] = format_table_numbers(value) if mime == "text/html" else value


def joined(value: str | list[str]) -> str:
    """A notebook's text field as one string (nbformat stores it as a string or as a list of lines)."""
    return value if isinstance(value, str) else "".join(value)
