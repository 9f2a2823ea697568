"""Regression checks: a run's metrics against reference files with per-metric tolerances."""

import json
import subprocess
import sys

import pytest
from test_harness import BAD_CELLS, write_notebook

from bertology_utils.cli import main
from bertology_utils.core.errors import DataFormatError
from bertology_utils.run import regression
from bertology_utils.run.refresh import update_references
from bertology_utils.run.regression import Tolerance, check_run, compare_metrics, read_reference

REFERENCE = {
    "_comment": ["hand-written for these tests"],
    "parameters": {"n": 4},
    "metrics": {
        "t.mean": {"value": 0.5, "abs": 0.01},
        "t.share": {"value": 200.0, "rel": 0.05, "note": "varies with the seed"},
        "t.count": {"value": 12},
        "t.model": {"value": "tiny"},
        "t.by_layer": {"value": [0.1, 0.2, 0.3], "abs": 0.001},
        "t.seconds": {"value": 3.0, "ignore": "timing"},
    },
}
METRICS = {
    "t.mean": 0.5,
    "t.share": 200.0,
    "t.count": 12,
    "t.model": "tiny",
    "t.by_layer": [0.1, 0.2, 0.3],
    "t.seconds": 3.0,
}


def write_json(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


VERSIONS = {"python": "3.11.7", "platform": "linux-x86_64", "torch": "2.13.0+cpu", "numpy": "2.4.6"}


def make_run(folder, metrics, failed=(), parameters=None, versions=None):
    """A run folder as the harness leaves it: run.json and <stem>/metrics.json (none for failed notebooks)."""
    notebooks = []
    for stem, values in metrics.items():
        if stem not in failed:
            write_json(folder / stem / "metrics.json", values)
        notebooks.append(
            {
                "name": stem,
                "status": "failed" if stem in failed else "ok",
                "parameters": (parameters or {}).get(stem, {"n": 4}),
            }
        )
    write_json(folder / "run.json", {"run_name": folder.name, "notebooks": notebooks, "versions": versions})
    return folder


@pytest.fixture
def references(tmp_path):
    folder = tmp_path / "refs"
    write_json(folder / "00_a.json", REFERENCE)
    return folder


def rows(result):
    return {(d.notebook, d.metric): d for d in result.differences}


def test_identical_metrics_pass_and_every_metric_is_listed(tmp_path, references):
    result = check_run(make_run(tmp_path / "run", {"00_a": METRICS}), references)
    assert result.ok and result.count("ok") == len(METRICS) == len(result.differences)
    assert result.report().startswith(f"check against {references}: ok (0 regressed, 0 missing, 0 new, 6 ok)")


@pytest.fixture
def reference(references):
    return read_reference(references / "00_a.json")


def compared(reference, **changes):
    return {d.metric: d for d in compare_metrics("00_a", reference, {**METRICS, **changes})}


@pytest.mark.parametrize(
    "metric, value, status",
    [
        ("t.mean", 0.509, "ok"),
        ("t.mean", 0.491, "ok"),
        ("t.mean", 0.511, "regressed"),  # abs 0.01
        ("t.share", 209.0, "ok"),
        ("t.share", 190.0, "ok"),
        ("t.share", 210.4, "regressed"),  # rel: 5% of 200
        ("t.count", 12.0, "ok"),
        ("t.count", 13, "regressed"),  # exact unless stated
        ("t.model", "tiny", "ok"),
        ("t.model", "tinier", "regressed"),
        ("t.model", None, "regressed"),
        ("t.by_layer", [0.1, 0.2009, 0.3], "ok"),
        ("t.by_layer", [0.1, 0.2, 0.302], "regressed"),
        ("t.by_layer", [0.1, 0.2], "regressed"),
        ("t.seconds", 99.0, "ok"),  # ignored: timing
    ],
)
def test_tolerances(reference, metric, value, status):
    assert compared(reference, **{metric: value})[metric].status == status


def test_abs_and_rel_together_allow_the_larger():
    tolerance = Tolerance(abs=1e-3, rel=0.01)
    assert tolerance.allows(1000.0, 1009.0) and not tolerance.allows(1000.0, 1011.0)  # rel governs large values
    assert tolerance.allows(0.0, 0.0009) and not tolerance.allows(0.0, 0.0011)  # abs governs near zero
    assert Tolerance().allows(2, 2) and not Tolerance().allows(2, 2.0000001)
    assert tolerance.describe() == "abs 0.001 or rel 0.01"
    assert Tolerance().describe() == "exact" and Tolerance(ignore="timing").describe() == "not compared (timing)"


def test_a_regression_says_by_how_much_and_where(reference):
    d = compared(reference, **{"t.share": 230.0})["t.share"]
    assert (d.reference, d.value, d.tolerance) == (200.0, 230.0, "rel 0.05")
    assert d.detail == "off by +30 (+15%)"
    d = compared(reference, **{"t.by_layer": [0.1, 0.25, 0.31]})["t.by_layer"]
    assert d.detail == "at [1]: off by +0.05 (+25%); 1 more off"  # the largest of the two first
    d = compared(reference, **{"t.model": "other"})["t.model"]
    assert (d.status, d.detail) == ("regressed", "not equal")


def test_nested_values_name_keys_and_types(tmp_path):
    ref = {"value": {"a": [1, 2], "b": "x"}}
    reference = read_reference(write_json(tmp_path / "00_n.json", {"metrics": {"m": ref}}))
    [d] = compare_metrics("00_n", reference, {"m": {"a": [1, 2], "c": "x"}})
    assert d.status == "regressed" and d.detail == "keys differ: missing 'b'; new 'c'"
    [d] = compare_metrics("00_n", reference, {"m": {"a": [1, True], "b": "x"}})
    assert d.detail == "at ['a'][1]: a boolean, reference a number"
    [d] = compare_metrics("00_n", reference, {"m": {"a": [1, 2], "b": "x"}})
    assert d.status == "ok"


def test_missing_metric_fails_and_new_metric_is_only_reported(tmp_path, references):
    metrics = {k: v for k, v in METRICS.items() if k != "t.count"}
    result = check_run(make_run(tmp_path / "run", {"00_a": {**metrics, "t.extra": 7}}), references)
    by_metric = rows(result)
    assert by_metric["00_a", "t.count"].status == "missing" and by_metric["00_a", "t.count"].value is None
    assert by_metric["00_a", "t.extra"].status == "new" and by_metric["00_a", "t.extra"].reference is None
    assert not result.ok
    text = result.report()
    assert "FAILED (0 regressed, 1 missing, 1 new, 5 ok)" in text
    assert "missing    00_a  t.count: reference 12, not recorded by this run" in text
    assert "new        00_a  t.extra: value 7, not in the reference" in text

    only_new = check_run(make_run(tmp_path / "run2", {"00_a": {**METRICS, "t.extra": 7}}), references)
    assert only_new.ok and only_new.count("new") == 1


def test_only_notebooks_in_the_run_are_compared(tmp_path, references):
    write_json(references / "01_b.json", {"metrics": {"b.x": {"value": 1}}})
    result = check_run(make_run(tmp_path / "run", {"00_a": METRICS, "02_c": {"c.y": 2}}), references)
    assert result.ok and result.skipped == ["01_b"]
    assert {d.notebook for d in result.differences} == {"00_a", "02_c"}
    assert rows(result)["02_c", "c.y"].status == "new"
    text = result.report()
    assert "skipped: 01_b (not in this run; its reference is not compared)" in text
    assert "note: 02_c has no reference" in text


def test_failed_notebook_and_other_parameters_are_explained(tmp_path, references):
    result = check_run(make_run(tmp_path / "run", {"00_a": METRICS}, failed={"00_a"}), references)
    assert not result.ok and result.count("missing") == len(METRICS)
    assert "note: 00_a failed: the reference metrics it did not record are missing" in result.report()
    result = check_run(make_run(tmp_path / "run2", {"00_a": METRICS}, parameters={"00_a": {"n": 8}}), references)
    assert 'note: 00_a ran with parameters {"n": 8}; its reference was made with {"n": 4}' in result.report()


def test_cli_check_shifted_metric_exits_1_with_a_readable_diff(tmp_path, references, capsys):
    run = make_run(tmp_path / "run", {"00_a": {**METRICS, "t.mean": 0.6}})
    assert main(["check", str(run), str(references)]) == 1
    out = capsys.readouterr().out
    assert f"check against {references}: FAILED (1 regressed, 0 missing, 0 new, 5 ok)" in out
    assert "regressed  00_a  t.mean: reference 0.5, value 0.6: off by +0.1 (+20%); tolerance abs 0.01" in out
    check = json.loads((run / "check.json").read_text())
    assert set(check) == {"reference", "ok", "differences", "versions"}
    assert check["versions"] == {"differences": [], "compared": [], "unknown": ["00_a"]}
    assert check["reference"] == str(references) and check["ok"] is False
    assert len(check["differences"]) == len(METRICS)
    assert {
        "notebook": "00_a",
        "metric": "t.mean",
        "kind": None,  # an undeclared metric: its reference's tolerance alone applies
        "reference": 0.5,
        "value": 0.6,
        "tolerance": "abs 0.01",
        "status": "regressed",
        "detail": "off by +0.1 (+20%)",
    } in check["differences"]
    assert {
        "notebook": "00_a",
        "metric": "t.count",
        "kind": None,
        "reference": 12,
        "value": 12,
        "tolerance": "exact",
        "status": "ok",
    } in check["differences"]

    assert main(["check", str(make_run(tmp_path / "ok", {"00_a": METRICS})), str(references)]) == 0
    assert json.loads((tmp_path / "ok" / "check.json").read_text())["ok"] is True


def test_versions_that_differ_are_a_warning_at_the_top_and_in_check_json(tmp_path, references, capsys):
    write_json(references / "00_a.json", {**REFERENCE, "versions": VERSIONS})
    write_json(references / "01_b.json", {**REFERENCE, "versions": {**VERSIONS, "numpy": "2.4.5"}})
    run_versions = {**VERSIONS, "torch": "2.14.1+cpu", "scipy": "1.17.1"}  # scipy: not in the references
    run = make_run(tmp_path / "run", {"00_a": METRICS, "01_b": METRICS}, versions=run_versions)
    assert main(["check", str(run), str(references)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:4] == [
        "WARNING: versions differ from those the references were made with (not a failure):",
        "  torch 2.14.1+cpu, reference 2.13.0+cpu",
        "  numpy 2.4.6, reference 2.4.5 (01_b)",
        f"check against {references}: ok (0 regressed, 0 missing, 0 new, 12 ok)",
    ]
    check = json.loads((run / "check.json").read_text())
    assert check["ok"] is True
    assert check["versions"] == {
        "differences": [
            {"name": "torch", "reference": "2.13.0+cpu", "value": "2.14.1+cpu", "notebooks": ["00_a", "01_b"]},
            {"name": "numpy", "reference": "2.4.5", "value": "2.4.6", "notebooks": ["01_b"]},
        ],
        "compared": ["00_a", "01_b"],
        "unknown": [],
    }
    # The same versions: nothing to say.
    same = check_run(make_run(tmp_path / "same", {"00_a": METRICS}, versions=VERSIONS), references)
    assert same.versions.differences == [] and same.versions.compared == ["00_a"]
    assert same.report().startswith("check against")


def test_versions_unknown_when_the_reference_or_the_run_records_none(tmp_path, references):
    reference = read_reference(references / "00_a.json")
    assert reference.versions is None  # an older reference reads fine
    result = check_run(make_run(tmp_path / "run", {"00_a": METRICS}, versions=VERSIONS), references)
    assert result.ok and result.versions.unknown == ["00_a"] and result.versions.differences == []
    assert result.report().splitlines()[-1] == (
        "  note: versions unknown for 00_a: the reference or the run records none"
    )
    write_json(references / "00_a.json", {**REFERENCE, "versions": VERSIONS})
    assert check_run(make_run(tmp_path / "old", {"00_a": METRICS}), references).versions.unknown == ["00_a"]


def test_cli_check_finds_a_run_by_name(tmp_path, references, monkeypatch, capsys):
    make_run(tmp_path / "results" / "nightly", {"00_a": METRICS})
    monkeypatch.setenv("BERTOLOGY_RESULTS_DIR", str(tmp_path / "results"))
    assert main(["check", "nightly", str(references)]) == 0
    assert (tmp_path / "results" / "nightly" / "check.json").is_file()


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "a reference file holds a JSON object"),
        ('{"metrics": {"m": 3}}', "metric 'm': expected an object with a 'value', got 3"),
        ('{"metrics": {"m": {"value": 1, "tol": 0.1}}}', "metric 'm': unknown keys ['tol']"),
        ('{"metrics": {"m": {"value": 1, "abs": -1}}}', "metric 'm': 'abs' must be a number >= 0, got -1"),
        ('{"metrics": {"m": {"value": 1, "rel": "5%"}}}', "metric 'm': 'rel' must be a number >= 0"),
        ('{"metrics": {"m": {"value": NaN}}}', "metric 'm': NaN and infinities cannot be compared"),
        ('{"metrics": {"m": {"value": 1, "ignore": ""}}}', "metric 'm': 'ignore' must be a non-empty string"),
        ('{"metric": {}}', "unknown keys ['metric']"),
        ('{"parameters": {}}', "'metrics' must be an object"),
        ('{"default": {"abs": 1, "ignore": "x"}, "metrics": {}}', "'default': unknown keys ['ignore']"),
        ('{"versions": ["torch"], "metrics": {}}', "'versions' must be an object"),
        ('{"versions": {"torch": 2.13}, "metrics": {}}', "'versions' must be an object"),
    ],
)
def test_malformed_reference_names_the_file(tmp_path, references, content, message, capsys):
    bad = references / "03_bad.json"
    bad.write_text(content, encoding="utf-8")
    with pytest.raises(DataFormatError, match="03_bad.json") as excinfo:
        read_reference(bad)
    assert message in str(excinfo.value)
    run = make_run(tmp_path / "run", {"00_a": METRICS})
    assert main(["check", str(run), str(references)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"bertology: error: {bad}: ") and message in err and "Traceback" not in err
    assert not (run / "check.json").exists()


def test_missing_or_empty_reference_folder(tmp_path, capsys):
    run = make_run(tmp_path / "run", {"00_a": METRICS})
    assert main(["check", str(run), str(tmp_path / "none")]) == 2
    assert "no reference folder" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["check", str(run), str(tmp_path / "empty")]) == 2
    assert "no reference files" in capsys.readouterr().err
    assert regression.read_references(tmp_path / "none", allow_empty=True) == {}


