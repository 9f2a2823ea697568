"""Notebook 02's claims: each objective's, the seeded objective's joined over its seeds, none below the floor."""

import pandas as pd

from bertology_utils.papers.claims import Claim, Verdict
from bertology_utils.run import sst2_classifiers
from bertology_utils.run.sst2_classifiers import sep_claims


def test_claims_per_objective_and_the_classifier_over_its_seeds(monkeypatch):
    def objective_claims(grads, summary, key):
        return [Claim(f"sep_small_gradient.{key}", "claim", "Clark et al. 2019", "-", str(grads), Verdict.HOLDS, "r")]

    monkeypatch.setattr(sst2_classifiers.clark, "objective_claims", objective_claims)
    monkeypatch.setattr(sst2_classifiers, "ablation_summary", lambda curve: pd.DataFrame())
    stats, curves = {"mlm": "g mlm", "sst2": "g sst2"}, {"mlm": None, "sst2": None}
    floors = {"mlm": (None, None), "sst2": (0.9, 0.5)}
    claims = sep_claims(stats, curves, floors, [("g seed 1", None, (0.8, 0.5)), ("g seed 2", None, (0.5, 0.5))])  # type: ignore[arg-type]
    assert [c.id for c in claims] == ["sep_small_gradient.mlm", "sep_small_gradient.sst2"]
    assert claims[0].seeds is None  # the pre-trained model's loss: no classifier, no seeds
    assert (claims[1].seeds.n, claims[1].seeds.holding, claims[1].seeds.not_testable) == (3, 2, 1)


def test_each_objective_and_the_other_seeds_on_the_first_seeds_items(monkeypatch):
    monkeypatch.setattr(sst2_classifiers, "attention_gradients", lambda items, objective, **_: (objective, list(items)))
    monkeypatch.setattr(
        sst2_classifiers, "ablation_curves", lambda items, objective, **kw: (objective, items, kw["seed"])
    )
    classifiers = {
        s: sst2_classifiers.SeedObjective(None, [f"dev {s}"] * 3, f"loss {s}", (0.9, 0.5))  # type: ignore[arg-type]
        for s in (4, 5)
    }
    objectives = {"mlm": ("lm", ["a", "b", "c"]), "sst2": ("loss 4", classifiers[4].dev)}
    stats, seeded = sst2_classifiers.objective_gradients(objectives, classifiers, 4, batch_size=2)  # type: ignore[arg-type]
    assert stats == {"mlm": ("lm", ["a", "b", "c"]), "sst2": ("loss 4", ["dev 4"] * 3)}
    assert seeded == {5: ("loss 5", ["dev 4"] * 3)}
    curves, seeded_curves = sst2_classifiers.objective_ablations(
        objectives,  # type: ignore[arg-type]
        classifiers,
        4,
        n_items=2,
        seed=7,
        batch_size=2,
    )
    assert curves == {"mlm": ("lm", ["a", "b"], 7), "sst2": ("loss 4", ["dev 4"] * 2, 7)}
    assert seeded_curves == {5: ("loss 5", ["dev 4"] * 2, 7)}
