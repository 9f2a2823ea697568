"""The store under SIGKILL: a short run of bench/bench_faults.py, every path, readers polling throughout."""

import sys
from pathlib import Path

import pytest

from bertology_utils.data import read_conllu

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))
bench_faults = pytest.importorskip("bench_faults")


@pytest.mark.slow
@pytest.mark.parametrize("path", bench_faults.PATHS)
def test_kills_leave_no_torn_read_no_lost_or_duplicated_item_and_equal_stores(path, tiny_model_dirs, tmp_path):
    corpus = read_conllu(ROOT / "data" / "sample" / "sample.conllu")[:24]
    results = bench_faults.run(
        (path,), kills=3, corpus=corpus, model=str(tiny_model_dirs["bert"]), load=0, writers=2, seed=7, root=tmp_path
    )
    print(bench_faults.table(results))
    stats = results[path]
    assert stats["torn examples"] == []
    assert (stats.get("torn", 0), stats.get("lost", 0), stats.get("duplicated", 0), stats.get("unequal", 0)) == (0,) * 4
    assert stats["kills"] >= 3 and stats["equal stores"] == stats["rounds"] >= 1
    assert stats["polls"] > 0 and stats["items"] == len(corpus) * stats["equal stores"] * (2 if path == "shards" else 1)


def test_the_documented_fault_table_is_the_recorded_runs():
    import json

    from bertology_utils.present.generated import read_block

    if not bench_faults.RECORD.is_file():
        pytest.skip("no recorded run yet: python bench/bench_faults.py --record")
    record = json.loads(bench_faults.RECORD.read_text())
    shown = read_block(bench_faults.PAGE, bench_faults.BLOCK)
    assert shown == bench_faults.doc_block(record).strip(), "run python bench/bench_faults.py --record"
    results = record["results"]
    assert set(results) == set(bench_faults.PATHS)
    assert sum(stats["kills"] for stats in results.values()) >= 300  # issue 42: the long run the docs report
    for stats in results.values():
        assert [stats.get(k, 0) for k in ("torn", "lost", "duplicated", "unequal")] == [0, 0, 0, 0]