# --------------------------------------------------------------------------- refreshing


def test_refresh_keeps_tolerances_notes_and_comments(tmp_path, references):
    new = {**METRICS, "t.mean": 0.7, "t.fresh": [0.25, 1], "t.label": "x", "t.fit_seconds": 2.5}
    del new["t.count"]
    run = make_run(
        tmp_path / "run",
        {"00_a": new, "01_b": {"b.x": 1.5}, "02_c": {}},
        failed={"02_c"},
        parameters={"00_a": {"n": 5}, "01_b": {}},
        versions=VERSIONS,
    )
    refresh = update_references(run, references)
    assert refresh.written == [references / "00_a.json", references / "01_b.json"] and refresh.not_written == ["02_c"]
    assert not (references / "02_c.json").exists()
    changes = rows(refresh.changes)
    assert changes["00_a", "t.mean"].status == "regressed" and changes["00_a", "t.count"].status == "missing"
    assert changes["01_b", "b.x"].status == "new"
    # a notebook that skipped everything keeps a reference too: what it recorded skipping
    skipped = make_run(tmp_path / "skipped", {"03_d": {"d.skipped": ["d"]}})
    record = json.loads((skipped / "run.json").read_text())
    record["notebooks"][0]["status"] = "skipped"
    (skipped / "run.json").write_text(json.dumps(record))
    assert update_references(skipped, references).written == [references / "03_d.json"]

    data = json.loads((references / "00_a.json").read_text())
    assert data["_comment"] == REFERENCE["_comment"] and data["parameters"] == {"n": 5}
    assert data["versions"] == VERSIONS and read_reference(references / "01_b.json").versions == VERSIONS
    assert refresh.changes.versions.unknown == ["00_a"]  # the old reference recorded none
    metrics = data["metrics"]
    assert metrics["t.mean"] == {"value": 0.7, "abs": 0.01}
    assert metrics["t.share"] == {"value": 200.0, "rel": 0.05, "note": "varies with the seed"}
    assert metrics["t.seconds"] == {"value": 3.0, "ignore": "timing"}
    assert "t.count" not in metrics
    default = {"abs": regression.DEFAULT_TOLERANCE.abs, "rel": regression.DEFAULT_TOLERANCE.rel}
    assert metrics["t.fresh"] == {"value": [0.25, 1], **default}
    assert metrics["t.label"] == {"value": "x"}
    assert metrics["t.fit_seconds"]["ignore"].startswith("timing")
    # One line per metric, so that a changed value is one changed line in git diff.
    assert '    "t.share": {"value": 200.0, "rel": 0.05, "note": "varies with the seed"},' in (
        (references / "00_a.json").read_text().splitlines()
    )
    # A refreshed reference passes against the run it came from, versions included.
    again = check_run(run, references)
    assert again.count("regressed") == 0 and again.versions.differences == [] and again.versions.unknown == []
    # A run that records no versions leaves none in the references it refreshes: unknown, not stale.
    update_references(make_run(tmp_path / "bare", {"00_a": new}), references)
    assert "versions" not in json.loads((references / "00_a.json").read_text())


