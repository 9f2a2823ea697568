"""Clark et al.'s Table 3 beside the probes' scores, and pictures of what the probes learned and predict.

`What Does BERT Look At? <https://arxiv.org/abs/1906.04341>`_, Section 5 and Table 3.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from bertology_utils.analyses.probes.evaluation import ProbeEvaluation

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "TABLE3_ROWS",
    "PAPER_TABLE3",
    "PAPER_STRUCTURAL_PROBE_UUAS",
    "table3",
    "plot_probe_weights",
    "plot_tree_comparison",
    "plot_structural_layers",
]

#: Table 3 row names here, in the paper's order (words: GloVe there, the vectors given here).
TABLE3_ROWS = ("Right-branching", "Distances + words", "Random-init Attn + words", "Attn", "Attn + words")

#: Clark et al. (2019) Table 3 (BERT-base, WSJ dev, Stanford Dependencies, UAS without punctuation),
#: as ../shared/reference/papers.md transcribes it; "words" were GloVe vectors there.
PAPER_TABLE3 = {
    "Right-branching": 26.0,
    "Distances + words": 58.0,
    "Random-init Attn + words": 30.0,
    "Attn": 61.0,
    "Attn + words": 77.0,
}
#: The structural probe's 80 is UUAS on BERT's vectors (Hewitt and Manning): not comparable.
PAPER_STRUCTURAL_PROBE_UUAS = 80.0


def table3(test: dict[str, ProbeEvaluation], dev: dict[str, ProbeEvaluation] | None = None) -> pd.DataFrame:
    """Clark et al.'s Table 3 beside ours, UAS in percent: one row per :data:`TABLE3_ROWS` entry given.

    :param test: row name -> the evaluation on the test split.
    :param dev: row name -> the evaluation on the dev split, when wanted.
    :returns: one row per probe: the paper's UAS, ours on test (and dev), ``test - paper`` (our test UAS
        minus the paper's WSJ dev UAS with BERT-base: a difference of model and data, not an error) and
        the scored words.
    """
    rows = []
    for name in TABLE3_ROWS:
        if name not in test:
            continue
        uas = 100 * test[name].uas
        row: dict[str, object] = {"row": name, "paper (BERT-base, WSJ dev)": PAPER_TABLE3[name], "test": uas}
        if dev is not None and name in dev:
            row["dev"] = 100 * dev[name].uas
        row["test - paper"] = uas - PAPER_TABLE3[name]
        row["scored words (test)"] = test[name].n_scored
        rows.append(row)
    return pd.DataFrame(rows).set_index("row")


def plot_probe_weights(
    weights: np.ndarray,
    *,
    axes: Sequence[Axes] | None = None,
    title: str = "",
    label: str = "weight",
    annotate: bool | None = None,
) -> Sequence[Axes]:
    """Two ``(L, H)`` heatmaps side by side: ``w`` (dependent -> head) and ``u`` (head -> dependent).

    One colour scale, centred on 0, for both.

    :param weights: ``(2, L, H)``, e.g. ``np.stack([probe.w_, probe.u_])`` or an entry of
        :meth:`~bertology_utils.analyses.probes.estimators.AttentionWordsProbe.effective_weights`.
    :param axes: two axes to draw on; a new figure when None.
    :param title: prefix of both titles.
    :param label: the colour bar's label.
    :param annotate: write the values in the cells (default: when there are at most 100 heads).
    :returns: the two axes.
    """
    import matplotlib.pyplot as plt

    from bertology_utils.core.figures import plot_layer_head_grid

    weights = np.asarray(weights, dtype=float)
    if weights.ndim != 3 or weights.shape[0] != 2:
        raise ValueError(f"weights must be (2, layers, heads), got {weights.shape}")
    _, L, H = weights.shape
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(2 * (0.5 * H + 2), 0.42 * L + 1.6))
    limit = float(np.abs(weights).max()) or 1.0
    names = ("w: dependent attends to head", "u: head attends to dependent")
    for ax, grid, name in zip(axes, weights, names):
        plot_layer_head_grid(
            grid,
            ax=ax,
            cmap="RdBu_r",
            vmin=-limit,
            vmax=limit,
            label=label,
            fmt=".1f",
            annotate=L * H <= 100 if annotate is None else annotate,
            title=f"{title}{': ' if title else ''}{name}",
        )
    return axes


def plot_tree_comparison(
    words: Sequence[str],
    gold: Sequence[int],
    predicted: Sequence[int],
    *,
    ax: Axes | None = None,
    title: str | None = None,
    scored: Sequence[bool] | None = None,
) -> Axes:
    """A sentence with its gold arcs above the words and the predicted arcs below.

    Predicted arcs are green where they match the gold head and red where they do not, light grey for
    words not scored; a root is drawn as a vertical line. Markers sit at the dependent's end of each arc.

    :param words: the sentence's words.
    :param gold: ``(W,)`` gold heads (UD convention, 0 = ROOT).
    :param predicted: ``(W,)`` predicted heads.
    :param ax: where to draw; a new figure when None.
    :param title: the axes' title.
    :param scored: ``(W,)`` False for words the UAS does not count (punctuation).
    :returns: the axes drawn on.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Arc

    n = len(words)
    if len(gold) != n or len(predicted) != n:
        raise ValueError(f"{n} words, {len(gold)} gold heads and {len(predicted)} predicted heads")
    scored = [True] * n if scored is None else list(scored)
    if len(scored) != n:
        raise ValueError(f"{n} words and {len(scored)} scored flags")
    if ax is None:
        _, ax = plt.subplots(figsize=(max(6.0, 0.9 * n), 4.0))
    top = 1.0
    for side, heads, sign in (("gold", gold, 1), ("predicted", predicted, -1)):
        for dep, head in enumerate(heads):
            if side == "gold":
                colour = "dimgray"
            elif not scored[dep]:
                colour = "silver"
            else:
                colour = "seagreen" if head == gold[dep] else "crimson"
            if head == 0:
                ax.plot([dep, dep], [0.15 * sign, 0.9 * sign * top], color=colour, lw=1.5)
                ax.text(
                    dep,
                    0.95 * sign * top,
                    "ROOT",
                    ha="center",
                    va="bottom" if sign > 0 else "top",
                    fontsize=7,
                    color=colour,
                )
                continue
            a, b = sorted((dep, head - 1))
            height = min(0.25 + 0.12 * (b - a), 0.85) * top
            ax.add_patch(
                Arc(
                    ((a + b) / 2, 0.15 * sign),
                    b - a,
                    2 * height,
                    theta1=0 if sign > 0 else 180,
                    theta2=180 if sign > 0 else 360,
                    color=colour,
                    lw=1.5,
                )
            )
            ax.plot([dep], [0.15 * sign], marker="v" if sign > 0 else "^", color=colour, ms=4)
    for k, word in enumerate(words):
        ax.text(k, 0, word, ha="center", va="center", fontsize=9)
    ax.text(-0.8, 0.5, "gold", rotation=90, ha="center", va="center", fontsize=9, color="dimgray")
    ax.text(-0.8, -0.5, "predicted", rotation=90, ha="center", va="center", fontsize=9, color="dimgray")
    ax.set_xlim(-1.2, n - 0.4)
    ax.set_ylim(-1.1, 1.1)
    ax.set_axis_off()
    if title:
        ax.set_title(title)
    return ax


