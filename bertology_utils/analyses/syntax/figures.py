"""Pictures of the syntax analysis: one head's map over a sentence with its gold arcs, best heads against offsets."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from bertology_utils.analyses.syntax.result import DIRECTIONS
from bertology_utils.analyses.syntax.scoring import word_attention_without_specials
from bertology_utils.attention.store import AttentionStore
from bertology_utils.attention.word_attention import ItemAttention
from bertology_utils.core.heads import Head
from bertology_utils.data import Corpus, Sentence

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["example_sentence", "plot_head_on_sentence", "plot_best_vs_baseline"]


def example_sentence(
    corpus: Corpus,
    relation: str,
    attention: AttentionStore | Iterable[ItemAttention] | None = None,
    min_words: int = 6,
    max_words: int = 14,
) -> int:
    """The shortest sentence of ``min_words``..``max_words`` words with a ``relation`` dependent.

    :param corpus: sentences with trees.
    :param relation: the dependency relation wanted.
    :param attention: with an attention store, only sentences it holds count; anything else is ignored.
    :param min_words: the fewest words a sentence may have.
    :param max_words: the most words a sentence may have.
    :returns: the corpus index of the sentence.
    :raises KeyError: when no sentence qualifies.
    """
    held = None
    if isinstance(attention, AttentionStore):
        held = attention.status() == 0
    candidates = [
        (len(s.words), i)
        for i, s in enumerate(corpus)
        if s.has_syntax
        and relation in s.relations
        and min_words <= len(s.words) <= max_words
        and (held is None or held[i])
    ]
    if not candidates:
        raise KeyError(f"no sentence of {min_words}-{max_words} words has a {relation!r} dependent")
    return min(candidates)[1]


def plot_head_on_sentence(
    item: ItemAttention,
    sentence: Sentence,
    layer: int,
    head: int,
    direction: str = DIRECTIONS[0],
    relation: str | None = None,
    ax: Axes | None = None,
) -> Axes:
    """One head's map over a sentence's words, the gold arcs of ``relation`` boxed.

    Rows attend to columns. For ``dep->head`` the boxes sit at (dependent, head); for ``head->dep``
    at (head, dependent). Special pseudo-words are left out, as they are as predictions.

    :param item: the sentence's word-level attention.
    :param sentence: the treebank sentence (its words label the axes, its tree gives the arcs).
    :param layer: the head's layer, from 0.
    :param head: the head within its layer, from 0.
    :param direction: one of :data:`~bertology_utils.analyses.syntax.result.DIRECTIONS`.
    :param relation: the relation whose gold arcs are boxed; None for no boxes.
    :param ax: where to draw; a new figure when None.
    :returns: the axes drawn on.
    """
    from matplotlib.patches import Rectangle

    from bertology_utils.core.figures import plot_attention_map

    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, not {direction!r}")
    att = word_attention_without_specials(item)[layer, head]
    ax = plot_attention_map(
        att,
        list(sentence.words),
        ax=ax,
        title=f"head {Head(layer, head)} ({direction})" + (f", gold {relation} boxed" if relation else ""),
    )
    if relation is not None and sentence.heads is not None and sentence.relations is not None:  # has_syntax
        for dep, (gov, rel) in enumerate(zip(sentence.heads, sentence.relations)):
            if rel == relation and gov > 0:
                row, col = (dep, gov - 1) if direction == DIRECTIONS[0] else (gov - 1, dep)
                ax.add_patch(Rectangle((col, row), 1, 1, fill=False, edgecolor="crimson", linewidth=2))
    return ax


def plot_best_vs_baseline(table: pd.DataFrame, ax: Axes | None = None, title: str | None = None) -> Axes:
    """Bars per relation: the best head, its held-out accuracy, and the best offset baseline.

    :param table: :meth:`~bertology_utils.analyses.syntax.result.SyntaxResult.best_heads` (accuracies
        as fractions).
    :param ax: where to draw; a new figure when None.
    :param title: the axes' title.
    :returns: the axes drawn on.
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(max(6.0, 0.55 * len(table) + 2), 4))
    x = np.arange(len(table))
    width = 0.28
    ax.bar(x - width, 100 * table["accuracy"], width, label="best head")
    ax.bar(x, 100 * table["held_out_accuracy"], width, label="best head, held out")
    ax.bar(x + width, 100 * table["baseline_accuracy"], width, label="best fixed offset", color="grey")
    # One line per relation and the legend beside the bars: every relation keeps its label at slide size.
    ax.set_xticks(x, [f"{rel} {h}" for rel, h in zip(table.index, table["best_head"])], rotation=90)
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 100)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    if title:
        ax.set_title(title)
    return ax
