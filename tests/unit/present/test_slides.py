"""Slide decks from executed notebooks: structure, hidden code, inlined libraries, nothing loaded from the network."""

import base64
import io
import re

import nbformat
import pytest
from bs4 import BeautifulSoup
from PIL import Image

from bertology_utils.cli import main
from bertology_utils.core.errors import BertologyError
from bertology_utils.present import assets
from bertology_utils.present.readable import (
    MISSING,
    for_people,
    format_number,
    format_table_numbers,
    machine_places,
    path_names,
    scrub_paths,
)
from bertology_utils.present.reveal import network_references
from bertology_utils.present.slides import SLIDES_SUFFIX, has_math, notebook_to_slides, prepare_for_slides, run_slides

needs_assets = pytest.mark.skipif(
    not assets.have_assets("reveal", "reveal_css", "reveal_theme", "jquery", "require", "widgets"),
    reason="the JavaScript libraries are not installed (make setup / npm ci)",
)


def png_base64(size=(6, 4), colour=(200, 30, 30)) -> str:
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


PNG = png_base64()
TABLE_HTML = (
    '<div><table border="1" class="dataframe"><thead><tr><th></th><th>claim</th><th>ours</th>'
    "<th>verdict</th></tr></thead><tbody><tr><th>0</th><td>heads park on [SEP]</td><td>0.03</td>"
    "<td>differs</td></tr></tbody></table></div>"
)


def _cell(kind, source, slide=None, tags=(), outputs=(), **metadata):
    cell = nbformat.v4.new_markdown_cell(source) if kind == "md" else nbformat.v4.new_code_cell(source)
    if slide is not None:
        cell.metadata["slideshow"] = {"slide_type": slide}
    if tags:
        cell.metadata["tags"] = list(tags)
    cell.metadata.update(metadata)
    if kind == "code":
        cell.outputs = list(outputs)
    return cell


def talk_notebook():
    """An executed notebook shaped like the project's: a title, findings with figures, a table, skipped code."""
    stream = nbformat.v4.new_output
    cells = [
        _cell("md", "# A talk about heads\n\nIntro text.", "slide"),
        _cell("code", "output_dir = None\nmodel_name = None", "skip", tags=["parameters"]),
        _cell("code", 'output_dir = "/tmp/x"', tags=["injected-parameters"]),
        _cell("md", "## Finding one", "slide"),
        _cell(
            "code",
            "fig = draw_secret_figure()",
            "subslide",
            outputs=[
                stream("stream", name="stderr", text="UserWarning: noisy warning\n"),
                stream("display_data", data={"image/png": PNG, "text/plain": "<Figure>"}),
            ],
        ),
        _cell("md", "The caption of finding one.", "fragment"),
        _cell("code", "prepare_without_output()", "slide"),
        _cell("md", "## Finding two\n\nText that continues the slide the silent code cell opened.", "-"),
        _cell(
            "code",
            "print('printed by hidden code')",
            "fragment",
            outputs=[stream("stream", name="stdout", text="printed by hidden code\n")],
        ),
        _cell("md", "## Paper vs ours", "slide"),
        _cell(
            "code",
            "comparison_table_code",
            "subslide",
            outputs=[
                stream("execute_result", data={"text/html": TABLE_HTML, "text/plain": "table"}, execution_count=5)
            ],
        ),
        _cell(
            "code",
            "collapsed_source_code()",
            "-",
            outputs=[stream("stream", name="stdout", text="output of a collapsed cell\n")],
            jupyter={"source_hidden": True},
        ),
        _cell(
            "code",
            "removed_cell_code()",
            "-",
            tags=["remove-cell"],
            outputs=[stream("stream", name="stdout", text="output of a removed cell\n")],
        ),
        _cell("md", "Speaker notes here.", "notes"),
        _cell("code", "record_metrics_code()", "skip"),
    ]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


@pytest.fixture
def executed(tmp_path):
    path = tmp_path / "run" / "01_talk" / "01_talk.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(talk_notebook(), path)
    return path


def slide_structure(html):
    """Number of vertical slides in each horizontal slide."""
    slides = BeautifulSoup(html, "html.parser").select_one("div.reveal > div.slides")
    return [len(top.find_all("section", recursive=False)) or 1 for top in slides.find_all("section", recursive=False)]


