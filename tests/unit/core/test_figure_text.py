"""The measured text of figures (core.figure_text): boxes in the saved image's pixels, the rules, the slide fit,
the PNG chunk and the inline formatter's metadata."""

import io
import json
from functools import partial
from itertools import combinations
from types import SimpleNamespace

import matplotlib.pyplot as plt
import numpy as np
import pytest
from IPython.core.events import EventManager
from IPython.core.formatters import DisplayFormatter
from IPython.core.pylabtools import print_figure
from matplotlib.figure import Figure
from PIL import Image

from bertology_utils.core.figure_text import (
    MIN_TEXT_PX,
    TEXT_KEY,
    FigureText,
    TextBox,
    fit_for_slide,
    fitted_for_slide,
    img_attribute,
    png_with_text,
    read_png_text,
    register_inline,
    shown_width,
    text_boxes,
    text_problems,
)
from bertology_utils.core.figures import plot_layer_head_grid, save_image
from bertology_utils.run.record import save_figure


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _png(fig, dpi, **kw) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, **kw)
    return buffer.getvalue()


def _box(text: FigureText, string: str) -> TextBox:
    return next(b for b in text.boxes if b.text == string)


def test_a_title_is_measured_in_the_saved_images_pixels_uncropped_and_cropped():
    fig = plt.figure(figsize=(10, 5))
    fig.suptitle("Title", fontsize=20, y=0.9)  # the title's top at 10% of the figure's height
    full = text_boxes(fig, dpi=100, bbox_inches=None)
    assert full.size == (1000, 500) == Image.open(io.BytesIO(_png(fig, 100))).size
    title = _box(full, "Title")
    assert title.font_px == pytest.approx(20 / 72 * 100, abs=0.05)  # 27.8 px, kept to 0.1 px
    assert title.y0 == pytest.approx(50, abs=2)
    assert (title.x0 + title.x1) / 2 == pytest.approx(500, abs=2)

    # Cropped to the text plus savefig's pad (0.1 in = 10 px): the box moves to the crop's corner.
    cropped = text_boxes(fig, dpi=100)
    assert cropped.size == Image.open(io.BytesIO(_png(fig, 100, bbox_inches="tight"))).size
    title = _box(cropped, "Title")
    assert (title.x0, title.y0) == (pytest.approx(10, abs=2), pytest.approx(10, abs=2))
    assert cropped.size[0] == pytest.approx(title.x1 - title.x0 + 20, abs=2)


def test_every_kind_of_text_is_measured_and_hidden_ones_are_not():
    fig, (ax, off) = plt.subplots(1, 2, figsize=(8, 3))
    mesh = ax.pcolormesh(np.arange(4).reshape(2, 2))
    ax.set(xticks=[0.5, 1.5, 5], xticklabels=["a", "b", "out of view"], xlabel="x", title="t")
    ax.set_xlim(0, 2)  # after the ticks, which would widen it
    ax.annotate("note", (1, 1))
    fig.colorbar(mesh, ax=ax, label="bar")
    ax.plot([0, 1], [0, 1], label="line")
    ax.legend(title="legend")
    off.set_title("shown")
    off.set_xlabel("hidden with its axis")
    off.axis("off")
    texts = {b.text for b in text_boxes(fig, dpi=72).boxes}
    assert {"a", "b", "x", "t", "note", "bar", "line", "legend", "shown"} <= texts
    assert not texts & {"out of view", "hidden with its axis"}


def _text(*boxes, size=(1000, 500)) -> FigureText:
    return FigureText(size, tuple(TextBox(*b) for b in boxes))


def test_text_problems_finds_small_and_overlapping_text():
    text = _text((0, 0, 50, 20, 20, "big"), (100, 0, 150, 10, 10, "tiny"), (40, 5, 90, 25, 20, "over big"))
    problems = text_problems(text, 1000)
    assert [(p.kind, p.texts) for p in problems] == [("small", ("tiny",)), ("overlap", ("big", "over big"))]
    # Shown at half its width, the 20 px texts are 10 px: too small.
    assert {p.texts for p in text_problems(text, 500) if p.kind == "small"} == {("big",), ("tiny",), ("over big",)}
    assert text_problems(text, 1000, overlap=0.5, min_px=5) == []


