"""Notebook 06's claims: five per classifier, joined over each task's seeds, none below the majority class."""

import types

import numpy as np

from bertology_utils.papers import kovaleva, michel
from bertology_utils.papers.claims import Claim, Verdict
from bertology_utils.papers.pruning_claims import PruningInputs, pruning_claims_by_task


def claim(name: str, task: str) -> Claim:
    return Claim(f"{name}.{task}", name, "paper", "-", "-", Verdict.HOLDS, "a rule")


def test_five_claims_per_task_joined_over_its_seeds(monkeypatch):
    for module, name in [
        (kovaleva, "last_layers_change_most"),
        (kovaleva, "single_heads_dispensable"),
        (kovaleva, "layer_ablation_improves"),
        (michel, "heads_prunable"),
        (michel, "importance_matches_ablation"),
    ]:
        monkeypatch.setattr(module, name, lambda *args, task="", _name=name, **kw: claim(_name, task or args[-1]))
    ablation = types.SimpleNamespace(harm=lambda by: np.zeros((2, 2)))

    def inputs(score: float) -> PruningInputs:
        return PruningInputs(score, np.ones((2, 2)), ablation, np.ones((2, 2)), None, [])  # type: ignore[arg-type]

    first = {"SST-2": inputs(0.9), "MRPC": inputs(0.6)}
    seeded = {("SST-2", 1): inputs(0.8), ("MRPC", 1): inputs(0.8)}
    claims = pruning_claims_by_task(first, seeded, {"SST-2": 0.5, "MRPC": 0.7}, keep=0.9, alpha=0.05)
    assert [c.id for c in claims[:5]] == [
        "last_layers_change_most.SST-2",
        "single_heads_dispensable.SST-2",
        "layer_ablation_improves.SST-2",
        "heads_prunable.SST-2",
        "importance_matches_ablation.SST-2",
    ]
    assert all(c.seeds.n == 2 and c.seeds.holding == 2 for c in claims[:5])
    # MRPC's first classifier is below its majority class: not testable there, counted as such
    assert all(c.seeds.n == 2 and c.seeds.not_testable == 1 for c in claims[5:])