# --------------------------------------------------------------------------- preparing the notebook


def test_prepare_skips_silent_code_and_hands_its_slide_to_the_next_cell():
    cells = prepare_for_slides(talk_notebook()).cells
    types = {cell.source.splitlines()[0]: cell.metadata.get("slideshow", {}).get("slide_type", "-") for cell in cells}
    assert types["prepare_without_output()"] == "skip"
    assert types["## Finding two"] == "slide"  # took over the slide the silent cell opened
    assert types['output_dir = "/tmp/x"'] == "skip"  # papermill's injected parameters
    assert "removed_cell_code()" not in types
    assert types["fig = draw_secret_figure()"] == "subslide"  # has an output: kept as it was
    figure_cell = next(c for c in cells if c.source.startswith("fig ="))
    assert [o.output_type for o in figure_cell.outputs] == ["display_data"]  # stderr dropped in a talk


def test_prepare_with_code_keeps_cells_and_streams_but_honours_removals():
    cells = prepare_for_slides(talk_notebook(), show_code=True).cells
    silent = next(c for c in cells if c.source == "prepare_without_output()")
    assert silent.metadata["slideshow"]["slide_type"] == "slide"
    figure_cell = next(c for c in cells if c.source.startswith("fig ="))
    assert [o.output_type for o in figure_cell.outputs] == ["stream", "display_data"]
    collapsed = next(c for c in cells if c.source == "collapsed_source_code()")
    assert collapsed.metadata["transient"] == {"remove_source": True}
    assert all(c.source != "removed_cell_code()" for c in cells)


def test_with_code_a_collapsed_cell_without_output_is_skipped_too():
    nb = nbformat.v4.new_notebook(
        cells=[
            _cell("md", "# Title", "slide"),
            _cell("code", "setup()", "subslide", jupyter={"source_hidden": True}),
            _cell("md", "More text", "fragment"),
            _cell("code", "visible_setup()", "subslide"),
        ]
    )
    types = [c.metadata["slideshow"]["slide_type"] for c in prepare_for_slides(nb, show_code=True).cells]
    assert types == ["slide", "skip", "subslide", "subslide"]


def test_prepare_does_not_change_the_notebook_given():
    nb = talk_notebook()
    before = nbformat.writes(nb)
    prepare_for_slides(nb)
    assert nbformat.writes(nb) == before


# --------------------------------------------------------------------------- network references


def test_network_references_finds_scripts_links_and_imports_only_where_they_load():
    page = """<html><head>
    <script src="https://cdn.example.org/lib.js"></script>
    <script type="text/javascript" src='//cdn.example.org/protocol-relative.js'></script>
    <link rel="stylesheet" href="http://cdn.example.org/a.css">
    <style>@import url(https://fonts.example.org/css?family=X); /* @import url('https://commented.example'); */</style>
    <script src="data:text/javascript;base64,AAAA"></script>
    <script>var s = "<link href='https://in.a.string.example'>"; // https://comment.example</script>
    <a href="https://a.link.is.not.loaded.example">x</a>
    </head></html>"""
    found = network_references(page)
    assert len(found) == 4
    assert any("lib.js" in f for f in found) and any("protocol-relative" in f for f in found)
    assert any("a.css" in f for f in found) and any("fonts.example.org" in f for f in found)
    assert not any("commented" in f or "a.link" in f or "in.a.string" in f for f in found)
    assert network_references("<p>no references</p>") == []


# --------------------------------------------------------------------------- the deck


