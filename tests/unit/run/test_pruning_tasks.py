"""Notebook 06's per-classifier steps: each runs on every task under its stage, and the metrics name them all."""

import types

import numpy as np

from bertology_utils.interventions.pruning import PruningCurve
from bertology_utils.run import pruning_tasks
from bertology_utils.run.pruning_tasks import Curves, Importances, PruningClassifiers, pruning_metrics
from bertology_utils.run.record import StageTimes

SHAPE = (2, 3)


def run(score: float) -> types.SimpleNamespace:
    return types.SimpleNamespace(loaded=f"model {score}", metrics={"score": score, "n": 8}, train_seconds=1.5)


def curve(scores: list[float]) -> PruningCurve:
    return PruningCurve("importance", np.linspace(0, 1, len(scores)), np.array(scores), scores[0])


def test_each_step_runs_on_every_task_under_its_stage(monkeypatch):
    monkeypatch.setattr(pruning_tasks, "ablation_sweep", lambda loaded, dev, **_: ("ablated", loaded, dev))
    monkeypatch.setattr(pruning_tasks, "head_importance", lambda loaded, dev, **_: np.full(SHAPE, 2.0))
    monkeypatch.setattr(pruning_tasks, "importance_ablation_agreement", lambda imp, ablation, by="loss": (0.5, by))
    runs, devs, times = {"SST-2": run(0.9), "RTE": run(0.6)}, {"SST-2": "dev a", "RTE": "dev b"}, StageTimes()
    ablations = pruning_tasks.ablation_sweeps(runs, devs, times=times, progress=False)  # type: ignore[arg-type]
    assert ablations == {"SST-2": ("ablated", "model 0.9", "dev a"), "RTE": ("ablated", "model 0.6", "dev b")}
    found = pruning_tasks.head_importances(runs, devs, ablations, times=times, progress=False)  # type: ignore[arg-type]
    assert (
        list(found.raw) == ["SST-2", "RTE"] and found.agreement["RTE"][("raw importance", "metric drop")][1] == "metric"
    )
    np.testing.assert_allclose(found.normalised["SST-2"], pruning_tasks.normalise_per_layer(np.full(SHAPE, 2.0)))
    assert list(times) == [(t, s) for s in ("ablation sweep", "importance") for t in ("SST-2", "RTE")]


def test_metrics_name_every_task_and_its_random_init():
    classifiers = PruningClassifiers({"SST-2": run(0.9)}, {"SST-2": run(0.5)}, {"SST-2": [0] * 8}, {}, {})  # type: ignore[arg-type]
    ablation = types.SimpleNamespace(metrics=lambda key: {f"{key}.head_deltas": 0})
    importance = np.ones(SHAPE)
    agreement = {
        ("raw importance", "loss increase"): (0.7, 0.01),
        ("normalised", "loss increase"): (0.6, 0.02),
        ("raw importance", "metric drop"): (0.4, 0.2),
    }
    importances = Importances({"SST-2": importance}, {"SST-2": importance / 2}, {"SST-2": agreement})
    curves = Curves({"SST-2": curve([1.0, 0.95, 0.5])}, {"SST-2": [curve([1.0, 0.8, 0.5]), curve([1.0, 0.95, 0.4])]})
    base = types.SimpleNamespace(name="tiny", num_layers=2, num_heads=3)
    times = StageTimes()
    times["SST-2", "ablation sweep"] = 2.0
    metrics = pruning_metrics(
        base,  # type: ignore[arg-type]
        classifiers,
        {"SST-2": 0.5},
        {"SST-2": ablation},  # type: ignore[dict-item]
        importances,
        curves,
        {"SST-2": np.ones(SHAPE)},
        keep=0.9,
        times=times,
    )
    assert metrics["pruning.tasks"] == ["SST-2"] and metrics["pruning.seconds"] == {"SST-2: ablation sweep": 2.0}
    assert metrics["pruning.SST-2.dev_examples"] == 8 and metrics["pruning.SST-2.head_deltas"] == 0
    assert metrics["pruning.SST-2.spearman_importance_vs_loss_p"] == 0.01
    assert metrics["pruning.SST-2.prunable_by_importance"] == 0.5
    assert metrics["pruning.SST-2.prunable_random_mean"] == 0.25
    assert metrics["pruning.SST-2.random_init_dev_metrics"] == {"score": 0.5, "n": 8}
    np.testing.assert_allclose(metrics["pruning.SST-2.attention_cosine_by_layer"], [1.0, 1.0])