def test_refresh_uses_the_files_default_for_new_floats(tmp_path, references):
    write_json(references / "00_a.json", {**REFERENCE, "default": {"rel": 0.2}})
    update_references(make_run(tmp_path / "run", {"00_a": {**METRICS, "t.new": 1.0}}), references)
    assert json.loads((references / "00_a.json").read_text())["metrics"]["t.new"] == {"value": 1.0, "rel": 0.2}


# --------------------------------------------------------------------------- bertology run --check / --update-reference

METRIC_CELL = (
    "from bertology_utils.run.record import record_metrics\n"
    "record_metrics({'t.n': n, 't.half': n / 2, 't.name': 'nb'}, output_dir=output_dir, declared=None)"
)


@pytest.mark.notebook
def test_run_check_and_update_reference(tmp_path, capsys):
    nb = write_notebook(tmp_path / "00_t.ipynb", METRIC_CELL)
    bad = write_notebook(tmp_path / "01_bad.ipynb", *BAD_CELLS)
    refs, res = tmp_path / "refs", tmp_path / "res"
    common = ["--results-dir", str(res)]
    assert main(["run", str(nb), "-p", "n", "4", "--run-name", "make", "--update-reference", str(refs), *common]) == 0
    assert "wrote 1 reference in" in capsys.readouterr().out
    reference = read_reference(refs / "00_t.json")
    assert reference.metrics == {"t.n": 4, "t.half": 2.0, "t.name": "nb"} and reference.parameters == {"n": 4}

    assert main(["run", str(nb), "-p", "n", "4", "--run-name", "same", "--check", str(refs), *common]) == 0
    assert "ok (0 regressed, 0 missing, 0 new, 3 ok)" in capsys.readouterr().out
    assert json.loads((res / "same" / "check.json").read_text())["ok"] is True

    assert main(["run", str(nb), "-p", "n", "5", "--run-name", "shifted", "--check", str(refs), *common]) == 1
    out = capsys.readouterr().out
    assert "regressed  00_t  t.n: reference 4, value 5: off by +1 (+25%); tolerance exact" in out
    assert "regressed  00_t  t.half: reference 2, value 2.5" in out
    assert f"check: {res / 'shifted' / 'check.json'}" in out

    # A failing notebook: named with its cell, the others still run and are checked; exit 1.
    assert main(["run", str(bad), str(nb), "-p", "n", "4", "--run-name", "broken", "--check", str(refs), *common]) == 1
    out = capsys.readouterr().out
    assert "notebook 01_bad failed in cell 2 (exec count 4): ValueError: boom" in out
    assert "ok (0 regressed, 0 missing, 0 new, 3 ok)" in out and "note: 01_bad has no reference" in out
    assert json.loads((res / "broken" / "check.json").read_text())["ok"] is True  # the comparison itself passed

    # A refresh does not overwrite the reference of a notebook that failed.
    assert main(["run", str(bad), "--run-name", "b2", "--update-reference", str(refs), *common]) == 1
    assert "not updated: 01_bad failed" in capsys.readouterr().out
    assert not (refs / "01_bad.json").exists()


