"""Pictures of head distances: the dendrogram, the embedding coloured by behaviour, two models in one plane."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from bertology_utils.analyses.clustering.distances import HeadDistances
from bertology_utils.attention.word_attention import ItemAttention
from bertology_utils.core.typing import HeadMatrix

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["plot_dendrogram", "neighbour_attention", "plot_embedding", "plot_two_models"]


def plot_dendrogram(
    linkage_matrix: np.ndarray,
    labels: Sequence[str],
    *,
    label_colours: Sequence[Any] | None = None,
    ax: Axes | None = None,
    title: str | None = None,
) -> dict[str, Any]:
    """Dendrogram of a hierarchical clustering of heads, leaves labelled (and optionally coloured) per head.

    :param linkage_matrix: :func:`~bertology_utils.analyses.clustering.embedding.head_linkage`'s result.
    :param labels: one label per head (leaf).
    :param label_colours: one matplotlib colour per head, for its label; None leaves them black.
    :param ax: where to draw; a new figure when None.
    :param title: the axes' title.
    :returns: scipy's ``dendrogram`` description of the tree (empty for one head).
    """
    import matplotlib.pyplot as plt
    from scipy.cluster.hierarchy import dendrogram

    if ax is None:
        _, ax = plt.subplots(figsize=(max(6.0, 0.12 * len(labels)), 4))
    if not len(linkage_matrix):
        ax.text(0.5, 0.5, f"one head ({', '.join(labels)}): no clustering", ha="center", transform=ax.transAxes)
        return {}
    tree = dendrogram(
        linkage_matrix,
        labels=list(labels),
        ax=ax,
        color_threshold=0,
        above_threshold_color="0.4",
        leaf_font_size=max(4, min(9, 700 // max(len(labels), 1))),
    )
    if label_colours is not None:
        colour_of = dict(zip(labels, label_colours))
        for tick in ax.get_xticklabels():
            tick.set_color(colour_of[tick.get_text()])
    ax.set_ylabel("distance")
    if title:
        ax.set_title(title)
    return tree


def neighbour_attention(items: Iterable[ItemAttention]) -> dict[str, HeadMatrix]:
    """Mean share of attention each head puts on the previous word, itself, the next word and punctuation.

    These are :func:`bertology_utils.analyses.patterns.surface_statistics`' means (every attending word of
    every item weighs the same, special pseudo-words included; ``"previous"`` and ``"next"`` over
    the rows that have such a neighbour): what the embedding plots colour heads by.

    :param items: word-level attention of one model.
    :returns: ``(L, H)`` arrays under ``"previous"``, ``"self"``, ``"next"`` and ``"punct"``.
    """
    from bertology_utils.analyses.patterns import surface_statistics

    stats = surface_statistics(items)
    return {key: stats[key] for key in ("previous", "self", "next", "punct")}


def plot_embedding(
    coords: np.ndarray,
    values: ArrayLike,
    *,
    ax: Axes | None = None,
    title: str | None = None,
    label: str = "",
    cmap: str = "viridis",
    categorical: bool | None = None,
    markers: ArrayLike | None = None,
    size: float = 40,
) -> Axes:
    """Scatter of 2-D head coordinates coloured by ``values`` (numbers: a colour bar; labels: a legend).

    :param coords: ``(K, 2)`` points, e.g. :func:`~bertology_utils.analyses.clustering.embedding.embed_heads`'
        ``coords``.
    :param values: ``(K,)`` what colours each head: numbers or labels.
    :param ax: where to draw; a new figure when None.
    :param title: the axes' title.
    :param label: the colour bar's or legend's title.
    :param cmap: the colour map for numbers.
    :param categorical: whether ``values`` are labels; by default, when they are not numbers.
    :param markers: ``(K,)`` one marker per point (e.g. per model in a joint embedding); circles when None.
    :param size: the markers' size.
    :returns: the axes drawn on.
    """
    import matplotlib.pyplot as plt

    coords = np.asarray(coords)
    colour_by = np.asarray(values)
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 4.5))
    if categorical is None:
        categorical = not np.issubdtype(colour_by.dtype, np.number)
    marker_of = np.asarray(markers) if markers is not None else np.full(len(coords), "o")
    if categorical:
        categories = list(dict.fromkeys(colour_by.tolist()))
        palette = plt.get_cmap("tab10" if len(categories) <= 10 else "tab20")
        for c, category in enumerate(categories):
            labelled = False  # one legend entry per category, whatever its markers
            for marker in np.unique(marker_of):
                keep = (colour_by == category) & (marker_of == marker)
                if keep.any():
                    ax.scatter(
                        coords[keep, 0],
                        coords[keep, 1],
                        color=palette(c % palette.N),
                        marker=marker,
                        s=size,
                        edgecolor="k",
                        linewidth=0.3,
                        label=None if labelled else str(category),
                    )
                    labelled = True
        ax.legend(title=label or None, fontsize=7, title_fontsize=8, loc="best", markerscale=0.8)
    else:
        vmin, vmax = np.nanmin(colour_by), np.nanmax(colour_by)
        for marker in np.unique(marker_of):
            keep = marker_of == marker
            points = ax.scatter(
                coords[keep, 0],
                coords[keep, 1],
                c=colour_by[keep],
                cmap=cmap,
                vmin=vmin,
                vmax=vmax,
                marker=marker,
                s=size,
                edgecolor="k",
                linewidth=0.3,
            )
        ax.figure.colorbar(points, ax=ax, label=label, shrink=0.8)
    ax.set_xticks([])
    ax.set_yticks([])
    if title:
        ax.set_title(title)
    return ax


def plot_two_models(
    distances: HeadDistances, coords: np.ndarray, names: Sequence[str], *, counterparts: bool = False
) -> Figure:
    """The heads of two models in one plane, coloured by layer: the first model's as circles, the second's as triangles.

    :param distances: :func:`~bertology_utils.analyses.clustering.distances.head_distances` of two stores.
    :param coords: ``(K, 2)`` their joint embedding.
    :param names: the two models' names.
    :param counterparts: (models of one shape) join each head to the same head of the other model by a
        grey line.
    :returns: the figure.
    """
    import matplotlib.pyplot as plt

    coords = np.asarray(coords)
    fig, ax = plt.subplots(figsize=(7, 6))
    if counterparts:
        for a, b in zip(coords[distances.source == 0], coords[distances.source == 1]):
            ax.plot(*np.stack([a, b]).T, color="0.75", linewidth=0.5, zorder=0)
    plot_embedding(
        coords,
        distances.layer + 1,
        ax=ax,
        label="layer",
        markers=np.where(distances.source == 0, "o", "^"),
        title=f"{names[0]} (circles) and {names[1]} (triangles)",
    )
    return fig
