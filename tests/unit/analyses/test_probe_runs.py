"""Table 3's fitted rows: evaluated in the paper's order, their metrics' names, the typical sentence."""

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from bertology_utils.analyses.probe_runs import (
    evaluate_probes,
    row_key,
    row_metrics,
    structural_row_metrics,
    typical_sentence,
    weights_against_accuracy,
)
from bertology_utils.analyses.probes import ProbeEvaluation
from bertology_utils.papers.metrics import REGISTRY


def evaluation(name: str, lengths: list[int], wrong: dict[int, int]) -> ProbeEvaluation:
    """Sentences of the given lengths, every word scored, ``wrong[i]`` words of sentence i predicted wrong."""
    sentence = np.concatenate([np.full(n, i) for i, n in enumerate(lengths)])
    position = np.concatenate([np.arange(n) for n in lengths])
    gold = position.copy()
    predicted = gold.copy()
    for i, k in wrong.items():
        predicted[np.flatnonzero(sentence == i)[:k]] += 1
    relation = np.full(len(gold), "nsubj", dtype=object)
    return ProbeEvaluation(name, sentence, position, gold, predicted, relation, np.ones(len(gold), bool))


class Probe:
    """A fitted probe that scores its data as given, without a model."""

    def __init__(self, test: ProbeEvaluation, dev: ProbeEvaluation, fitted: bool = True):
        self.results = {"test": test, "dev": dev}
        self.n_sentences_fit_ = 3
        if fitted:
            self.history_, self.best_epoch_, self.fit_seconds_ = [1, 2], 1, 2.345

    def evaluate(self, split: str, name: str) -> ProbeEvaluation:
        return self.results[split]


def test_the_typical_sentence_is_the_one_closest_to_the_overall_uas():
    scored = evaluation("Attn", [12, 5, 11, 14], {0: 6, 1: 0, 2: 1, 3: 0})  # UAS 35/42
    assert typical_sentence(scored) == 2  # 10/11 is the closest to 35/42 among 10 to 16 words
    assert typical_sentence(scored, min_words=13) == 3
    assert typical_sentence(scored, min_words=20) == 0  # none that long: the first sentence


def test_rows_are_evaluated_in_table3_order_and_named_as_metrics():
    good, bad = evaluation("a", [4], {}), evaluation("b", [4], {0: 2})
    fitted = {"Attn": Probe(good, bad), "Right-branching": Probe(bad, good, fitted=False)}
    inputs = {name: {"test": "test", "dev": "dev"} for name in fitted}
    scores = evaluate_probes(fitted, inputs, progress=False)  # type: ignore[arg-type]
    assert list(scores.test) == ["Right-branching", "Attn"]
    assert scores.training.loc["Attn", "test UAS"] == 100.0 and scores.training.loc["Attn", "dev UAS"] == 50.0
    assert (
        scores.training.loc["Attn", "fit seconds"] == 2.3 and scores.training.loc["Right-branching", "epochs run"] == 0
    )
    metrics = row_metrics(fitted, scores)
    assert metrics == {
        "probes.right_branching.test_uas": 0.5,
        "probes.right_branching.dev_uas": 1.0,
        "probes.right_branching.paper_uas": 0.26,
        "probes.attn.test_uas": 1.0,
        "probes.attn.dev_uas": 0.5,
        "probes.attn.paper_uas": 0.61,
        "probes.attn.best_epoch": 1,
        "probes.attn.fit_seconds": 2.3,
    }
    assert row_key("Random-init Attn + words") == "random_init_attn_words"


def test_weights_against_accuracy_per_direction():
    rng = np.random.default_rng(0)
    weights, accuracy = rng.random((2, 3, 4)), rng.random((2, 3, 4))
    table = weights_against_accuracy(weights, accuracy, ["dep->head", "head->dep"])
    assert list(table.index) == ["dep->head", "head->dep"]
    rho = spearmanr(weights[1].ravel(), accuracy[1].ravel()).statistic
    assert table.loc["head->dep", "spearman"] == pytest.approx(rho)
    layer, head = np.unravel_index(weights[0].argmax(), (3, 4))
    assert table.loc["dep->head", "weight"] == weights[0, layer, head]
    assert table.loc["dep->head", "accuracy"] == accuracy[0].max()


def test_structural_metrics_name_full_rank_rows_by_layer_and_sweep_rows_by_rank():
    rows = [(0, "distance", 8, "test", "uuas", 0.5), (0, "distance", 8, "test", "best_epoch", 3.0),
            (2, "depth", 8, "test", "root_acc", 0.75), (2, "depth", 2, "test", "root_acc", 0.25),
            (2, "depth", 2, "test", "best_epoch", 1.0)]  # fmt: skip
    table = pd.DataFrame(rows, columns=["layer", "probe", "rank", "split", "metric", "value"])
    metrics = structural_row_metrics(table)
    assert metrics == {
        "probes.structural.distance.layer_0.test_uuas": 0.5,
        "probes.structural.distance.layer_0.best_epoch": 3,
        "probes.structural.depth.layer_2.test_root_acc": 0.75,
        "probes.structural.depth.layer_2.rank_2.test_root_acc": 0.25,
        "probes.structural.depth.layer_2.rank_2.best_epoch": 1,
    }
    assert isinstance(metrics["probes.structural.distance.layer_0.best_epoch"], int)
    REGISTRY.check(metrics)  # every key is declared


def test_structural_layers_a_model_lacks_are_counted_skips():
    from bertology_utils.analyses.probe_runs import structural_layers_in

    kept, lacking = structural_layers_in([0, 3], num_layers=2)  # hidden states 0..2
    assert kept == [0] and list(lacking) == [3] and "0..2" in lacking[3]
    assert structural_layers_in([0, 3], num_layers=6) == ([0, 3], {})
    assert structural_layers_in(None, num_layers=2) == (None, {})  # every layer
    assert structural_layers_in([], num_layers=2) == ([], {})
