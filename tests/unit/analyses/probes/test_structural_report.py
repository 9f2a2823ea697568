"""The structural probes' figure: what it draws, and that it passes the slide rules as save_image writes it."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from bertology_utils.analyses.probes import plot_structural_layers  # noqa: E402
from bertology_utils.core.figure_text import fit_for_slide, shown_width, text_boxes, text_problems  # noqa: E402
from bertology_utils.core.figures import DEFAULT_DPI  # noqa: E402


def table(layers: int = 13) -> pd.DataFrame:
    """Full-rank rows at every layer and a rank-2 sweep row at layer 1 (left out of the figure)."""
    rows = []
    for layer in range(layers):
        rows += [(layer, "distance", 64, "test", "uuas", 0.3 + 0.04 * layer),
                 (layer, "depth", 64, "test", "root_acc", 0.2 + 0.05 * layer)]  # fmt: skip
    rows.append((1, "distance", 2, "test", "uuas", 0.05))
    return pd.DataFrame(rows, columns=["layer", "probe", "rank", "split", "metric", "value"])


def test_the_lines_are_full_rank_percentages_and_the_attention_probes_are_horizontal():
    _, ax = plt.subplots()
    try:
        plot_structural_layers(table(4), {"Attn": 0.5, "Attn + words": 0.7}, ax=ax)
        uuas, root, attn, words = ax.get_lines()
        np.testing.assert_allclose(uuas.get_ydata(), [30, 34, 38, 42])  # the rank-2 row is not drawn
        np.testing.assert_allclose(root.get_ydata(), [20, 25, 30, 35])
        np.testing.assert_allclose(attn.get_ydata(), [50, 50])
        np.testing.assert_allclose(words.get_ydata(), [70, 70])
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert "UUAS (undirected)" in labels[0] and "UAS (directed" in labels[2]
        assert ax.get_ylabel() == "test score (%)"
    finally:
        plt.close("all")


def test_the_figure_passes_the_slide_rules_at_bert_large_depth():
    fig, ax = plt.subplots(figsize=(9.0, 4.0))
    try:
        plot_structural_layers(table(25), {"Attn": 0.5, "Attn + words": 0.7}, ax=ax, title="a model: per layer")
        fig.tight_layout()
        fit_for_slide(fig)
        text = text_boxes(fig, dpi=DEFAULT_DPI)
        assert text_problems(text, shown_width(text.size)) == []
    finally:
        plt.close("all")
