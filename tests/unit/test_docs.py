"""The front door: the README as a short front page, the findings tables generated from committed records,
the blocks generators write, and the documentation site built strict and offline."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bertology_utils.cli import main
from bertology_utils.core.errors import BertologyError, DataFormatError
from bertology_utils.papers.claims import Claim, Interval, Seeds
from bertology_utils.present.findings import (
    FINDINGS_VERSION,
    claim_uncertainty,
    claims_tables,
    load_findings,
    record_findings,
    runs_table,
    runs_tables,
    save_findings,
    summary_table,
)
from bertology_utils.present.generated import has_block, read_block, write_block
from bertology_utils.run.record import record_claims, record_metrics, record_skipped

ROOT = Path(__file__).resolve().parents[2]
RECORDS = sorted((ROOT / "docs" / "findings").glob("*.json"))
MKDOCS = Path(sys.executable).with_name("mkdocs")


def _claim(id_, text, verdict, paper="Clark et al. 2019", **uncertainty):
    return Claim(id_, text, paper, "paper's", f"ours {id_}", verdict, "rule", {"x": 1.0}, **uncertainty)


def _run(tmp_path, name="r", model="org/tiny-model", notebooks=None):
    """A run folder as the harness writes it: run.json, and per notebook claims, metrics and skips."""
    run = tmp_path / name
    notebooks = notebooks or {
        "01_a": [_claim("sep", "More [SEP]", "differs"), _claim("table1.det", "det: the best head wins", "holds")],
        "02_b": [
            _claim("table1.amod", "amod: the best head wins", "differs"),
            _claim("table1.All", "All: the best head wins", "differs"),
            _claim("sep", "More [SEP]", "differs"),
        ],
    }
    for stem, claims in notebooks.items():
        record_claims(claims, "topic.claims", output_dir=run / stem, declared=None)
        record_metrics({"topic.model": model}, output_dir=run / stem, declared=None)
    record_skipped("topic.part", "no data for it", output_dir=run / "02_b")
    entries = [{"name": stem, "status": "ok"} for stem in notebooks]
    (run / "run.json").write_text(json.dumps({"run_name": name, "finished": "2026-11-26", "notebooks": entries}))
    return run


# --------------------------------------------------------------------------- findings records and tables


def test_a_record_holds_every_claim_with_its_key_and_the_model(tmp_path):
    record = record_findings(_run(tmp_path))
    assert record["version"] == FINDINGS_VERSION and record["model"] == "org/tiny-model"
    first, second = record["notebooks"]
    assert [c["key"] for c in first["claims"]] == ["topic.claims.sep", "topic.claims.table1.det"]
    assert [c["verdict"] for c in second["claims"]] == ["differs", "differs", "differs"]
    assert second["skipped"] == [{"section": "topic.part", "reason": "no data for it"}]
    saved = save_findings(record, tmp_path / "f.json")
    assert load_findings(saved) == record


def test_the_summary_folds_variants_and_counts_their_verdicts(tmp_path):
    one = record_findings(_run(tmp_path, "one"))
    other = record_findings(
        _run(tmp_path, "other", model="org/other", notebooks={"01_a": [_claim("sep", "More [SEP]", "holds")]})
    )
    table = summary_table([one, other]).splitlines()
    assert table[0] == "| claim | paper | tiny-model | other |"
    # "More [SEP]" is one line over both notebooks; the relations' label is dropped, their verdicts counted
    assert table[2:] == [
        "| More [SEP] | Clark et al. 2019 | differs (2 of 2) | holds |",
        "| The best head wins | Clark et al. 2019 | 1 holds, 2 differs | — |",
    ]


def test_a_label_that_is_not_the_claims_variant_stays(tmp_path):
    run = _run(tmp_path, notebooks={"01_a": [_claim("entropy", "Last layer: entropy | 3.89 nats", "holds")]})
    assert "| Last layer: entropy \\| 3.89 nats |" in summary_table([record_findings(run)])


def test_the_full_tables_give_numbers_and_skips_per_notebook(tmp_path):
    full = claims_tables(record_findings(_run(tmp_path)))
    assert full.startswith("### 01_a\n")
    assert "| det: the best head wins | Clark et al. 2019 | paper's | ours table1.det | holds |" in full
    assert "- skipped topic.part: no data for it" in full
    assert claims_tables(record_findings(_run(tmp_path, "s")), notebooks=["02_b"], heading="##").startswith("## 02_b")


def test_a_claims_interval_and_seeds_are_kept_and_shown_in_the_full_tables(tmp_path):
    interval = Interval(0.12, 0.4, method="bootstrap over 72 heads")
    run = _run(
        tmp_path,
        notebooks={
            "01_a": [
                _claim("rho", "Importance tracks ablation", "inconclusive", interval=interval, seeds=Seeds(2, 3)),
                _claim("one", "One seed only", "holds", seeds=Seeds(1, 1)),
                _claim("plain", "Neither", "holds"),
            ]
        },
    )
    record = record_findings(run)
    rho, one, plain = record["notebooks"][0]["claims"]
    assert rho["interval"] == {"low": 0.12, "high": 0.4, "level": 0.95, "method": "bootstrap over 72 heads"}
    assert (
        rho["seeds"] == {"holding": 2, "n": 3, "not_testable": 0}
        and plain["interval"] is None
        and plain["seeds"] is None
    )
    assert load_findings(save_findings(record, tmp_path / "f.json")) == record
    full = claims_tables(record)
    assert "| claim | paper | paper's value | ours | verdict | interval, seeds |" in full
    assert (
        "| Importance tracks ablation | Clark et al. 2019 | paper's | ours rho | inconclusive "
        "| 95% CI [0.12, 0.4] (bootstrap over 72 heads); holds in 2 of 3 seeds |"
    ) in full
    assert "| One seed only | Clark et al. 2019 | paper's | ours one | holds | one seed |" in full
    assert "| Neither | Clark et al. 2019 | paper's | ours plain | holds |  |" in full and "None" not in full


def test_a_record_without_intervals_keeps_its_tables(tmp_path):
    record = record_findings(_run(tmp_path))
    # as a record written before claims had intervals: no such keys at all
    for nb in record["notebooks"]:
        for claim in nb["claims"]:
            del claim["interval"], claim["seeds"]
    full = claims_tables(record)
    assert "interval" not in full and "None" not in full
    assert full == claims_tables(record_findings(_run(tmp_path, "again")))
    assert [claim_uncertainty(c) for nb in record["notebooks"] for c in nb["claims"]] == [""] * 5


def test_the_uncertainty_text_of_claims_and_records():
    interval = Interval(0.123456, 0.4, method="bootstrap over 72 heads")
    claim = _claim("rho", "x", "holds", interval=interval, seeds=Seeds(3, 3))
    assert (
        claim_uncertainty(claim)
        == claim.uncertainty
        == ("95% CI [0.123, 0.4] (bootstrap over 72 heads); holds in 3 of 3 seeds")
    )
    assert claim_uncertainty(claim, short=True) == "95% CI [0.123, 0.4]; holds in 3 of 3 seeds"
    assert claim_uncertainty(claim.to_dict()) == claim.uncertainty
    # JSON has no NaN: a bound that was not finite comes back as null
    recorded = {"interval": {"low": None, "high": None, "level": 0.9, "method": "bootstrap over 0 heads"}}
    assert claim_uncertainty(recorded) == "no 90% interval (bootstrap over 0 heads)"
    assert claim_uncertainty(recorded, short=True) == "no 90% interval"
    assert claim_uncertainty({"interval": None, "seeds": None}) == claim_uncertainty({}) == ""
    assert claim_uncertainty(_claim("plain", "x", "holds")) == ""


def test_the_summary_counts_inconclusive_as_a_verdict_of_its_own(tmp_path):
    claims = [
        _claim(f"table1.{rel}", f"{rel}: the best head wins", verdict)
        for rel, verdict in (("a", "not testable"), ("b", "inconclusive"), ("c", "holds"), ("d", "inconclusive"))
    ]
    table = summary_table([record_findings(_run(tmp_path, notebooks={"01_a": claims}))])
    assert (
        table.splitlines()[2] == "| The best head wins | Clark et al. 2019 | 1 holds, 2 inconclusive, 1 not testable |"
    )
    alone = [_claim("table1.a", "a: the best head wins", "inconclusive")]
    assert "| inconclusive |" in summary_table([record_findings(_run(tmp_path, "alone", notebooks={"01_a": alone}))])


def test_bad_runs_and_records_get_one_clear_error(tmp_path):
    with pytest.raises(BertologyError, match="no run folder"):
        record_findings(tmp_path / "missing")
    empty = tmp_path / "empty"
    (empty / "01_a").mkdir(parents=True)
    record_metrics({"a.model": "m"}, output_dir=empty / "01_a", declared=None)
    with pytest.raises(BertologyError, match="recorded no claims"):
        record_findings(empty)
    mixed = _run(tmp_path, "mixed")
    record_metrics({"topic.model": "org/else"}, output_dir=mixed / "02_b", declared=None)
    with pytest.raises(BertologyError, match="mixes models"):
        record_findings(mixed)
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"version": 0, "notebooks": []}))
    with pytest.raises(DataFormatError, match="record it again"):
        load_findings(old)
    with pytest.raises(BertologyError, match="no findings record"):
        load_findings(tmp_path / "none.json")


def test_the_runs_table_sets_base_seeds_side_by_side(tmp_path, capsys):
    def run(name, seed, verdicts):
        made = [
            _claim(id_, f"claim {id_}", v, interval=Interval(-0.1, 0.3), seeds=Seeds(int(v == "holds"), 3))
            for id_, v in verdicts.items()
        ]
        folder = _run(tmp_path, name, notebooks={"06_a": [*made, _claim("pretrained", "Not trained", "differs")]})
        info = json.loads((folder / "run.json").read_text())
        caps = {"ONEDNN_MAX_CPU_ISA": "AVX2", "cpu_flags": ["avx2", "avx512f"]} if seed else {}  # kept in the record
        (folder / "run.json").write_text(json.dumps({**info, "parameters": {"seed": seed}, "environment": caps}))
        return record_findings(folder)

    first = run("s0", 0, {"a": "holds", "b": "differs", "c": "inconclusive", "d": "holds"})
    second = run("s3", 3, {"a": "holds", "b": "holds", "c": "differs"})
    assert (first["kernels"], second["kernels"]) == ({}, {"ONEDNN_MAX_CPU_ISA": "AVX2"})
    lines = runs_table([first, second], breakable_keys=True).splitlines()
    assert lines[0] == (
        "4 claims: 2 same, 1 inconclusive on one side, 1 flipped; "
        "of them 3 on trained models: 1 same, 1 inconclusive on one side, 1 flipped."
    )
    assert lines[2] == "| notebook | claim | seed 0 | seed 3 | verdicts |"
    assert lines[4] == (
        "| 06_a | topic.<wbr>claims.<wbr>a | holds (95% CI [-0.1, 0.3]; holds in 1 of 3 seeds) "
        "| holds (95% CI [-0.1, 0.3]; holds in 1 of 3 seeds) | same |"
    )
    assert lines[5].endswith("| flipped |") and lines[6].endswith("| inconclusive on one side |")
    # a key may break after its dots on a narrow page
    assert lines[7] == "| 06_a | topic.<wbr>claims.<wbr>pretrained | differs | differs | same |"
    assert len(lines) == 8  # d is in one record only
    with pytest.raises(BertologyError, match="at least two"):
        runs_table([first])
    with pytest.raises(BertologyError, match="one model"):
        runs_table([first, {**second, "model": "org/other"}])
    capsys.readouterr()
    assert main(["findings", str(tmp_path / "s0"), str(tmp_path / "s3"), "--seeds"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("4 claims: 2 same") and "<wbr>" not in printed  # a terminal gets the keys whole
    # runs that differ in another setting are named by it; one that left it unset reads "default"
    fp32, auto = ({**first, "parameters": p} for p in ({"seed": 0}, {"seed": 0, "precision": "auto"}))
    assert (
        runs_table([fp32, auto]).splitlines()[2]
        == "| notebook | claim | precision default | precision auto | verdicts |"
    )
    same = [{**first, "run": "a"}, {**second, "run": "b", "parameters": {"seed": 0}, "kernels": {}}]
    assert runs_table(same).splitlines()[2] == "| notebook | claim | a | b | verdicts |"
    # runs of the same parameters on other kernels (the CPU held to fewer instruction sets) are named by them
    held = {**same[1], "kernels": {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}}
    assert runs_table([held, same[0]]).splitlines()[2] == (
        "| notebook | claim | kernels held to AVX2 | the CPU's own kernels | verdicts |"
    )
    # where the levels alone would name two runs alike, the variables are said
    aten = {**same[1], "kernels": {"ATEN_CPU_CAPABILITY": "avx2"}}
    assert runs_table([held, aten]).splitlines()[2] == (
        "| notebook | claim | kernels held by ONEDNN_MAX_CPU_ISA=AVX2 and ATEN_CPU_CAPABILITY=avx2 "
        "| kernels held by ATEN_CPU_CAPABILITY=avx2 | verdicts |"
    )
    # runs of other notebooks with each setting are compared apart, in the order their first record comes
    other = [{**r, "notebooks": [{**nb, "name": "02_b"} for nb in r["notebooks"]]} for r in (fp32, auto)]
    assert runs_tables([fp32, *other, auto]) == runs_table([fp32, auto]) + "\n\n" + runs_table(other)
    assert runs_tables([fp32, auto]) == runs_table([fp32, auto])
    with pytest.raises(BertologyError, match="at least two"):
        runs_tables([fp32, auto, other[0]])


def test_the_command_records_prints_and_updates_pages(tmp_path, capsys):
    run = _run(tmp_path)
    assert main(["findings", str(run), "--record", str(tmp_path / "rec.json")]) == 0
    page = tmp_path / "page.md"
    page.write_text("# x\n<!-- findings: generated by test; do not edit -->\nold\n<!-- findings: end -->\nend\n")
    assert main(["findings", str(tmp_path / "rec.json"), "--update", str(page)]) == 0
    assert read_block(page, "findings") == summary_table([load_findings(tmp_path / "rec.json")])
    assert page.read_text().endswith("<!-- findings: end -->\nend\n")
    capsys.readouterr()
    assert main(["findings", str(run), "--full"]) == 0
    assert capsys.readouterr().out.startswith("### 01_a")
    bare = tmp_path / "bare.md"
    bare.write_text("no blocks\n")
    assert main(["findings", str(run), "--update", str(bare)]) == 2
    assert "has no generated block" in capsys.readouterr().err


def test_generated_blocks_are_found_by_name_and_rewritten_in_place(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("a\n<!-- b1: generated by x y; do not edit -->\n1\n<!-- b1: end -->\nz\n")
    assert has_block(page, "b1") and not has_block(page, "b2")
    assert write_block(page, "b1", "2") and not write_block(page, "b1", "2")
    assert page.read_text() == "a\n<!-- b1: generated by x y; do not edit -->\n2\n<!-- b1: end -->\nz\n"
    with pytest.raises(BertologyError, match="no generated block 'b2'"):
        read_block(page, "b2")


# --------------------------------------------------------------------------- the committed pages


def test_the_committed_findings_tables_are_generated_from_the_committed_records():
    assert RECORDS, "docs/findings/ holds no findings record: bertology findings RUN --record docs/findings/NAME.json"
    records = [load_findings(path) for path in RECORDS]
    summary = summary_table(records)
    for page in (ROOT / "README.md", ROOT / "docs" / "findings.md"):
        assert read_block(page, "findings") == summary, f"{page.name}: run make findings"
    assert read_block(ROOT / "docs" / "findings.md", "findings-full") == claims_tables(records[0])
    mpnet = [load_findings(path) for path in sorted((ROOT / "docs" / "findings" / "mpnet").glob("*.json"))]
    assert read_block(ROOT / "docs" / "mpnet.md", "findings-full") == "\n\n".join(map(claims_tables, mpnet))
    seeded = [load_findings(path) for path in sorted((ROOT / "docs" / "findings" / "seeds").glob("*.json"))]
    assert len(seeded) >= 2, "docs/findings/seeds/ holds a record per base seed (docs/regression.md)"
    assert read_block(ROOT / "docs" / "regression.md", "seeds") == runs_tables(seeded, breakable_keys=True), (
        "make findings"
    )
    precisions = [load_findings(path) for path in sorted((ROOT / "docs" / "findings" / "precision").glob("*.json"))]
    assert len(precisions) >= 2, "docs/findings/precision/ holds a record per precision (docs/guide/models.md)"
    assert read_block(ROOT / "docs" / "guide" / "models.md", "precision") == runs_tables(
        precisions, breakable_keys=True
    ), "make findings"


def test_the_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) < 150
    first_screen = "\n".join(lines[:40])
    for must in ("make run", "make test", "make docs", "docs/findings.md", "docs/getting-started.md"):
        assert must in first_screen, must
    # every link into docs/ names a page that exists
    text = "\n".join(lines)
    for target in {part.split(")")[0].split("#")[0] for part in text.split("](")[1:]}:
        if not target.startswith("http"):
            assert (ROOT / target).exists(), target


def _mkdocs(config: Path, site: Path, run: str = "") -> subprocess.CompletedProcess:
    env = dict(os.environ, BERTOLOGY_DOCS_RUN=run, NO_MKDOCS_2_WARNING="1")
    return subprocess.run(
        [str(MKDOCS), "build", "--strict", "-f", str(config), "-d", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_the_site_builds_strict_and_offline_without_a_run(tmp_path):
    if not MKDOCS.exists():
        pytest.skip("mkdocs is not installed (pip install -e '.[dev]')")
    done = _mkdocs(ROOT / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stderr[-3000:]
    tour = (tmp_path / "site" / "notebooks" / "00_tour.html").read_text(encoding="utf-8")
    assert "Not executed here" in tour
    # every notebook's page is titled by its number, and 09's no longer repeats the atlas page's title
    titles = [
        re.search(r"<h1[^>]*>(.*?)<", (tmp_path / "site" / "notebooks" / f"{n.stem}.html").read_text("utf-8"))[1]
        for n in sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
    ]
    assert all(t.startswith(f"{i:02d} · ") and not re.match(r"\d+ · \d+", t) for i, t in enumerate(titles)), titles
    api = (tmp_path / "site" / "api" / "attention.html").read_text(encoding="utf-8")
    assert "bertology_utils.attention.extraction" in api and "extract_attention" in api


@pytest.mark.slow
def test_a_broken_link_or_a_missing_figure_fails_the_build(tmp_path):
    if not MKDOCS.exists():
        pytest.skip("mkdocs is not installed (pip install -e '.[dev]')")
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs)
    (docs / "data.md").write_text("# Data\n\n[gone](nowhere.md) ![figure](figures/missing.png)\n")
    config = tmp_path / "mkdocs.yml"
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    text = text.replace("docs_dir: docs", f"docs_dir: {docs}").replace(
        "scripts/mkdocs_hooks.py", str(ROOT / "scripts" / "mkdocs_hooks.py")
    )
    config.write_text(text.replace("paths: [.]", f"paths: [{ROOT}]"))
    done = _mkdocs(config, tmp_path / "site")
    assert done.returncode != 0
    assert "'nowhere.md'" in done.stderr and "'figures/missing.png'" in done.stderr


def _bench(name: str):
    sys.path.insert(0, str(ROOT / "bench"))
    return pytest.importorskip(name)


def _bench_tests():
    return _bench("bench_tests")


def _recorded(bench, record_path, block: str, how: str) -> dict:
    """The record a bench wrote at ``record_path``, after checking that the page's ``block`` is made from it."""
    record = json.loads(record_path.read_text())
    assert read_block(bench.PAGE, block) == bench.doc_block(record).strip(), f"run {how}"
    return record