def test_run_with_a_malformed_reference_stops_before_running(tmp_path, capsys):
    nb = write_notebook(tmp_path / "00_t.ipynb", METRIC_CELL)
    (tmp_path / "refs").mkdir()
    bad = write_json(tmp_path / "refs" / "00_t.json", {"metrics": {"t.n": {"value": 4, "abs": "x"}}})
    for option in ("--check", "--update-reference"):
        assert main(["run", str(nb), option, str(tmp_path / "refs"), "--results-dir", str(tmp_path / "res")]) == 2
        assert f"bertology: error: {bad}: metric 't.n': 'abs' must be a number" in capsys.readouterr().err
    assert not (tmp_path / "res").exists()  # nothing ran
    assert main(["run", str(nb), "--check", "a", "--update-reference", "b"]) == 2
    assert "not allowed with argument" in capsys.readouterr().err


@pytest.mark.notebook
def test_params_file_sets_parameters_per_notebook(tmp_path, capsys):
    a = write_notebook(tmp_path / "00_a.ipynb", METRIC_CELL)
    b = write_notebook(tmp_path / "01_b.ipynb", METRIC_CELL)
    params = write_json(tmp_path / "p.json", {"00_a": {"n": 7}, "01_b": {"n": 9}})
    res = tmp_path / "res"
    assert (
        main(
            [
                "run",
                str(a),
                str(b),
                "--params-file",
                str(params),
                "-p",
                "model_name",
                "m",
                "--run-name",
                "r",
                "--results-dir",
                str(res),
            ]
        )
        == 0
    )
    run = json.loads((res / "r" / "run.json").read_text())
    assert [nb["parameters"] for nb in run["notebooks"]] == [{"n": 7, "model_name": "m"}, {"n": 9, "model_name": "m"}]
    assert json.loads((res / "r" / "01_b" / "metrics.json").read_text())["t.n"] == 9
    # -p wins over the file; '-' reads the file from stdin.
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bertology_utils",
            "run",
            str(a),
            "--params-file",
            "-",
            "-p",
            "n",
            "1",
            "--run-name",
            "s",
            "--results-dir",
            str(res),
        ],
        input='{"00_a": {"n": 7}}',
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads((res / "s" / "00_a" / "metrics.json").read_text())["t.n"] == 1


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"00_zz": {"n": 1}}', "no notebook named 00_zz"),
        ('{"00_a": 3}', "expected a JSON object: notebook stem -> {parameter: value}"),
        ('{"00_a": {"not a name": 1}}', "parameter names must be Python identifiers: 00_a: not a name"),
        ('{"00_a": {"output_dir": "/tmp"}}', "output_dir is set by the harness"),
        ("", "not valid JSON"),
    ],
)
def test_bad_params_file_is_a_usage_error(tmp_path, content, message, capsys):
    nb = write_notebook(tmp_path / "00_a.ipynb", METRIC_CELL)
    params = tmp_path / "p.json"
    params.write_text(content, encoding="utf-8")
    assert main(["run", str(nb), "--params-file", str(params), "--results-dir", str(tmp_path / "res")]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "res").exists()
