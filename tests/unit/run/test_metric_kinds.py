"""Metric declarations and the regression check's kinds: every recorded key is declared once; the check
compares verdicts first and gives each number the tolerance its kind allows; a refresh under perturbations
measures tolerances; a run planted with real faults fails while runs on other CPUs' kernels pass."""

import json
import os
from pathlib import Path

import numpy as np
import pytest
from test_regression import VERSIONS, make_run, write_json

from bertology_utils.papers.metrics import (
    FLOORS,
    REGISTRY,
    Floor,
    Kind,
    Metric,
    MetricRegistry,
    UndeclaredMetricError,
)
from bertology_utils.run import perturb, regression
from bertology_utils.run.record import record_claims, record_metrics
from bertology_utils.run.refresh import CHANGES_FACTOR, SAFETY_FACTOR, update_references
from bertology_utils.run.regression import check_run, compare_metrics, read_references
from bertology_utils.run.results import CLAIMS_FILE, METRICS_FILE

ROOT = Path(__file__).resolve().parents[3]
SMALL = ROOT / "tests" / "references" / "small"
#: Metrics of the small runs repeated under perturbations that keep the science the same (other CPUs'
#: kernels, one thread), each with a cache of its own: written by `make refresh-references`.
PERTURBED = ROOT / "tests" / "references" / "perturbed"
DEVICES = ROOT / "tests" / "references" / "devices"


def small_references() -> dict[str, dict]:
    return {path.stem: json.loads(path.read_text()) for path in sorted(SMALL.glob("*.json"))}


# --------------------------------------------------------------------------- declarations


def test_every_metric_of_the_small_references_is_declared_once():
    undeclared, ties = [], []
    for stem, reference in small_references().items():
        for key in reference["metrics"]:
            found = REGISTRY.matches(key)
            if not found:
                undeclared.append(f"{stem}: {key}")
            elif len(found) > 1 and found[0].literal_length == found[1].literal_length:
                ties.append(f"{stem}: {key} matches {found[0].key} and {found[1].key} alike")
    assert not undeclared, "declare these in bertology_utils/papers/metrics/: " + ", ".join(undeclared)
    assert not ties, ties


def test_the_findings_records_claims_are_declared():
    for path in (ROOT / "docs" / "findings").glob("*.json"):
        for notebook in json.loads(path.read_text())["notebooks"]:
            for claim in notebook.get("claims", []):
                assert REGISTRY[f"{claim['key']}.verdict"].kind is Kind.VERDICT, claim["key"]


def test_kinds_follow_the_keys_where_the_key_says_it():
    for reference in small_references().values():
        for key in reference["metrics"]:
            kind = REGISTRY[key].kind
            if ".claims." in key and key.endswith(".verdict"):
                assert kind is Kind.VERDICT, key
            if key.rsplit(".", 1)[-1].endswith("seconds"):
                assert kind is Kind.TIMING, key


def test_item_counts_are_recorded_beside_what_they_count():
    for stem, reference in small_references().items():
        metrics = {key: entry["value"] for key, entry in reference["metrics"].items()}
        for key in metrics:
            counted = REGISTRY[key].items_key(key)
            if counted is not None:  # recorded; 0 only where there was nothing to decide
                assert isinstance(metrics.get(counted), int), (
                    f"{stem}: {key} counts its items in {counted}, not recorded"
                )
                assert metrics[counted] > 0 or metrics[key] is None, f"{stem}: {key} decided by 0 items"


