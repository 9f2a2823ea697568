"""Thread counts: shares, pinned blocks, and a process following a budget file."""

import os
import subprocess
import sys
import textwrap
import threading

import pytest
import torch

from bertology_utils.core import threads


def test_threads_per_job_is_each_jobs_share_of_the_cores(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(6)))
    assert [threads.threads_per_job(j) for j in (1, 2, 4, 6, 12, 0)] == [6, 3, 1, 1, 1, 6]


def test_budget_files_round_trip_and_bad_ones_read_as_none(tmp_path):
    path = tmp_path / "threads"
    assert threads.read_budget(path) is None  # missing
    threads.write_budget(path, 3)
    assert threads.read_budget(path) == 3 and [p.name for p in tmp_path.iterdir()] == ["threads"]
    for bad in ("", "two", "0", "-1", "1.5"):
        path.write_text(bad)
        assert threads.read_budget(path) is None


def test_torch_threads_pins_a_block_and_restores_the_setting():
    before = torch.get_num_threads()
    with threads.torch_threads(1):
        assert torch.get_num_threads() == 1
        with threads.torch_threads(2):
            assert torch.get_num_threads() == 2
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with threads.torch_threads(None):
        assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="n_jobs must be at least 1"):
        with threads.torch_threads(0):
            pass


def test_follow_budget_only_on_the_main_thread_and_a_free_signal(tmp_path, monkeypatch):
    answers = []
    helper = threading.Thread(target=lambda: answers.append(threads.follow_budget(tmp_path / "threads")))
    helper.start()
    helper.join()
    assert answers == [False]
    monkeypatch.delenv(threads.BUDGET_FILE_ENV, raising=False)
    assert threads.follow_budget() is False  # no file named


def _run(script: str, tmp_path, **env) -> list[str]:
    environment = {**os.environ, **dict.fromkeys(threads.THREAD_VARIABLES, "1"), **env}
    done = subprocess.run(
        [sys.executable, "-c", WAIT + textwrap.dedent(script)],
        env=environment,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


# Waits in Python (so the handler can run) until torch's setting changes or ``seconds`` pass.
WAIT = """
import time, torch
def wait_for_change(start, seconds=20):
    until = time.time() + seconds
    while torch.get_num_threads() == start and time.time() < until:
        time.sleep(0.05)
    return torch.get_num_threads()
"""


def test_a_process_started_with_the_budget_file_takes_a_new_budget(tmp_path):
    budget = tmp_path / "threads"
    threads.write_budget(budget, 1)
    script = f"""
    import os, torch
    import bertology_utils
    from bertology_utils.core import threads
    start = torch.get_num_threads()
    threads.write_budget({str(budget)!r}, 3)
    print(start, wait_for_change(start), os.environ["OMP_NUM_THREADS"], threads.BUDGET_FILE_ENV in os.environ)
    """
    # the variable is gone from the process's environment: what it starts keeps its own settings
    assert _run(script, tmp_path, **{threads.BUDGET_FILE_ENV: str(budget)}) == ["1", "3", "3", "False"]


def test_a_budget_arriving_in_a_pinned_block_waits_for_its_end(tmp_path):
    budget = tmp_path / "threads"
    threads.write_budget(budget, 1)
    script = f"""
    import time, torch
    from bertology_utils.core import threads
    assert threads.follow_budget({str(budget)!r})
    assert not threads.follow_budget({str(budget)!r})  # once per process
    with threads.torch_threads(1):
        threads.write_budget({str(budget)!r}, 2)
        inside = wait_for_change(1, seconds=3 * threads.POLL_SECONDS)  # held back
        with threads.torch_threads(1):
            pass
        inner = torch.get_num_threads()  # an inner block's end leaves the outer one's pin
    print(inside, inner, torch.get_num_threads())
    """
    assert _run(script, tmp_path) == ["1", "1", "2"]


def test_a_budget_arriving_while_torch_is_imported_waits_for_the_import(tmp_path):
    # A torch whose import runs Python for three polls, so the handler fires while it is half made (a kernel that
    # imports torch just as the notebook beside it finishes): it must not call into it, and must apply the budget after.
    # The new budget is written once the import has begun: written before it, a helper thread slowed by a loaded
    # machine could hand it over before torch existed (then only the environment takes it, which this torch does not
    # read), and the test failed so once under CI beside another job.
    budget = tmp_path / "threads"
    threads.write_budget(budget, 1)
    fake = tmp_path / "fake" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(
        "import time\n"
        "from bertology_utils.core import threads\n"
        f"threads.write_budget({str(budget)!r}, 2)\n"
        "until = time.time() + 3 * POLL\n"
        "while time.time() < until:\n"
        "    time.sleep(0.01)\n"
        "applied = []\n"
        "def set_num_threads(n):\n"
        "    applied.append(n)\n".replace("POLL", str(threads.POLL_SECONDS))
    )
    script = f"""
    import sys, time
    sys.path.insert(0, {str(fake.parent)!r})
    from bertology_utils.core import threads
    assert "torch" not in sys.modules and threads.follow_budget({str(budget)!r})
    import torch
    until = time.time() + 10 * threads.POLL_SECONDS
    while 2 not in torch.applied and time.time() < until:
        time.sleep(0.05)
    print(torch.applied[-1])
    """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2"]