@needs_assets
def test_deck_is_self_contained_and_follows_the_slideshow_metadata(executed):
    out = notebook_to_slides(executed)
    assert out == executed.with_name("01_talk" + SLIDES_SUFFIX)
    html = out.read_text(encoding="utf-8")

    assert network_references(html) == []
    assert re.findall(r"<script\b[^>]*\bsrc\s*=", html, re.IGNORECASE) == []  # every script inline
    assert re.findall(r"<link\b[^>]*\bhref\s*=", html, re.IGNORECASE) == []  # every stylesheet inline
    for name in ("reveal", "jquery", "require"):
        assert assets.asset_text(name)[-300:].replace("</script", "<\\/script") in html, name
    assert assets.asset_text("reveal_css")[-300:] in html
    assert "fonts.googleapis.com" not in html  # the theme's web-font import is dropped
    assert "Reveal.initialize(" in html
    assert "mathjax" not in html.lower() and "mermaid.initialize" not in html
    assert "@jupyter-widgets/html-manager" not in html  # no widget state: no widget renderer

    assert slide_structure(html) == [1, 2, 1, 2]  # title; finding + figure; finding two; paper + table
    assert f"data:image/png;base64,{PNG}" in html
    assert "differs" in html and "heads park on [SEP]" in html
    assert 'class="fragment"' in html and '<aside class="notes">' in html
    assert "printed by hidden code" in html and "output of a collapsed cell" in html
    for hidden in (
        "draw_secret_figure",
        "noisy warning",
        "record_metrics_code",
        "removed_cell",
        "prepare_without_output",
        "/tmp/x",
        "In&nbsp;[",
    ):
        assert hidden not in html, hidden


@needs_assets
def test_skipped_sections_get_a_slide_after_the_title(executed):
    from bertology_utils.run.record import record_skipped

    record_skipped(
        "talk.gap", "GAP not found; to get it: put it in <dir> & set BERTOLOGY_DATA_DIR", output_dir=executed.parent
    )
    html = notebook_to_slides(executed).read_text(encoding="utf-8")
    assert slide_structure(html) == [1, 1, 2, 1, 2]
    slide = BeautifulSoup(html, "html.parser").select("div.reveal > div.slides > section")[1].get_text(" ", strip=True)
    assert slide.startswith("Not computed in this run")
    assert "talk.gap : GAP not found; to get it: put it in <dir> & set BERTOLOGY_DATA_DIR" in slide


@needs_assets
def test_show_code_keeps_the_code_but_not_what_the_notebook_hides(executed, tmp_path):
    html = notebook_to_slides(executed, tmp_path / "deck.html", show_code=True).read_text(encoding="utf-8")
    assert "draw_secret_figure" in html and "noisy warning" in html and "prepare_without_output" in html
    assert "collapsed_source_code" not in html and "output of a collapsed cell" in html
    assert "removed_cell" not in html
    assert "record_metrics_code" not in html  # 'skip' cells stay out of a deck
    assert slide_structure(html) == [1, 2, 1, 2]
    assert network_references(html) == []


@needs_assets
def test_widget_state_gets_the_inlined_renderer(executed, tmp_path):
    nb = nbformat.read(executed, as_version=4)
    nb.metadata["widgets"] = {
        "application/vnd.jupyter.widget-state+json": {"version_major": 2, "version_minor": 0, "state": {}}
    }
    nbformat.write(nb, executed)
    html = notebook_to_slides(executed, tmp_path / "widgets.html").read_text(encoding="utf-8")
    assert 'define("@jupyter-widgets/html-manager"' in html
    assert 'type="application/vnd.jupyter.widget-state+json"' in html
    assert network_references(html) == []


def test_a_missing_notebook_is_a_clear_error(tmp_path):
    with pytest.raises(BertologyError, match="no notebook"):
        notebook_to_slides(tmp_path / "nope.ipynb")


# --------------------------------------------------------------------------- a run's decks and the command


@needs_assets
def test_run_slides_picks_notebooks_by_number_or_stem(executed, tmp_path, capsys):
    run_dir = executed.parent.parent
    other = run_dir / "02_other" / "02_other.ipynb"
    other.parent.mkdir()
    nbformat.write(talk_notebook(), other)

    assert run_slides(run_dir, ["2"]) == [other.with_name("02_other" + SLIDES_SUFFIX)]
    decks = tmp_path / "decks"
    assert main(["slides", str(run_dir), "--out", str(decks)]) == 0
    assert capsys.readouterr().out.split() == [str(decks / "01_talk.slides.html"), str(decks / "02_other.slides.html")]
    assert (decks / "01_talk.slides.html").stat().st_size > 100_000  # the libraries are in it

    assert main(["slides", str(run_dir), "07"]) == 2
    err = capsys.readouterr().err
    assert "'07' is not in this run" in err and "01_talk, 02_other" in err
    assert main(["slides", str(tmp_path / "no-run")]) == 2
    assert "no run folder" in capsys.readouterr().err


