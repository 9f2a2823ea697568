"""What the SVG that save_figure writes beside each PNG costs: time and size of each, per kind of figure.

Figures shaped like the notebooks' for a 12 x 12 model and 18-word items (a layer x head grid, a 3 x 3
grid of them, three attention maps, a contact sheet of 30 small maps, a strip plot, a 20 x 64 heatmap
as the neuron view draws), each saved by bertology_utils.core.figures.save_image as save_figure does
(150 dpi, tight bounding box); the fastest of --repeats saves counts.

    python bench/bench_figure_svg.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="saves per figure and format (the fastest counts)")
    args = parser.parse_args()

    import matplotlib

    matplotlib.use("agg")
    import matplotlib.pyplot as plt
    import numpy as np
    import pandas as pd
    import seaborn as sns

    from bertology_utils.core.figures import plot_attention_map, plot_layer_head_grid, save_image
    from bertology_utils.present.labelling import draw_map

    rng = np.random.default_rng(0)
    words = [f"word{i}" for i in range(18)]

    def attention():
        weights = rng.random((18, 18)) ** 4
        return weights / weights.sum(1, keepdims=True)

    def grid():
        return plot_layer_head_grid(rng.random((12, 12)), title="entropy").figure

    def grids():
        fig, axes = plt.subplots(3, 3, figsize=(13, 12.6), layout="constrained")
        for ax in axes.ravel():
            plot_layer_head_grid(rng.random((12, 12)), ax=ax, annotate=False)
        return fig

    def maps():
        fig, axes = plt.subplots(1, 3, figsize=(16, 5.5), layout="constrained")
        for ax in axes:
            plot_attention_map(attention(), words, ax=ax, title="a head")
        return fig

    def contact_sheet():
        fig, axes = plt.subplots(5, 6, figsize=(12.6, 11.5))
        for ax in axes.ravel():
            draw_map(ax, attention(), np.zeros(18, int), np.zeros(18, int), title="L1-H1")
        fig.tight_layout()
        return fig

    def strip_plot():
        shares = pd.DataFrame(
            {
                "layer": np.repeat(np.arange(1, 13), 48),
                "share": rng.random(576),
                "target": np.tile(["cls", "sep", "period", "comma"], 144),
            }
        )
        fig, ax = plt.subplots(figsize=(8, 4), layout="constrained")
        sns.stripplot(data=shares, x="layer", y="share", hue="target", dodge=True, size=3, ax=ax)
        return fig

    def neuron():
        fig, ax = plt.subplots(figsize=(14, 6))
        sns.heatmap(rng.normal(size=(20, 64)), ax=ax, cmap="RdBu_r", center=0)
        return fig

    folder = Path(tempfile.mkdtemp(prefix="bench-figure-svg-"))
    totals = {"png": 0.0, "svg": 0.0}
    for name, make in (
        ("layer x head grid, annotated", grid),
        ("3 x 3 grids", grids),
        ("3 maps of 18 words", maps),
        ("contact sheet, 30 maps", contact_sheet),
        ("strip plot, 576 points", strip_plot),
        ("20 x 64 heatmap", neuron),
    ):
        fig = make()
        line = []
        for fmt in totals:
            path = folder / f"figure.{fmt}"
            best = min(_timed(lambda: save_image(fig, path)) for _ in range(args.repeats))  # noqa: B023
            totals[fmt] += best
            line.append(f"{fmt} {best:.2f} s {path.stat().st_size / 1e3:4.0f} kB")
        plt.close(fig)
        print(f"{name:30s} {' | '.join(line)}")
    print(
        f"all six: PNG {totals['png']:.2f} s, SVG {totals['svg']:.2f} s ({totals['svg'] / totals['png']:.2f}x the PNGs)"
    )


def _timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
