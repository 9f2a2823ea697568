"""The decks and the lecture carry each figure's measured text to the browser: the ``<img>``'s ``data-text-boxes``."""

import base64
import io
import json

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import nbformat  # noqa: E402
from bs4 import BeautifulSoup  # noqa: E402
from lecture_runs import make_lecture_run  # noqa: E402

from bertology_utils.core.figure_text import TEXT_KEY, FigureText, read_png_text, text_boxes  # noqa: E402
from bertology_utils.core.figures import save_image  # noqa: E402
from bertology_utils.present.lecture_outline import LECTURE  # noqa: E402
from bertology_utils.present.lecture_run import read_lecture_run  # noqa: E402
from bertology_utils.present.lecture_slides import topic_slide  # noqa: E402
from bertology_utils.present.slides import notebook_to_slides  # noqa: E402


def _figure():
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.set_title("it's <quoted> & λ")
    return fig


def _boxes(img) -> FigureText:
    return FigureText.from_json(img["data-text-boxes"])


def test_an_inline_figures_metadata_becomes_its_img_attribute(tmp_path):
    fig = _figure()
    png = io.BytesIO()
    fig.savefig(png, format="png")
    text = text_boxes(fig, dpi=100)
    plt.close(fig)
    shown = nbformat.v4.new_output(
        "display_data",
        data={"image/png": base64.b64encode(png.getvalue()).decode(), "text/plain": "<Figure>"},
        metadata={"image/png": {TEXT_KEY: json.loads(text.to_json())}},
    )
    plain = nbformat.v4.new_output("display_data", data={"image/png": shown.data["image/png"]})
    cells = [nbformat.v4.new_markdown_cell("# Figures"), nbformat.v4.new_code_cell("fig", outputs=[shown, plain])]
    path = tmp_path / "01_x" / "01_x.ipynb"
    path.parent.mkdir()
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    images = BeautifulSoup(notebook_to_slides(path).read_text(encoding="utf-8"), "html.parser").select(
        ".jp-RenderedImage img"
    )
    assert len(images) == 2
    assert _boxes(images[0]) == text
    assert "data-text-boxes" not in images[1].attrs  # an output without the metadata: no attribute


def test_a_lecture_figure_saved_by_save_image_carries_its_boxes(tmp_path):
    run = make_lecture_run(tmp_path / "run", notebooks={"06_pruning"})
    topic = next(t for t in LECTURE if t.figure == ("06_pruning", "pretrained_vs_random_init"))
    path = run / "06_pruning" / "figures" / "pretrained_vs_random_init.png"
    save_image(_figure(), path)
    plt.close("all")
    img = BeautifulSoup(topic_slide(topic, [read_lecture_run(run)], []), "html.parser").select_one("figure img")
    assert _boxes(img) == read_png_text(path)
    assert "it's <quoted> & λ" in {b.text for b in _boxes(img).boxes}