def test_a_declaration_states_a_unit_and_meaning_and_known_placeholders():
    with pytest.raises(ValueError, match="unit"):
        Metric("a.b", Kind.FLOAT, "", "what")
    with pytest.raises(ValueError, match="unknown placeholders"):
        Metric("a.{x}.acc", Kind.MAXIMUM, "accuracy", "what", items="a.{y}.count")
    registry = MetricRegistry()
    registry.declare([Metric("a.{x}.acc", Kind.MAXIMUM, "accuracy", "what", items="a.{x}.count")])
    with pytest.raises(ValueError, match="declared twice"):
        registry.declare([Metric("a.{x}.acc", Kind.FLOAT, "share", "again")])
    assert registry.find("a.amod.acc").items_key("a.amod.acc") == "a.amod.count"
    assert registry.find("a.b.c.acc") is None  # {x} is one dotted part
    registry.declare([Metric("a.amod.acc", Kind.FLOAT, "share", "a more specific one, declared later")])
    assert registry.find("a.amod.acc").kind is Kind.FLOAT  # what was found before is looked up again
    assert registry.template("a.{x}.acc").kind is Kind.MAXIMUM and registry.template("a.b") is None
    with pytest.raises(UndeclaredMetricError, match="not declared"):
        registry["a.b"]


def test_record_metrics_refuses_an_undeclared_key_and_writes_nothing(tmp_path):
    with pytest.raises(UndeclaredMetricError, match="tour.no_such_metric"):
        record_metrics({"tour.n_sentences": 4, "tour.no_such_metric": 1.0}, output_dir=tmp_path)
    assert not (tmp_path / METRICS_FILE).exists()
    recorded = record_metrics({"tour.n_sentences": 4}, output_dir=tmp_path)
    assert recorded == {"tour.n_sentences": 4}
    # a notebook of one's own records any key when it asks for no check
    assert record_metrics({"mine.x": 1}, output_dir=tmp_path, declared=None)["mine.x"] == 1


def test_record_claims_refuses_an_undeclared_value_before_writing_claims(tmp_path):
    from bertology_utils.papers.claims import Claim, Verdict

    claim = Claim("cls_early_layers", "c", "p", "v", "o", Verdict.HOLDS, "r", {"undeclared_value": 1.0})
    with pytest.raises(UndeclaredMetricError, match="undeclared_value"):
        record_claims([claim], "tour.claims", output_dir=tmp_path)
    assert not (tmp_path / CLAIMS_FILE).exists() and not (tmp_path / METRICS_FILE).exists()


# --------------------------------------------------------------------------- the check by kind

GRID = [[0.5, 0.25, 0.75], [0.125, 1.0, 0.0]]


def check_one(tmp_path, reference: dict, metrics: dict, stem="03_syntax_coref"):
    write_json(tmp_path / "refs" / f"{stem}.json", {"metrics": reference})
    return check_run(make_run(tmp_path / "run", {stem: metrics}), tmp_path / "refs")


def moved(grid, *cells, by=0.5):
    grid = np.array(grid)
    for cell in cells:
        grid[cell] += by
    return grid.tolist()


@pytest.mark.parametrize(
    "cells, ok",
    [((), True), (((0, 1),), True), (((0, 1), (1, 2)), False)],
    ids=["equal", "one decision flipped", "two flipped"],
)
def test_a_grid_decided_by_maxima_may_change_in_one_element(tmp_path, cells, ok):
    reference = {"syntax.head.amod": {"value": GRID, "abs": 1e-6}, "syntax.amod.count": {"value": 8}}
    result = check_one(tmp_path, reference, {"syntax.head.amod": moved(GRID, *cells), "syntax.amod.count": 8})
    assert result.ok is ok
    row = next(d for d in result.differences if d.metric == "syntax.head.amod")
    assert row.kind == "maximum" and "1 element may differ" in row.tolerance


def test_a_float_grid_may_not(tmp_path):
    reference = {"patterns.head.entropy": {"value": GRID}}
    result = check_one(tmp_path, reference, {"patterns.head.entropy": moved(GRID, (0, 1), by=1e-3)}, "01_patterns")
    assert not result.ok and result.differences[0].kind == "float"
    assert check_one(tmp_path, reference, {"patterns.head.entropy": moved(GRID, (0, 1), by=1e-5)}, "01_patterns").ok