def test_a_talk_drops_progress_bar_widgets_but_keeps_other_widgets():
    new = nbformat.v4.new_output
    widget = "application/vnd.jupyter.widget-view+json"
    bar = new(
        "display_data",
        data={
            widget: {"model_id": "a", "version_major": 2, "version_minor": 0},
            "text/plain": "extract ewt:  100%|##########| 8/8 [00:01<00:00,  6.10item/s]",
        },
    )
    explorer = new(
        "display_data",
        data={
            widget: {"model_id": "b", "version_major": 2, "version_minor": 0},
            "text/plain": "AttentionExplorer(children=(Dropdown(...),))",
        },
    )
    nb = nbformat.v4.new_notebook(cells=[_cell("code", "run()", "slide", outputs=[bar, explorer])])
    kept = prepare_for_slides(nb).cells[0].outputs
    assert [o.data["text/plain"] for o in kept] == [explorer.data["text/plain"]]
    assert len(prepare_for_slides(nb, show_code=True).cells[0].outputs) == 2


@pytest.mark.parametrize(
    "markdown, math",
    [
        ("the weight $\\alpha_k[j,i]$ of head $k$", True),
        ("$$\\sum_i x_i = 1$$", True),
        ("inline \\(a + b\\) and display \\[c\\]", True),
        ("\\begin{align} x &= y \\end{align}", True),
        ("it costs $5 and $10", False),
        ("an escaped \\$ sign and plain prose", False),
    ],
)
def test_has_math(markdown, math):
    nb = nbformat.v4.new_notebook(cells=[_cell("md", markdown), _cell("code", "x = '$y$'")])
    assert has_math(nb) is math


@pytest.mark.skipif(
    not assets.have_assets("mathjax", "reveal", "reveal_css", "reveal_theme", "jquery", "require"),
    reason="the JavaScript libraries are not installed (make setup / npm ci)",
)
def test_a_deck_with_latex_inlines_mathjax(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[_cell("md", "# Probes\n\nThe weight $\\alpha_k[j,i]$ of head $k$.", "slide")])
    path = tmp_path / "04_math.ipynb"
    nbformat.write(nb, path)
    html = notebook_to_slides(path).read_text(encoding="utf-8")
    assert network_references(html) == []
    assert "window.MathJax = {tex:" in html
    assert assets.asset_text("mathjax")[-300:].replace("</script", "<\\/script") in html
    assert html.index("window.MathJax") < html.index(assets.asset_text("mathjax")[:200])  # config first


# --------------------------------------------------------------------------- for people: numbers, paths


@pytest.mark.parametrize(
    ("value", "p_value", "shown"),
    [
        (0.659223, False, "0.659"),
        (0.019808, False, "0.0198"),
        (12.345, False, "12.3"),
        (1234.5, False, "1234"),
        (999.7, False, "1000"),
        (-0.5, False, "-0.5"),
        (0.0, False, "0"),
        (1.2345e-05, False, "1.23e-05"),
        (0.00042, True, "< 0.001"),
        (0.0, True, "< 0.001"),
        (0.0123456, True, "0.0123"),
    ],
)
def test_format_number_to_three_significant_digits(value, p_value, shown):
    assert format_number(value, p_value=p_value) == shown


def test_table_decimals_are_formatted_and_p_value_columns_floored():
    table = (
        '<table class="dataframe"><thead><tr><th></th><th>top</th><th>p-value</th><th>wilcoxon_p</th>'
        "<th>n</th><th>claim</th></tr></thead><tbody>"
        "<tr><th>0.123456</th><td>0.000123456</td><td>0.0000312</td><td>0.04567</td><td>12</td><td>0.5 of heads</td></tr>"
        "</tbody></table>"
    )
    cells = [td.get_text() for td in BeautifulSoup(format_table_numbers(table), "html.parser").find_all("td")]
    # "top" is not a p-value column; the index (a <th>), integers and text stay as they are.
    assert cells == ["0.000123", "< 0.001", "0.0457", "12", "0.5 of heads"]
    assert "<th>0.123456</th>" in format_table_numbers(table)
    assert format_table_numbers("<p>0.123456</p>") == "<p>0.123456</p>"