def _shared(a, b) -> float:
    """The fraction of the smaller box's area both boxes cover, read one pair at a time (the rule's definition)."""
    (ax0, ax1), (ay0, ay1) = sorted(a[0::2]), sorted(a[1::2])
    (bx0, bx1), (by0, by1) = sorted(b[0::2]), sorted(b[1::2])
    width, height = min(ax1, bx1) - max(ax0, bx0), min(ay1, by1) - max(ay0, by0)
    smaller = min((ax1 - ax0) * (ay1 - ay0), (bx1 - bx0) * (by1 - by0))
    return width * height / smaller if width > 0 and height > 0 and smaller > 0 else 0.0


def test_overlaps_are_found_in_one_pass_as_a_pair_by_pair_reading_finds_them():
    rng = np.random.default_rng(0)
    corners = rng.integers(0, 40, size=(300, 4)).astype(float)  # a coarse grid: shared edges and corners
    corners[::7, 2] = corners[::7, 0]  # boxes without area
    corners[::5] = corners[::5][:, [2, 3, 0, 1]]  # corners in the other order
    text = _text(*((*box, 20, f"t{i}") for i, box in enumerate(corners)))
    expected = [(f"t{i}", f"t{j}") for (i, a), (j, b) in combinations(enumerate(corners), 2) if _shared(a, b) > 0.05]
    assert len(expected) > 100
    found = [p.texts for p in text_problems(text, 1000, min_px=0)]
    assert found == expected  # the same pairs, in combinations' order
    assert text_problems(_text((0, 0, 10, 10, 20, "a"), (10, 0, 20, 10, 20, "b")), 1000, min_px=0) == []  # touching


def test_planted_defects_in_a_drawn_figure_are_found():
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.bar([f"category {i}" for i in range(30)], np.arange(30))  # 30 long labels side by side
    ax.tick_params(axis="y", labelsize=4)
    ax.text(0.5, 0.5, "a note", transform=ax.transAxes)
    ax.text(0.5, 0.5, "under the legend", transform=ax.transAxes)
    text = text_boxes(fig, dpi=100)
    problems = text_problems(text, shown_width(text.size))
    assert {p.texts[0] for p in problems if p.kind == "small"} == {t.get_text() for t in ax.get_yticklabels()} & {
        b.text for b in text.boxes
    }
    overlaps = {p.texts for p in problems if p.kind == "overlap"}
    assert ("category 0", "category 1") in overlaps
    assert ("a note", "under the legend") in overlaps


def test_shown_width_fits_the_slide_box():
    assert shown_width((2000, 500)) == 1180
    assert shown_width((1000, 1000)) == 540


def test_fit_for_slide_thins_a_many_category_axis_and_leaves_the_data_alone():
    rng = np.random.default_rng(0)
    layers, heads = 12, 12  # a layer x head bar chart: the category count comes from the data below
    values = rng.random(layers * heads)
    names = [f"L{i // heads + 1}H{i % heads + 1}" for i in range(values.size)]
    fig, ax = plt.subplots(figsize=(8, 4))
    bars = ax.bar(names, values, label="importance")
    ax.legend(loc="upper right")
    ax.tick_params(labelsize=5)
    before = text_boxes(fig, dpi=150)
    assert text_problems(before, shown_width(before.size))

    fit_for_slide(fig)
    after = text_boxes(fig, dpi=150)
    assert text_problems(after, shown_width(after.size)) == []
    shown = [t.get_text() for t in ax.get_xticklabels()]
    assert 1 < len(shown) < len(names) and set(shown) <= set(names)
    assert names.index(shown[1]) - names.index(shown[0]) > 1  # every k-th kept, in order
    np.testing.assert_array_equal([b.get_height() for b in bars], values)  # the data as plotted
    legend = ax.get_legend().get_window_extent()
    assert legend.x0 >= ax.get_window_extent().x1  # moved beside the axes
    ticks = list(ax.get_xticks())
    fit_for_slide(fig)  # a second fit changes nothing
    assert list(ax.get_xticks()) == ticks


