"""What a probe's predictions score against the gold trees: :class:`ProbeEvaluation`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bertology_utils.analyses.probes.data import ProbeData

__all__ = ["ProbeEvaluation"]


@dataclass(frozen=True)
class ProbeEvaluation:
    """Predicted heads of every word of a :class:`ProbeData`, and the UAS.

    Arrays run over the words of the evaluated sentences, in corpus order. Heads use the UD
    convention (0 = ROOT, i = the i-th word, from 1).
    """

    name: str
    sentence: np.ndarray  #: corpus index of each word's sentence
    position: np.ndarray  #: 0-based position of the word in its sentence
    gold: np.ndarray  #: gold head
    predicted: np.ndarray  #: predicted head
    relation: np.ndarray  #: gold relation (str)
    scored: np.ndarray  #: counted in the UAS (not punctuation)
    skipped: dict = field(default_factory=dict)
    description: str = ""

    @property
    def correct(self) -> np.ndarray:
        return self.gold == self.predicted

    @property
    def n_sentences(self) -> int:
        return len(np.unique(self.sentence))

    @property
    def n_scored(self) -> int:
        return int(self.scored.sum())

    @property
    def uas(self) -> float:
        """Unlabeled attachment score, punctuation left out (a fraction)."""
        return float(self.correct[self.scored].mean()) if self.scored.any() else math.nan

    @property
    def uas_with_punctuation(self) -> float:
        return float(self.correct.mean()) if len(self.correct) else math.nan

    def by_sentence(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per evaluated sentence (corpus index, ascending): the index, its scored words predicted right and its
        scored words (punctuation left out), for a bootstrap over sentences."""
        index, row = np.unique(self.sentence, return_inverse=True)
        scored = np.bincount(row, weights=self.scored, minlength=len(index)).astype(np.int64)
        right = np.bincount(row, weights=self.correct & self.scored, minlength=len(index)).astype(np.int64)
        return index, right, scored

    def by_relation(self, min_count: int = 0) -> pd.DataFrame:
        """UAS per gold relation (punctuation left out), most frequent first."""
        keep = self.scored
        frame = pd.DataFrame({"relation": self.relation[keep], "correct": self.correct[keep]})
        table = frame.groupby("relation")["correct"].agg(count="size", uas="mean")
        table = table[table["count"] >= min_count]
        return table.sort_values(["count"], ascending=False, kind="stable")

    def heads(self, index: int) -> np.ndarray:
        """Predicted heads of corpus sentence ``index`` (UD convention)."""
        where = self.sentence == index
        if not where.any():
            raise KeyError(f"sentence {index} was not evaluated")
        return self.predicted[where]

    @classmethod
    def of(cls, name: str, data: ProbeData, predictions: Mapping[int, np.ndarray]) -> ProbeEvaluation:
        """The evaluation of ``predictions`` (corpus index -> predicted heads) against ``data``'s gold trees."""
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

        def cat(parts: list[np.ndarray], dtype) -> np.ndarray:
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