def test_a_header_name_may_break_after_its_underscores():
    table = "<table><thead><tr><th>masked_embedding_norm</th><th>top</th></tr></thead><tbody><tr><td>1</td><td>2</td></tr></tbody></table>"
    assert "<th>masked_<wbr/>embedding_<wbr/>norm</th><th>top</th>" in format_table_numbers(table)


def test_a_number_pandas_cut_is_left_out():
    table = (
        "<table><tbody><tr><td>half of it in layers 6-10...</td><td>vs 34.7 (+1...</td><td>CI [-0.28, -0....</td>"
        "<td>a word...</td><td>0.5</td></tr></tbody></table>"
    )
    cells = [td.get_text() for td in BeautifulSoup(format_table_numbers(table), "html.parser").find_all("td")]
    assert cells == ["half of it in layers …", "vs 34.7 …", "CI [-0.28, …", "a word...", "0.5"]


def test_missing_values_read_as_a_dash():
    table = (
        "<table><thead><tr><th></th><th>a</th><th>b</th><th>c</th><th>d</th></tr></thead><tbody>"
        "<tr><th>x</th><td>NaN</td><td>&lt;NA&gt;</td><td>None</td><td>0.5</td></tr></tbody></table>"
    )
    cells = [td.get_text() for td in BeautifulSoup(format_table_numbers(table), "html.parser").find_all("td")]
    assert cells == [MISSING, MISSING, MISSING, "0.5"]
    assert format_number(float("nan")) == MISSING and format_number(float("inf")) == "inf"


def test_for_people_scrubs_sources_and_outputs():
    nb = nbformat.v4.new_notebook()
    code = nbformat.v4.new_code_cell('output_dir = "/home/ann/work/results/default/07"')
    code.outputs = [nbformat.v4.new_output("stream", text="wrote /home/ann/work/results/default/07/x.png\n")]
    nb.cells = [nbformat.v4.new_markdown_cell("see /home/ann/notes.txt"), code]
    for_people(nb, [("/home/ann/work/results", "<results>"), ("/home/ann", "~")])
    assert nb.cells[0].source == "see notes.txt"
    assert code.source == 'output_dir = "<results>/default/07"'
    assert code.outputs[0]["text"] == "wrote x.png\n"


def test_scrub_paths_shortens_the_most_specific_folder():
    places = [("/home/ann/.cache/bertology", "<cache>"), ("/home/ann/work/results", "<results>"), ("/home/ann", "~")]
    text = (
        "model at /home/ann/.cache/bertology/models/x, figure /home/ann/work/results/default/00/fig.png, "
        "notes in /home/ann/notes.txt; file:///home/ann/work/results/r; /home/annie stays"
    )
    assert scrub_paths(text, places) == (
        "model at <cache>/models/x, figure <results>/default/00/fig.png, notes in ~/notes.txt; <results>/r; "
        "/home/annie stays"
    )


def test_path_names_show_a_file_by_its_name_alone():
    places = [("/home/ann/.cache/bertology", "<cache>"), ("/home/ann/work/results", "<results>"), ("/home/ann", "~")]
    text = (
        "store at /home/ann/.cache/bertology/attention/m-ewt.zarr, figure <results>/default/00/fig.png; "
        "notes in ~/notes.txt; the cache <cache>; https://arxiv.org/abs/1906.04341; /srv/x/y stays"
    )
    assert path_names(text, places) == (
        "store at m-ewt.zarr, figure fig.png; notes in notes.txt; the cache <cache>; "
        "https://arxiv.org/abs/1906.04341; /srv/x/y stays"
    )


def test_machine_places_name_the_run_results_cache_and_checkout(executed, monkeypatch, tmp_path):
    from bertology_utils.core import settings

    monkeypatch.setenv(settings.CACHE_DIR_ENV, str(tmp_path / "the-cache"))
    places = dict(machine_places(executed))
    assert places[str((tmp_path / "the-cache").resolve())] == "<cache>"
    assert places[str(executed.resolve().parents[2])] == "<results>"
    assert places[str(settings.PROJECT_ROOT.resolve())] == "<repo>"
    assert "/" not in places
    folders = [folder for folder, _ in machine_places(executed)]
    assert folders == sorted(folders, key=len, reverse=True)


