"""Figures of context mixing: shares of attention by token kind, faithfulness by layer, one item's maps."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from bertology_utils.attention.word_attention import ItemAttention

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_shares", "plot_faithfulness", "plot_side_by_side"]


def plot_shares(raw: pd.DataFrame, weighted: pd.DataFrame, kinds: Sequence[str] = ("cls", "sep", "punct")) -> Figure:
    """Per-layer share of attention on each kind of token, raw (solid) vs norm-weighted (dashed), as
    Kobayashi et al.'s Figure 2 (`Attention is Not Only a Weight <https://arxiv.org/abs/2004.10102>`_).

    :param raw: one row per layer (from 1), a column per kind (``SurfaceStats.per_layer()``).
    :param weighted: the same for the norm-weighted maps.
    :param kinds: the columns drawn.
    :returns: the figure.
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for k, kind in enumerate(kinds):
        color = f"C{k}"
        ax.plot(raw.index, raw[kind], color=color, marker="o", label=f"{kind} (raw)")
        ax.plot(weighted.index, weighted[kind], color=color, marker="s", linestyle="--", label=f"{kind} (norm)")
    ax.set_xlabel("layer")
    ax.set_ylabel("share of attention")
    ax.set_xticks(list(raw.index))
    ax.set_ylim(0, None)
    ax.legend(ncol=2, fontsize="small", frameon=False)
    fig.tight_layout()
    return fig


def plot_faithfulness(summary: pd.DataFrame, references: Sequence[str] | None = None) -> Figure:
    """Mean Spearman rho per layer, one line per method, one panel per reference.

    :param summary: :func:`~bertology_utils.interventions.mixing.faithfulness.faithfulness_summary`'s rows.
    :param references: the panels, in order (default: every reference in ``summary``).
    :returns: the figure.
    """
    import matplotlib.pyplot as plt

    import bertology_utils.interventions.lrp  # noqa: F401  registers attnlrp and cp_lrp: their titles
    from bertology_utils.interventions.references import reference_title

    references = list(dict.fromkeys(summary.reference)) if references is None else list(references)
    # at most three panels a row: five side by side on a slide are each too flat to read a curve
    columns = min(3, len(references))
    rows = -(-len(references) // columns)
    fig, axes = plt.subplots(
        rows, columns, figsize=(4.2 * columns + 2.5, 3.2 * rows), squeeze=False, sharey=True, layout="constrained"
    )
    for ax in axes.flat[len(references) :]:
        ax.set_visible(False)
    for ax, reference in zip(axes.flat, references):
        part = summary[summary.reference == reference]
        for method, rows_of in part.groupby("method", sort=False):
            ax.plot(rows_of.layer, rows_of["mean"], marker="o", label=str(method).replace("_", " "))
        ax.axhline(0, color="grey", linewidth=0.8)
        ax.set_title(f"against {reference_title(reference)}")
        ax.set_xlabel("layer")
        ax.set_xticks(sorted(part.layer.unique()))
    for row in axes:
        row[0].set_ylabel("mean Spearman rho")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, frameon=False, loc="outside right center")
    return fig


def plot_side_by_side(items: Mapping[str, ItemAttention], layer: int = -1) -> Figure:
    """One item's maps under several methods at ``layer``, heads averaged.

    :param items: title -> the item's word-level maps under one method.
    :param layer: the layer drawn (from 0; negative from the last).
    :returns: the figure.
    """
    import matplotlib.pyplot as plt

    from bertology_utils.core.figures import plot_attention_map

    first = next(iter(items.values()))
    size = max(3.0, 0.32 * first.n_words + 1.5)
    fig, axes = plt.subplots(1, len(items), figsize=((size + 1) * len(items), size), squeeze=False)
    for ax, (title, item) in zip(axes[0], items.items()):
        plot_attention_map(np.asarray(item.attention, dtype=np.float64)[layer].mean(0), item.words, ax=ax, title=title)
    fig.tight_layout()
    return fig
