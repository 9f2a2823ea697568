"""The probes' weight figures stay readable on a slide: notebook 04 draws its effective weights two relations a
figure (w and u side by side), so every text is at least MIN_TEXT_PX and none overlaps once fitted."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from bertology_utils.analyses.probes import plot_probe_weights  # noqa: E402
from bertology_utils.core.figure_text import fit_for_slide, shown_width, text_boxes, text_problems  # noqa: E402
from bertology_utils.core.figures import DEFAULT_DPI  # noqa: E402


@pytest.mark.parametrize("layers, heads", [(6, 12), (12, 12)])
@pytest.mark.parametrize("relations", [("all",), ("nsubj", "obj")])
def test_effective_weights_fit_a_slide(layers: int, heads: int, relations: tuple[str, ...]) -> None:
    weights = np.random.default_rng(0).normal(size=(len(relations), 2, layers, heads))
    _, L, H = weights[0].shape
    fig, axes = plt.subplots(
        len(relations), 2, figsize=(2 * (0.5 * H + 2), len(relations) * (0.42 * L + 1.4)), squeeze=False
    )
    for row, name, grid in zip(axes, relations, weights, strict=True):
        plot_probe_weights(grid, axes=row, title=f"Attn + words, {name} arcs", label="mean weight", annotate=False)
    fig.tight_layout()
    fit_for_slide(fig)
    text = text_boxes(fig, dpi=DEFAULT_DPI)
    assert any("dependent attends to head" in box.text for box in text.boxes)
    assert text_problems(text, shown_width(text.size)) == []
    plt.close(fig)
