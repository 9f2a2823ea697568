"""Views out of the browser: head, model, neuron and context-mixing views saved as PNG, SVG and PDF, figures
saved with an SVG beside each PNG, and the run's figures gathered as SVGs for slides."""

import io
import re
import xml.etree.ElementTree as ET

import matplotlib.pyplot as plt
import nbformat
import numpy as np
import pytest
from matplotlib.collections import LineCollection
from PIL import Image

from bertology_utils.cli import main
from bertology_utils.core.errors import BertologyError
from bertology_utils.core.figures import plot_attention_map
from bertology_utils.core.models import load_model
from bertology_utils.data import Corpus
from bertology_utils.interventions.mixing import mixing_for
from bertology_utils.present import assets
from bertology_utils.present.mixing_maps import mixing_view
from bertology_utils.present.report import figure_files
from bertology_utils.present.reveal import SLIDE_SIZE
from bertology_utils.present.slides import SLIDE_FIGURES_DIR, slide_figures
from bertology_utils.present.views import head_view, model_view, neuron_view
from bertology_utils.run.record import save_figure

SENTENCE = "The old sailor reads a heavy wooden box."
PAIR = ("Hello world again.", "Where did you put the keys?")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SVG_TEXT = "{http://www.w3.org/2000/svg}text"


@pytest.fixture(scope="module")
def bert(tiny_model_dirs):
    return load_model(tiny_model_dirs["bert"])  # 2 layers x 4 heads


def svg_texts(path) -> list[str]:
    """The text of every <text> element of an SVG (the file must parse as XML)."""
    return ["".join(node.itertext()) for node in ET.parse(path).getroot().iter(SVG_TEXT)]


def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC)
    return Image.open(io.BytesIO(data)).size


def views(bert) -> dict:
    words = Corpus.from_texts(SENTENCE)
    maps = mixing_for(words, bert, ["attention", "rollout", "alti"])
    return {
        "head": head_view(SENTENCE, bert, layer=1, heads=[0, 2]),
        "model": model_view(PAIR, bert, level="word", layers=[1], heads=[1, 3]),
        "neuron": neuron_view(SENTENCE, bert, layer=1, head=3),
        "mixing": mixing_view({name: items[0] for name, items in maps.items()}),
        "mixing in the head view": head_view(maps["alti"][0], level="word"),
    }


def labels_of(view) -> list[str]:
    if hasattr(view, "labels"):
        return list(view.labels)
    if hasattr(view, "tokens"):
        return list(view.tokens)
    return list(next(iter(view.maps.values())).words)


def test_every_view_saves_as_svg_holding_its_tokens_and_as_png(bert, tmp_path):
    for name, view in views(bert).items():
        svg, png = tmp_path / f"{name}.svg", tmp_path / f"{name}.png"
        assert view.save(svg) == svg and view.save(png) == png
        texts = svg_texts(svg)
        missing = [label for label in labels_of(view) if label not in texts]
        assert not missing, f"{name}: the SVG lacks {missing}"
        width, height = png_size(png)
        assert 300 < width < 5000 and 200 < height < 5000, (name, width, height)
        assert not plt.get_fignums(), f"{name}: save left its figure open (a notebook would show it again)"


def test_images_show_what_the_interactive_view_selects(bert, tmp_path):
    shown = views(bert)
    shown["head"].save(tmp_path / "head.svg")
    texts = svg_texts(tmp_path / "head.svg")
    assert any("layer 2" in t for t in texts) and {"1", "3"} <= set(texts) and not {"2", "4"} & set(texts)
    shown["model"].save(tmp_path / "model.svg")
    texts = svg_texts(tmp_path / "model.svg")
    assert {"layer 2", "head 2", "head 4"} <= set(texts) and not {"layer 1", "head 1", "head 3"} & set(texts)
    assert {"Hello", "keys"} <= set(texts)  # word level: the pair's words, not lower-cased tokens
    shown["mixing"].save(tmp_path / "mixing.svg")
    assert {"attention", "rollout", "alti"} <= set(svg_texts(tmp_path / "mixing.svg"))


def test_head_view_image_draws_each_weight_as_bertviz_does(bert):
    view = head_view(SENTENCE, bert, layer=1, heads=[0, 2])
    fig = view.figure()
    (lines,) = [c for c in fig.axes[0].collections if isinstance(c, LineCollection)]
    # opacity = weight / heads shown, one line per (head, from, to); invisible ones (under 1/256) left out
    weights = np.asarray(view.maps[1][[0, 2]], dtype=float) / 2
    expected = np.sort(weights[weights >= 1 / 256])
    np.testing.assert_allclose(np.sort(lines.get_colors()[:, 3]), expected, atol=1e-6)
    assert len(lines.get_segments()) == len(expected)
    plt.close(fig)


def test_pdf_and_html_still_save(bert, tmp_path):
    view = head_view(SENTENCE, bert)
    assert view.save(tmp_path / "v.pdf").read_bytes().startswith(b"%PDF")
    assert "<!DOCTYPE html>" in view.save(tmp_path / "v.html").read_text()
    assert neuron_view(SENTENCE, bert).save(tmp_path / "n.PDF").read_bytes().startswith(b"%PDF")


