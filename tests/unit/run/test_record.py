"""What notebooks call to record their results: metrics, claims, skipped sections, figures, stage times."""

import json
import math

import numpy as np
import pytest

from bertology_utils.core.errors import BertologyError, DataFormatError
from bertology_utils.run import record, results


def test_record_skipped_replaces_a_section_and_keeps_everything(tmp_path, capsys):
    record.record_skipped("t.a", "first", output_dir=tmp_path)
    record.record_skipped("t.b", "other", output_dir=tmp_path, everything=True)
    recorded = record.record_skipped("t.a", "second", output_dir=tmp_path)
    assert recorded == {
        "everything": True,
        "sections": [{"section": "t.b", "reason": "other"}, {"section": "t.a", "reason": "second"}],
    }
    assert results.load_skipped(tmp_path) == recorded
    assert json.loads((tmp_path / "metrics.json").read_text()) == {"t.skipped": ["t.b", "t.a"]}
    assert capsys.readouterr().out.splitlines()[-1] == "skipped t.a: second"
    assert results.load_skipped(tmp_path / "none") == {"everything": False, "sections": []}
    with pytest.raises(BertologyError, match="section name and a reason"):
        record.record_skipped("t.c", "", output_dir=tmp_path)
    (tmp_path / results.SKIPPED_FILE).write_text('{"sections": [{"section": "x"}]}')
    with pytest.raises(DataFormatError, match="skipped.json"):
        results.load_skipped(tmp_path)


def test_record_metrics_merges_and_converts(tmp_path):
    torch = pytest.importorskip("torch")
    pd = pytest.importorskip("pandas")
    record.record_metrics({"a.kept": 1, "a.replaced": 1}, output_dir=tmp_path, declared=None)
    full = record.record_metrics(
        {
            "a.replaced": np.int64(2),
            "a.array": np.array([[0.5, np.nan]], dtype=np.float32),
            "a.tensor": torch.tensor(1.5),
            "a.bool": np.bool_(True),
            "a.inf": float("inf"),
            "a.path": tmp_path / "x",
            "a.series": pd.Series([1, 2], index=["u", "v"]),
        },
        output_dir=tmp_path,
        extra="text",
        declared=None,
    )
    expected = {
        "a.kept": 1,
        "a.replaced": 2,
        "a.array": [[0.5, None]],
        "a.tensor": 1.5,
        "a.bool": True,
        "a.inf": None,
        "a.path": str(tmp_path / "x"),
        "a.series": {"u": 1, "v": 2},
        "extra": "text",
    }
    assert full == expected
    text = (tmp_path / "metrics.json").read_text()
    assert text == json.dumps(expected, indent=2, sort_keys=True) + "\n"
    assert type(json.loads(text)["a.replaced"]) is int


def test_stage_times_add_up_per_task_and_stage_even_when_a_block_raises(monkeypatch):
    clock = iter([0.0, 2.0, 10.0, 13.0, 20.0, 20.5])
    monkeypatch.setattr(record.time, "perf_counter", lambda: next(clock))
    seconds = record.StageTimes()
    with seconds.timed("SST-2", "fine-tune"):
        pass
    with pytest.raises(RuntimeError), seconds.timed("SST-2", "fine-tune"):
        raise RuntimeError("a failed stage still spent its time")
    with seconds.timed("MRPC", "L0 gates"):
        pass
    assert seconds == {("SST-2", "fine-tune"): 5.0, ("MRPC", "L0 gates"): 0.5}
    assert seconds.of("SST-2") == {"fine-tune": 5.0}
    assert seconds.of("RTE") == {}
    assert seconds.total() == 5.5
    assert seconds.flat() == {"SST-2: fine-tune": 5.0, "MRPC: L0 gates": 0.5}


def test_record_claims_writes_claims_json_and_their_metrics(tmp_path):
    from bertology_utils.papers.claims import Claim, Verdict

    first = Claim(
        "same_layer_close",
        "Heads in the same layer are close",
        "Clark et al. 2019",
        "seen",
        "p = 0.01",
        Verdict.HOLDS,
        "p < 0.05",
        {"p_value": np.float64(0.01), "ratio": float("nan")},
    )
    other = Claim(
        "table1.det",
        "det: head beats offset",
        "Clark et al. 2019",
        "94.3 vs 51.7",
        "no data",
        Verdict.NOT_TESTABLE,
        "held out > offset",
    )
    record.record_claims([first, other], "x.claims", output_dir=tmp_path, declared=None)
    again = Claim(**{**first.to_dict(), "verdict": Verdict.DIFFERS, "values": {"p_value": 0.2}})
    recorded = record.record_claims(
        [again], "x.claims", output_dir=tmp_path, declared=None
    )  # replaces the first, keeps its place
    assert [(c.id, c.verdict) for c in recorded] == [
        ("same_layer_close", Verdict.DIFFERS),
        ("table1.det", Verdict.NOT_TESTABLE),
    ]
    assert results.load_claims(tmp_path) == recorded and results.load_claims(tmp_path / "none") == []
    stored = json.loads((tmp_path / "claims.json").read_text())["claims"]
    assert [c["key"] for c in stored] == ["x.claims.same_layer_close", "x.claims.table1.det"]
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert (
        metrics["x.claims.same_layer_close.verdict"] == "differs"
        and metrics["x.claims.same_layer_close.p_value"] == 0.2
    )
    assert metrics["x.claims.same_layer_close.ratio"] is None  # NaN, from the first recording
    assert metrics["x.claims.table1.det.verdict"] == "not testable"
    with pytest.raises(BertologyError, match="share an id"):
        record.record_claims([first, first], "x.claims", output_dir=tmp_path, declared=None)


def test_record_metrics_rejects_unknown_types(tmp_path):
    with pytest.raises(TypeError, match="object"):
        record.record_metrics({"a.b": object()}, output_dir=tmp_path, declared=None)


def test_interactive_output_dir(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    monkeypatch.setenv(results.RESULTS_DIR_ENV, str(tmp_path))
    assert results.results_dir() == tmp_path
    record.record_metrics(x=math.pi, declared=None)
    paths = record.save_figure(Figure(figsize=(1, 1)), "../Heads: layer 3/head 2.", formats=("png", "svg"))
    assert json.loads((tmp_path / "interactive" / "metrics.json").read_text()) == {"x": math.pi}
    figures = tmp_path / "interactive" / "figures"
    assert paths == [figures / "_Heads_layer_3_head_2.png", figures / "_Heads_layer_3_head_2.svg"]
    assert all(p.stat().st_size > 0 for p in paths)