@needs_assets
def test_deck_shows_formatted_tables_and_no_machine_paths(executed, monkeypatch, tmp_path):
    from bertology_utils.core import settings

    monkeypatch.setenv(settings.CACHE_DIR_ENV, str(tmp_path / "the-cache"))
    nb = nbformat.read(executed, as_version=4)
    table = TABLE_HTML.replace("<td>0.03</td>", "<td>0.659223</td>")
    cell = next(c for c in nb.cells if c.source == "print('printed by hidden code')")
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text=f"saved {executed.parent}/figures/a.png\n"),
        nbformat.v4.new_output("stream", name="stdout", text=f"model {tmp_path / 'the-cache'}/models/m\n"),
        nbformat.v4.new_output("display_data", data={"text/html": table, "text/plain": "table"}),
    ]
    nbformat.write(nb, executed)
    html = notebook_to_slides(executed).read_text(encoding="utf-8")
    assert "saved a.png" in html and "model m" in html
    assert str(tmp_path) not in html
    assert "<td>0.659</td>" in html and "0.659223" not in html


# --------------------------------------------------------------------------- presenting tools, PDF


@pytest.mark.skipif(
    not assets.have_assets("reveal_notes", "chalkboard", "chalkboard_css", "menu", "menu_css", "fontawesome_css"),
    reason="the JavaScript libraries are not installed (make setup / npm ci)",
)
def test_deck_inlines_notes_chalkboard_and_menu_with_nothing_to_fetch(executed):
    html = notebook_to_slides(executed).read_text(encoding="utf-8")
    assert network_references(html) == []
    for global_name in ("RevealNotes", "RevealChalkboard", "RevealMenu"):
        assert global_name in html
    assert "bertologyConfig.plugins = [window.RevealNotes, window.RevealChalkboard, window.RevealMenu]" in html
    assert "path + 'img/" not in html and html.count("data:image/png;base64,") >= 17  # the board's pictures
    assert "fa-solid-900" not in html and "font/woff2;base64," in html  # icon fonts inlined, not referenced
    assert '"path": "data:text/css,"' in html and '"loadIcons": false' in html
    assert '"pdfMaxPagesPerSlide": 1' in html


def test_pdf_without_chromium_says_what_to_install(executed, monkeypatch, tmp_path):
    pytest.importorskip("playwright")
    from bertology_utils.present import browser, slides

    monkeypatch.setattr(browser, "CHROMIUM", str(tmp_path / "no-chromium"))
    monkeypatch.setattr(browser.shutil, "which", lambda name: None)
    with pytest.raises(BertologyError, match="needs Chromium.*apt-get install chromium"):
        slides.deck_to_pdf(executed)


def test_rise_settings_are_in_every_notebook():
    import subprocess
    import sys

    from bertology_utils.core import settings

    script = settings.PROJECT_ROOT / "scripts" / "rise_settings.py"
    done = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


# --------------------------------------------------------------------------- fitting a slide


def _html_output(page: str):
    return nbformat.v4.new_output("display_data", data={"text/html": page, "text/plain": "table"})


def _table(rows: int, columns: int = 3, text: str = "x") -> str:
    head = "".join(f"<th>c{j}</th>" for j in range(columns))
    body = "".join(
        f"<tr><th>{i}</th>" + "".join(f"<td>{text}{i}</td>" for _ in range(columns)) + "</tr>" for i in range(rows)
    )
    return f'<table class="dataframe"><thead><tr><th></th>{head}</tr></thead><tbody>{body}</tbody></table>'


def _slides(cells) -> list[str]:
    """The slide types of what a deck shows."""
    return [c.metadata.get("slideshow", {}).get("slide_type", "-") for c in cells]


