"""Notebook 07's per-classifier claims: the first seed's inputs and the others', joined claim by claim."""

import types

import numpy as np

from bertology_utils.interventions.l0 import L0Sweep
from bertology_utils.papers import voita
from bertology_utils.papers.claims import Verdict
from bertology_utils.run.head_role_tasks import ClaimInputs, ClassifierHeads, L0Pruning, claim_inputs, classifier_claims

SHAPE = (3, 4)


def inputs(seed: int, score: float = 0.9) -> ClaimInputs:
    """A classifier whose relevance tracks its confidence and whose gates keep the specialised heads."""
    rng = np.random.default_rng(seed)
    relevance = rng.random(SHAPE)
    specialised = np.zeros(SHAPE, dtype=bool)
    specialised[0, :2] = True
    masks = np.stack([np.ones(SHAPE, bool), specialised | (relevance > 0.8), np.zeros(SHAPE, bool)])
    sweep = L0Sweep("SST-2", "score", np.array([0.0, 0.1, 1.0]), [], masks, np.array([0.9, 0.88, 0.5]), 0.9)
    survived = voita.specialised_survival(masks, specialised, n_permutations=50, seed=0)
    return ClaimInputs(score, relevance, relevance + 1, 0.0, specialised, sweep, survived)


def test_claims_per_task_are_joined_over_its_seeds():
    first = {"SST-2": inputs(0), "MRPC": inputs(1)}
    seeded = {("SST-2", 1): inputs(2), ("SST-2", 2): inputs(3)}
    claims = classifier_claims(first, seeded, {"SST-2": 0.5, "MRPC": 0.5}, alpha=0.05, keep=0.9)
    assert [c.id.split(".")[-1] for c in claims] == ["SST-2"] * 4 + ["MRPC"] * 4
    assert [c.seeds.n for c in claims] == [3] * 4 + [1] * 4
    assert claims[2].id == "l0_prunes_most_heads.SST-2" and claims[2].verdict is Verdict.HOLDS


def test_a_classifier_at_the_majority_class_makes_no_claim():
    claims = classifier_claims({"SST-2": inputs(0, score=0.5)}, {}, {"SST-2": 0.5}, alpha=0.05, keep=0.9)
    assert len(claims) == 4 and all(c.verdict is Verdict.NOT_TESTABLE for c in claims)


def test_claim_inputs_read_the_first_classifier_results():
    made = inputs(0)
    attribution = types.SimpleNamespace(relative_gap=np.array([0.01, 0.03, 0.02]))
    roles = types.SimpleNamespace(specialised=made.specialised)
    heads = ClassifierHeads(None, attribution, None, made.relevance, made.confidence, None, roles)  # type: ignore[arg-type]
    pruned = L0Pruning(made.sweep, None, [], None, made.survived)  # type: ignore[arg-type]
    read = claim_inputs(0.9, heads, pruned)
    assert read.gap == 0.03 and read.sweep is made.sweep and read.survived is made.survived
    assert read.relevance is made.relevance and read.specialised is made.specialised and read.score == 0.9
