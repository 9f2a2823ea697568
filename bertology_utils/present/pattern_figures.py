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

    :param kinds: one row per classified map, with columns ``dataset``, ``item``, ``layer`` and ``head``
        (from 1) and ``type``.
    :param stores: the attention stores by data set name, indexable by item.
    :param n: maps per type (columns).
    :param seed: the draw's seed.
    :returns: the figure (word-level maps on a fixed colour scale, titled by data set, layer and head).
    """
    shown = {
        t: kinds[kinds["type"] == t].sample(min(n, int((kinds["type"] == t).sum())), random_state=seed) for t in TYPES
    }
    fig, axes = plt.subplots(len(TYPES), n, figsize=(2.1 * n, 2.3 * len(TYPES)), squeeze=False)
    for row_axes, (t, rows) in zip(axes, shown.items()):
        for ax in row_axes:
            ax.axis("off")
        for ax, row in zip(row_axes, rows.itertuples()):
            ax.axis("on")
            item = stores[row.dataset][int(row.item)]
            draw_map(
                ax,
                item.attention[row.layer - 1, row.head - 1],
                item.word_kinds,
                item.segments,
                title=f"{row.dataset} L{row.layer}-H{row.head}",
            )
        row_axes[0].text(
            -0.15, 0.5, t, transform=row_axes[0].transAxes, rotation=90, ha="right", va="center", fontsize=12
        )
    fig.tight_layout()
    return fig
