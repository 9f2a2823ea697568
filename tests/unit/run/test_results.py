"""The results folder: run names and the readers of a run's files."""

import json

import pytest

from bertology_utils.run import results


def test_default_run_name_format():
    name = results.default_run_name()
    assert len(name) == 15 and name[8] == "-" and name.replace("-", "").isdigit()


def test_run_entries_lists_run_json_then_unlisted_result_folders(tmp_path):
    from bertology_utils.core.errors import DataFormatError
    from bertology_utils.run.results import UNLISTED, run_entries

    run = tmp_path / "r"
    (run / "01_b").mkdir(parents=True)
    (run / "01_b" / "metrics.json").write_text("{}")
    (run / "02_c").mkdir()  # no results: not a notebook folder
    (run / "run.json").write_text(json.dumps({"notebooks": [{"name": "00_a", "status": "failed"}]}))
    assert run_entries(run) == [{"name": "00_a", "status": "failed"}, {"name": "01_b", "status": UNLISTED}]
    (run / "run.json").write_text(json.dumps({"notebooks": {"00_a": "ok"}}))
    with pytest.raises(DataFormatError, match="run.json.*'notebooks' must be a list"):
        run_entries(run)
