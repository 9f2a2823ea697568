"""core.files: files and folders written whole or not at all, also when the writer is killed."""

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

from bertology_utils.core.cache import CacheWarning, cached_arrays
from bertology_utils.core.files import atomic_path, atomic_write_text, is_partial, remove_leftovers


@pytest.mark.parametrize("stop", [RuntimeError("disk full"), KeyboardInterrupt(), SystemExit(143)])
def test_a_write_stopped_half_way_leaves_the_old_content_and_no_partial(tmp_path, stop):
    path = tmp_path / "metrics.json"
    atomic_write_text(path, "old")
    with pytest.raises(type(stop)), atomic_path(path) as partial:
        partial.write_text("half of the ne")
        raise stop
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["metrics.json"]
    with pytest.raises(type(stop)), atomic_path(tmp_path / "new.json") as partial:
        partial.write_text("half")
        raise stop
    assert os.listdir(tmp_path) == ["metrics.json"]  # no entry at all


@pytest.mark.parametrize("stop", [RuntimeError("disk full"), KeyboardInterrupt()])
def test_a_folder_appears_whole_or_not_at_all(tmp_path, stop):
    target = tmp_path / "entry"
    with atomic_path(target, folder=True) as partial:
        (partial / "a.txt").write_text("one")
    assert (target / "a.txt").read_text() == "one"
    with pytest.raises(type(stop)), atomic_path(target, folder=True) as partial:
        (partial / "a.txt").write_text("two")
        raise stop
    assert (target / "a.txt").read_text() == "one"  # the old entry stays whole
    with atomic_path(target, folder=True) as partial:
        (partial / "b.txt").write_text("three")
    assert sorted(p.name for p in target.iterdir()) == ["b.txt"]  # replaced, not merged
    assert os.listdir(tmp_path) == ["entry"]


def test_leftovers_of_dead_writers_are_removed_by_the_next_write(tmp_path):
    target = tmp_path / "entry"
    # a child writes a file and a folder under partial names, then dies without renaming them
    script = "import os\nfrom bertology_utils.core.files import atomic_path\n" + textwrap.dedent(
        f"""
        writes = [atomic_path({str(target)!r}, folder=True), atomic_path({str(tmp_path / "other.json")!r})]
        folder, file = [w.__enter__() for w in writes]
        (folder / "x").write_text("half")
        file.write_text("half")
        os._exit(0)
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True)
    left = sorted(os.listdir(tmp_path))
    assert len(left) == 2 and all(is_partial(name) for name in left)
    with atomic_path(target, folder=True) as partial:
        (partial / "x").write_text("whole")
    # the leftover of this target is gone; the other target's stays until that target is written
    assert set(os.listdir(tmp_path)) == {"entry", next(n for n in left if n.startswith(".other.json."))}
    assert remove_leftovers(tmp_path / "other.json") and os.listdir(tmp_path) == ["entry"]


_WRITER = """
import sys, warnings, numpy as np
from bertology_utils.core.cache import cached_arrays
from bertology_utils.core.files import atomic_write_text
root, n = sys.argv[1], int(sys.argv[2])
warnings.simplefilter("ignore")  # each write replaces an entry made for another key, with a CacheWarning
for i in range(10**6):  # rewrite the same entries until killed
    k = i % n
    cached_arrays(f"{root}/entry{k}", {"k": k, "i": i}, lambda: {"a": np.full(200_000, k, dtype=np.int64)})
    atomic_write_text(f"{root}/result{k}.json", '{"k": %d, "pad": "%s"}' % (k, "x" * 100_000))
    if i == n - 1:  # every entry written once: from now on the kill lands while they are rewritten
        print("ready", flush=True)
"""


def test_a_writer_killed_at_any_moment_leaves_whole_entries_or_none(tmp_path):
    """SIGKILL, nothing the writer can clean up after: every entry is absent or reads back whole."""
    n, rng = 3, random.Random(0)
    for _ in range(12):
        writer = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(tmp_path), str(n)], stdout=subprocess.PIPE, text=True
        )
        assert writer.stdout.readline() == "ready\n"
        time.sleep(rng.uniform(0.0, 0.3))
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        writer.stdout.close()
        for k in range(n):
            result = tmp_path / f"result{k}.json"
            if result.exists():
                assert json.loads(result.read_text())["k"] == k
            entry = tmp_path / f"entry{k}"
            if entry.exists():
                assert json.loads((entry / "key.json").read_text())["k"] == k
                with np.load(entry / "arrays.npz") as stored:
                    assert (stored["a"] == k).all() and stored["a"].shape == (200_000,)
    with warnings.catch_warnings():  # a later writer (replacing an entry of another key) clears the leftovers
        warnings.simplefilter("ignore", CacheWarning)
        cached_arrays(tmp_path / "entry0", {"k": 0}, lambda: {"a": np.zeros(1)})
    assert not [p for p in tmp_path.iterdir() if is_partial(p) and p.name.startswith(".entry0.")]
