"""Faithfulness on every seed's classifier: one table per seed, the first seed's maps and references kept, the
others' tables stored whole."""

import types

import pandas as pd
import pytest

from bertology_utils.interventions import faithfulness_runs, mixing, references
from bertology_utils.interventions.faithfulness_runs import faithfulness_by_seed


class Classifier:
    """What the cache reads of a classifier: its weights and precision."""

    def __init__(self, name):
        self.name = name

    def weights_fingerprint(self):
        return {"weights": self.name}

    def precision_key(self):
        return {}


@pytest.fixture
def stubbed(monkeypatch, tmp_path):
    """The maps, references and table stubbed (each names its classifier), every call counted; a cache of its own."""
    monkeypatch.setenv("BERTOLOGY_CACHE_DIR", str(tmp_path / "cache"))
    calls = types.SimpleNamespace(maps=[], references=[], tables=[])
    monkeypatch.setattr(
        mixing,
        "mixing_for",
        lambda items, loaded, methods, **kw: calls.maps.append(loaded.name) or {"attention": [loaded.name]},
    )
    monkeypatch.setattr(
        faithfulness_runs,
        "word_references",
        lambda loaded, items, **kw: (
            calls.references.append(kw["references"]) or types.SimpleNamespace(scores=loaded.name, kw=kw)
        ),
    )
    monkeypatch.setattr(
        mixing, "faithfulness", lambda maps, scores: calls.tables.append(scores) or pd.DataFrame({"s": [scores]})
    )
    refusing = type(references.REFERENCE_REGISTRY["decompx_logit"])
    monkeypatch.setattr(refusing, "unsupported", lambda self, loaded: f"not on {loaded.name}")
    return calls


RUNS = {0: types.SimpleNamespace(loaded=Classifier("model 0")), 1: types.SimpleNamespace(loaded=Classifier("model 1"))}
SETTINGS = dict(max_tokens=64, batch_size=2, ig_steps=4, ig_tolerance=None, progress=False)


def test_each_seed_gets_its_table_and_the_first_keeps_its_maps(stubbed):
    found = faithfulness_by_seed(RUNS, ["an item"], ["attention"], first=1, **SETTINGS)  # type: ignore[arg-type]
    assert stubbed.tables == ["model 0", "model 1"] and list(found.tables) == [0, 1]
    assert found.tables[0]["s"].tolist() == ["model 0"] and found.tables[1]["s"].tolist() == ["model 1"]
    assert found.maps == {"attention": ["model 1"]} and found.references.scores == "model 1"
    assert found.references.kw["steps"] == 4 and found.references.kw["cache"] is True
    # every seed is judged by every registered reference the architecture takes, AttnLRP and CP-LRP included
    taken = tuple(n for n in references.REFERENCE_REGISTRY if n != "decompx_logit")
    assert stubbed.references == [taken] * 2 and {"attnlrp", "cp_lrp"} <= set(stubbed.references[0])
    assert found.refused == {"decompx_logit": "not on model 0"}
    with pytest.raises(KeyError, match="seed 2"):
        faithfulness_by_seed(
            RUNS, [], [], first=2, max_tokens=None, batch_size=1, ig_steps=1, ig_tolerance=None, progress=False
        )  # type: ignore[arg-type]


def test_a_warm_run_computes_only_the_first_seeds_maps(stubbed):
    first = faithfulness_by_seed(RUNS, ["an item"], ["attention"], first=1, **SETTINGS)  # type: ignore[arg-type]
    again = faithfulness_by_seed(RUNS, ["an item"], ["attention"], first=1, **SETTINGS)  # type: ignore[arg-type]
    assert stubbed.maps == ["model 0", "model 1", "model 1"]  # seed 0's table was read back
    pd.testing.assert_frame_equal(again.tables[0], first.tables[0], check_dtype=False)
    assert again.maps == first.maps
    # other items, methods or settings make another entry; without the cache every seed is computed
    faithfulness_by_seed(RUNS, ["another item"], ["attention"], first=1, **SETTINGS)  # type: ignore[arg-type]
    faithfulness_by_seed(RUNS, ["an item"], ["attention", "rollout"], first=1, **SETTINGS)  # type: ignore[arg-type]
    faithfulness_by_seed(RUNS, ["an item"], ["attention"], first=1, **{**SETTINGS, "max_tokens": 32})  # type: ignore[arg-type]
    faithfulness_by_seed(RUNS, ["an item"], ["attention"], first=1, cache=False, **SETTINGS)  # type: ignore[arg-type]
    assert stubbed.maps[3:] == ["model 0", "model 1"] * 4
