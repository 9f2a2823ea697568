"""Figures of Kovaleva et al.'s pattern types over a run's maps: their shares by layer, and examples of each.

Kovaleva et al. (2019), *Revealing the Dark Secrets of BERT* (https://arxiv.org/abs/1908.08593), sorted
attention maps into five types (Fig. 1) and showed their shares per layer (Fig. 2 style). The maps are
classified by :func:`~bertology_utils.analyses.pattern_models.classify_items`, one row per map.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from bertology_utils.analyses.pattern_types import TYPES
from bertology_utils.core.figure_text import SLIDE_BOX
from bertology_utils.present.labelling import draw_map

__all__ = ["plot_type_shares_by_layer", "plot_type_examples"]


def plot_type_shares_by_layer(
    shares: pd.DataFrame, names: Sequence[str], colours: Mapping[str, Any] | None = None
) -> Figure:
    """Stacked bars of each type's share of the maps per layer, one panel per data set.

    :param shares: type shares indexed by (data set, layer), one column per type
        (:func:`~bertology_utils.analyses.pattern_types.type_proportions` by ``["dataset", "layer"]``).
    :param names: the data sets, one panel each, in order.
    :param colours: type -> colour (None: seaborn's ``Set2``).
    :returns: the figure.
    """
    if colours is None:
        import seaborn as sns

        colours = dict(zip(TYPES, sns.color_palette("Set2", len(TYPES))))
    fig, axes = plt.subplots(1, len(names), figsize=(3.2 * len(names) + 1, 3.8), sharey=True, layout="constrained")
    axes = np.atleast_1d(axes)
    for ax, name in zip(axes, names):
        part = shares.loc[name]
        bottom = np.zeros(len(part))
        for t in TYPES:
            ax.bar(part.index, part[t], bottom=bottom, color=colours[t], label=t)
            bottom += part[t].to_numpy()
        ax.set_title(name)
        ax.set_xlabel("layer")
    axes[0].set_ylabel("share of maps")
    axes[-1].legend(bbox_to_anchor=(1.02, 1), loc="upper left")
    return fig


def plot_type_examples(kinds: pd.DataFrame, stores: Mapping[str, Any], n: int, seed: int = 0) -> Figure:
    """A contact sheet: up to ``n`` maps drawn at random (``seed``) from those of each type, one row per type.

    Drawn for a slide: the figure has the slide box's shape (:data:`~bertology_utils.core.figure_text.SLIDE_BOX`
    at 100 px an inch), so its 12 pt text is 16 px where it is shown and nothing has to be enlarged over the maps.

    :param kinds: one row per classified map, with columns ``dataset``, ``item``, ``layer`` and ``head``
        (from 1) and ``type``.
    :param stores: the attention stores by data set name, indexable by item.
    :param n: maps per type (columns).
    :param seed: the draw's seed.
    :returns: the figure (word-level maps on a fixed colour scale, titled by layer and head over the data set).
    """
    shown = {
        t: kinds[kinds["type"] == t].sample(min(n, int((kinds["type"] == t).sum())), random_state=seed) for t in TYPES
    }
    fig, axes = plt.subplots(
        len(TYPES), n, figsize=(SLIDE_BOX[0] / 100, SLIDE_BOX[1] / 100), squeeze=False, layout="constrained"
    )
    for row_axes, (t, rows) in zip(axes, shown.items()):
        for ax in row_axes:
            ax.axis("off")
        for ax, row in zip(row_axes, rows.itertuples()):
            ax.axis("on")
            item = stores[row.dataset][int(row.item)]
            draw_map(ax, item.attention[row.layer - 1, row.head - 1], item.word_kinds, item.segments)
            ax.set_title(f"L{row.layer}-H{row.head}\n{row.dataset}", fontsize=12, linespacing=1.0)
        # the type's name, level, left of its row (a rotated name is taller than a row); "+" starts a line
        first = row_axes[0]
        if rows.empty:
            first.axis("on")
            first.set(xticks=[], yticks=[])
            first.spines[:].set_visible(False)
            first.text(0.5, 0.5, "none", transform=first.transAxes, ha="center", va="center", fontsize=12)
        first.set_ylabel(t.replace("+", " +\n"), rotation=0, ha="right", va="center", fontsize=12)
    return fig
