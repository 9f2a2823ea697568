"""The labelling tool: map sources, the annotator's CSV, the queue, agreement and the ipywidgets panel."""

import math

import numpy as np
import pandas as pd
import pytest

from bertology_utils.analyses.pattern_maps import planted_layout
from bertology_utils.analyses.pattern_types import TYPES
from bertology_utils.attention.word_attention import ItemAttention
from bertology_utils.core.errors import BertologyError
from bertology_utils.present.labelling import (
    KEYS,
    LABELS,
    LabelFile,
    LabelSession,
    MapRecord,
    agreement,
    label_maps,
    labelled_set_records,
    map_norm,
    sample_records,
)


def record(map_id, n=4):
    kinds, segments = planted_layout(n - 2)
    return MapRecord(map_id, np.eye(n), kinds, segments, tuple(f"w{i}" for i in range(n)), "toy", 1, 2, "d", "i")


def items(shape, count=3):
    out = []
    for k in range(count):
        kinds, segments = planted_layout(2 + k)
        n = len(kinds)
        att = np.random.default_rng(k).dirichlet(np.ones(n), size=(*shape, n))
        out.append(ItemAttention(k, f"it{k}", tuple(f"w{i}" for i in range(n)), kinds, segments, att, n))
    return out


def test_labelled_set_folder_round_trip_and_errors(tmp_path):
    rows = [record("a"), record("b", 5)]
    arrays = {
        f"{r.map_id}/{k}": np.asarray(getattr(r, k)) for r in rows for k in ("attention", "word_kinds", "segments")
    }
    arrays |= {f"{r.map_id}/words": np.asarray(r.words) for r in rows}
    np.savez(tmp_path / "maps.npz", **arrays)
    pd.DataFrame(
        [dict(map_id=r.map_id, model="toy", dataset="d", item_id="007", layer=1, head=2, extra=0) for r in rows]
    ).to_csv(tmp_path / "maps.csv", index=False)
    back = labelled_set_records(tmp_path)
    assert [r.map_id for r in back] == ["a", "b"] and back[1].words == rows[1].words
    assert np.array_equal(back[1].attention, rows[1].attention) and back[0].item_id == "007"
    pd.DataFrame([dict(map_id="zzz", model="toy", dataset="d", item_id="1", layer=1, head=1)]).to_csv(
        tmp_path / "maps.csv", index=False
    )
    with pytest.raises(BertologyError, match="no map zzz"):
        labelled_set_records(tmp_path)
    (tmp_path / "maps.npz").unlink()
    with pytest.raises(BertologyError, match="maps.npz is missing"):
        labelled_set_records(tmp_path)
    with pytest.raises(ValueError, match="map x"):
        MapRecord("x", np.eye(3), np.zeros(4), np.zeros(4), ("a", "b", "c", "d"), "m", 1, 1)


@pytest.mark.parametrize("shape", [(2, 3), (4, 1)])
def test_sample_records_of_any_shape(shape):
    source = items(shape)
    drawn = sample_records(source, 8, seed=3, model="toy")
    assert [r.map_id for r in drawn] == [f"s{k:03d}" for k in range(8)]
    assert [(r.item_id, r.layer, r.head) for r in drawn] == [
        (r.item_id, r.layer, r.head) for r in sample_records(source, 8, seed=3)
    ]
    for r in drawn:
        item = source[int(r.item_id[2:])]
        assert 1 <= r.layer <= shape[0] and 1 <= r.head <= shape[1]
        assert np.allclose(r.attention, item.attention[r.layer - 1, r.head - 1])
    assert {r.item_id for r in sample_records(iter(source), 30, seed=0)} == {"it0", "it1", "it2"}
    with pytest.raises(ValueError, match="no items"):
        sample_records([], 2)


def test_label_file_resumes_overrides_and_refuses_bad_rows(tmp_path):
    path = tmp_path / "a.csv"
    f = LabelFile(path, "ann")
    f.record("m1", "vertical")
    f.record("m2", "unsure", "best: diagonal")
    f.record("m1", "diagonal")
    again = LabelFile(path, "ann")
    assert again.labels() == {"m1": "diagonal", "m2": "unsure"}
    assert (
        path.read_text().splitlines()[0] == "map_id,label,annotator,note,time"
        and len(path.read_text().splitlines()) == 4
    )
    with pytest.raises(ValueError, match="label must be one of"):
        f.record("m3", "stripes")
    (tmp_path / "bad.csv").write_text("map_id,label,annotator,note,time\nm1,vertical,ann\n")
    with pytest.raises(BertologyError, match="line 2"):
        LabelFile(tmp_path / "bad.csv", "x")
    (tmp_path / "header.csv").write_text("id,label\n")
    with pytest.raises(BertologyError, match="line 1"):
        LabelFile(tmp_path / "header.csv", "x")


