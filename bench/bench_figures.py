"""Figure building: the package's heatmaps against seaborn.heatmap, in grids of several panels.

For grids of 1, 4 and 9 layer x head panels (the notebooks draw up to 9 in one figure), the time
to build the figure with bertology_utils.core.figures.plot_layer_head_grid and with
seaborn.heatmap called the way the package called it before (same data, same colour bars),
then the time to save each as PNG (150 dpi, as save_figure does). seaborn.heatmap draws the
whole figure after each panel, so its cost grows with the square of the panel count.

Then saving: save_figure writes a PNG and an SVG of a fitted figure; it fits the figure once and holds
the layout the fit ended with while both images are drawn (run.record.save_figure). The baseline in
the same run is what it did before: fit and save each image with the layout engine running in every
draw. And the slide rules' overlap check over a figure's texts (every pair of boxes at once, one
numpy pass) against the same check pair by pair in Python.

    python bench/bench_figures.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="figures built per setting (the fastest counts)")
    args = parser.parse_args()

    import matplotlib

    matplotlib.use("agg")
    import matplotlib.pyplot as plt
    import numpy as np
    import seaborn as sns

    from bertology_utils.core.figures import plot_layer_head_grid

    def seaborn_grid(values, ax):
        layers, heads = values.shape
        sns.heatmap(
            values,
            ax=ax,
            cmap="viridis",
            annot=True,
            fmt=".2f",
            xticklabels=range(1, heads + 1),
            yticklabels=range(1, layers + 1),
            cbar_kws={"label": ""},
        )

    def package_grid(values, ax):
        plot_layer_head_grid(values, ax=ax, annotate=True, label="")

    rng = np.random.default_rng(0)
    folder = Path(tempfile.mkdtemp(prefix="bench-figures-"))
    for rows, cols in ((1, 1), (2, 2), (3, 3)):
        seconds = {}
        for label, draw in (("seaborn.heatmap", seaborn_grid), ("package", package_grid)):
            build, save = [], []
            for _ in range(args.repeats):
                start = time.perf_counter()
                fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 4 * rows), layout="constrained", squeeze=False)
                for ax in axes.ravel():
                    draw(rng.random((6, 12)), ax)
                build.append(time.perf_counter() - start)
                start = time.perf_counter()
                fig.savefig(folder / f"{label}-{rows}x{cols}.png", dpi=150, bbox_inches="tight")
                save.append(time.perf_counter() - start)
                plt.close(fig)
            seconds[label] = (min(build), min(save))
        (sb, sb_save), (ours, ours_save) = seconds["seaborn.heatmap"], seconds["package"]
        print(
            f"{rows}x{cols} panels: build {sb:.2f} s with seaborn.heatmap, {ours:.2f} s with the package "
            f"({sb / ours:.1f}x); save {sb_save:.2f} vs {ours_save:.2f} s; "
            f"build and save {(sb + sb_save) / (ours + ours_save):.1f}x"
        )
    bench_saving(args.repeats)


def bench_saving(repeats: int) -> None:
    import gc
    import tempfile

    import matplotlib.pyplot as plt
    import numpy as np

    from bertology_utils.core.figure_text import fit_for_slide, text_problems
    from bertology_utils.core.figures import plot_layer_head_grid, save_image
    from bertology_utils.run.record import save_figure

    def grid(annotate: bool):
        fig, axes = plt.subplots(3, 3, figsize=(13, 12), layout="constrained")
        for k, ax in enumerate(axes.ravel()):
            values = np.random.default_rng(k).random((6, 12))
            plot_layer_head_grid(values, ax=ax, title=f"statistic {k}", annotate=annotate, label="")
        return fig

    def per_image(fig, folder):  # as before: fitted for each image, and laid out again in every draw
        for suffix in ("png", "svg"):
            fit_for_slide(fig)
            save_image(fig, folder / f"f.{suffix}", fit=False)

    folder = Path(tempfile.mkdtemp(prefix="bench-figures-save-"))
    for annotate in (False, True):
        seconds = {}
        for label, save in (("per image", per_image), ("save_figure", lambda f, d: save_figure(f, "f", d))):
            times = []
            for _ in range(repeats):
                fig = grid(annotate)
                gc.collect()  # the figures closed before: collecting them inside a timing costs up to seconds
                start = time.perf_counter()
                save(fig, folder)
                times.append(time.perf_counter() - start)
                plt.close(fig)
            seconds[label] = min(times)
        print(
            f"3x3 layer x head grid{' with values in its cells' if annotate else ''}, PNG and SVG: "
            f"{seconds['per image']:.2f} s fitted and laid out per image, {seconds['save_figure']:.2f} s with "
            f"save_figure ({seconds['per image'] / seconds['save_figure']:.2f}x)"
        )

    from bertology_utils.core.figure_text import FigureText, TextBox

    rng = np.random.default_rng(0)
    for n in (200, 800):
        # labels 40 x 20 px on a grid 44 px apart, nudged at random: a few touch their neighbours
        grid_xy = np.stack(np.divmod(np.arange(n), 40), axis=1)[:, ::-1] * 44.0 + rng.normal(0, 3, (n, 2))
        corners = np.concatenate([grid_xy, grid_xy + [40.0, 20.0]], axis=1)
        text = FigureText((1000, 1000), tuple(TextBox(*box, 20.0, str(i)) for i, box in enumerate(corners)))
        start = time.perf_counter()
        found = len(text_problems(text, 1000, min_px=0))
        vectorised = time.perf_counter() - start
        start = time.perf_counter()
        pairs = 0
        for i in range(n):
            for j in range(i + 1, n):
                a, b = corners[i], corners[j]
                width = min(max(a[0], a[2]), max(b[0], b[2])) - max(min(a[0], a[2]), min(b[0], b[2]))
                height = min(max(a[1], a[3]), max(b[1], b[3])) - max(min(a[1], a[3]), min(b[1], b[3]))
                area = min(abs(a[2] - a[0]) * abs(a[3] - a[1]), abs(b[2] - b[0]) * abs(b[3] - b[1]))
                pairs += width > 0 and height > 0 and area > 0 and width * height / area > 0.05
        loop = time.perf_counter() - start
        assert pairs == found
        print(
            f"overlap check, {n} texts ({found} overlapping pairs): {vectorised * 1e3:.1f} ms in one pass, "
            f"{loop * 1e3:.0f} ms pair by pair ({loop / vectorised:.0f}x)"
        )


if __name__ == "__main__":
    main()