@pytest.mark.parametrize("arcs, ok", [(0, True), (1, True), (2, False)])
def test_an_accuracy_over_items_may_move_by_one_item(tmp_path, arcs, ok):
    reference = {"syntax.all.best_accuracy": {"value": 0.46, "abs": 1e-6}, "syntax.all.count": {"value": 800}}
    result = check_one(tmp_path, reference, {"syntax.all.best_accuracy": 0.46 + arcs / 800, "syntax.all.count": 800})
    assert result.ok is ok


def test_verdicts_come_first_and_inconclusive_is_no_regression(tmp_path):
    key = "syntax.claims.table1.amod.verdict"
    reference = {key: {"value": "holds"}, "syntax.amod.count": {"value": 8}}
    result = check_one(tmp_path, reference, {key: "differs", "syntax.amod.count": 9})
    report = result.report()
    assert not result.ok and result.count("regressed") == 2
    assert report.index("verdicts: 0 of 1 as in the reference") < report.index("syntax.amod.count [exact]")
    assert f"{key}: holds -> differs" in report
    assert check_one(tmp_path, reference, {key: regression.INCONCLUSIVE, "syntax.amod.count": 8}).ok


def test_kinds_never_narrow_a_stated_tolerance_and_ignore_text_and_times(tmp_path):
    reference = {
        "tour.mean_attention_to_cls": {"value": 0.5, "abs": 0.1},
        "tour.data": {"value": "4 sentences of /home/someone/ewt"},
        "pruning.seconds_total": {"value": 3.0},
    }
    metrics = {"tour.mean_attention_to_cls": 0.55, "tour.data": "4 sentences of /tmp/ewt", "pruning.seconds_total": 9.0}
    assert check_one(tmp_path, reference, metrics, "00_tour").ok


def test_a_notebook_that_skipped_everything_is_not_compared_with_a_reference_where_it_ran(tmp_path):
    write_json(tmp_path / "refs" / "09_atlas.json", {"metrics": {"atlas.n_heads": {"value": 72}}})
    run = make_run(tmp_path / "run", {"09_atlas": {"atlas.skipped": ["atlas"]}})
    record = json.loads((run / "run.json").read_text())
    record["notebooks"][0]["status"] = "skipped"
    (run / "run.json").write_text(json.dumps(record))
    result = check_run(run, tmp_path / "refs")
    assert result.ok and result.skipped == ["09_atlas"] and "skipped everything" in result.report()


# --------------------------------------------------------------------------- a refresh under perturbations


def test_a_refresh_under_perturbations_measures_each_tolerance(tmp_path):
    base = {
        "syntax.head.amod": GRID,
        "syntax.amod.count": 8,
        "syntax.amod.best_head": "3-9",
        "tour.mean_attention_to_cls": 0.5,
        "probes.attn.test_uas": 0.7,
        "probes.test_scored_words": 100,
        "syntax.claims.table1.amod.verdict": "holds",
        "tour.n_sentences": 4,
    }
    other = {
        **base,
        "syntax.head.amod": moved(GRID, (0, 0), by=0.25),  # one arc flipped: a decision, not noise
        "syntax.amod.best_head": "2-8",
        "tour.mean_attention_to_cls": 0.5 + 2e-7,
        "probes.attn.test_uas": 0.7 + 3e-3,  # a probe trained on other kernels drifts
        "syntax.claims.table1.amod.verdict": "differs",  # a verdict that moves is not settled
        "tour.n_sentences": 5,
    }
    run = make_run(tmp_path / "run", {"03_syntax_coref": base}, versions=VERSIONS)
    isa = make_run(tmp_path / "isa", {"03_syntax_coref": other})
    threads = make_run(tmp_path / "threads", {"03_syntax_coref": base})
    refs = tmp_path / "refs"
    refresh = update_references(run, refs, {"isa-sse41": isa, "threads-1": threads})
    metrics = json.loads((refs / "03_syntax_coref.json").read_text())["metrics"]
    grid = metrics["syntax.head.amod"]
    assert grid["kind"] == "maximum" and grid["changes"] == CHANGES_FACTOR
    assert grid["measured"] == {"abs": 0.0, "changes": 1, "under": ["isa-sse41"]}
    assert metrics["syntax.amod.best_head"]["changes"] == CHANGES_FACTOR  # flipped, so it may
    assert metrics["tour.mean_attention_to_cls"]["abs"] == pytest.approx(max(1e-6, SAFETY_FACTOR * 2e-7))
    assert metrics["probes.attn.test_uas"]["abs"] == pytest.approx(SAFETY_FACTOR * 3e-3)
    exact = metrics["tour.n_sentences"]  # exact still, what moved recorded beside it
    assert exact["kind"] == "exact" and "abs" not in exact and exact["measured"]["under"] == ["isa-sse41"]
    assert sorted(refresh.unsettled) == [
        "03_syntax_coref syntax.claims.table1.amod.verdict: a verdict verdict value moved under isa-sse41",
        "03_syntax_coref tour.n_sentences: a exact value moved under isa-sse41",
    ]
    assert check_run(isa, refs).count("regressed") == 2  # what must not move still fails
    assert check_run(threads, refs).ok


