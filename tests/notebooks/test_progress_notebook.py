"""The long stages of the notebooks report progress when they run, and ``bertology run`` says where each
notebook is and how long its last run with the same parameters took."""

import json
import re

import pytest
from notebook_runs import SMALL_PARAMETERS

from bertology_utils.run import display
from bertology_utils.run.harness import DEFAULT_NOTEBOOKS_DIR, run_notebooks

#: Notebook -> the progress bars (their descriptions; "…" stands for a data set's name) its long stages show at
#: small parameters, everything computed afresh. 04's probes and 07's relevance, L0 gates and pruning curves
#: are the functions tests/unit/run/test_display.py checks bar by bar; running those two notebooks afresh here
#: (98 s and 412 s at small parameters here, under load) would check no stage the other three and the unit tests miss.
LONG_STAGES = {
    "02_sep_noop": ["fine-tune SST-2", "gradients", "ablations"],
    "06_pruning": [
        "fine-tune SST-2",
        "ablation sweep SST-2",
        "importance SST-2",
        "pruning curve SST-2",
        "pruning curve SST-2: scoring",
        "random pruning SST-2, seed 0",
    ],
    "08_context_mixing": [
        "attention",
        "norm",
        "fine-tune SST-2",
        "attention+norm_layer+rollout+flow+alti+globenc+decompx+value_zeroing+value_zeroing_rollout",
        "word references",
    ],
    "10_sinks": ["sinks", "sink interventions"],
}


@pytest.fixture
def isolated_cache(tmp_path, monkeypatch):
    """A cache of each test's own: every stage computes, none reads back what another notebook stored
    (06, 07 and 08 fine-tune the same small SST-2 classifier)."""
    monkeypatch.setenv("BERTOLOGY_CACHE_DIR", str(tmp_path / "cache"))


def shown_text(executed) -> str:
    """Everything the executed notebook's cells showed: streams, and the text of displays (a tqdm widget's
    text form is its bar, description first)."""
    text = []
    for cell in json.loads(executed.read_text(encoding="utf-8"))["cells"]:
        for output in cell.get("outputs", []):
            text.append("".join(output.get("text", "")))
            text.append("".join(output.get("data", {}).get("text/plain", "")))
    return "\n".join(text)


def bar_pattern(desc: str) -> str:
    """A bar's text starts with its description and a colon: "fine-tune SST-2:  40%|####  | 2/5 [...]"."""
    return re.escape(desc).replace(re.escape("…"), r"[^:\n]+") + ":"


@pytest.mark.slow
@pytest.mark.notebook
@pytest.mark.parametrize("stem", LONG_STAGES)
def test_each_long_stage_of_a_notebook_shows_a_progress_bar(stem, tmp_path, isolated_cache):
    report = run_notebooks(
        [DEFAULT_NOTEBOOKS_DIR / f"{stem}.ipynb"],
        run_name="progress",
        parameters=SMALL_PARAMETERS[stem],
        results_root=tmp_path,
        progress=False,
    )
    assert report.ok, report.summary()
    shown = shown_text(tmp_path / "progress" / stem / f"{stem}.ipynb")
    missing = [desc for desc in LONG_STAGES[stem] if not re.search(bar_pattern(desc), shown)]
    assert not missing, f"no progress bar for {missing} in {stem}'s outputs"


@pytest.mark.slow
@pytest.mark.notebook
def test_progress_false_quiets_a_notebook(tmp_path, isolated_cache):
    stem = "00_tour"
    report = run_notebooks(
        [DEFAULT_NOTEBOOKS_DIR / f"{stem}.ipynb"],
        run_name="quiet",
        parameters={**SMALL_PARAMETERS[stem], "progress": False},
        results_root=tmp_path,
        progress=False,
    )
    assert report.ok, report.summary()
    assert "%|" not in shown_text(tmp_path / "quiet" / stem / f"{stem}.ipynb")  # a bar's "40%|####  |"


@pytest.mark.slow
@pytest.mark.notebook
def test_a_run_shows_each_notebooks_section_elapsed_and_expected_time(tmp_path, isolated_cache, capfd, monkeypatch):
    """Off a terminal (as here), status lines come every LOG_INTERVAL_S seconds; the second run of the
    same notebook with the same parameters expects the first one's time."""
    monkeypatch.setattr(display, "LOG_INTERVAL_S", 0.2)
    notebook = DEFAULT_NOTEBOOKS_DIR / "00_tour.ipynb"
    parameters = {**SMALL_PARAMETERS["00_tour"], "progress": False}
    first = run_notebooks([notebook], run_name="first", parameters=parameters, results_root=tmp_path)
    err = capfd.readouterr().err
    assert "[1/1] 00_tour ...\n" in err  # no earlier run to expect a time from
    assert "[1/1] 00_tour: Extracting attention (" in err  # a markdown heading of the notebook
    assert f"[1/1] 00_tour ok ({first.notebooks[0].duration_s:.1f} s)" in err
    assert "\r" not in err and "\x1b" not in err

    run_notebooks([notebook], run_name="second", parameters=parameters, results_root=tmp_path)
    err = capfd.readouterr().err
    expected = display.format_duration(first.notebooks[0].duration_s)
    assert f"[1/1] 00_tour ... (~{expected} expected from the last run with these parameters)" in err
    assert f" elapsed, ~{expected} expected)" in err

    run_notebooks([notebook], run_name="other", parameters={**parameters, "n_sentences": 3}, results_root=tmp_path)
    assert "expected" not in capfd.readouterr().err  # other parameters: no time to expect
