"""Figures of notebook 10: where heads park their attention, what it moves, the outliers, and the interventions."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from bertology_utils.core.figures import plot_layer_head_grid
from bertology_utils.interventions.objectives import KIND_COLORS, KIND_LABELS, KINDS

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from bertology_utils.interventions.sink_interventions import SinkInterventions
    from bertology_utils.interventions.sinks import SinkStatistics

__all__ = ["plot_sink_heads", "plot_mass_against_norm", "plot_outliers", "plot_interventions"]


def plot_sink_heads(stats: SinkStatistics, heads: np.ndarray | None = None) -> Figure:
    """Two layer x head grids: each head's attention on [CLS], [SEP] and punctuation, and the norm of what those
    tokens send relative to the other tokens (log2 scale: -1 is half).

    :param stats: the measures.
    :param heads: (L, H) bool, the sink heads, outlined in both grids.
    :returns: the figure.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    table = stats.head_table()
    shape = (stats.num_layers, stats.num_heads)
    mass = table["sink_mass"].to_numpy().reshape(shape)
    ratio = np.log2(table["value_ratio"].to_numpy().reshape(shape))
    width = 0.6 * stats.num_heads + 2
    fig, axes = plt.subplots(1, 2, figsize=(2 * width, 0.45 * stats.num_layers + 1.8))
    annotate = stats.num_layers * stats.num_heads <= 96
    plot_layer_head_grid(
        mass, ax=axes[0], title="attention on sinks", label="share", vmin=0, vmax=1, fmt=".1f", annotate=annotate
    )
    bound = float(np.nanmax(np.abs(ratio))) if np.isfinite(ratio).any() else 1.0
    plot_layer_head_grid(
        ratio,
        ax=axes[1],
        title="their ||f(x)|| vs other tokens' (log2)",
        label="log2 ratio",
        cmap="RdBu_r",
        vmin=-bound,
        vmax=bound,
        fmt=".1f",
        annotate=annotate,
    )
    if heads is not None:
        for ax in axes:
            for layer, head in zip(*np.nonzero(heads)):
                ax.add_patch(Rectangle((head, layer), 1, 1, fill=False, edgecolor="black", linewidth=1.5))
    fig.tight_layout()
    return fig


def plot_mass_against_norm(stats: SinkStatistics) -> Figure:
    """One point per head: its attention on sinks against the relative norm of what they send (log scale), and
    against the norm of its whole output; colour by layer.

    :param stats: the measures.
    :returns: the figure.
    """
    import matplotlib.pyplot as plt

    table = stats.head_table()
    fig, axes = plt.subplots(1, 2, figsize=(9.5, 3.8), sharex=True, layout="constrained")
    colours = plt.get_cmap("viridis")((table["layer"] - 1) / max(1, stats.num_layers - 1))
    axes[0].scatter(table["sink_mass"], table["value_ratio"], c=colours, s=22)
    axes[0].set_yscale("log")
    axes[0].axhline(1, color="grey", linewidth=0.8)
    axes[0].set_ylabel("sinks' ||f(x)|| / other tokens'")
    axes[1].scatter(table["sink_mass"], table["update"], c=colours, s=22)
    axes[1].set_ylabel("norm of the head's output")
    for ax in axes:
        ax.set_xlabel("attention on sinks")
    mappable = plt.cm.ScalarMappable(cmap="viridis", norm=plt.Normalize(1, stats.num_layers))
    fig.colorbar(mappable, ax=axes, label="layer", fraction=0.05)
    return fig


def plot_outliers(stats: SinkStatistics) -> Figure:
    """Per hidden state: the largest activation over the median magnitude (log scale, the outlier multiple dashed),
    and the share of the outlier activations on each kind of token.

    :param stats: the measures.
    :returns: the figure.
    """
    import matplotlib.pyplot as plt

    table = stats.layer_table()
    states = table.index.to_numpy()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    axes[0].plot(states, table["ratio"], marker="o", color="black")
    axes[0].axhline(stats.multiple, color="tab:red", linestyle="--", label=f"{stats.multiple:g}x the median")
    axes[0].set_yscale("log")
    axes[0].set_ylabel("largest / median magnitude")
    axes[0].legend(frameon=False, loc="lower right")
    bottom = np.zeros(len(states))
    for kind in KINDS:
        share = table[f"on_{kind}"].fillna(0).to_numpy()
        axes[1].bar(states, share, bottom=bottom, color=KIND_COLORS[kind], label=KIND_LABELS[kind])
        bottom += share
    axes[1].set_ylabel(f"outliers (> {stats.multiple:g}x) on")
    axes[1].set_ylim(0, 1)
    axes[1].legend(frameon=False, fontsize="small", loc="upper left", bbox_to_anchor=(1, 1))
    for ax in axes:
        ax.set_xlabel("hidden state (0: embeddings)")
        ax.set_xticks(states)
    fig.tight_layout()
    return fig


def plot_interventions(result: SinkInterventions) -> Figure:
    """Per intervention, the mean change of the loss and of the largest activation ratio (log10), with each
    sentence's change as a dot.

    :param result: the interventions' results.
    :returns: the figure.
    """
    import matplotlib.pyplot as plt

    names = [c for c in result.losses if c != "none" and not c.startswith("control")]
    if result.controls:
        names.insert(1 if "sink heads" in names else 0, "controls")
    labels = {"sink heads": f"sink heads ({result.n_heads_removed})", "controls": "as many others"}
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for ax, measure, title in (
        (axes[0], result.loss_change, "loss change"),
        (axes[1], result.ratio_change, "largest activation ratio, log10 change"),
    ):
        for x, name in enumerate(names):
            values = measure(name)
            jitter = np.linspace(-0.2, 0.2, len(values)) if len(values) > 1 else np.zeros(1)
            ax.scatter(x + jitter, values, s=6, alpha=0.4, color=f"C{x}")
            ax.plot([x - 0.3, x + 0.3], [values.mean()] * 2, color="black", linewidth=2)
        ax.axhline(0, color="grey", linewidth=0.8)
        ax.set_xticks(range(len(names)), [labels.get(n, n) for n in names])
        ax.set_title(title)
    fig.tight_layout()
    return fig