def test_fit_for_slide_enlarges_small_text_to_the_minimum_at_the_shown_size():
    fig, ax = plt.subplots(figsize=(16, 4))  # wide: shown at 1180 px of about 2400
    ax.plot([0, 1], [0, 1])
    ax.set_title("small", fontsize=6)
    fit_for_slide(fig)
    text = text_boxes(fig, dpi=150)
    assert _box(text, "small").font_px * shown_width(text.size) / text.size[0] >= MIN_TEXT_PX


def test_save_image_writes_the_boxes_into_the_png(tmp_path):
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.set_title("λ is kept")
    path = save_image(fig, tmp_path / "f.png")
    text = read_png_text(path)
    assert text is not None and text.size == Image.open(path).size
    assert text == text_boxes(fig, dpi=150)
    assert _box(text, "λ is kept").font_px == pytest.approx(fig.axes[0].title.get_fontsize() * 150 / 72, abs=0.05)
    assert read_png_text(_png(fig, 50)) is None  # a PNG without the chunk
    assert read_png_text(png_with_text(_png(fig, 50), text)) == text


def _grid_figure():
    fig, axes = plt.subplots(2, 2, figsize=(12, 6), layout="constrained")
    for k, ax in enumerate(axes.ravel()):
        plot_layer_head_grid(np.random.default_rng(k).random((3, 4)), ax=ax, title=f"statistic {k}", annotate=True)
    return fig


def test_fitted_for_slide_lays_the_figure_out_once_for_every_image_and_gives_its_engine_back(monkeypatch):
    fig = _grid_figure()
    engine = fig.get_layout_engine()
    runs = []
    monkeypatch.setattr(engine, "execute", lambda f, run=engine.execute: runs.append(1) or run(f))
    with fitted_for_slide(fig) as fitted:
        assert fitted is fig and fig.get_layout_engine() is not engine
        laid_out = len(runs)
        held = [text_boxes(fig, dpi=dpi) for dpi in (100, 150)]
        _png(fig, 150, bbox_inches="tight")
    assert laid_out >= 1 and len(runs) == laid_out  # the images' draws laid nothing out again
    assert fig.get_layout_engine() is engine
    again = [text_boxes(fig, dpi=dpi) for dpi in (100, 150)]  # laid out at each resolution
    assert len(runs) > laid_out
    for h, a in zip(held, again, strict=True):
        assert [b.text for b in h.boxes] == [b.text for b in a.boxes]
        moved = np.abs(np.array([b[:5] for b in h.boxes]) - np.array([b[:5] for b in a.boxes])).max()
        assert moved <= 0.01 * max(h.size)  # rounding: the same layout
        assert text_problems(h, shown_width(h.size)) == []


def test_save_figure_fits_a_figure_once_for_all_its_formats(tmp_path, monkeypatch):
    import bertology_utils.core.figure_text as figure_text

    fits = []
    monkeypatch.setattr(figure_text, "fit_for_slide", lambda fig, **kw: fits.append(fig) or fit_for_slide(fig, **kw))
    fig = _grid_figure()
    png, svg = save_figure(fig, "grid", tmp_path, formats=("png", "svg"))
    assert fits == [fig]
    text = read_png_text(png)
    assert text is not None and text_problems(text, shown_width(text.size)) == []
    assert "statistic 3" in svg.read_text()


def test_img_attribute_carries_the_json_escaped():
    text = _text((1, 2, 3, 4, 20, "it's <b>"))
    attribute = img_attribute(text)
    assert attribute.startswith(" data-text-boxes='") and "<" not in attribute and "'" not in attribute[18:-1]
    assert img_attribute(None) == ""
    assert img_attribute(json.loads(text.to_json())) == attribute


