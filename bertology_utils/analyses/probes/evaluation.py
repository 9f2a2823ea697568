"""What a probe's predictions score against the gold trees: :class:`ProbeEvaluation`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from bertology_utils.analyses.probes.data import ProbeData
from bertology_utils.core.typing import SampleValues, WordValues

__all__ = ["ProbeEvaluation"]


@dataclass(frozen=True)
class ProbeEvaluation:
    """Predicted heads of every word of a :class:`ProbeData`, and the UAS.

    Arrays run over the N words of the evaluated sentences, in corpus order. Heads use the UD
    convention (0 = ROOT, i = the i-th word, from 1). The score of Clark et al.'s Table 3 (`What Does
    BERT Look At? <https://arxiv.org/abs/1906.04341>`_) is :attr:`uas`.

    :param name: the probe's name.
    :param sentence: ``(N,)`` corpus index of each word's sentence.
    :param position: ``(N,)`` 0-based position of the word in its sentence.
    :param gold: ``(N,)`` gold head.
    :param predicted: ``(N,)`` predicted head.
    :param relation: ``(N,)`` gold relation (str).
    :param scored: ``(N,)`` bool: counted in the UAS (not punctuation).
    :param skipped: sentences of the data left out, by reason.
    :param description: what was evaluated.
    """

    name: str
    sentence: SampleValues  #: corpus index of each word's sentence
    position: SampleValues  #: 0-based position of the word in its sentence
    gold: SampleValues  #: gold head
    predicted: SampleValues  #: predicted head
    relation: SampleValues  #: gold relation (str)
    scored: SampleValues  #: counted in the UAS (not punctuation)
    skipped: dict[str, int] = field(default_factory=dict)
    description: str = ""

    @property
    def correct(self) -> SampleValues:
        """``(N,)`` bool, N the words: the predicted head is the gold one."""
        return self.gold == self.predicted

    @property
    def n_sentences(self) -> int:
        """Sentences evaluated."""
        return len(np.unique(self.sentence))

    @property
    def n_scored(self) -> int:
        """Words the UAS counts."""
        return int(self.scored.sum())

    @property
    def uas(self) -> float:
        """Unlabeled attachment score, punctuation left out (a fraction)."""
        return float(self.correct[self.scored].mean()) if self.scored.any() else math.nan

    @property
    def uas_with_punctuation(self) -> float:
        """Unlabeled attachment score over every word, punctuation included (a fraction)."""
        return float(self.correct.mean()) if len(self.correct) else math.nan

    def by_sentence(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per evaluated sentence, for a bootstrap over sentences.

        :returns: ``(index, right, scored)``, each ``(sentences,)`` by corpus index, ascending: the index,
            its scored words predicted right and its scored words (punctuation left out).
        """
        index, row = np.unique(self.sentence, return_inverse=True)
        scored = np.bincount(row, weights=self.scored, minlength=len(index)).astype(np.int64)
        right = np.bincount(row, weights=self.correct & self.scored, minlength=len(index)).astype(np.int64)
        return index, right, scored

    def edges_by_sentence(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per evaluated sentence, the gold tree's edges the predicted heads hold, undirected: UUAS's counts.

        A gold edge joins a word and its head, both scored (punctuation left out), as the structural probes'
        UUAS counts them (:func:`~bertology_utils.analyses.probes.structural.structural_metrics`); it is found
        when either word's predicted head is the other.

        :returns: ``(index, found, edges)``, each ``(sentences,)`` by corpus index, ascending.
        """
        index, row = np.unique(self.sentence, return_inverse=True)
        first = np.searchsorted(self.sentence, index)  # words run sentence by sentence, in order
        head_row = first[row] + np.maximum(self.gold - 1, 0)
        edge = (self.gold > 0) & self.scored & self.scored[head_row]
        found = (self.predicted == self.gold) | (self.predicted[head_row] == self.position + 1)
        edges = np.bincount(row, weights=edge, minlength=len(index)).astype(np.int64)
        right = np.bincount(row, weights=edge & found, minlength=len(index)).astype(np.int64)
        return index, right, edges

    def by_relation(self, min_count: int = 0) -> pd.DataFrame:
        """UAS per gold relation (punctuation left out).

        :param min_count: leave out relations with fewer scored words.
        :returns: one row per relation, most frequent first: ``count`` and ``uas``.
        """
        keep = self.scored
        frame = pd.DataFrame({"relation": self.relation[keep], "correct": self.correct[keep]})
        table = frame.groupby("relation")["correct"].agg(count="size", uas="mean")
        table = table[table["count"] >= min_count]
        return table.sort_values(["count"], ascending=False, kind="stable")

    def heads(self, index: int) -> WordValues:
        """The predicted heads of one sentence.

        :param index: a corpus index.
        :returns: ``(W,)`` heads (UD convention).
        :raises KeyError: when the sentence was not evaluated.
        """
        where = self.sentence == index
        if not where.any():
            raise KeyError(f"sentence {index} was not evaluated")
        return self.predicted[where]

    @classmethod
    def of(cls, name: str, data: ProbeData, predictions: Mapping[int, WordValues]) -> ProbeEvaluation:
        """The evaluation of predictions against the gold trees.

        :param name: the probe's name.
        :param data: the data predicted on.
        :param predictions: corpus index -> ``(W,)`` predicted heads.
        :returns: the evaluation.
        """
        sentence: list[np.ndarray] = []
        position: list[np.ndarray] = []
        gold: list[np.ndarray] = []
        predicted: list[np.ndarray] = []
        relation: list[np.ndarray] = []
        scored: list[np.ndarray] = []
        for i in sorted(predictions):
            heads, is_scored = data.gold(i)
            n = len(heads)
            sentence.append(np.full(n, i))
            position.append(np.arange(n))
            gold.append(heads)
            predicted.append(np.asarray(predictions[i], dtype=np.int64))
            relation.append(np.asarray(data.corpus[i].relations, dtype=object))
            scored.append(is_scored)

        def cat(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
            return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype=dtype)

        return cls(
            name,
            cat(sentence, np.int64),
            cat(position, np.int64),
            cat(gold, np.int64),
            cat(predicted, np.int64),
            cat(relation, object),
            cat(scored, bool),
            dict(data.skipped),
            data.description,
        )

    def __repr__(self) -> str:
        return f"ProbeEvaluation({self.name!r}: UAS {100 * self.uas:.1f} over {self.n_scored} words)"
