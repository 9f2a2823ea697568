"""Plotting helpers shared by the notebooks (matplotlib, in seaborn's heatmap style).

The heatmaps are drawn with matplotlib alone: ``seaborn.heatmap`` draws the whole figure after
every call (to see whether tick labels overlap), so a figure of k panels cost about k^2/2 panel
draws (a 3 x 3 grid of layer x head maps: 9 s instead of 0.3 s); these draw nothing until the
figure is shown or saved, and set the label rotation they need themselves.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import to_rgba

from bertology_utils.core.typing import HeadMatrix, WordMap

__all__ = ["plot_attention_map", "plot_layer_head_grid"]


def plot_attention_map(
    attention: WordMap,
    labels: Sequence[str],
    *,
    ax=None,
    title: str | None = None,
    cmap: str = "Blues",
    annotate: bool = False,
):
    """Heatmap of one ``(n, n)`` attention map: rows attend (from), columns are attended to."""
    attention = np.asarray(attention, dtype=float)
    if attention.shape != (len(labels), len(labels)):
        raise ValueError(f"a {attention.shape} map needs {attention.shape[0]} labels, got {len(labels)}")
    if ax is None:
        size = max(3.0, 0.35 * len(labels) + 1.5)
        _, ax = plt.subplots(figsize=(size + 1, size))
    _heatmap(
        ax,
        attention,
        cmap=cmap,
        vmin=0,
        vmax=max(attention.max(), 1e-9),
        square=True,
        xticklabels=labels,
        yticklabels=labels,
        annotate=annotate,
        fmt=".2f",
        cbar_kws={"shrink": 0.7, "label": "attention"},
    )
    ax.set_xlabel("attended to")
    ax.set_ylabel("attending from")
    ax.tick_params(axis="x", labelrotation=90)
    ax.tick_params(axis="y", labelrotation=0)
    if title:
        ax.set_title(title)
    return ax


def plot_layer_head_grid(
    values: HeadMatrix,
    *,
    ax=None,
    title: str | None = None,
    cmap: str = "viridis",
    label: str = "",
    fmt: str = ".2f",
    annotate: bool | None = None,
    vmin=None,
    vmax=None,
):
    """Heatmap of a ``(layers, heads)`` statistic, both axes counted from 1 like the papers."""
    values = np.asarray(values, dtype=float)
    layers, heads = values.shape
    if ax is None:
        _, ax = plt.subplots(figsize=(0.55 * heads + 2, 0.45 * layers + 1.5))
    if annotate is None:
        annotate = layers * heads <= 150
    _heatmap(
        ax,
        values,
        cmap=cmap,
        annotate=annotate,
        fmt=fmt,
        vmin=vmin,
        vmax=vmax,
        xticklabels=range(1, heads + 1),
        yticklabels=range(1, layers + 1),
        cbar_kws={"label": label},
    )
    ax.tick_params(axis="y", labelrotation=0)
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    if title:
        ax.set_title(title)
    return ax


def _luminance(color) -> float:
    """Relative luminance of a colour (WCAG), to pick dark or light text on it."""
    rgb = np.asarray(to_rgba(color)[:3])
    linear = np.where(rgb <= 0.03928, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    return float(linear @ [0.2126, 0.7152, 0.0722])


def _heatmap(
    ax,
    values: np.ndarray,
    *,
    cmap: str,
    xticklabels,
    yticklabels,
    vmin=None,
    vmax=None,
    annotate: bool = False,
    fmt: str = ".2f",
    square: bool = False,
    cbar_kws: dict | None = None,
):
    """One cell per value, first row at the top, ticks at cell centres, a colour bar; NaN cells left blank.

    What ``seaborn.heatmap`` draws (no spines, no grid, annotations dark or light by the cell's
    luminance), without its draw of the whole figure.
    """
    data = np.ma.masked_invalid(np.asarray(values, dtype=float))
    finite = data.compressed()
    vmin = (float(finite.min()) if finite.size else 0.0) if vmin is None else vmin
    vmax = (float(finite.max()) if finite.size else 1.0) if vmax is None else vmax
    mesh = ax.pcolormesh(data, cmap=cmap, vmin=vmin, vmax=vmax)
    rows, columns = data.shape
    ax.set(xlim=(0, columns), ylim=(rows, 0))
    ax.set_xticks(np.arange(columns) + 0.5, [str(x) for x in xticklabels])
    ax.set_yticks(np.arange(rows) + 0.5, [str(y) for y in yticklabels])
    ax.grid(False)
    for spine in ax.spines.values():
        spine.set_visible(False)
    if square:
        ax.set_aspect("equal")
    bar = ax.figure.colorbar(mesh, ax=ax, **(cbar_kws or {}))
    bar.outline.set_linewidth(0)
    if annotate:
        for (row, column), value in np.ndenumerate(data.filled(np.nan)):
            if np.isfinite(value):
                dark = _luminance(mesh.cmap(mesh.norm(value))) > 0.408
                ax.text(
                    column + 0.5, row + 0.5, format(value, fmt), ha="center", va="center", color=".15" if dark else "w"
                )
    return mesh