def test_standard_perturbations_follow_the_cpu():
    avx2 = perturb.standard_perturbations({"cpu_flags": ["sse4_1", "avx", "avx2"], "cores": 2})
    assert [p.name for p in avx2] == ["isa-avx", "isa-sse41", "threads-1"]
    assert avx2[1].environment == {"ONEDNN_MAX_CPU_ISA": "SSE41"}
    zen4 = perturb.standard_perturbations({"cpu_flags": ["avx", "avx2", "avx512f", "avx512_vnni"], "cores": 1})
    assert [p.name for p in zen4] == ["isa-avx512_core", "isa-avx2", "isa-avx", "isa-sse41"]
    assert all(p.numbers for p in avx2 + zen4)
    amx = perturb.standard_perturbations({"cpu_flags": ["avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16"]})
    assert amx[-1] == perturb.BF16_PRODUCTS and not amx[-1].numbers
    assert amx[-1].environment == {"BERTOLOGY_FP32_PRODUCTS": "bf16"}


def test_the_instruction_set_caps_cut_the_flags_a_run_could_use():
    amx = ["sse4_1", "avx", "avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16"]
    assert perturb.capped_flags({"cpu_flags": amx}) == (amx, {})
    # the lower of oneDNN's and ATen's caps holds; case as either library reads it
    both = {"cpu_flags": amx, "ONEDNN_MAX_CPU_ISA": "avx512_core", "ATEN_CPU_CAPABILITY": "avx2", "OMP_NUM_THREADS": 1}
    assert perturb.capped_flags(both) == (amx[:4], {"ONEDNN_MAX_CPU_ISA": "avx512_core", "ATEN_CPU_CAPABILITY": "avx2"})
    assert (
        perturb.caps_said(perturb.capped_flags(both)[1])
        == "ONEDNN_MAX_CPU_ISA=avx512_core and ATEN_CPU_CAPABILITY=avx2"
    )
    assert perturb.caps_said({}) == ""
    assert perturb.capped_flags({"cpu_flags": amx, "ONEDNN_MAX_CPU_ISA": "AVX512_CORE"})[0] == amx[:5]
    assert perturb.capped_flags({"cpu_flags": amx, "ATEN_CPU_CAPABILITY": "default"})[0] == ["sse4_1"]
    # a cap above what the CPU has cuts nothing; a level it does not know cuts nothing and is still said
    assert perturb.capped_flags({"cpu_flags": amx[:3], "ONEDNN_MAX_CPU_ISA": "AVX2"}) == (
        amx[:3],
        {"ONEDNN_MAX_CPU_ISA": "AVX2"},
    )
    assert perturb.capped_flags({"cpu_flags": amx, "ONEDNN_MAX_CPU_ISA": "AVX10_2"}) == (
        amx,
        {"ONEDNN_MAX_CPU_ISA": "AVX10_2"},
    )


