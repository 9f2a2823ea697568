"""core.locking.cache_lock: one holder of a cache entry at a time, across threads and processes."""

import subprocess
import sys
import threading
import time

from bertology_utils.core.locking import cache_lock


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


def test_other_entries_and_other_processes(tmp_path):
    entry = tmp_path / "a.zarr"
    code = (
        "import sys, time\nfrom bertology_utils.core.locking import cache_lock\n"
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
