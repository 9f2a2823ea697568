"""core.cache: entry names, one holder of an entry at a time (threads and processes), whole writes, stored arrays."""

import subprocess
import sys
import threading
import time

import numpy as np
import pandas as pd
import pytest

from bertology_utils.core.cache import (
    CacheWarning,
    EntryBusy,
    busy_last,
    cache_lock,
    cached_arrays,
    cached_frames,
    entry_name,
    key_digest,
)


def test_a_second_holder_waits_for_the_first(tmp_path):
    entry = tmp_path / "cache" / "store.zarr"
    events = []
    held = threading.Event()

    def first():
        with cache_lock(entry):
            held.set()
            time.sleep(0.3)
            events.append("first done")

    thread = threading.Thread(target=first)
    thread.start()
    held.wait()
    with cache_lock(entry):
        events.append("second in")
    thread.join()
    assert events == ["first done", "second in"]
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [".locks"]  # nothing beside the entries


def test_a_holder_that_will_not_wait_is_told_at_once(tmp_path):
    entry = tmp_path / "cache" / "checkpoint"
    with cache_lock(entry):
        start = time.perf_counter()
        with pytest.raises(EntryBusy, match="checkpoint"), cache_lock(entry, wait=False):
            pass
        assert time.perf_counter() - start < 0.5
    with cache_lock(entry, wait=False):  # free again: taken without waiting
        pass


def test_entries_another_process_is_building_come_last():
    calls, building = [], {"b", "d"}

    def build(key, wait):
        calls.append((key, wait))
        if key in building and not wait:
            raise EntryBusy(key)
        return key.upper()

    assert list(busy_last("abcd", build)) == [("a", "A"), ("c", "C"), ("b", "B"), ("d", "D")]
    assert calls == [("a", False), ("b", False), ("c", False), ("d", False), ("b", True), ("d", True)]
    calls.clear()
    first = busy_last("abcd", build)
    assert next(first) == ("a", "A")
    first.close()  # stopped after the first: nothing more is built
    assert calls == [("a", False)]


def test_other_entries_and_other_processes(tmp_path):
    entry = tmp_path / "a.zarr"
    code = (
        "import sys, time\nfrom bertology_utils.core.cache import cache_lock\n"
        f"with cache_lock({str(entry)!r}):\n    print('locked', flush=True)\n    time.sleep(1.0)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "locked"
    with cache_lock(tmp_path / "b.zarr"):  # another entry: no wait
        pass
    start = time.perf_counter()
    with cache_lock(entry):
        waited = time.perf_counter() - start
    child.wait()
    assert waited > 0.3  # the child held it


def test_entry_names_follow_the_whole_key():
    key = {"model": {"sha256": "ab"}, "n": 3, "shape": (6, 12)}
    assert key_digest(key) == key_digest({"shape": [6, 12], "n": 3, "model": {"sha256": "ab"}})  # order, tuples
    assert key_digest(key) != key_digest({**key, "n": 4})
    assert entry_name("all-MiniLM / SST-2", key) == f"all-MiniLM_SST-2-{key_digest(key)}"


def test_cached_arrays_compute_once_and_check_their_key(tmp_path):
    calls = []

    def compute():
        calls.append(1)
        return {"logits": np.arange(6.0).reshape(2, 3), "order": np.array([[0, 1], [2, 3]])}

    key = {"what": "test", "version": 1}
    folder = tmp_path / entry_name("result", key)
    first, reused = cached_arrays(folder, key, compute)
    again, reused_again = cached_arrays(folder, key, compute)
    assert (reused, reused_again, len(calls)) == (False, True, 1)
    for name in first:
        np.testing.assert_array_equal(again[name], first[name])
        assert again[name].dtype == first[name].dtype
    (folder / "arrays.npz").write_bytes(b"garbage")
    with pytest.warns(CacheWarning, match="corrupt"):
        rebuilt, reused = cached_arrays(folder, key, compute)
    assert not reused and len(calls) == 2
    np.testing.assert_array_equal(rebuilt["logits"], first["logits"])
    with pytest.warns(CacheWarning, match="recorded key"):  # a folder holding another key's arrays
        cached_arrays(folder, {"what": "other"}, compute)


def test_cached_frames_read_back_every_value_and_column_in_order(tmp_path):
    rng = np.random.default_rng(0)
    tables = {
        "table": pd.DataFrame(
            {
                "metric": ["uuas", "dspr", "é, “odd” text", ""],
                "value": rng.random(4) / 3,  # floats no short decimal prints exactly
                "layer": np.array([3, 0, 12, 1], dtype=np.int64),
                "flag": [True, False, True, True],
            }
        ),
        "empty": pd.DataFrame({"layer": np.zeros(0, dtype=np.int64), "value": np.zeros(0)}),
    }
    calls = []

    def compute():
        calls.append(1)
        return tables

    key = {"what": "tables"}
    folder = tmp_path / entry_name("tables", key)
    first, reused = cached_frames(folder, key, compute)
    again, reused_again = cached_frames(folder, key, compute)
    assert (reused, reused_again, len(calls)) == (False, True, 1)
    assert list(again) == ["table", "empty"]
    for name, table in tables.items():
        assert list(again[name].columns) == list(table.columns)
        pd.testing.assert_frame_equal(again[name], table, check_exact=True, check_dtype=False)
        assert [again[name][c].dtype.kind for c in table.columns] == [table[c].dtype.kind for c in table.columns]
    (folder / "frames.npz").write_bytes(b"garbage")
    with pytest.warns(CacheWarning, match="corrupt"):
        _, reused = cached_frames(folder, key, compute)
    assert not reused and len(calls) == 2
