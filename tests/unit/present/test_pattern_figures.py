"""Figures of Kovaleva's types: one panel per data set, one row per type with up to n maps."""

import types

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from bertology_utils.analyses.pattern_types import TYPES  # noqa: E402
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
    drawn = [ax for ax in fig.get_axes() if ax.axison]
    assert len(fig.get_axes()) == 2 * len(TYPES) and len(drawn) == 3
    assert {ax.get_title() for ax in drawn} == {"single L1-H1", "single L2-H2", "single L1-H2"}
    plt.close(fig)
