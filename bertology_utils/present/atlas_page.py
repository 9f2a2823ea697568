"""The head atlas as one offline HTML page: a layers x heads grid per run, coloured by a chosen column,
a card per head, filters, and the view kept in the URL so that a link reproduces it.

:func:`render_atlas_page` takes the payload that :mod:`bertology_utils.present.atlas` builds (schema
version :data:`PAYLOAD_VERSION`) and returns the page's text. The page requests nothing from the
network: its script and style are our own (``atlas_page.js`` and ``atlas_page.css`` beside this
module, inlined), the payload is embedded as JSON in ``<script type="application/json" id="atlas-data">``
and the attention maps are drawn on canvases from the payload's base64 bytes.

Filters (conditions ``column operator value``, combined with AND; a missing value never matches):

- ``ge``, ``le``, ``gt``, ``lt``: numeric values against the value read as a number;
- ``eq``, ``ne``: numbers compared numerically (a value that is not a number equals none), booleans as
  ``"true"``/``"false"`` and categories as strings;
- ``top``, ``bottom`` with p in (0, 100]: per run, among the heads with a numeric value, n of them,
  ``k = ceil(p / 100 * n)`` (in that order of operations); the threshold is the k-th largest (``top``)
  or k-th smallest (``bottom``) value, and a head matches at or beyond it, ties included.

The URL hash: ``#color=<col>&filter=<col>~<op>~<value>&...&card=<run>:<layer>-<head>``, each component
percent-encoded (``encodeURIComponent``, with ``~`` encoded too so that it only ever separates).
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

__all__ = ["PAYLOAD_VERSION", "FILTER_OPERATORS", "render_atlas_page"]

PAYLOAD_VERSION = 1
FILTER_OPERATORS = ("ge", "le", "gt", "lt", "eq", "ne", "top", "bottom")

_HERE = Path(__file__).parent
_HOW_TO_READ = (
    "Each square is one attention head: rows are layers (first at the top), columns are heads. "
    "Pick what colours the squares in the menu, click a square for that head's card, "
    "and add filters to highlight the heads that meet every condition."
)


def _asset(name: str) -> str:
    text = (_HERE / name).read_text(encoding="utf-8")
    # Inlined into <script>/<style>: the asset must not be able to close its own element.
    if "</" in text.replace("<\\/", ""):
        raise ValueError(f"{name} contains '</', which would end its inline element early")
    return text


def _script_json(payload: dict[str, Any]) -> str:
    """JSON that is safe inside a <script> element: no '<', '>' or '&' can start markup, and the two
    line separators JavaScript once treated as newlines are escaped as well."""
    text = json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    for char, escaped in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escaped)
    return text


def render_atlas_page(payload: dict[str, Any]) -> str:
    """The atlas page for ``payload`` (see :mod:`bertology_utils.present.atlas`), one self-contained HTML text.

    Raises ValueError for a payload of another version, or one with NaN or infinity (missing is null).
    """
    if payload.get("version") != PAYLOAD_VERSION:
        raise ValueError(f"atlas payload version {payload.get('version')!r}; this page reads version {PAYLOAD_VERSION}")
    title = html.escape(str(payload.get("title") or "Head atlas"))
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
{_asset("atlas_page.css")}
</style>
</head>
<body>
<header class="atlas-header">
<h1>{title}</h1>
<p class="howto"><strong>How to read this:</strong> {html.escape(_HOW_TO_READ)}</p>
<noscript><p class="note">This page draws its grids with JavaScript; please enable it.</p></noscript>
</header>
<main>
<section id="atlas-controls" aria-label="Controls">
<div class="control-row">
<label for="atlas-column">Colour by</label>
<select id="atlas-column"></select>
</div>
<div id="atlas-column-info"></div>
<div id="atlas-legend"></div>
<div id="atlas-filters">
<h2>Filters</h2>
<form id="atlas-filter-form" autocomplete="off">
<select id="atlas-filter-column" aria-label="Filter column"></select>
<select id="atlas-filter-op" aria-label="Operator"></select>
<input id="atlas-filter-value" aria-label="Value" size="8">
<button type="submit" id="atlas-filter-add">Add</button>
</form>
<ul id="atlas-filter-list"></ul>
<p id="atlas-count"></p>
</div>
</section>
<div id="atlas-body">
<div id="atlas-runs"></div>
<section id="atlas-card" hidden></section>
</div>
</main>
<script type="application/json" id="atlas-data">{_script_json(payload)}</script>
<script>
{_asset("atlas_page.js")}
</script>
</body>
</html>
"""
