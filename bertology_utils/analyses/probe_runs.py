"""Clark et al.'s Table 3 rows once fitted: their scores, their metrics, and what they are compared with.

Clark et al. (2019), *What Does BERT Look At? An Analysis of BERT's Attention*
(https://arxiv.org/abs/1906.04341), Section 5: probing classifiers on the attention maps together.
Notebook 04 fits its rows with :func:`~bertology_utils.analyses.probes.fit_probes`; the functions here
evaluate every fitted row on dev and test (:func:`evaluate_probes`), set the attention-only probe's
weights against the single heads' accuracy (:func:`weights_against_accuracy`), pick a typical test
sentence to draw (:func:`typical_sentence`) and name each row's metrics (:func:`row_metrics`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import spearmanr
from tqdm.auto import tqdm

from bertology_utils.analyses.probes.data import ProbeData
from bertology_utils.analyses.probes.evaluation import ProbeEvaluation
from bertology_utils.analyses.probes.report import PAPER_TABLE3, TABLE3_ROWS
from bertology_utils.core.heads import Head

__all__ = [
    "ProbeScores",
    "evaluate_probes",
    "weights_against_accuracy",
    "typical_sentence",
    "row_key",
    "row_metrics",
    "structural_row_metrics",
    "structural_layers_in",
]


@dataclass
class ProbeScores:
    """Each fitted row's evaluation on test and on dev, by row name in Table 3's order, and how it was trained.

    ``training``: one row per probe (epochs run, best epoch, training sentences, fit seconds, dev and
    test UAS in percent).
    """

    test: dict[str, ProbeEvaluation]
    dev: dict[str, ProbeEvaluation]
    training: pd.DataFrame


def evaluate_probes(
    fitted: Mapping[str, Any], inputs: Mapping[str, Mapping[str, ProbeData]], *, progress: bool = True
) -> ProbeScores:
    """Evaluate every fitted probe on its row's test and dev data, in Table 3's order.

    :param fitted: fitted probes by Table 3 row name (:func:`~bertology_utils.analyses.probes.fit_probes`).
    :param inputs: each row's data by split (``"dev"``, ``"test"``): the model's maps, or the random-init
        control's for its row.
    :param progress: a progress bar over the rows.
    :returns: the rows' :class:`ProbeScores`.
    """
    test, dev, training = {}, {}, []
    for name in tqdm([n for n in TABLE3_ROWS if n in fitted], desc="evaluating", unit="probe", disable=not progress):
        probe = fitted[name]
        test[name] = probe.evaluate(inputs[name]["test"], name)
        dev[name] = probe.evaluate(inputs[name]["dev"], name)
        training.append(
            {
                "row": name,
                "epochs run": len(getattr(probe, "history_", [])),
                "best epoch": getattr(probe, "best_epoch_", None),
                "train sentences": probe.n_sentences_fit_,
                "fit seconds": round(getattr(probe, "fit_seconds_", 0.0), 1),
                "dev UAS": round(100 * dev[name].uas, 1),
                "test UAS": round(100 * test[name].uas, 1),
            }
        )
    return ProbeScores(test, dev, pd.DataFrame(training).set_index("row"))


def weights_against_accuracy(weights: np.ndarray, accuracy: np.ndarray, directions: Sequence[str]) -> pd.DataFrame:
    """Per direction, the attention probe's heaviest head against the most accurate single head.

    Do the heads the probe weighs most coincide with the best single heads (Clark et al., Section 4)?

    :param weights: the probe's weights ``w`` and ``u``, (2, L, H).
    :param accuracy: each single head's accuracy at "the most-attended word is the gold head", (2, L, H),
        in the same directions.
    :param directions: the two directions' names (dependent -> head, head -> dependent).
    :returns: one row per direction: the heaviest head and its weight, the most accurate head and its
        accuracy, and Spearman's rank correlation of weight and accuracy over the heads (``spearman``).
    """
    rows = {}
    for direction, grid, right in zip(directions, weights, accuracy):
        heaviest, best = Head.argmax(grid), Head.argmax(right)
        rows[direction] = {
            "heaviest head": str(heaviest),
            "weight": float(grid[heaviest]),
            "most accurate head": str(best),
            "accuracy": float(right[best]),
            "spearman": spearmanr(grid.ravel(), right.ravel()).statistic,
        }
    return pd.DataFrame(rows).T


def typical_sentence(evaluation: ProbeEvaluation, min_words: int = 10, max_words: int = 16) -> int:
    """A sentence whose UAS is closest to the probe's overall UAS, among those of ``min_words`` to ``max_words``.

    Ties go to the shorter sentence, then the earlier one. With no such sentence (small runs), the
    first evaluated sentence.

    :param evaluation: a probe's evaluation.
    :param min_words: the fewest words of a candidate.
    :param max_words: the most words of a candidate.
    :returns: the sentence's corpus index.
    """
    candidates = []
    for i in np.unique(evaluation.sentence):
        words = evaluation.sentence == i
        n = int(words.sum())
        scored = words & evaluation.scored
        if min_words <= n <= max_words and scored.any():
            candidates.append((abs(evaluation.correct[scored].mean() - evaluation.uas), n, int(i)))
    if not candidates:
        return int(np.unique(evaluation.sentence)[0])
    return min(candidates)[2]


def row_key(name: str) -> str:
    """A Table 3 row's name as a metric name part: ``"Attn + words"`` -> ``"attn_words"``.

    :param name: the row's name.
    :returns: lowercase, ``_`` for ``" + "``, ``-`` and spaces.
    """
    return name.lower().replace(" + ", "_").replace("-", "_").replace(" ", "_")


def row_metrics(fitted: Mapping[str, Any], scores: ProbeScores, prefix: str = "probes") -> dict[str, float | int]:
    """Each evaluated row's metrics: test, dev and the paper's UAS (fractions), and a trained probe's best
    epoch and fit seconds.

    :param fitted: the fitted probes by row name.
    :param scores: their :func:`evaluate_probes`.
    :param prefix: the metrics' first part.
    :returns: ``{prefix}.{row_key(name)}.test_uas`` and the rest.
    """
    metrics: dict[str, float | int] = {}
    for name in scores.test:
        key = f"{prefix}.{row_key(name)}"
        metrics |= {
            f"{key}.test_uas": scores.test[name].uas,
            f"{key}.dev_uas": scores.dev[name].uas,
            f"{key}.paper_uas": PAPER_TABLE3[name] / 100,
        }
        probe = fitted[name]
        if hasattr(probe, "best_epoch_"):
            metrics |= {f"{key}.best_epoch": probe.best_epoch_, f"{key}.fit_seconds": round(probe.fit_seconds_, 1)}
    return metrics


def structural_row_metrics(table: pd.DataFrame, prefix: str = "probes") -> dict[str, float | int]:
    """The structural probes' scores per layer, from :func:`~bertology_utils.analyses.probes.structural_probe_layers`.

    Full-rank fits (the rank every layer gets) are ``{prefix}.structural.{probe}.layer_{k}.{split}_{metric}``
    and ``...layer_{k}.best_epoch``; the rank sweep's other ranks add ``.rank_{r}`` after the layer.

    :param table: the tidy table (``layer``, ``probe``, ``rank``, ``split``, ``metric``, ``value``).
    :param prefix: the metrics' first part.
    :returns: the metrics, epochs as ints.
    """
    full = table.groupby("layer")["rank"].transform("max")  # the layer's own rank; a sweep only adds lower ones
    metrics: dict[str, float | int] = {}
    for row, is_full in zip(table.itertuples(index=False), full.eq(table["rank"])):
        where = f"{prefix}.structural.{row.probe}.layer_{row.layer}" + ("" if is_full else f".rank_{row.rank}")
        if row.metric == "best_epoch":
            metrics[f"{where}.best_epoch"] = int(row.value)
        else:
            metrics[f"{where}.{row.split}_{row.metric}"] = float(row.value)
    return metrics


def structural_layers_in(layers: Sequence[int] | None, num_layers: int) -> tuple[list[int] | None, dict[int, str]]:
    """The asked structural-probe layers a model has, and why each other one is skipped (a parameter written for
    a deeper model is a counted skip on a shallower one, not a failure).

    :param layers: the hidden-state layers asked for (0: the embeddings); None: every layer.
    :param num_layers: the model's layers, so its hidden states are 0 .. ``num_layers``.
    :returns: the layers to fit (None stays None: every layer), and a reason by layer it lacks.
    """
    if layers is None:
        return None, {}
    kept = [k for k in layers if 0 <= k <= num_layers]
    lacking = {k: f"the model has hidden states 0..{num_layers} (0: the embeddings)" for k in layers if k not in kept}
    return kept, lacking