def test_a_long_markdown_cell_continues_on_the_next_slide():
    paragraphs = [f"Paragraph {i}: " + "word " * 60 for i in range(8)]
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell(
            "## Why heads\n\n" + "\n\n".join(paragraphs) + "\n\n### Next part",
            metadata={"slideshow": {"slide_type": "slide"}},
        )
    ]
    nb.cells[0].source += "\n\nIts text."
    cells = prepare_for_slides(nb).cells
    assert len(cells) > 2 and _slides(cells) == ["slide"] * len(cells)
    assert cells[0].source.startswith("## Why heads") and cells[1].source.startswith("### Why heads (continued)")
    joined = "\n\n".join(cells[i].source for i in range(len(cells)))
    assert all(p in joined for p in paragraphs)  # nothing lost
    assert not cells[-2].source.rstrip().endswith("### Next part")  # a heading goes with what it heads
    short = nbformat.v4.new_notebook()
    short.cells = [nbformat.v4.new_markdown_cell("## Short\n\nOne paragraph.")]
    assert len(prepare_for_slides(short).cells) == 1


def test_a_tall_table_is_split_by_rows_onto_slides_of_their_own():
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("table", metadata={"slideshow": {"slide_type": "slide"}})
    cell.outputs = [_html_output(_table(50)), nbformat.v4.new_output("stream", text="a note\n")]
    nb.cells = [cell]
    cells = prepare_for_slides(nb).cells
    tables = [BeautifulSoup(c.outputs[0]["data"]["text/html"], "html.parser") for c in cells]
    assert len(cells) >= 2 and _slides(cells) == ["slide"] * len(cells)
    shown = [int(th.get_text()) for t in tables for th in t.select("tbody th")]
    assert shown == list(range(50))  # every row once, in order
    assert all(t.find("thead") is not None for t in tables)
    assert tables[0].find("caption").get_text() == f"rows 1–{len(tables[0].select('tbody tr'))} of 50"
    assert cells[-1].outputs[-1]["text"] == "a note\n"  # the note stays with the table's last part
    # a table one or two rows taller than a slide is not cut into a slide of one row
    nb.cells[0].outputs = [_html_output(_table(22))]
    assert len(prepare_for_slides(nb).cells) == 1


def test_a_wide_table_with_few_rows_is_turned():
    wide = _html_output(_table(2, columns=15, text="share_heads_improve"))
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("t", outputs=[wide])]
    page = prepare_for_slides(nb).cells[0].outputs[0]["data"]["text/html"]
    rows = BeautifulSoup(page, "html.parser").find_all("tr")
    assert len(rows) == 16 and [c.get_text() for c in rows[1].find_all(["th", "td"])] == [
        "c0",
        "share_heads_improve0",
        "share_heads_improve1",
    ]
    narrow = _html_output(_table(2, columns=3))
    nb.cells = [nbformat.v4.new_code_cell("t", outputs=[narrow])]
    assert prepare_for_slides(nb).cells[0].outputs[0]["data"]["text/html"] == narrow["data"]["text/html"]


def test_a_claims_table_on_a_slide_keeps_the_verdict_and_drops_the_rule():
    from bertology_utils.papers.claims import Claim, Verdict, claims_table

    def claim(name: str) -> Claim:
        return Claim(
            id=name,
            paper="Clark et al. 2019",
            claim="a claim",
            paper_value="0.5",
            ours="0.4",
            verdict=Verdict.HOLDS,
            rule="a long rule " * 10,
            note="a note",
        )

    nb = nbformat.v4.new_notebook()
    for names, case in ((["prunable.SST-2", "prunable.RTE"], ["SST-2", "RTE"]), (["one", "two"], None)):
        page = claims_table([claim(n) for n in names]).to_html()
        nb.cells = [nbformat.v4.new_code_cell("t", outputs=[_html_output(page)])]
        table = BeautifulSoup(prepare_for_slides(nb).cells[0].outputs[0]["data"]["text/html"], "html.parser")
        header = [c.get_text() for c in table.find("tr").find_all(["th", "td"])]
        assert "rule" not in header and "note" not in header and "verdict" in header and "id" not in table.get_text()
        firsts = [row.find(["th", "td"]).get_text() for row in table.find("tbody").find_all("tr")]
        if case:
            assert header[0] == "case" and firsts == case
        else:
            assert header[0] == "paper" and firsts == ["Clark et al. 2019"] * 2
