"""Faithfulness on every seed's classifier: one table per seed, the first seed's maps and references kept."""

import types

import pandas as pd
import pytest

from bertology_utils.interventions import faithfulness_runs, mixing, references
from bertology_utils.interventions.faithfulness_runs import faithfulness_by_seed


def test_each_seed_gets_its_table_and_the_first_keeps_its_maps(monkeypatch):
    calls = []
    monkeypatch.setattr(mixing, "mixing_for", lambda items, loaded, methods, **kw: {"attention": [loaded]})
    asked = []
    monkeypatch.setattr(
        faithfulness_runs,
        "word_references",
        lambda loaded, items, **kw: asked.append(kw["references"]) or types.SimpleNamespace(scores=loaded, kw=kw),
    )
    monkeypatch.setattr(
        mixing, "faithfulness", lambda maps, scores: calls.append(scores) or pd.DataFrame({"s": [scores]})
    )
    refusing = type(references.REFERENCE_REGISTRY["decompx_logit"])
    monkeypatch.setattr(refusing, "unsupported", lambda self, loaded: f"not on {loaded}")
    runs = {0: types.SimpleNamespace(loaded="model 0"), 1: types.SimpleNamespace(loaded="model 1")}
    found = faithfulness_by_seed(
        runs,
        ["an item"],
        ["attention"],
        first=1,
        max_tokens=64,
        batch_size=2,
        ig_steps=4,
        ig_tolerance=None,
        progress=False,
    )  # type: ignore[arg-type]
    assert calls == ["model 0", "model 1"] and list(found.tables) == [0, 1]
    assert found.maps == {"attention": ["model 1"]} and found.references.scores == "model 1"
    assert found.references.kw["steps"] == 4 and found.references.kw["cache"] is True
    # every seed is judged by every registered reference the architecture takes, AttnLRP and CP-LRP included
    taken = tuple(n for n in references.REFERENCE_REGISTRY if n != "decompx_logit")
    assert asked == [taken] * 2 and {"attnlrp", "cp_lrp"} <= set(asked[0])
    assert found.refused == {"decompx_logit": "not on model 0"}
    with pytest.raises(KeyError, match="seed 2"):
        faithfulness_by_seed(
            runs, [], [], first=2, max_tokens=None, batch_size=1, ig_steps=1, ig_tolerance=None, progress=False
        )  # type: ignore[arg-type]
