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
Prose and outputs too long for a slide are spread over several
(:mod:`~bertology_utils.present.slide_fit`), tables' numbers are rounded and this machine's paths left out
(:mod:`~bertology_utils.present.readable`); the page's reveal.js parts are
:mod:`~bertology_utils.present.reveal`'s.

A deck is ready when ``Reveal.isReady()`` is true (reveal.js also adds the class ``ready``
to the ``div.reveal`` element).

:func:`slide_figures` ("figures for slides", ``bertology slides --figures``) gathers every figure a
run saved into one folder, ``<run>/figures-for-slides/<notebook>-<name>.svg``, each sized to fill a
slide (:data:`~bertology_utils.present.reveal.SLIDE_SIZE`, the decks' size; aspect kept). The SVGs are those
``save_figure`` wrote beside each PNG from the live figure (vector, text as text); a PNG cannot be turned back into one.
"""

from __future__ import annotations

import copy
import html
import os
import re
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from bertology_utils.core.errors import BertologyError
from bertology_utils.core.figure_text import img_attribute
from bertology_utils.core.files import atomic_write_text
from bertology_utils.present.browser import chromium
from bertology_utils.present.readable import for_people, machine_places
from bertology_utils.present.reveal import (
    REVEAL,
    REVEAL_STYLESHEETS,
    SLIDE_SIZE,
    network_references,
    presenting_tools,
    reveal_config,
    reveal_start,
    without_remote_imports,
)
from bertology_utils.present.slide_fit import fit_to_slides, slide_type

if TYPE_CHECKING:
    from nbformat import NotebookNode

__all__ = [
    "SLIDES_SUFFIX",
    "REMOVE_CELL_TAGS",
    "REMOVE_INPUT_TAGS",
    "REMOVE_OUTPUT_TAGS",
    "has_math",
    "is_progress_output",
    "slides_path",
    "notebook_to_slides",
    "prepare_for_slides",
    "run_slides",
    "deck_to_pdf",
    "SLIDE_FIGURES_DIR",
    "slide_figures",
]

#: Suffix of a deck beside its notebook: ``<stem>/<stem>.slides.html``.
SLIDES_SUFFIX = ".slides.html"

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
    for asset, path in REVEAL_STYLESHEETS.items()
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
.reveal .slides section .jp-RenderedHTMLCommon th { padding: 0.2em 0.35em; line-height: 1.25; }
.reveal .slides section .jp-OutputArea-output pre { font-size: 0.5em; line-height: 1.3; white-space: pre-wrap; }
.reveal .slides section h1 { font-size: 2.4em; }
.reveal .slides section h2 { font-size: 1.9em; }
.reveal .slides section h3 { font-size: 1.5em; }
.jp-OutputPrompt, .jp-InputPrompt { display: none; }
"""

_TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js -%}{{ resources.bertology_scripts }}{%- endblock html_head_js -%}
{%- block jupyter_widgets -%}
{%- if "widgets" in nb.metadata -%}{{ resources.bertology_widgets }}{%- endif -%}
{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{{ resources.bertology_mathjax }}{%- endblock html_head_js_mathjax -%}
{%- block html_head_css -%}<style type="text/css">{{ resources.bertology_css }}</style>{%- endblock html_head_css -%}
{%- block footer_js -%}{{ resources.bertology_footer }}{%- endblock footer_js -%}
{%- block data_png scoped -%}
{%- set text = output | get_metadata("bertology/text", "image/png") -%}
{{ super() | replace("<img ", "<img" ~ (text | img_attribute) ~ " ", 1) if text else super() }}
{%- endblock data_png -%}
"""

#: LaTeX in markdown, as Jupyter renders it: $...$, $$...$$, \(...\), \[...\] or an environment.
_MATH = re.compile(r"\$\$.+?\$\$|(?<![\\$])\$[^$\s](?:[^$]*[^$\s])?\$|\\\(.+?\\\)|\\\[.+?\\\]|\\begin\{", re.DOTALL)

# Typeset the same delimiters Jupyter does, once the page has loaded (hidden slides included).
_MATHJAX_CONFIG = """<script>
window.MathJax = {tex: {inlineMath: [["$", "$"], ["\\\\(", "\\\\)"]], processEscapes: true}, svg: {fontCache: "global"}};
</script>"""


def has_math(nb: NotebookNode) -> bool:
    """Whether any markdown cell of ``nb`` holds LaTeX that MathJax would typeset."""
    return any(cell.cell_type == "markdown" and _MATH.search(cell.source) for cell in nb.cells)


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


def _add_skipped_slide(nb: NotebookNode, folder: Path) -> None:
    """After the title slide, a slide listing the sections the run did not compute and why."""
    import nbformat

    from bertology_utils.run.results import load_skipped

    skipped = load_skipped(folder)
    if not skipped["sections"]:
        return
    lead = "Nothing in this notebook was computed" if skipped["everything"] else "Not computed in this run"
    # Reasons are a program's text, which may hold "<" and "&": escaped, or markdown would read them as HTML.
    lines = [f"### {lead}", ""] + [
        f"* **{html.escape(s['section'])}**: {html.escape(s['reason'])}" for s in skipped["sections"]
    ]
    cell = nbformat.v4.new_markdown_cell("\n".join(lines), metadata={"slideshow": {"slide_type": "slide"}})
    nb.cells.insert(min(1, len(nb.cells)), cell)


def prepare_for_slides(nb: NotebookNode, *, show_code: bool = False) -> NotebookNode:
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
    nb.cells = fit_to_slides(nb.cells)
    return nb


#: tqdm's notebook bar as text: "desc: 100%|#####| 8/8 [00:01<00:00, ...]".
_PROGRESS_TEXT = re.compile(r"\d+%\|.*\|\s*\d+/\d+\s*\[")


def is_progress_output(output: NotebookNode) -> bool:
    """What a static page (a deck, the docs) leaves out: stderr (warnings, text bars) and tqdm's bar widgets."""
    return (output.get("output_type") == "stream" and output.get("name") == "stderr") or _is_progress_bar(output)


def _is_progress_bar(output: NotebookNode) -> bool:
    """A tqdm progress-bar widget (its plain-text form is the bar): noise in a talk."""
    data = output.get("data", {})
    text = data.get("text/plain", "")
    return "application/vnd.jupyter.widget-view+json" in data and bool(
        _PROGRESS_TEXT.search(text if isinstance(text, str) else "".join(text))
    )


def _skip_empty_code_cells(cells: list[NotebookNode], show_code: bool) -> None:
    """Mark code cells that show nothing (no outputs, and code hidden) 'skip'.

    A skipped cell that opened a slide or subslide hands that over to the next shown cell when
    that cell would only have continued it ('-' or 'fragment'), so the slide structure stays.
    """
    opens = {"slide": 2, "subslide": 1}
    for i, cell in enumerate(cells):
        code_shown = show_code and not cell.metadata.get("transient", {}).get("remove_source")
        if cell.cell_type != "code" or cell.outputs or code_shown or slide_type(cell) in ("skip", "notes"):
            continue
        kind = slide_type(cell)
        following = next((c for c in cells[i + 1 :] if slide_type(c) not in ("skip", "notes")), None)
        if kind in opens and following is not None and opens.get(slide_type(following), 0) < opens[kind]:
            following.metadata.setdefault("slideshow", {})["slide_type"] = kind
        cell.metadata.setdefault("slideshow", {})["slide_type"] = "skip"


def _export(nb: NotebookNode, *, title: str, show_code: bool) -> str:
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
    exporter.register_filter("img_attribute", img_attribute)  # an inline figure's text boxes, for the browser tests
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
        style = without_remote_imports(style_tag(asset))
        html, count = link.subn(lambda _: style, html)  # noqa: B023 (called within this iteration)
        if count != 1:  # nbconvert's reveal template changed: fail loudly rather than ship a broken deck
            raise BertologyError(f"nbconvert's slide template no longer links {asset} as expected")
    return html


# ---------------------------------------------------------------------------------------------------------------
# PDF


def deck_to_pdf(deck: str | os.PathLike, pdf: str | os.PathLike | None = None, *, timeout_s: float = 120) -> Path:
    """Print ``deck`` (a deck's HTML) to ``pdf`` (default: beside it, ``.pdf``) with Chromium; returns the path.

    reveal.js lays the deck out for print (``?print-pdf``): one page per slide, each page the deck's size.
    Raises :class:`BertologyError` saying what to install when Playwright or Chromium is missing.
    """
    deck = Path(deck)
    out = Path(pdf) if pdf is not None else deck.with_name(deck.name.removesuffix(".html") + ".pdf")
    with chromium("printing decks to PDF") as browser:
        out.parent.mkdir(parents=True, exist_ok=True)
        page = browser.new_page()
        page.goto(deck.resolve().as_uri() + "?print-pdf", timeout=timeout_s * 1000)
        page.wait_for_function(
            "() => window.Reveal !== undefined && Reveal.isReady() && document.querySelector('.pdf-page')",
            timeout=timeout_s * 1000,
        )
        page.wait_for_function("() => Array.from(document.images).every(i => i.complete)", timeout=timeout_s * 1000)
        page.pdf(path=str(out), prefer_css_page_size=True, print_background=True)
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
    from bertology_utils.run.results import find_run

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
    """``svg`` with its width and height set (in px) to fill a slide of
    :data:`~bertology_utils.present.reveal.SLIDE_SIZE`, aspect kept.

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