def _drawn(fig: Figure) -> Figure:
    fig.gca().plot([0, 1], [1, 0], label="line")
    fig.gca().set_title("inline")
    return fig


@pytest.mark.parametrize("retina", [False, True])
def test_the_inline_formatter_adds_the_boxes_and_keeps_the_png(retina):
    from IPython.core.pylabtools import retina_figure

    original = partial(retina_figure if retina else print_figure, **({} if retina else {"fmt": "png"}), base64=True)
    shell = SimpleNamespace(kernel=object(), display_formatter=DisplayFormatter(), events=EventManager(None, {}))
    shell.events.register = lambda *_: None  # this shell runs no cells
    png_formatter = shell.display_formatter.formatters["image/png"]
    png_formatter.for_type(Figure, original)
    assert register_inline(shell) and register_inline(shell)
    wrapped = png_formatter.type_printers[Figure]
    assert wrapped.__wrapped__ is original  # wrapped once, whatever the number of calls

    fig = _drawn(plt.figure(figsize=(4, 3)))
    data, metadata = wrapped(fig)
    expected = original(fig)  # the figure as fitted by the wrapper
    assert data == (expected[0] if retina else expected)
    text = FigureText.from_json(json.dumps(metadata[TEXT_KEY]))
    png = Image.open(io.BytesIO(__import__("base64").b64decode(data)))
    assert text.size == png.size and "inline" in {b.text for b in text.boxes}
    if retina:
        assert metadata["width"] == png.size[0] // 2  # the formatter's own metadata kept


def test_a_formatter_the_backend_registers_during_a_cell_is_wrapped_before_its_figures_show():
    # the inline backend is set up by a kernel's first figure: inside a cell, after our pre_run_cell hook ran;
    # it then registers flush_figures after our post_execute hook, so ours runs first
    shell = SimpleNamespace(kernel=object(), display_formatter=DisplayFormatter(), events=EventManager(None, {}))
    shell.events = EventManager(shell, {"pre_run_cell": lambda info: None, "post_execute": lambda: None})
    png_formatter = shell.display_formatter.formatters["image/png"]
    assert register_inline(shell)
    shown = []
    png_formatter.for_type(Figure, partial(print_figure, fmt="png", base64=True))  # the backend, mid-cell
    shell.events.register("post_execute", lambda: shown.append(png_formatter.type_printers[Figure]))
    shell.events.trigger("post_execute")
    assert getattr(shown[0], "bertology_text", False)


def test_a_maps_tokens_are_enlarged_but_never_thinned():
    from bertology_utils.core.figures import plot_attention_map

    tokens = [f"token{i}" for i in range(40)]  # too many for the slide: a plain axis would keep every k-th
    ax = plot_attention_map(np.full((40, 40), 1 / 40), tokens)
    fit_for_slide(ax.figure)
    assert [t.get_text() for t in ax.get_xticklabels()] == tokens
    text = text_boxes(ax.figure, dpi=100)
    assert min(b.font_px for b in text.boxes if b.text in tokens) * shown_width(text.size) / text.size[0] >= MIN_TEXT_PX


def test_a_grid_spaced_by_its_own_gaps_is_fitted_without_tight_layout_or_its_warning(recwarn):
    from bertology_utils.core.figures import plot_attention_thumbnails

    words = ["[CLS]", *(f"word{i}" for i in range(10)), "[SEP]"]  # too many labels for the panels: fitting relays
    fig = plot_attention_thumbnails(np.full((6, 12, 12, 12), 1 / 12), words, title="every head")
    positions = [ax.get_position().bounds for ax in fig.axes]
    fit_for_slide(fig)
    assert fig.get_layout_engine() is None  # tight layout could place none of its axes: it would only warn
    assert [ax.get_position().bounds for ax in fig.axes] == positions
    assert not [w for w in recwarn if "tight_layout" in str(w.message)]
    plain = _grid_figure()  # subplots on a plain grid are still laid out tight
    plain.set_layout_engine(None)
    fit_for_slide(plain)
    assert type(plain.get_layout_engine()).__name__ == "TightLayoutEngine"
