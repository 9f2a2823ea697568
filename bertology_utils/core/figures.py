"""Plotting helpers shared by the notebooks (seaborn/matplotlib)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

__all__ = ["plot_attention_map", "plot_layer_head_grid"]


def plot_attention_map(
    attention: np.ndarray,
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
    sns.heatmap(
        attention,
        ax=ax,
        cmap=cmap,
        vmin=0,
        vmax=max(attention.max(), 1e-9),
        square=True,
        xticklabels=labels,
        yticklabels=labels,
        annot=annotate,
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
    values: np.ndarray,
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
    sns.heatmap(
        values,
        ax=ax,
        cmap=cmap,
        annot=annotate,
        fmt=fmt,
        vmin=vmin,
        vmax=vmax,
        xticklabels=range(1, heads + 1),
        yticklabels=range(1, layers + 1),
        cbar_kws={"label": label},
    )
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    if title:
        ax.set_title(title)
    return ax