def test_session_queue_back_and_seeded_order(tmp_path):
    records = [record(f"m{k}") for k in range(5)]
    f = LabelFile(tmp_path / "s.csv", "ann")
    f.record("m1", "block")
    session = LabelSession(records, f)
    assert [r.map_id for r in session.queue] == ["m0", "m2", "m3", "m4"] and session.remaining == 4
    session.label("vertical")
    session.label("diagonal")
    session.back()
    assert session.current.map_id == "m2"
    session.label("heterogeneous")
    assert f.labels()["m2"] == "heterogeneous" and session.labelled == 3 and session.current.map_id == "m3"
    shuffled = [r.map_id for r in LabelSession(records, LabelFile(tmp_path / "t.csv", "b"), order_seed=1).queue]
    assert shuffled == [r.map_id for r in LabelSession(records, LabelFile(tmp_path / "u.csv", "b"), order_seed=1).queue]
    assert sorted(shuffled) == [f"m{k}" for k in range(5)] and shuffled != [f"m{k}" for k in range(5)]
    with pytest.raises(ValueError, match="unique"):
        LabelSession([record("x"), record("x")], f)


def test_agreement_kappa_by_hand(tmp_path):
    a = dict(enumerate(["vertical"] * 4 + ["diagonal"] * 3 + ["heterogeneous"] * 3))
    b = dict(enumerate(["vertical"] * 3 + ["diagonal"] * 4 + ["heterogeneous"] * 2 + ["vertical"]))
    a = {str(k): v for k, v in a.items()} | {"u": "unsure"}
    b = {str(k): v for k, v in b.items()} | {"u": "vertical"}
    result = agreement(a, b)
    observed = 8 / 10
    # chance: a's shares (.4 v, .3 d, .3 h) times b's (.4 v, .4 d, .2 h)
    expected = 0.4 * 0.4 + 0.3 * 0.4 + 0.3 * 0.2
    assert result.n == 10 and result.observed == pytest.approx(observed)
    assert result.kappa == pytest.approx((observed - expected) / (1 - expected), abs=1e-12)
    assert result.confusion.loc["vertical", "diagonal"] == 1 and result.confusion.loc["heterogeneous", "vertical"] == 1
    assert list(result.confusion.index) == list(TYPES) and int(result.confusion.to_numpy().sum()) == 10
    assert sorted(result.disagreements["map_id"]) == ["3", "9"]
    f = LabelFile(tmp_path / "a.csv", "a")
    for k, v in a.items():
        f.record(k, v)
    assert agreement(f, b).kappa == pytest.approx(result.kappa) and agreement(tmp_path / "a.csv", b).n == 10
    one = agreement({"1": "vertical"}, {"1": "vertical"})
    assert math.isnan(one.kappa) and "at least 2" in one.note
    same = agreement({"1": "block", "2": "block"}, {"1": "block", "2": "block"})
    assert math.isnan(same.kappa) and "one type" in same.note


def test_tool_records_clicks_and_keys(tmp_path):
    path = tmp_path / "tool.csv"
    tool = label_maps([record("m0"), record("m1"), record("m2", 6)], path, "ann", scale="fixed")
    assert "0 of 3 labelled" in tool.progress.value and "m0" in tool.info.value
    assert len(tool.buttons) == len(LABELS) == len(KEYS)
    tool.buttons[LABELS.index("diagonal")].click()
    assert "1 of 3 labelled" in tool.progress.value and "m1" in tool.info.value
    tool.note.value = "best: block"
    tool.key.value = KEYS[LABELS.index("unsure")]
    assert tool.key.value == "" and "m2" in tool.info.value
    tool.back.click()
    assert "m1" in tool.info.value
    tool.key.value = "1"
    tool.per_map.value = True
    assert tool.scale == "map" and tool.output.outputs
    tool.key.value = "x"  # not a key: nothing happens
    tool.buttons[LABELS.index("skip")].click()
    assert "Every map of this session is labelled" in tool.info.value and tool.output.outputs == ()
    rows = pd.read_csv(path, keep_default_na=False)
    assert rows[["map_id", "label"]].values.tolist() == [
        ["m0", "diagonal"],
        ["m1", "unsure"],
        ["m1", "vertical"],
        ["m2", "skip"],
    ]
    assert rows["note"].tolist()[1] == "best: block" and set(rows["annotator"]) == {"ann"}
    resumed = label_maps([record("m0"), record("m1"), record("m2", 6)], path, "ann")
    assert "3 of 3 labelled" in resumed.progress.value
    with pytest.raises(ValueError, match="scale"):
        label_maps([record("m0")], tmp_path / "x.csv", "ann", scale="log")


def test_colour_scales():
    att = np.array([[0.2, 0.8], [0.5, 0.5]])
    fixed, own = map_norm(att), map_norm(att, "map")
    assert fixed(0.25) == pytest.approx(0.5) and fixed.vmax == 1.0
    assert own.vmax == pytest.approx(0.8) and own(0.4) == pytest.approx(0.5)


def test_shipped_independent_pass_agrees_as_documented():
    """Annotator C's committed pass against the final labels: the numbers the READMEs quote."""
    from pathlib import Path

    folder = Path(__file__).resolve().parents[3] / "data" / "pattern_labels"
    final = pd.read_csv(folder / "labels.csv")
    c = LabelFile(folder / "pass_c.csv", "C").labels()
    assert len(c) == len(final) == 455
    g = agreement(c, dict(zip(final["map_id"], final["label"])))
    assert g.n == 421
    assert g.observed == pytest.approx(0.777, abs=5e-4)
    assert g.kappa == pytest.approx(0.684, abs=5e-4)
    assert int(g.confusion.loc["vertical", "heterogeneous"]) == 38
