"""Figures of Kovaleva's types: one panel per data set, one row per type with up to n maps."""

import types

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from bertology_utils.analyses.pattern_types import TYPES  # noqa: E402
from bertology_utils.core.figure_text import fit_for_slide, shown_width, text_boxes, text_problems  # noqa: E402
from bertology_utils.present.pattern_figures import plot_type_examples, plot_type_shares_by_layer  # noqa: E402


def test_shares_by_layer_has_one_panel_per_data_set():
    index = pd.MultiIndex.from_product([["single", "MRPC"], [1, 2]], names=["dataset", "layer"])
    shares = pd.DataFrame(np.full((4, len(TYPES)), 1 / len(TYPES)), index=index, columns=list(TYPES))
    fig = plot_type_shares_by_layer(shares, ["single", "MRPC"])
    axes = fig.get_axes()
    assert [ax.get_title() for ax in axes] == ["single", "MRPC"]
    assert len(axes[0].patches) == 2 * len(TYPES)
    plt.close(fig)


def test_examples_draw_up_to_n_maps_per_type():
    item = types.SimpleNamespace(
        attention=np.full((2, 2, 3, 3), 1 / 3), word_kinds=np.array([1, 0, 2]), segments=np.zeros(3, int)
    )
    kinds = pd.DataFrame(
        {
            "dataset": "single",
            "item": 0,
            "layer": [1, 2, 1],
            "head": [1, 2, 2],
            "type": ["vertical", "vertical", "block"],
        }
    )
    fig = plot_type_examples(kinds, {"single": [item]}, 2)
    drawn = [ax for ax in fig.get_axes() if ax.images]
    assert len(fig.get_axes()) == 2 * len(TYPES) and len(drawn) == 3
    assert {ax.get_title() for ax in drawn} == {"L1-H1\nsingle", "L2-H2\nsingle", "L1-H2\nsingle"}
    # each type names its row, the types without a map too
    assert [fig.get_axes()[2 * row].get_ylabel() for row in range(len(TYPES))] == [
        t.replace("+", " +\n") for t in TYPES
    ]
    plt.close(fig)


def test_the_contact_sheet_fits_a_slide_with_maps_one_can_see():
    rng = np.random.default_rng(0)
    n_words, n = 25, 6
    item = types.SimpleNamespace(
        attention=rng.dirichlet(np.ones(n_words), size=(3, 4, n_words)),
        word_kinds=np.r_[1, np.zeros(n_words - 2, int), 2],
        segments=np.r_[np.zeros(12, int), np.ones(n_words - 12, int)],
    )
    # every type but the last has n maps from the data set with the longest name; the last has none
    rows = [(t, layer, head) for t in TYPES[:-1] for layer in (1, 2, 3) for head in (1, 2)]
    kinds = pd.DataFrame(rows, columns=["type", "layer", "head"]).assign(dataset="treebank pairs", item=0)
    fig = plot_type_examples(kinds, {"treebank pairs": [item]}, n)
    fit_for_slide(fig)
    text = text_boxes(fig, dpi=100)
    assert text_problems(text, shown_width(text.size)) == []
    scale = shown_width(text.size) / text.size[0]
    fig.canvas.draw()
    maps = [ax for ax in fig.get_axes() if ax.images]
    assert len(maps) == n * (len(TYPES) - 1)
    assert min(ax.get_window_extent().height for ax in maps) * scale >= 60  # px on the slide
    assert {b.text for b in text.boxes} >= {"L1-H1\ntreebank pairs", "none", "vertical +\ndiagonal"}
    plt.close(fig)
