"""Plotting helpers shared by the notebooks and the views (matplotlib, in seaborn's heatmap style), and
:func:`save_image`, which writes a figure as PNG, SVG or PDF by the path's suffix.

The heatmaps are drawn with matplotlib alone: ``seaborn.heatmap`` draws the whole figure after
every call (to see whether tick labels overlap), so a figure of k panels cost about k^2/2 panel
draws (a 3 x 3 grid of layer x head maps: 9 s instead of 0.3 s); these draw nothing until the
figure is shown or saved, and set the label rotation they need themselves.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection, QuadMesh
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from bertology_utils.core.errors import BertologyError
from bertology_utils.core.figure_text import (
    MIN_TEXT_PX,
    SLIDE_BOX,
    fitted_for_slide,
    keep_every_label,
    measured_png,
    register_inline,
)
from bertology_utils.core.files import atomic_path, atomic_write_bytes
from bertology_utils.core.typing import HeadMatrix, WordMap

__all__ = [
    "IMAGE_FORMATS",
    "DEFAULT_DPI",
    "image_format",
    "save_image",
    "plot_attention_map",
    "map_labels_that_fit",
    "plot_layer_head_grid",
    "plot_attention_lines",
    "plot_attention_thumbnails",
]

# Inside a Jupyter kernel, inline figures are fitted for a slide and carry their text boxes from the first import
# of the plotting helpers on (every notebook imports them, or save_figure does, before its first figure), with
# no extension to load; outside a kernel this does nothing.
register_inline()

#: Suffixes :func:`save_image` writes. SVG and PDF keep text as text (SVG ``<text>`` elements, PDF
#: embedded fonts), so a figure's labels stay searchable and editable on a slide.
IMAGE_FORMATS = (".png", ".svg", ".pdf")
#: Resolution of PNGs and of the raster parts (``imshow`` panels) of SVGs and PDFs.
DEFAULT_DPI = 150


def image_format(path: str | os.PathLike, also: Sequence[str] = ()) -> str:
    """The suffix of ``path`` (lower case) if it is one of :data:`IMAGE_FORMATS` or ``also``; else a clear error."""
    suffix = Path(path).suffix.lower()
    known = (*also, *IMAGE_FORMATS)
    if suffix not in known:
        raise BertologyError(
            f"cannot save {Path(path).name!r}: unknown format {suffix or '(no suffix)'!r}; "
            f"formats that exist: {', '.join(known)}"
        )
    return suffix


def save_image(fig: Figure, path: str | os.PathLike, *, dpi: int = DEFAULT_DPI, fit: bool = True) -> Path:
    """Write ``fig`` whole (never half written) as PNG, SVG or PDF, chosen by the suffix of ``path``; returns it.

    The figure is first fitted for a slide (:func:`~bertology_utils.core.figure_text.fit_for_slide`: its
    presentation only). A PNG carries the boxes of its text, measured in the draw that wrote it, in a text chunk
    (:func:`~bertology_utils.core.figure_text.read_png_text`). SVG text is written as ``<text>`` elements in the
    viewer's fonts (``svg.fonttype: none``), not as glyph outlines: the tokens of a map can be searched, checked by
    tests and edited on a slide.

    :param fig: the figure.
    :param path: the file to write; its suffix picks the format.
    :param dpi: the resolution of a PNG.
    :param fit: fit the figure first; False inside the caller's
        :func:`~bertology_utils.core.figure_text.fitted_for_slide` (one figure written in several formats).
    :returns: ``path``.
    """
    path = Path(path)
    suffix = image_format(path)
    with fitted_for_slide(fig) if fit else nullcontext(fig):
        if suffix == ".png":
            atomic_write_bytes(path, measured_png(fig, dpi=dpi)[0])
            return path
        with plt.rc_context({"svg.fonttype": "none"}), atomic_path(path) as partial:
            fig.savefig(partial, format=suffix[1:], dpi=dpi, bbox_inches="tight")
    return path


def plot_attention_map(
    attention: WordMap,
    labels: Sequence[str],
    *,
    ax: Axes | None = None,
    title: str | None = None,
    cmap: str = "Blues",
    annotate: bool = False,
    max_labels: int | None = None,
    crop: bool = True,
) -> Axes:
    """Heatmap of one ``(n, n)`` attention map: rows attend (from), columns are attended to.

    :param attention: the ``(n, n)`` map.
    :param labels: its ``n`` tokens.
    :param ax: the axes to draw on; a new figure when None.
    :param title: the axes' title.
    :param cmap: the colour map.
    :param annotate: write the values in the cells.
    :param max_labels: at most this many token labels (the title says what is shown instead), e.g.
        :func:`map_labels_that_fit`: every token is a label, and a slide has room for so many rows of them.
    :param crop: with more tokens than ``max_labels``, show the map of the first ``max_labels`` tokens, labelled;
        False: the whole map, its tokens unlabelled (a pattern that spans the sentence, seen whole).
    :returns: the axes.
    """
    attention = np.asarray(attention, dtype=float)
    if attention.shape != (len(labels), len(labels)):
        raise ValueError(f"a {attention.shape} map needs {attention.shape[0]} labels, got {len(labels)}")
    unlabelled = max_labels is not None and len(labels) > max_labels and not crop
    if max_labels is not None and len(labels) > max_labels:
        shown = f"{len(labels)} tokens, unlabelled" if unlabelled else f"first {max_labels} of {len(labels)} tokens"
        title = f"{title}\n({shown})" if title else shown
        if not unlabelled:
            attention, labels = attention[:max_labels, :max_labels], labels[:max_labels]
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
    if unlabelled:
        ax.set(xticks=[], yticks=[])
    keep_every_label(ax)  # the tokens are the map's content
    ax.set_xlabel("attended to")
    ax.set_ylabel("attending from")
    ax.tick_params(axis="x", labelrotation=90)
    ax.tick_params(axis="y", labelrotation=0)
    if title:
        ax.set_title(title)
    return ax


def map_labels_that_fit(
    labels: Sequence[str],
    panels_across: int = 1,
    panels_down: int = 1,
    *,
    box: tuple[int, int] = SLIDE_BOX,
    min_px: float = MIN_TEXT_PX,
) -> int:
    """How many of ``labels`` one of a grid of :func:`plot_attention_map` maps (their figure filling ``box``: as wide
    as it, or as tall) shows as rows of ``min_px`` text that do not overlap: its ``max_labels``.

    :param labels: the map's tokens (the longest sets the room their column takes).
    :param panels_across: maps side by side in the figure.
    :param panels_down: rows of maps in the figure.
    :param box: the largest ``(width, height)`` in px the figure is shown in.
    :param min_px: the tokens' font size at the shown size.
    :returns: the number of tokens, at least 1.
    """
    line = 1.2 * min_px  # a row of text: matplotlib's line height
    tokens = 0.62 * min_px * max(map(len, labels), default=0)  # the token column (or row): DejaVu's mean advance
    # a panel's width also holds the axis label and the colour bar with its ticks and label (about six em); the
    # height, the tokens along the bottom, the axis label and the title
    width = box[0] / panels_across - tokens - line - 6 * min_px
    height = box[1] / panels_down - tokens - 2 * line
    return max(1, int(min(width, height) // line))


def plot_layer_head_grid(
    values: HeadMatrix,
    *,
    ax: Axes | None = None,
    title: str | None = None,
    cmap: str = "viridis",
    label: str = "",
    fmt: str = ".2f",
    annotate: bool | None = None,
    vmin: float | None = None,
    vmax: float | None = None,
) -> Axes:
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


def plot_attention_lines(
    maps: np.ndarray,
    labels: Sequence[str],
    *,
    heads: Sequence[int] | None = None,
    ax: Axes | None = None,
    title: str | None = None,
    segments: Sequence[int] | None = None,
) -> Axes:
    """bertviz's head view as a still: tokens in two columns, a line from each attending token (left) to each
    token it attends to (right) per selected head, in the head's colour, its opacity the weight divided by
    the number of heads shown, as bertviz draws it.

    ``maps`` is one layer's ``(heads, n, n)``; ``heads`` (from 0) the heads drawn (default: all); ``segments``
    (one per label) draws a line between the first and second text of a pair.
    """
    maps = np.asarray(maps, dtype=float)
    if maps.ndim != 3 or maps.shape[1:] != (len(labels), len(labels)):
        raise ValueError(f"a (heads, n, n) map with n = {len(labels)} labels is needed, got {maps.shape}")
    heads = list(range(maps.shape[0])) if heads is None else [int(h) for h in heads]
    n = len(labels)
    if ax is None:
        _, ax = plt.subplots(figsize=(4.5, 0.26 * n + 1.2))
    colours = plt.get_cmap("tab10")  # d3's schemeCategory10, bertviz's head colours
    lines, line_colours = [], []
    for h in heads:
        weights = np.clip(maps[h] / len(heads), 0, 1)
        # Lines bertviz draws but nobody sees (opacity under 1/256) are left out of the file.
        for i, j in zip(*np.nonzero(weights >= 1 / 256)):
            lines.append([(0.0, i), (1.0, j)])
            line_colours.append((*to_rgba(colours(h % 10))[:3], weights[i, j]))
    ax.add_collection(LineCollection(lines, colors=line_colours, linewidths=1.5))
    for y, label in enumerate(labels):
        ax.text(-0.03, y, label, ha="right", va="center")
        ax.text(1.03, y, label, ha="left", va="center")
    if segments is not None:
        for boundary in np.flatnonzero(np.diff(np.asarray(segments))):
            ax.axhline(boundary + 0.5, color="0.75", linewidth=0.8, linestyle=":")
    ax.set(xlim=(-0.6, 1.6), ylim=(n - 0.5, -0.5))
    ax.axis("off")
    keep_every_label(ax)  # the tokens are the view's content
    handles = [Line2D([], [], color=colours(h % 10), linewidth=3, label=str(h + 1)) for h in heads]
    ax.legend(handles=handles, title="head", loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    if title:
        ax.set_title(title)
    return ax


def plot_attention_thumbnails(
    maps: np.ndarray,
    labels: Sequence[str],
    *,
    layers: Sequence[int] | None = None,
    heads: Sequence[int] | None = None,
    title: str | None = None,
) -> Figure:
    """bertviz's model view as a still: a ``layers x heads`` grid of small heatmaps, the labels along the
    first column (attending from) and the last row (attended to); returns the figure.

    ``maps`` is ``(layers, heads, n, n)``; ``layers`` and ``heads`` (from 0) restrict the grid. Each panel is
    an image (``imshow``), so the SVG of a large model's grid stays small; its labels are text.
    """
    maps = np.asarray(maps, dtype=float)
    if maps.ndim != 4 or maps.shape[2:] != (len(labels), len(labels)):
        raise ValueError(f"a (layers, heads, n, n) map with n = {len(labels)} labels is needed, got {maps.shape}")
    layers = list(range(maps.shape[0])) if layers is None else [int(x) for x in layers]
    heads = list(range(maps.shape[1])) if heads is None else [int(h) for h in heads]
    n = len(labels)
    fontsize = float(np.clip(70 / max(n, 1), 3, 8))  # labels of a long input shrink to fit their panel
    side = 1.1
    fig, axes = plt.subplots(
        len(layers),
        len(heads),
        figsize=(side * len(heads) + 1.2, side * len(layers) + 1.2),
        squeeze=False,
        gridspec_kw={"wspace": 0.08, "hspace": 0.08},
    )
    for (r, layer), (c, head) in itertools.product(enumerate(layers), enumerate(heads)):
        ax = keep_every_label(axes[r, c])  # the tokens are the view's content
        ax.imshow(maps[layer, head], cmap="Blues", vmin=0, vmax=1, interpolation="nearest")
        ax.set_xticks([])
        ax.set_yticks([])
        if c == 0:
            ax.set_yticks(range(n), labels, fontsize=fontsize)
            ax.set_ylabel(f"layer {layer + 1}", fontsize=8)
        if r == len(layers) - 1:
            ax.set_xticks(range(n), labels, fontsize=fontsize, rotation=90)
        if r == 0:
            ax.set_title(f"head {head + 1}", fontsize=8)
    if title:
        fig.suptitle(title)
    return fig


def _luminance(rgba: Sequence[float] | np.ndarray) -> float:
    """Relative luminance of an RGBA colour (WCAG), to pick dark or light text on it."""
    rgb = np.asarray(rgba[:3], dtype=np.float64)
    linear = np.where(rgb <= 0.03928, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    return float(linear @ [0.2126, 0.7152, 0.0722])


def _heatmap(
    ax: Axes,
    values: np.ndarray,
    *,
    cmap: str,
    xticklabels: Sequence[object],
    yticklabels: Sequence[object],
    vmin: float | None = None,
    vmax: float | None = None,
    annotate: bool = False,
    fmt: str = ".2f",
    square: bool = False,
    cbar_kws: dict | None = None,
) -> QuadMesh:
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