def test_a_perturbation_of_the_precision_holds_the_verdicts_not_the_numbers(tmp_path):
    base = {"tour.mean_attention_to_cls": 0.5, "syntax.claims.table1.amod.verdict": "holds"}
    lower = {"tour.mean_attention_to_cls": 0.51, "syntax.claims.table1.amod.verdict": "holds"}
    run = make_run(tmp_path / "run", {"03_syntax_coref": base}, versions=VERSIONS)
    refs = tmp_path / "refs"
    name = perturb.BF16_PRODUCTS.name
    refresh = update_references(run, refs, {name: make_run(tmp_path / "bf16", {"03_syntax_coref": lower})}, [name])
    metrics = json.loads((refs / "03_syntax_coref.json").read_text())["metrics"]
    assert metrics["tour.mean_attention_to_cls"] == {"value": 0.5, "kind": "float", "abs": 1e-6, "rel": 1e-4}
    assert refresh.unsettled == []
    flipped = {**lower, "syntax.claims.table1.amod.verdict": "differs"}
    refresh = update_references(run, refs, {name: make_run(tmp_path / "flipped", {"03_syntax_coref": flipped})}, [name])
    assert refresh.unsettled == [
        f"03_syntax_coref syntax.claims.table1.amod.verdict: a verdict verdict value moved under {name}"
    ]


def test_products_in_bf16_are_set_where_models_are_loaded():
    import subprocess
    import sys

    code = "import torch, bertology_utils.core.models; print(torch.backends.mkldnn.matmul.fp32_precision)"
    for value, expected in (("bf16", "bf16"), ("", "none")):
        env = {**os.environ, "BERTOLOGY_FP32_PRODUCTS": value}
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
        assert done.stdout.split() == [expected], done.stderr


# --------------------------------------------------------------------------- faults are caught, other CPUs pass


def perturbed_runs() -> dict[str, Path]:
    return {path.name: path for path in sorted(PERTURBED.iterdir()) if path.is_dir()}


def run_from(folder: Path, metrics: dict[str, dict]) -> Path:
    """A run folder holding ``metrics`` per notebook, with the small references' parameters."""
    parameters = {stem: reference.get("parameters") for stem, reference in small_references().items()}
    return make_run(folder, metrics, parameters=parameters)


def reference_values() -> dict[str, dict]:
    return {
        stem: {key: entry["value"] for key, entry in reference["metrics"].items()}
        for stem, reference in small_references().items()
    }


def test_runs_under_perturbations_pass_the_small_references(tmp_path):
    runs = perturbed_runs()
    assert runs, f"no perturbed runs in {PERTURBED}: make refresh-references writes them"
    for name, folder in runs.items():
        metrics = {path.stem: json.loads(path.read_text()) for path in sorted(folder.glob("*.json"))}
        if name == perturb.BF16_PRODUCTS.name:  # a lower precision: its verdicts, not its numbers
            references = read_references(SMALL)
            rows = [row for stem, found in metrics.items() for row in compare_metrics(stem, references[stem], found)]
            verdicts = [row for row in rows if row.kind == Kind.VERDICT.value]
            # Only a CPU with native bf16 writes this run (perturb.BF16_FLAGS), so a claim added by a refresh on
            # another CPU has no verdict in it until a refresh there: such a verdict is missing, never different.
            checked = [row for row in verdicts if row.status != regression.MISSING]
            assert checked and all(row.status == regression.OK for row in checked), [
                row for row in checked if row.status != regression.OK
            ]
            continue
        result = check_run(run_from(tmp_path / name, metrics), SMALL)
        assert result.ok, f"{name}:\n{result.report()}"