def test_the_test_tiers_table_is_the_recorded_run():
    bench_tests = _bench_tests()
    how = "make test, make test-slow, then python bench/bench_tests.py --record"
    record = _recorded(bench_tests, bench_tests.RECORD, bench_tests.BLOCK, how)
    assert set(record["tiers"]) == set(bench_tests.TIERS)
    assert all(tier["failures"] + tier["errors"] == 0 for tier in record["tiers"].values())


def test_the_structural_host_table_is_the_recorded_run():
    bench = _bench("bench_structural_probes")
    record = _recorded(bench, bench.RECORD, bench.BLOCK, "python bench/bench_structural_probes.py --host --record")
    assert all(row["same"] for row in record["rows"])


def test_the_l0_settle_table_is_the_recorded_run():
    bench = _bench("bench_l0")
    how = "python bench/bench_l0.py --settle --steps 1000 --record, for each task"
    record = _recorded(bench, bench.SETTLE_RECORD, bench.SETTLE_BLOCK, how)
    # 07's tasks, each read at the default's fifths: one count per checkpoint and lambda
    assert {"SST-2", "MRPC"} <= set(record["tasks"])
    for task in record["tasks"].values():
        assert task["steps"] > task["default_steps"] == task["checkpoints"][-1]
        assert all(len(row["differ"]) == len(task["checkpoints"]) for row in task["lambdas"])


def test_a_tiers_junit_record_gives_its_counts_and_the_sessions_seconds(tmp_path):
    bench_tests = _bench_tests()
    path = tmp_path / "test.xml"
    path.write_text(
        '<?xml version="1.0"?><testsuites><testsuite name="pytest" errors="0" failures="1" skipped="2" '
        'tests="7" time="61.26"><testcase classname="a" name="b" time="3.0"/></testsuite></testsuites>'
    )
    assert bench_tests.read_tier(path) == {"tests": 7, "skipped": 2, "failures": 1, "errors": 0, "seconds": 61.3}
    record = {
        "date": "d",
        "machine": "m",
        "jobs": 2,
        "tiers": {t: bench_tests.read_tier(path) for t in bench_tests.TIERS},
    }
    assert "| `make test` |" in bench_tests.doc_block(record) and "within its target" in bench_tests.doc_block(record)