def plot_structural_layers(
    table: pd.DataFrame,
    attention_uas: Mapping[str, float],
    *,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """The structural probes' UUAS and root accuracy per layer, with the attention probes' UAS as lines.

    The attention probes read every layer's maps at once, so each is one horizontal line; their UAS is
    directed (the head of each word) and the structural probe's UUAS undirected (the edges of a spanning
    tree), which the legend says.

    :param table: :func:`~bertology_utils.analyses.probes.structural_probe_layers`'s table (full-rank rows
        are drawn: each layer's highest rank).
    :param attention_uas: UAS (fractions) of attention probes by row name, on the split of ``table``.
    :param ax: where to draw; a new figure when None.
    :param title: the axes' title.
    :returns: the axes drawn on.
    """
    import matplotlib.pyplot as plt

    full = table[table["rank"] == table.groupby("layer")["rank"].transform("max")]
    split = full["split"].iloc[0]
    if ax is None:
        _, ax = plt.subplots(figsize=(9.0, 4.0))
    for (probe, metric), label, marker in (
        (("distance", "uuas"), "distance probe: UUAS (undirected)", "o"),
        (("depth", "root_acc"), "depth probe: root accuracy", "s"),
    ):
        line = full[(full["probe"] == probe) & (full["metric"] == metric)].sort_values("layer")
        ax.plot(line["layer"], 100 * line["value"], marker=marker, label=label)
    for (name, uas), style in zip(attention_uas.items(), ("--", ":", "-.")):
        ax.axhline(100 * uas, color="grey", ls=style, lw=1.2, label=f"{name} probe: UAS (directed, all maps)")
    ax.set_xticks(sorted(full["layer"].unique()))
    ax.set_xlabel("hidden-state layer (0: embeddings)")
    ax.set_ylabel(f"{split} score (%)")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=8, loc="lower right")
    if title:
        ax.set_title(title)
    return ax