@pytest.mark.parametrize("device", sorted(p.name for p in DEVICES.iterdir() if p.is_dir()))
def test_a_run_on_another_device_passes_the_references_it_was_checked_against(device, tmp_path):
    folder = DEVICES / device
    record = json.loads((folder / "device.json").read_text())
    references = read_references(SMALL)
    metrics = {path.stem: json.loads(path.read_text()) for path in sorted(folder.glob("[0-9]*.json"))}
    checked = record["references_sha256_by_notebook"]
    # every notebook the run was checked on; a notebook added since has no run on that device yet
    assert set(metrics) == set(references) & set(checked), "a device run holds every notebook's metrics"
    # A refresh that moved one notebook's reference values leaves the others' check standing.
    same = sorted(stem for stem, reference in references.items() if checked.get(stem) == reference.values_sha256())
    if not same:
        pytest.skip(
            f"{device}: the references were refreshed since this run on {record['device']}; run the small check "
            "there again (docs/regression.md, scripts/device_record.py) and keep its metrics here"
        )
    result = check_run(run_from(tmp_path / device, {stem: metrics[stem] for stem in same}), SMALL)
    assert record["check_ok"] and result.ok, f"{device}:\n{result.report()}"


def swap_heads(values: dict, a=(0, 0), b=(1, 3)) -> dict:
    """Two heads' numbers swapped in every (layers, heads) grid of numbers: a head indexed wrongly."""
    out = {}
    for key, value in values.items():
        grid = np.array(value, dtype=object) if isinstance(value, list) else None
        if grid is not None and grid.ndim == 2 and all(isinstance(v, float) for v in grid.ravel()):
            grid[a], grid[b] = grid[b], grid[a]
            value = grid.tolist()
        out[key] = value
    return out


def shift_relation(values: dict, relation="amod") -> dict:
    """A relation's arcs read one head to the right: its per-head accuracies shifted along the heads."""
    grid = np.array(values[f"syntax.head.{relation}"])
    return {**values, f"syntax.head.{relation}": np.roll(grid, 1, axis=1).tolist()}


def flip_labels(values: dict) -> dict:
    """The classifier's binary labels flipped: every accuracy a on its dev set reads 1 - a."""
    flipped = {"sep.sst2.dev_accuracy", "pruning.SST-2.base_score", "head_roles.SST-2.dev_score"}
    return {key: 1.0 - value if key in flipped else value for key, value in values.items()}


def flip_verdict(values: dict) -> dict:
    key = next(k for k, v in values.items() if k.endswith(".verdict") and v == "holds")
    return {**values, key: "differs"}


FAULTS = {
    "two heads swapped in 01": ("01_patterns", swap_heads),
    "two heads swapped in 08": ("08_context_mixing", swap_heads),
    "a relation's arcs shifted by one": ("03_syntax_coref", shift_relation),
    "the classifier's labels flipped in 02": ("02_sep_noop", flip_labels),
    "the classifier's labels flipped in 06": ("06_pruning", flip_labels),
    # not 07: its small SST-2 classifier scores 0.5, which flipped labels leave as it is
    "a verdict flipped in 03": ("03_syntax_coref", flip_verdict),
    "one notebook's metrics dropped": ("05_clustering", lambda values: {}),
}


@pytest.mark.parametrize("fault", FAULTS)
def test_a_planted_fault_is_flagged(tmp_path, fault):
    stem, plant = FAULTS[fault]
    metrics = reference_values()
    assert check_run(run_from(tmp_path / "clean", metrics), SMALL).ok
    planted = plant(metrics[stem])
    assert planted != metrics[stem], f"{fault}: the fault changed nothing"
    result = check_run(run_from(tmp_path / "faulty", {**metrics, stem: planted}), SMALL)
    assert not result.ok, f"{fault} was not flagged"
    assert all(d.notebook == stem for d in result.differences if d.status in regression.FAILING)


