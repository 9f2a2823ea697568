"""What :func:`~bertology_utils.analyses.syntax.scoring.score_syntax` found, and how it reads against the paper.

:class:`SyntaxResult` holds the counts of a scored treebank, per fold, direction, relation, layer and
head, and reads them as accuracies, best heads, held-out checks, tables and metrics.
:data:`PAPER_TABLE1` is Table 1 of Clark et al. (2019, `What Does BERT Look At?
<https://arxiv.org/abs/1906.04341>`_), :data:`STANFORD_TO_UD` maps its Stanford relations to UD, and
:func:`paper_comparison` sets the two side by side.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from bertology_utils.core.heads import Head
from bertology_utils.core.typing import HeadMatrix

__all__ = [
    "ALL",
    "DIRECTIONS",
    "FOLDS",
    "PAPER_TABLE1",
    "STANFORD_TO_UD",
    "PAPER_NOTES",
    "SyntaxResult",
    "held_out_picks",
    "paper_comparison",
]

#: Label of the row that pools every scored relation.
ALL = "all"
#: Scored directions, in the order of the direction axis of the result arrays.
DIRECTIONS = ("dep->head", "head->dep")
#: Folds for the held-out check: a head is chosen on one half of the sentences, scored on the other.
FOLDS = 2

#: Clark et al. (2019) Table 1 (BERT-base, WSJ dev, Stanford Dependencies) as
#: ../shared/reference/papers.md transcribes it: relation -> (best head, accuracy %,
#: best-offset baseline %, baseline offset). Heads are layer-head counted from 1.
PAPER_TABLE1 = {
    "All": ("7-6", 34.5, 26.3, 1),
    "prep": ("7-4", 66.7, 61.8, -1),
    "pobj": ("9-6", 76.3, 34.6, -2),
    "det": ("8-11", 94.3, 51.7, 1),
    "nn": ("4-10", 70.4, 70.2, 1),
    "nsubj": ("8-2", 58.5, 45.5, 1),
    "amod": ("4-10", 75.6, 68.3, 1),
    "dobj": ("8-10", 86.8, 40.0, -2),
    "advmod": ("7-6", 48.8, 40.2, 1),
    "aux": ("4-10", 81.1, 71.5, 1),
    "poss": ("7-6", 80.5, 47.7, 1),
    "auxpass": ("4-10", 82.5, 40.5, 1),
    "ccomp": ("8-1", 48.8, 12.4, -2),
    "mark": ("8-2", 50.7, 14.5, 2),
    "prt": ("6-7", 99.1, 91.4, -1),
}

#: Paper (Stanford Dependencies) relation -> its UD v2 counterpart; None where UD has none.
STANFORD_TO_UD = {
    "All": ALL,
    "prep": None,
    "pobj": None,
    "det": "det",
    "nn": "compound",
    "nsubj": "nsubj",
    "amod": "amod",
    "dobj": "obj",
    "advmod": "advmod",
    "aux": "aux",
    "poss": "nmod:poss",
    "auxpass": "aux:pass",
    "ccomp": "ccomp",
    "mark": "mark",
    "prt": "compound:prt",
}

#: Caveats shown beside the paper's rows.
PAPER_NOTES = {
    "All": "ours leaves out root words and punctuation; Clark's code counted every word",
    "prep": "no UD twin: UD attaches the preposition to its noun (case), the reverse arc",
    "pobj": "no UD twin: in UD the noun is the head of the prepositional phrase (obl/nmod)",
    "nn": "UD compound also covers compound numbers and more",
    "auxpass": "papers.md marks this row (check); Clark's public notebook prints 94.1 vs 82.5 (+1), head 4-10",
}


@dataclass(frozen=True)
class SyntaxResult:
    """Per-relation, per-head accuracy of "most-attended word = gold head", with offset baselines.

    Clark et al. (2019, `What Does BERT Look At? <https://arxiv.org/abs/1906.04341>`_), Section 4.2
    and Table 1, as :func:`~bertology_utils.analyses.syntax.scoring.score_syntax` counts it. Arrays are
    indexed ``[fold, direction, relation, layer, head]`` (folds: sentences with even / odd corpus index,
    for the held-out check) and ``relations[0]`` is :data:`ALL`. Use the properties and tables rather
    than the fold arrays. The ``sentence_*`` arrays (None in a result built by hand) hold what a
    bootstrap over sentences needs: per scored sentence, counts of the held-out head and the offsets
    only, not of every head.

    :param relations: the scored relations, :data:`ALL` first, then by count.
    :param fold_counts: ``(folds, relations)`` scored dependents.
    :param fold_correct: ``(folds, directions, relations, L, H)`` hits: the credit on the gold head.
    :param fold_offset_correct: ``(folds, relations, offsets)`` hits of each fixed offset.
    :param offsets: the fixed offsets of the baseline, in the order of the last axis.
    :param n_sentences: sentences scored.
    :param excluded: dependents left out by kind (``"root"``, ``"punct"``) in scored sentences.
    :param skipped: sentences left out, by reason.
    :param description: what was scored (the corpus's description).
    :param sentence_index: ``(sentences,)`` corpus index of each scored sentence.
    :param sentence_counts: ``(sentences, relations)`` scored dependents.
    :param sentence_held_out: ``(sentences, relations)`` hits of the head chosen on the other fold.
    :param sentence_offset_correct: ``(sentences, relations, offsets)`` hits of each fixed offset.
    """

    relations: tuple[str, ...]
    fold_counts: np.ndarray  #: (folds, relations) scored dependents
    fold_correct: np.ndarray  #: (folds, directions, relations, L, H) hits: credit on the gold head
    fold_offset_correct: np.ndarray  #: (folds, relations, offsets) hits of each fixed offset
    offsets: tuple[int, ...]
    n_sentences: int  #: sentences scored
    excluded: dict[str, int]  #: dependents left out by kind ("root", "punct") in scored sentences
    skipped: dict[str, int]  #: sentences left out, by reason
    description: str = ""
    sentence_index: np.ndarray | None = None  #: (sentences,) corpus index of each scored sentence
    sentence_counts: np.ndarray | None = None  #: (sentences, relations) scored dependents
    sentence_held_out: np.ndarray | None = None  #: (sentences, relations) hits of the head chosen on the other fold
    sentence_offset_correct: np.ndarray | None = None  #: (sentences, relations, offsets) hits of each fixed offset

    # -- arrays -------------------------------------------------------------------------------

    @property
    def num_layers(self) -> int:
        """L, the layers scored."""
        return self.fold_correct.shape[3]

    @property
    def num_heads(self) -> int:
        """H, the heads per layer."""
        return self.fold_correct.shape[4]

    @property
    def counts(self) -> np.ndarray:
        """``(relations,)`` scored dependents."""
        return self.fold_counts.sum(0)

    @property
    def correct(self) -> np.ndarray:
        """``(directions, relations, L, H)`` hits (credit, so not always whole)."""
        return self.fold_correct.sum(0)

    @property
    def accuracy(self) -> np.ndarray:
        """``(directions, relations, L, H)`` accuracy; nan for a relation with no dependents."""
        return _ratio(self.correct, self.counts[None, :, None, None])

    @property
    def head_accuracy(self) -> np.ndarray:
        """``(relations, L, H)``: each head's accuracy in its better direction."""
        return self.accuracy.max(0)

    @property
    def baseline_accuracy(self) -> np.ndarray:
        """``(relations, offsets)`` accuracy of each fixed offset."""
        return _ratio(self.fold_offset_correct.sum(0), self.counts[:, None])

    def index(self, relation: str) -> int:
        """Position of ``relation`` on the relation axis.

        :param relation: a scored relation label (or :data:`ALL`).
        :returns: its index into :attr:`relations`.
        :raises KeyError: when the relation has no scored dependents.
        """
        try:
            return self.relations.index(relation)
        except ValueError:
            raise KeyError(
                f"relation {relation!r} has no scored dependents; known: {', '.join(self.relations)}"
            ) from None

    def grid(self, relation: str, direction: str | None = None) -> HeadMatrix:
        """Every head's accuracy on one relation.

        :param relation: a scored relation label (or :data:`ALL`).
        :param direction: one of :data:`DIRECTIONS`, or None for each head's better direction.
        :returns: ``(L, H)`` accuracy.
        """
        r = self.index(relation)
        if direction is None:
            return self.head_accuracy[r]
        return self.accuracy[DIRECTIONS.index(direction), r]

    # -- best heads ---------------------------------------------------------------------------

    def best(self, relation: str) -> dict[str, Any]:
        """The best head for a relation against the best fixed offset, as a row of Table 1.

        :param relation: a scored relation label (or :data:`ALL`).
        :returns: ``relation``, ``count``, ``best_head`` (``"layer-head"`` from 1), ``layer`` and ``head``
            (from 1), ``direction``, ``accuracy``, ``held_out_accuracy`` (the head chosen on the other
            fold), ``baseline_offset``, ``baseline_accuracy`` and ``margin`` (accuracy minus baseline).
        """
        r = self.index(relation)
        acc = np.nan_to_num(self.accuracy[:, r], nan=-1.0)
        d, layer, head = np.unravel_index(int(acc.argmax()), acc.shape)
        base = np.nan_to_num(self.baseline_accuracy[r], nan=-1.0)
        o = int(base.argmax())
        count = int(self.counts[r])
        accuracy = float(self.accuracy[d, r, layer, head])
        baseline = float(self.baseline_accuracy[r, o])
        return {
            "relation": relation,
            "count": count,
            "best_head": str(Head(int(layer), int(head))),
            "layer": int(layer) + 1,
            "head": int(head) + 1,
            "direction": DIRECTIONS[d],
            "accuracy": accuracy,
            "held_out_accuracy": self._held_out(r),
            "baseline_offset": self.offsets[o],
            "baseline_accuracy": baseline,
            "margin": accuracy - baseline,
        }

    def _held_out(self, r: int) -> float:
        """Accuracy of a head chosen on one fold and scored on the other, pooled over both ways.

        Picking the best of 2 x layers x heads candidates on the same words inflates the best
        accuracy, most for rare relations; this is the estimate free of that selection.
        """
        picks = held_out_picks(self.fold_correct, self.fold_counts)[:, r]
        if (picks < 0).any():
            return math.nan
        flat = self.fold_correct[:, :, r].reshape(FOLDS, -1)
        hits = sum(float(flat[1 - chosen_on, pick]) for chosen_on, pick in enumerate(picks))
        return hits / int(self.fold_counts[:, r].sum())

    def held_out_margins(self, relation: str) -> tuple[np.ndarray, np.ndarray]:
        """Per sentence, the held-out head's hits minus the best offset's, for a bootstrap over sentences.

        The offset is :meth:`best`'s; the ratio of the two arrays' sums is :meth:`best`'s held-out
        accuracy minus its baseline accuracy.

        :param relation: a scored relation label (or :data:`ALL`).
        :returns: ``(gain, dependents)``, both ``(sentences,)`` over the scored sentences with a
            ``relation`` dependent; gains are NaN where the held-out accuracy is, and both arrays are
            empty without per-sentence counts (a result built by hand).
        """
        r = self.index(relation)
        if self.sentence_counts is None or self.sentence_held_out is None or self.sentence_offset_correct is None:
            return np.zeros(0), np.zeros(0, dtype=np.int64)
        counts = self.sentence_counts[:, r]
        present = counts > 0
        offset = int(np.nan_to_num(self.baseline_accuracy[r], nan=-1.0).argmax())
        gain = self.sentence_held_out[present, r] - self.sentence_offset_correct[present, r, offset]
        return gain.astype(np.float64), counts[present].astype(np.int64)

    def best_heads(self, min_count: int = 0) -> pd.DataFrame:
        """:meth:`best` for every relation: the best head against the best offset baseline.

        :param min_count: leave out relations with fewer scored dependents (:data:`ALL` always stays).
        :returns: one row per relation (``all`` first, then by count), indexed by relation.
        """
        rows = [self.best(rel) for rel, n in zip(self.relations, self.counts) if rel == ALL or n >= min_count]
        return pd.DataFrame(rows).set_index("relation")

    def frame(self) -> pd.DataFrame:
        """Every count as a tidy table.

        :returns: one row per relation, direction, layer and head (layer and head from 1), with the
            head's name, its hits, the relation's count and the accuracy.
        """
        D, R, L, H = self.correct.shape
        d, r, layer, head = (a.ravel() for a in np.indices((D, R, L, H)))
        return pd.DataFrame(
            {
                "relation": np.asarray(self.relations, dtype=object)[r],
                "direction": np.asarray(DIRECTIONS, dtype=object)[d],
                "layer": layer + 1,
                "head": head + 1,
                "head_name": [str(Head(int(a), int(b))) for a, b in zip(layer, head)],
                "correct": self.correct.ravel(),
                "count": self.counts[r],
                "accuracy": self.accuracy.ravel(),
            }
        )

    def table1_relations(self) -> list[str]:
        """The UD relations of the paper's Table 1 scored here.

        :returns: relation labels, :data:`ALL` first, no repeats.
        """
        wanted = dict.fromkeys(STANFORD_TO_UD[r] for r in PAPER_TABLE1)
        return [relation for relation in wanted if relation is not None and relation in self.relations]

    def head_metrics(self, prefix: str = "syntax") -> dict[str, HeadMatrix]:
        """Per-head metrics for every relation of :meth:`table1_relations`.

        :param prefix: the metrics' name prefix.
        :returns: ``(L, H)`` arrays: ``{prefix}.head.<relation>``, the accuracy in the better direction
            (what :meth:`best` maximises; ``:`` in a UD relation becomes ``_``);
            ``{prefix}.head.best_relation``, the relation other than :data:`ALL` each head is most
            accurate on (``""`` for a head with no accuracy), and ``{prefix}.head.best_relation_accuracy``.
        """
        relations = self.table1_relations()
        out = {f"{prefix}.head.{r.replace(':', '_')}": self.head_accuracy[self.index(r)] for r in relations}
        named = [r for r in relations if r != ALL]
        if named:
            grids = self.head_accuracy[[self.index(r) for r in named]]  # (relations, layers, heads)
            # relations present have dependents, so a grid is nan only where every one is; argmax then says 0
            best = np.nan_to_num(grids, nan=-1.0).argmax(0)
            accuracy = np.take_along_axis(grids, best[None], 0)[0]
            out[f"{prefix}.head.best_relation"] = np.where(
                np.isnan(accuracy), "", np.asarray(named, dtype=object)[best]
            )
            out[f"{prefix}.head.best_relation_accuracy"] = accuracy
        return out

    def metrics(self, prefix: str = "syntax") -> dict[str, Any]:
        """What was scored, and the best head of each relation of the paper's Table 1 found here.

        :param prefix: the metrics' name prefix.
        :returns: ``{prefix}.sentences``, ``.dependents``, ``.excluded_root``, ``.excluded_punct``,
            ``.skipped_sentences``, and per relation ``{prefix}.<relation>.best_head``,
            ``.best_accuracy``, ``.held_out_accuracy``, ``.direction``, ``.baseline_offset``,
            ``.baseline_accuracy`` and ``.count`` (``:`` in a UD relation becomes ``_``).
        """
        out = {
            f"{prefix}.sentences": self.n_sentences,
            f"{prefix}.dependents": int(self.counts[0]),
            f"{prefix}.excluded_root": self.excluded.get("root", 0),
            f"{prefix}.excluded_punct": self.excluded.get("punct", 0),
            f"{prefix}.skipped_sentences": sum(self.skipped.values()),
        }
        for relation in self.table1_relations():
            best = self.best(relation)
            key = f"{prefix}.{relation.replace(':', '_')}"
            out.update(
                {
                    f"{key}.best_head": best["best_head"],
                    f"{key}.best_accuracy": best["accuracy"],
                    **{
                        f"{key}.{name}": best[name]
                        for name in ("held_out_accuracy", "direction", "baseline_offset", "baseline_accuracy", "count")
                    },
                }
            )
        return out

    def baselines(self) -> pd.DataFrame:
        """Accuracy of every fixed offset.

        :returns: one row per relation, one column per offset.
        """
        return pd.DataFrame(
            self.baseline_accuracy,
            index=pd.Index(self.relations, name="relation"),
            columns=pd.Index(self.offsets, name="offset"),
        )


def held_out_picks(fold_correct: np.ndarray, fold_counts: np.ndarray) -> np.ndarray:
    """The best head of each relation on each fold, for the held-out check.

    :param fold_correct: ``(folds, directions, relations, L, H)`` hits, as :attr:`SyntaxResult.fold_correct`.
    :param fold_counts: ``(folds, relations)`` scored dependents.
    :returns: ``(folds, relations)`` flat ``(direction, layer, head)`` index of the best head (the first
        maximum), -1 for a relation whose check cannot be made (a fold without its dependents).
    """
    flat = fold_correct.transpose(0, 2, 1, 3, 4).reshape(FOLDS, fold_correct.shape[2], -1)
    picks = flat.argmax(-1)  # the first maximum in (direction, layer, head) order
    return np.where((fold_counts > 0).all(0), picks, -1)


def _ratio(numerator: ArrayLike, denominator: ArrayLike) -> np.ndarray:
    top = np.asarray(numerator, dtype=np.float64)
    bottom = np.broadcast_to(np.asarray(denominator, dtype=np.float64), top.shape)
    return np.divide(top, bottom, out=np.full(top.shape, np.nan), where=bottom > 0)


def paper_comparison(result: SyntaxResult) -> pd.DataFrame:
    """Clark et al.'s Table 1 beside ours, row by row, accuracies in percent.

    `What Does BERT Look At? <https://arxiv.org/abs/1906.04341>`_, Table 1, with each Stanford relation
    read as its UD twin (:data:`STANFORD_TO_UD`). :func:`bertology_utils.papers.clark.probing.head_beats_offset`
    judges each row.

    :param result: a scored treebank.
    :returns: one row per paper relation: the paper's head, accuracy, baseline and offset; ours (count,
        head, direction, accuracy, held-out accuracy, baseline, offset; gaps where the row has no UD
        twin or no dependents); ``paper margin``, ``margin`` (our *held-out* accuracy minus the best
        offset baseline's) and a ``note`` (:data:`PAPER_NOTES`).
    """
    rows = []
    for relation, (head, accuracy, baseline, offset) in PAPER_TABLE1.items():
        ud = STANFORD_TO_UD[relation]
        row: dict[str, Any] = {
            "paper relation": relation,
            "UD relation": ud if ud is not None else "-",
            "paper head": head,
            "paper accuracy": accuracy,
            "paper baseline": baseline,
            "paper offset": offset,
            "count": 0,
            "head": "-",
            "direction": "-",
            "accuracy": np.nan,
            "held-out accuracy": np.nan,
            "baseline": np.nan,
            "offset": np.nan,
        }
        if ud is not None and ud in result.relations:
            best = result.best(ud)
            row.update(
                {
                    "count": best["count"],
                    "head": best["best_head"],
                    "direction": best["direction"],
                    "accuracy": 100 * best["accuracy"],
                    "held-out accuracy": 100 * best["held_out_accuracy"],
                    "baseline": 100 * best["baseline_accuracy"],
                    "offset": best["baseline_offset"],
                }
            )
        row.update(
            {
                "paper margin": accuracy - baseline,
                "margin": row["held-out accuracy"] - row["baseline"],
                "note": PAPER_NOTES.get(relation, ""),
            }
        )
        rows.append(row)
    table = pd.DataFrame(rows).set_index("paper relation")
    table["offset"] = table["offset"].astype("Int64")  # integers, with a gap where the row has no UD twin
    return table
