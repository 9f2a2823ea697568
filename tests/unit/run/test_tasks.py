"""run.tasks: a notebook's task parameter fine-tuned with its budget overrides, or recorded as skipped."""

from pathlib import Path

import pytest

from bertology_utils.core.cache import EntryBusy, cache_lock
from bertology_utils.core.errors import ModelNotAvailableError
from bertology_utils.interventions.finetuning import DEFAULT_BUDGETS, USER_TASK_BUDGET
from bertology_utils.run import StageTimes, fine_tune_task, task_budget, tasks
from bertology_utils.run.results import load_skipped

USER_TASK = Path(__file__).resolve().parents[2] / "data" / "user_task"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BERTOLOGY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("BERTOLOGY_OFFLINE", "1")


def test_task_budget_overrides_only_what_is_given():
    assert task_budget("SST-2") == DEFAULT_BUDGETS["SST-2"]
    budget = task_budget("SST-2", 32, 3, 16)
    assert (budget.train_examples, budget.epochs, budget.eval_examples) == (32, 3, 16)
    assert budget.learning_rate == DEFAULT_BUDGETS["SST-2"].learning_rate
    assert task_budget("RTE", None).train_examples is None  # None: the whole train split, not the default
    assert task_budget("RTE", "default", None, 8).epochs == DEFAULT_BUDGETS["RTE"].epochs


def test_missing_data_is_recorded_as_a_skipped_section(tmp_path, cache, capsys):
    assert fine_tune_task(tmp_path / "no-such-task", section="demo.task", output_dir=tmp_path) is None
    skipped = load_skipped(tmp_path)
    assert [s["section"] for s in skipped["sections"]] == ["demo.task"]
    assert "no-such-task" in skipped["sections"][0]["reason"] and not skipped["everything"]
    assert "skipped demo.task" in capsys.readouterr().out


def test_fine_tunes_with_the_overridden_budget_and_times_it(tiny_model_dirs, tmp_path, cache, capsys):
    times = StageTimes()
    run = fine_tune_task(
        USER_TASK, tiny_model_dirs["bert"], section="demo.user", train_examples=8, epochs=1, eval_examples=4,
        times=times, output_dir=tmp_path,
    )  # fmt: skip
    assert run is not None and run.name == "user_task"
    assert (run.budget.train_examples, run.budget.epochs, run.budget.eval_examples) == (8, 1, 4)
    assert run.budget.learning_rate == USER_TASK_BUDGET.learning_rate
    assert run.tuned.budget == run.budget and run.tuned.metrics["n"] == 4 and run.tuned.init == "pretrained"
    assert list(times) == [("user_task", "fine-tune")] and times.total() > 0
    assert "fine-tuned on user_task" in capsys.readouterr().out
    assert load_skipped(tmp_path)["sections"] == []
    again = dict(section="demo.user", train_examples=8, epochs=1, eval_examples=4, output_dir=tmp_path)
    with cache_lock(run.tuned.path):  # held as another process training this checkpoint holds it
        with pytest.raises(EntryBusy):
            fine_tune_task(USER_TASK, tiny_model_dirs["bert"], wait=False, **again)
    reused = fine_tune_task(USER_TASK, tiny_model_dirs["bert"], wait=False, **again)
    assert reused is not None and reused.tuned.from_cache and reused.tuned.path == run.tuned.path

    random = fine_tune_task(run.data, tiny_model_dirs["bert"], section="demo.user", train_examples=8, epochs=1,
                            eval_examples=4, init="random", times=times, output_dir=tmp_path)  # fmt: skip
    assert random is not None and random.data is run.data and random.tuned.init == "random"
    assert ("user_task", "fine-tune (random init)") in times


def test_a_failure_to_fine_tune_is_skipped_only_when_asked(tmp_path, cache):
    missing_model = str(tmp_path / "no-model")
    with pytest.raises(ModelNotAvailableError):
        fine_tune_task(USER_TASK, missing_model, section="demo.user", output_dir=tmp_path)
    assert (
        fine_tune_task(USER_TASK, missing_model, section="demo.user", skip_failures=True, output_dir=tmp_path) is None
    )
    (section,) = load_skipped(tmp_path)["sections"]
    assert section["section"] == "demo.user" and section["reason"].startswith("fine-tuning failed")


def test_seeds_are_fine_tuned_in_order_and_stop_where_the_data_is_missing(monkeypatch):
    calls = []

    def fake(task, model, *, section, seed, progress, **settings):
        calls.append((task, section, seed, settings))
        return None if task == "missing" else f"{task} {seed}"

    monkeypatch.setattr(tasks, "fine_tune_task", fake)
    found = tasks.fine_tune_seeds("SST-2", None, [3, 4], section="s", progress=False, epochs=1)
    assert found == {3: "SST-2 3", 4: "SST-2 4"} and calls[0] == ("SST-2", "s", 3, {"epochs": 1, "wait": False})
    calls.clear()
    assert tasks.fine_tune_seeds("missing", None, [3, 4], section="s", progress=False) == {} and len(calls) == 1


def test_every_task_is_fine_tuned_under_its_own_section(monkeypatch):
    def fake(task, model, *, section, progress, **settings):
        return None if task == "missing" else (section, settings)

    monkeypatch.setattr(tasks, "fine_tune_task", fake)
    found = tasks.fine_tune_tasks(["SST-2", "missing"], None, section="roles", progress=False, seed=3)
    assert found == {"SST-2": ("roles.SST-2", {"seed": 3, "wait": False}), "missing": None}


def test_checkpoints_another_process_is_training_come_after_the_others(monkeypatch):
    calls, building = [], {0, 1}  # another process trains seeds 0 and 1; both are done once this one waits

    def fake(task, model, *, section, seed, progress, wait, **settings):
        calls.append((seed, wait))
        if seed in building and not wait:
            raise EntryBusy(f"seed {seed}")
        return f"{task} {seed}"

    monkeypatch.setattr(tasks, "fine_tune_task", fake)
    found = tasks.fine_tune_seeds("SST-2", None, [0, 1, 2, 3], section="s", progress=False)
    assert list(found.items()) == [(s, f"SST-2 {s}") for s in (0, 1, 2, 3)]  # in the seeds' order all the same
    assert calls == [(0, False), (1, False), (2, False), (3, False), (0, True), (1, True)]

    def fake_task(task, model, *, section, progress, wait, **settings):
        calls.append((task, wait))
        if task == "SST-2" and not wait:
            raise EntryBusy(task)
        return None if task == "missing" else task

    calls.clear()
    monkeypatch.setattr(tasks, "fine_tune_task", fake_task)
    found = tasks.fine_tune_tasks(["SST-2", "missing", "RTE"], None, section="roles", progress=False)
    assert list(found) == ["SST-2", "missing", "RTE"] and found["missing"] is None and found["SST-2"] == "SST-2"
    assert calls == [("SST-2", False), ("missing", False), ("RTE", False), ("SST-2", True)]


def test_missing_data_stops_the_seeds_even_after_a_busy_one(monkeypatch):
    calls = []

    def fake(task, model, *, section, seed, progress, wait, **settings):
        calls.append((seed, wait))
        if seed == 0 and not wait:
            raise EntryBusy("seed 0")
        return None  # the data is missing

    monkeypatch.setattr(tasks, "fine_tune_task", fake)
    assert tasks.fine_tune_seeds("SST-2", None, [0, 1, 2], section="s", progress=False) == {}
    assert calls == [(0, False), (1, False)]