def test_floors_are_stated_for_every_kind():
    assert set(FLOORS) == set(Kind)
    assert FLOORS[Kind.TIMING].ignore and FLOORS[Kind.TEXT].ignore
    assert FLOORS[Kind.EXACT] == FLOORS[Kind.VERDICT] == Floor()  # exact: nothing may move
    assert all(FLOORS[k].changes == 1 for k in (Kind.MAXIMUM, Kind.TRAINED)) and FLOORS[Kind.FLOAT].changes == 0


PERTURBED_CELL = (
    "import os\n"
    "from bertology_utils.run.record import record_metrics\n"
    "record_metrics({'tour.n_sentences': n, 'tour.mean_attention_to_cls': 0.25,\n"
    "                'tour.data': os.environ.get('ONEDNN_MAX_CPU_ISA', 'native')}, output_dir=output_dir)"
)


@pytest.mark.notebook
def test_run_update_reference_perturb_measures_in_runs_of_their_own(tmp_path, capsys):
    from test_harness import write_notebook

    from bertology_utils.cli import main

    nb = write_notebook(tmp_path / "00_t.ipynb", PERTURBED_CELL)
    refs, res = tmp_path / "refs", tmp_path / "res"
    argv = ["run", str(nb), "-p", "n", "4", "--run-name", "r", "--results-dir", str(res), "--update-reference"]
    assert main([*argv, str(refs), "--perturb"]) == 0
    out = capsys.readouterr().out
    expected = perturb.standard_perturbations()
    assert all(f"perturbed run: {p.name}: {p.why}" in out for p in expected)
    reference = json.loads((refs / "00_t.json").read_text())
    assert [p["name"] for p in reference["perturbations"]] == [p.name for p in expected]
    assert reference["environment"]["cores"] >= 1 and "cpu_flags" in reference["environment"]
    for p in expected:  # each ran with its own environment, into a run of its own
        recorded = json.loads((res / perturb.perturbed_run_name("r", p) / "00_t" / "metrics.json").read_text())
        assert recorded["tour.data"] == p.environment.get("ONEDNN_MAX_CPU_ISA", "native")
    metrics = reference["metrics"]
    assert metrics["tour.mean_attention_to_cls"] == {"value": 0.25, "kind": "float", "abs": 1e-6, "rel": 1e-4}
    assert metrics["tour.n_sentences"] == {"value": 4, "kind": "exact"}
    assert metrics["tour.data"]["ignore"].startswith("text")
    assert main([*argv[:-1], "--perturb"]) == 2  # without --update-reference there is nothing to measure for


def test_a_refresh_under_perturbations_keeps_a_tolerance_stated_with_its_reason(tmp_path):
    note = "moves by 1e-3 between two machines this refresh cannot try"
    refs = tmp_path / "refs"
    write_json(
        refs / "00_tour.json",
        {
            "metrics": {
                "tour.mean_attention_to_cls": {"value": 0.5, "abs": 5e-3, "note": note},
                "tour.mean_attention_to_sep": {"value": 0.1, "abs": 5e-3},  # no reason given: measured afresh
            }
        },
    )
    values = {"tour.mean_attention_to_cls": 0.5, "tour.mean_attention_to_sep": 0.1}
    run = make_run(tmp_path / "run", {"00_tour": values})
    update_references(run, refs, {"threads-1": make_run(tmp_path / "threads", {"00_tour": values})})
    metrics = json.loads((refs / "00_tour.json").read_text())["metrics"]
    assert metrics["tour.mean_attention_to_cls"] == {
        "value": 0.5,
        "kind": "float",
        "abs": 5e-3,
        "rel": 1e-4,
        "note": note,
    }
    assert metrics["tour.mean_attention_to_sep"] == {"value": 0.1, "kind": "float", "abs": 1e-6, "rel": 1e-4}