def test_an_unknown_format_lists_the_formats_that_exist(bert, tmp_path):
    open_before = set(plt.get_fignums())  # figures another test on this worker left open are not this one's
    with pytest.raises(
        BertologyError, match=r"unknown format '\.jpg'; formats that exist: \.html, \.png, \.svg, \.pdf"
    ):
        head_view(SENTENCE, bert).save(tmp_path / "x.jpg")
    with pytest.raises(BertologyError, match=r"'\(no suffix\)'.*\.html, \.png, \.svg, \.pdf"):
        model_view(SENTENCE, bert).save(tmp_path / "x")
    with pytest.raises(BertologyError, match=r"unknown format '\.html'; formats that exist: \.png, \.svg, \.pdf$"):
        neuron_view(SENTENCE, bert).save(tmp_path / "x.html")  # a figure, not a page
    assert not list(tmp_path.iterdir())
    assert set(plt.get_fignums()) == open_before


def test_mixing_view_checks_its_maps(bert):
    maps = mixing_for(Corpus.from_texts([SENTENCE, "A small dog."]), bert, ["rollout"])["rollout"]
    with pytest.raises(BertologyError, match="at least one map"):
        mixing_view({})
    with pytest.raises(BertologyError, match="of one item"):
        mixing_view({"first": maps[0], "second": maps[1]})
    with pytest.raises(ValueError, match="layer 2 out of range"):
        mixing_view({"rollout": maps[0]}, layer=2)


# --------------------------------------------------------------------------- figures of a run, for slides


def tokens_figure():
    labels = ["[CLS]", "sailor", "<box>", "[SEP]"]
    return plot_attention_map(np.full((4, 4), 0.25), labels, title="a map").figure, labels


def small_run(tmp_path):
    """A run folder of two executed notebooks: one figure saved by save_figure, one PNG from an older run."""
    run = tmp_path / "run"
    for stem in ("00_tour", "01_patterns"):
        (run / stem).mkdir(parents=True)
        notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"# {stem}")])
        nbformat.write(notebook, run / stem / f"{stem}.ipynb")
    fig, labels = tokens_figure()
    saved = save_figure(fig, "attention map", output_dir=run / "00_tour")
    plt.close(fig)
    save_figure(plt.figure(figsize=(2, 1)), "old", output_dir=run / "01_patterns", formats="png")
    plt.close("all")
    return run, saved, labels


def test_save_figure_writes_an_svg_with_text_beside_each_png(tmp_path):
    run, saved, labels = small_run(tmp_path)
    figures = run / "00_tour" / "figures"
    assert saved == [figures / "attention_map.png", figures / "attention_map.svg"]
    assert saved[0].read_bytes().startswith(PNG_MAGIC)
    assert set(labels) <= set(svg_texts(saved[1]))  # "<box>" too: escaped in the file, text once parsed
    assert figure_files(run / "00_tour") == [saved[0]]  # the report shows each figure once


def test_slide_figures_gathers_every_svg_sized_for_a_slide(tmp_path):
    run, saved, labels = small_run(tmp_path)
    with pytest.warns(UserWarning, match=r"1 figure\(s\) were saved as PNG only .*01_patterns/old\.png"):
        written = slide_figures(run)
    assert written == [run / SLIDE_FIGURES_DIR / "00_tour-attention_map.svg"]
    root = ET.parse(written[0]).getroot()
    width, height = (float(root.get(k).removesuffix("px")) for k in ("width", "height"))
    assert (round(width), round(height)) in {(SLIDE_SIZE[0], round(height)), (round(width), SLIDE_SIZE[1])}
    assert width <= SLIDE_SIZE[0] and height <= SLIDE_SIZE[1]
    original = ET.parse(saved[1]).getroot()
    assert root.get("viewBox") == original.get("viewBox")  # the drawing itself is untouched
    assert set(labels) <= set(svg_texts(written[0]))
    with pytest.warns(UserWarning, match="01_patterns/old.png"):
        assert slide_figures(run, ["01"], out_dir=tmp_path / "out") == []  # only the PNG-only notebook


@pytest.mark.filterwarnings("ignore:1 figure")
@pytest.mark.skipif(
    not assets.have_assets("reveal", "reveal_css", "reveal_theme", "jquery", "require"),
    reason="the JavaScript libraries are not installed (make setup / npm ci)",
)
def test_slides_command_writes_the_figures_with_figures(tmp_path, capsys):
    run, _, _ = small_run(tmp_path)
    assert main(["slides", str(run), "00", "--figures"]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == [
        str(run / "00_tour" / "00_tour.slides.html"),
        str(run / SLIDE_FIGURES_DIR / "00_tour-attention_map.svg"),
    ]
    out = tmp_path / "decks"
    assert main(["slides", str(run), "--out", str(out), "--figures"]) == 0
    assert (out / SLIDE_FIGURES_DIR / "00_tour-attention_map.svg").is_file()


def test_an_svg_without_a_viewbox_gets_one_and_a_bad_one_is_refused(tmp_path):
    run, _, _ = small_run(tmp_path)
    figures = run / "00_tour" / "figures"
    (figures / "bare.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg" width="4" height="2"/>')
    with pytest.warns(UserWarning):
        written = slide_figures(run)
    bare = ET.parse(run / SLIDE_FIGURES_DIR / "00_tour-bare.svg").getroot()
    assert (bare.get("width"), bare.get("height"), bare.get("viewBox")) == ("1280px", "640px", "0 0 4 2")
    assert len(written) == 2
    (figures / "bare.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg" width="100%"/>')
    with pytest.raises(BertologyError, match=re.escape(str(figures / "bare.svg"))):
        slide_figures(run)
