"""Figure building: the package's heatmaps against seaborn.heatmap, in grids of several panels.

For grids of 1, 4 and 9 layer x head panels (the notebooks draw up to 9 in one figure), the time
to build the figure with bertology_utils.core.figures.plot_layer_head_grid and with
seaborn.heatmap called the way the package called it before (same data, same colour bars),
then the time to save each as PNG (150 dpi, as save_figure does). seaborn.heatmap draws the
whole figure after each panel, so its cost grows with the square of the panel count.

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


if __name__ == "__main__":
    main()
