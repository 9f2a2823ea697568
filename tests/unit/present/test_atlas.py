"""The head atlas on synthetic run folders: every cell is the recorded value, absent columns say why,
the filters' semantics, two runs of different shapes, the cards' pattern images, bad input."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from atlas_checks import assert_cells_are_recorded, make_run
from atlas_payloads import reference_query

from bertology_utils.cli import main
from bertology_utils.core.errors import BertologyError
from bertology_utils.present import atlas as atlas_module
from bertology_utils.present.atlas import COLUMNS, Filter, build_atlas, parse_filter, read_atlas
from bertology_utils.present.atlas_stores import resample_word_maps


@pytest.fixture
def run(tmp_path):
    return make_run(tmp_path)


def test_every_cell_is_the_recorded_value(run):
    atlas = build_atlas(run, maps=False)
    assert assert_cells_are_recorded(atlas, {"run": run}) == 6 * len(atlas.columns)
    assert atlas.table[["layer", "head"]].values.tolist() == [[l, h] for l in (1, 2) for h in (1, 2, 3)]
    assert atlas.table["head_name"].tolist() == ["1-1", "1-2", "1-3", "2-1", "2-2", "2-3"]


def test_the_dictionary_names_units_papers_and_why_a_column_is_absent(run):
    atlas = build_atlas(run, maps=False)
    d = atlas.dictionary.set_index("column")
    assert d.loc["importance.SST-2", "paper"] == "Michel et al. 2019"
    assert d.loc["importance.SST-2", "notebook"] == "06_pruning"
    assert d.loc["specialised", "kind"] == "bool" and d.loc["role.syntactic_relations", "kind"] == "category"
    assert d.loc["head_roles.mystery", "meaning"] == "recorded by 07_head_roles as head_roles.mystery"
    assert set(d.loc[["l0_kept.SST-2.lambda=0.1", "l0_kept.SST-2.lambda=1"], "status"]) == {"recorded"}
    absent = d[d["status"] == "absent"]
    assert not set(absent.index) & set(atlas.table.columns), "an absent column must not be a column of blanks"
    assert "GAP data missing" in absent.loc["coref.accuracy", "reason"]
    assert "did not run" in absent.loc["mixing.<kind>.<weighting>", "reason"]
    assert "recorded no such metric" in absent.loc["syntax.best_relation", "reason"]
    assert len(d) == len(set(d.index))


def test_filters_follow_the_pages_semantics(run):
    atlas = build_atlas(run, maps=False)
    t = atlas.table
    values = t["importance.SST-2"]
    top = atlas.query(["importance.SST-2~top~34"])  # 34% of 6 heads: ceil(2.04) = 3
    assert top.sum() == 3 and (values[top] >= values[~top].max()).all()
    assert atlas.query([Filter("importance.SST-2", "bottom", 100)]).all()
    confident = atlas.query(["confidence~ge~0.5"])
    assert not confident[0], "a missing value never matches"
    assert confident.tolist() == [bool(v >= 0.5) if pd.notna(v) else False for v in t["confidence"]]
    both = atlas.query(["importance.SST-2~top~50", "specialised~eq~true"])
    assert both.tolist() == (atlas.query(["importance.SST-2~top~50"]) & t["specialised"].fillna(False)).tolist()
    category = t["role.syntactic_relations"].iloc[0]
    assert (
        atlas.query([f"role.syntactic_relations~eq~{category}"]).tolist()
        == (t["role.syntactic_relations"] == category).tolist()
    )
    assert atlas.query(["importance.SST-2~ne~-1"]).all()
    with pytest.raises(BertologyError, match="no column"):
        atlas.query(["nothing~ge~1"])
    with pytest.raises(BertologyError, match="operator"):
        parse_filter("importance.SST-2~about~1")
    with pytest.raises(BertologyError, match="percentage"):
        atlas.query(["importance.SST-2~top~0"])
    with pytest.raises(BertologyError, match="number column"):
        atlas.query(["specialised~top~10"])


def test_top_keeps_ties_at_the_threshold(tmp_path):
    run = make_run(tmp_path)
    path = run / "06_pruning" / "metrics.json"
    data = json.loads(path.read_text())
    data["pruning.SST-2.importance"] = [[0.1, 0.5, 0.5], [0.5, 0.2, 0.3]]
    path.write_text(json.dumps(data))
    atlas = build_atlas(run, maps=False)
    assert atlas.query(["importance.SST-2~top~10"]).tolist() == [False, True, True, True, False, False]


def test_two_runs_of_different_shapes_side_by_side(tmp_path):
    first = make_run(tmp_path, "small", layers=2, heads=3)
    second = make_run(tmp_path, "wide", layers=3, heads=4, seed=1, model="tiny/other")
    atlas = build_atlas(first, second)
    assert atlas.table.groupby("run").size().to_dict() == {"small": 6, "wide": 12}
    assert assert_cells_are_recorded(atlas, {"small": first, "wide": second}) == 18 * len(atlas.columns)
    assert set(atlas.table[atlas.table["run"] == "wide"]["model"]) == {"tiny/other"}
    top = atlas.query(["importance.SST-2~top~50"])
    assert atlas.table[top].groupby("run").size().to_dict() == {"small": 3, "wide": 6}, "top p% is per run"
    # the two stores hold the same sentences: every head of one run has its closest head in the other
    match = atlas.payload()["match"]
    assert set(match["r0"]["r1"]) == set(atlas.table[atlas.table["run"] == "small"]["head_name"])
    assert all(m[0] in set(atlas.table[atlas.table["run"] == "wide"]["head_name"]) for m in match["r0"]["r1"].values())
    assert math.isfinite(match["r1"]["r0"]["3-4"][1])


def test_runs_on_different_sentences_are_not_matched(tmp_path):
    atlas = build_atlas(make_run(tmp_path, "a"), make_run(tmp_path, "b", corpus="other"))
    assert atlas.match == {}
    assert "different sentences" in atlas.match_notes["a -> b"]


def test_the_cards_pattern_images_come_from_the_store(run):
    atlas = build_atlas(run)
    maps = atlas.payload()["runs"][0]["maps"]
    size = maps["mean"]["size"]
    mean = np.frombuffer(__import__("base64").b64decode(maps["mean"]["data"]), np.uint8).reshape(2, 3, size, size)
    # rows of a resampled map still sum to one (up to the uint8 rounding of each cell)
    np.testing.assert_allclose(mean.sum(-1) / 255, 1, atol=size / 255)
    assert maps["mean"]["labels"][0] == "[CLS]" and maps["mean"]["labels"][-1] == "[SEP]"
    assert "3 sentences" in maps["note"], "only the sentences long enough are averaged"
    example = maps["examples"][0]
    n = len(example["words"])
    assert len(__import__("base64").b64decode(example["data"])) == 2 * 3 * n * n


def test_resampling_keeps_rows_and_the_diagonal():
    n, size = 14, 6
    eye = np.broadcast_to(np.eye(n), (1, 1, n, n))
    resampled = resample_word_maps(eye, size)
    np.testing.assert_allclose(resampled.sum(-1), 1)
    assert (np.argmax(resampled[0, 0], -1) == np.arange(size)).all()


def test_card_has_the_heads_values_and_nearest_heads(run):
    atlas = build_atlas(run, maps=False)
    card = atlas.card("run", 2, 3)
    row = atlas.table[(atlas.table["layer"] == 2) & (atlas.table["head"] == 3)].iloc[0]
    assert card["values"]["importance.SST-2"] == row["importance.SST-2"]
    assert card["nearest"] == [["1-3", 0.5]]
    assert "confidence" not in atlas.card("run", 1, 1)["values"], "missing values are left out of the card"
    with pytest.raises(BertologyError, match="no head 9-9"):
        atlas.card("run", 9, 9)


def test_claims_are_attached_to_the_columns_they_read(run):
    columns = {c["name"]: c for c in build_atlas(run, maps=False).payload()["columns"]}
    assert [c["verdict"] for c in columns["importance.SST-2"]["claims"]] == ["holds"]
    assert columns["confidence"]["claims"] == []


def test_a_claims_interval_and_seeds_go_with_it_into_the_payload(run):
    path = run / "06_pruning" / "claims.json"
    (claim,) = json.loads(path.read_text())["claims"]
    columns = {c["name"]: c for c in build_atlas(run, maps=False).payload()["columns"]}
    assert columns["importance.SST-2"]["claims"][0]["uncertainty"] == "", "recorded before intervals: no text"
    interval = {"low": 0.12, "high": 0.4, "level": 0.95, "method": "bootstrap over 72 heads"}
    claim.update(verdict="inconclusive", interval=interval, seeds={"holding": 2, "n": 3})
    path.write_text(json.dumps({"claims": [claim]}))
    (shown,) = {c["name"]: c for c in build_atlas(run, maps=False).payload()["columns"]}["importance.SST-2"]["claims"]
    assert shown["verdict"] == "inconclusive"
    assert shown["uncertainty"] == "95% CI [0.12, 0.4] (bootstrap over 72 heads); holds in 2 of 3 seeds"


def test_the_page_colours_every_verdict_but_not_testable_its_own_way():
    from bertology_utils.papers.claims import Verdict

    style = (atlas_module.Path(atlas_module.__file__).parent / "atlas_page.css").read_text()
    assert all(f".verdict-{v.value.replace(' ', '-')} {{" in style for v in Verdict if v is not Verdict.NOT_TESTABLE)


def test_written_tables_read_back(run, tmp_path):
    atlas = build_atlas(run, maps=False)
    paths = atlas.write(tmp_path / "out", page=False)
    back = read_atlas(paths["table"])
    pd.testing.assert_frame_equal(back, atlas.table)
    csv = pd.read_csv(paths["csv"])
    np.testing.assert_allclose(csv["importance.SST-2"], atlas.table["importance.SST-2"])
    assert pd.read_csv(paths["dictionary"])["column"].tolist() == atlas.dictionary["column"].tolist()
    with pytest.raises(BertologyError, match="no atlas table"):
        read_atlas(tmp_path / "nowhere")


def test_bad_runs_get_clear_errors(tmp_path):
    with pytest.raises(BertologyError, match="no run folder"):
        build_atlas(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(BertologyError, match="no notebook results"):
        build_atlas(tmp_path / "empty")
    with pytest.raises(BertologyError, match="at least one run"):
        build_atlas()


def test_a_run_of_two_models_keeps_one(tmp_path):
    run = make_run(tmp_path)
    path = run / "06_pruning" / "metrics.json"
    data = json.loads(path.read_text())
    data["pruning.model"] = "someone/else"
    path.write_text(json.dumps(data))
    atlas = build_atlas(run, maps=False)
    assert "importance.SST-2" not in atlas.columns
    assert "06_pruning (someone/else)" in atlas.runs[0].missing["other models"]


def test_an_older_run_without_per_head_metrics_says_so(tmp_path):
    run = make_run(tmp_path, store=False)
    for path in run.glob("*/metrics.json"):
        data = json.loads(path.read_text())
        kept = {k: v for k, v in data.items() if not isinstance(v, list) and ".structural." not in k}
        path.write_text(json.dumps(kept))  # no grids, and none of the structural probes' keys per layer
    atlas = build_atlas(run)
    assert atlas.columns == []
    assert (atlas.dictionary["status"] == "absent").all()
    assert "no pattern images" in atlas.payload()["runs"][0]["maps_note"]


def test_every_spec_fills_its_templates():
    for spec in COLUMNS:
        groups = {name: "x" for name in spec.fields} | {"along": "1"}
        for text in (spec.name, spec.label, spec.description, *spec.claims):
            text.format(**groups)
        assert spec.unit and spec.description


#: The column each key of tests/references/small/*.json fed when the specs were regular expressions
#: over the keys (``head_roles.summary`` is a dict: its flattened parts are matched, never a grid)
READ_BEFORE = {
    "clustering.head.dominant": "behaviour",
    "clustering.head.x": "mds.x",
    "clustering.head.y": "mds.y",
    "coref.head.accuracy": "coref.accuracy",
    "head_roles.SST-2.confidence": "confidence.SST-2",
    "head_roles.SST-2.l0_masks": "l0_kept.SST-2.lambda=<along>",
    "head_roles.SST-2.relevance": "relevance.SST-2",
    "head_roles.SST-2.specialised": "specialised.SST-2",
    "head_roles.confidence": "confidence",
    "head_roles.positional_offset": "positional_offset",
    "head_roles.positional_share": "positional_share",
    "head_roles.qk_dimensions_mean": "qk_dimensions",
    "head_roles.rare_rate": "rare_rate",
    "head_roles.roles.positional": "role.positional",
    "head_roles.roles.rare": "role.rare",
    "head_roles.roles.syntactic": "role.syntactic",
    "head_roles.specialised": "specialised",
    "head_roles.summary.specialised": "specialised.summary",
    "head_roles.syntactic_relations": "role.syntactic_relations",
    "mixing.head.cls.norm": "mixing.cls.norm",
    "mixing.head.cls.raw": "mixing.cls.raw",
    "mixing.head.punct.norm": "mixing.punct.norm",
    "mixing.head.punct.raw": "mixing.punct.raw",
    "mixing.head.sep.norm": "mixing.sep.norm",
    "mixing.head.sep.raw": "mixing.sep.raw",
    "patterns.head.cls": "to_cls",
    "patterns.head.cls_entropy": "cls_entropy",
    "patterns.head.comma": "to_comma",
    "patterns.head.entropy": "entropy",
    "patterns.head.next": "to_next",
    "patterns.head.other": "to_other",
    "patterns.head.period": "to_period",
    "patterns.head.previous": "to_previous",
    "patterns.head.punct": "to_punct",
    "patterns.head.self": "to_self",
    "patterns.head.sep": "to_sep",
    "patterns.head.sep_to_sep": "to_sep_to_sep",
    "patterns.head.type": "pattern_type",
    "patterns.head.type_share.block": "type_share.block",
    "patterns.head.type_share.diagonal": "type_share.diagonal",
    "patterns.head.type_share.heterogeneous": "type_share.heterogeneous",
    "patterns.head.type_share.vertical": "type_share.vertical",
    "patterns.head.type_share.vertical+diagonal": "type_share.vertical+diagonal",
    "patterns.head.vig.bag_of_words": "vig.bag_of_words",
    "patterns.head.vig.delimiter": "vig.delimiter",
    "patterns.head.vig.identical_word": "vig.identical_word",
    "patterns.head.vig.identical_word_across": "vig.identical_word_across",
    "patterns.head.vig.next_word": "vig.next_word",
    "patterns.head.vig.previous_word": "vig.previous_word",
    "patterns.head.vig.same_word_pieces": "vig.same_word_pieces",
    "pruning.SST-2.attention_cosine": "finetune_cosine.SST-2",
    "pruning.SST-2.head_deltas": "disabled_change.SST-2",
    "pruning.SST-2.head_loss_deltas": "disabled_loss_change.SST-2",
    "pruning.SST-2.importance": "importance.SST-2",
    "pruning.SST-2.importance_raw": "importance_raw.SST-2",
    "sep.head.masked_embedding.attention_to_cls": "attention_to.cls.masked_embedding",
    "sep.head.masked_embedding.attention_to_other": "attention_to.other.masked_embedding",
    "sep.head.masked_embedding.attention_to_punct": "attention_to.punct.masked_embedding",
    "sep.head.masked_embedding.attention_to_sep": "attention_to.sep.masked_embedding",
    "sep.head.masked_embedding.gradient_norm": "gradient_norm.masked_embedding",
    "sep.head.masked_embedding.normalised_gradient_cls": "gradient.cls.masked_embedding",
    "sep.head.masked_embedding.normalised_gradient_other": "gradient.other.masked_embedding",
    "sep.head.masked_embedding.normalised_gradient_punct": "gradient.punct.masked_embedding",
    "sep.head.masked_embedding.normalised_gradient_sep": "gradient.sep.masked_embedding",
    "sep.head.sst2.attention_to_cls": "attention_to.cls.sst2",
    "sep.head.sst2.attention_to_other": "attention_to.other.sst2",
    "sep.head.sst2.attention_to_punct": "attention_to.punct.sst2",
    "sep.head.sst2.attention_to_sep": "attention_to.sep.sst2",
    "sep.head.sst2.gradient_norm": "gradient_norm.sst2",
    "sep.head.sst2.normalised_gradient_cls": "gradient.cls.sst2",
    "sep.head.sst2.normalised_gradient_other": "gradient.other.sst2",
    "sep.head.sst2.normalised_gradient_punct": "gradient.punct.sst2",
    "sep.head.sst2.normalised_gradient_sep": "gradient.sep.sst2",
    "syntax.head.advmod": "syntax.advmod",
    "syntax.head.all": "syntax.all",
    "syntax.head.amod": "syntax.amod",
    "syntax.head.aux": "syntax.aux",
    "syntax.head.aux_pass": "syntax.aux_pass",
    "syntax.head.best_relation": "syntax.best_relation",
    "syntax.head.best_relation_accuracy": "syntax.best_relation_accuracy",
    "syntax.head.ccomp": "syntax.ccomp",
    "syntax.head.compound": "syntax.compound",
    "syntax.head.compound_prt": "syntax.compound_prt",
    "syntax.head.det": "syntax.det",
    "syntax.head.mark": "syntax.mark",
    "syntax.head.nmod_poss": "syntax.nmod_poss",
    "syntax.head.nsubj": "syntax.nsubj",
    "syntax.head.obj": "syntax.obj",
    "sinks.head.is_sink": "sinks.is_sink",
    "sinks.head.peak_mass": "sinks.peak_mass",
    "sinks.head.sink_mass": "sinks.mass",
    "sinks.head.update": "sinks.update",
    "sinks.head.value_ratio": "sinks.value_ratio",
    # a hidden state's, shown by every head of the layer that writes it (ColumnSpec.per_state)
    "probes.structural.depth.layer_0.test_nspr": "structural.nspr",
    "probes.structural.depth.layer_0.test_root_acc": "structural.root_acc",
    "probes.structural.depth.layer_3.test_nspr": "structural.nspr",
    "probes.structural.depth.layer_3.test_root_acc": "structural.root_acc",
    "probes.structural.distance.layer_0.test_dspr": "structural.dspr",
    "probes.structural.distance.layer_0.test_uuas": "structural.uuas",
    "probes.structural.distance.layer_3.test_dspr": "structural.dspr",
    "probes.structural.distance.layer_3.test_uuas": "structural.uuas",
    "sinks.outliers_by_state": "sinks.outliers_out",
    "sinks.ratio_by_state": "sinks.ratio_out",
}


def test_columns_read_declared_metrics_and_the_keys_they_read_before():
    from bertology_utils.core.settings import PROJECT_ROOT
    from bertology_utils.papers.metrics import REGISTRY

    declared = {m.key for m in REGISTRY.metrics}
    assert [s.metric for s in COLUMNS if s.metric not in declared] == [], "a ColumnSpec.metric must be declared"
    keys = set()  # flattened as the atlas reads a metrics.json
    for path in sorted((PROJECT_ROOT / "tests" / "references" / "small").glob("*.json")):
        metrics = {key: entry["value"] for key, entry in json.loads(path.read_text())["metrics"].items()}
        keys |= {key for key, _ in atlas_module._flatten(metrics)}
    read = {}
    for key in keys:
        specs = [(spec, fill) for spec in COLUMNS if (fill := spec.match(key)) is not None]
        assert len(specs) <= 1, (key, [spec.name for spec, _ in specs])
        if specs:
            spec, fill = specs[0]
            assert fill.keys() >= spec.fields - {"along"}, (key, spec.name)
            read[key] = spec.name.format(**fill, along="<along>")
    assert read == READ_BEFORE, "a reference's per-head key feeds another column, or none, or newly one"


def test_the_command_writes_the_atlas_and_prints_matching_heads(run, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(atlas_module.Atlas, "write", lambda self, out=None: {"table": out})
    assert main(["atlas", str(run), "--no-maps", "--out", str(tmp_path), "--filter", "importance.SST-2~top~50"]) == 0
    out = capsys.readouterr().out
    assert "3 of 6 heads pass importance.SST-2~top~50" in out
    assert main(["atlas", str(run), "--filter", "nothing~ge~1"]) == 2
    assert "no column 'nothing'" in capsys.readouterr().err


def test_the_documentations_column_list_is_the_registrys():
    from bertology_utils.cli.atlas import COLUMNS_BLOCK
    from bertology_utils.core.settings import PROJECT_ROOT
    from bertology_utils.present.atlas import columns_markdown
    from bertology_utils.present.generated import read_block

    assert read_block(PROJECT_ROOT / "docs" / "atlas.md", COLUMNS_BLOCK) == columns_markdown(), (
        "run `bertology atlas --columns docs/atlas.md`"
    )


def test_the_atlas_notebooks_own_record_is_not_a_source(run):
    (run / "09_atlas").mkdir()
    (run / "09_atlas" / "skipped.json").write_text(
        json.dumps({"everything": True, "sections": [{"section": "atlas", "reason": "ran alone"}]})
    )
    entries = json.loads((run / "run.json").read_text())
    entries["notebooks"].append({"name": "09_atlas", "status": "skipped"})
    (run / "run.json").write_text(json.dumps(entries))
    assert "09_atlas" not in build_atlas(run, maps=False).runs[0].missing


@pytest.mark.parametrize(
    "filters",
    [
        [("importance.SST-2", "top", "34")],
        [("importance.SST-2", "bottom", "50"), ("specialised", "eq", "true")],
        [("confidence", "ge", "0.4"), ("role.syntactic_relations", "ne", "block")],
        [("disabled_change.SST-2", "lt", "0.5"), ("l0_kept.SST-2.lambda=1", "eq", "false")],
    ],
)
def test_the_python_query_is_the_pages(tmp_path, filters):
    """Atlas.query and the page's documented semantics (tests/atlas_payloads.reference_query, which the
    browser test holds the page to) pick the same heads, on two runs of different shapes."""
    atlas = build_atlas(make_run(tmp_path, "a"), make_run(tmp_path, "b", layers=3, heads=4, seed=2), maps=False)
    payload = atlas.payload()
    ids = {run.name: run.id for run in atlas.runs}
    picked = atlas.table[atlas.query(["~".join(f) for f in filters])]
    assert {(ids[r], la, h) for r, la, h in zip(picked["run"], picked["layer"], picked["head"])} == reference_query(
        payload, filters
    )


def test_the_documented_atlas_benchmark_is_the_recorded_run():
    import sys
    from pathlib import Path

    from bertology_utils.present.generated import read_block

    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
    import bench_atlas

    record = json.loads(bench_atlas.RECORD.read_text())
    assert read_block(bench_atlas.PAGE, bench_atlas.BLOCK) == bench_atlas.doc_block(record).strip(), (
        "run python bench/bench_atlas.py --record"
    )
    assert all(row["page_mb"] < bench_atlas.TARGET_MB for row in record["rows"])


def test_column_labels_name_objectives_and_token_kinds_as_readers_do():
    from bertology_utils.interventions.objectives import objective_label
    from bertology_utils.present.atlas import _readable

    assert [objective_label(k) for k in ("sst2", "sts-b", "stsb", "mrpc", "masked_embedding", "mlm", "mine")] == [
        "SST-2 classifier",
        "sts-b",  # a key is the task without its dash: this is no key
        "STS-B classifier",
        "MRPC classifier",
        "masked-word embedding",
        "masked LM",
        "mine",
    ]
    assert _readable({"objective": "sst2", "kind": "sep", "relation": "nsubj"}) == {
        "objective": "SST-2 classifier",
        "kind": "[SEP]",
        "relation": "nsubj",
    }


def test_a_hidden_states_metric_is_shown_by_every_head_of_the_layer_that_writes_it(run):
    """State 0 is the embeddings, which no head writes; state l is layer l's output."""
    probes = json.loads((run / "04_probes" / "metrics.json").read_text())
    outliers = json.loads((run / "10_sinks" / "metrics.json").read_text())["sinks.outliers_by_state"]
    (claim,) = json.loads((run / "06_pruning" / "claims.json").read_text())["claims"]
    claim.update(key="probes.claims.structural.peak_in_middle", id="peak_in_middle")
    (run / "04_probes" / "claims.json").write_text(json.dumps({"claims": [claim]}))
    atlas = build_atlas(run, maps=False)
    t = atlas.table.set_index(["layer", "head"])
    uuas = probes["probes.structural.distance.layer_1.test_uuas"]
    assert t.loc[1, "structural.uuas"].tolist() == [uuas] * 3
    assert t.loc[2, "structural.uuas"].isna().all(), "the last layer's key is missing: no value, not another's"
    assert t.loc[1, "sinks.outliers_out"].tolist() == [outliers[1]] * 3
    assert t.loc[2, "sinks.outliers_out"].tolist() == [outliers[2]] * 3
    d = atlas.dictionary.set_index("column")
    assert d.loc["structural.uuas", "metric"] == "probes.structural.distance.layer_{layer}.test_uuas"
    assert d.loc["structural.uuas", "label"] == "tree distances in the layer's output (UUAS)"
    assert d.loc["sinks.ratio_out", "status"] == "absent", "a list that is not one value per state is no column"
    assert not [c for c in atlas.columns if "rank" in c or "dev" in c]
    columns = {c["name"]: c for c in atlas.payload()["columns"]}
    assert [c["verdict"] for c in columns["structural.uuas"]["claims"]] == ["holds"]
    assert atlas.query(["structural.uuas~ge~0"]).sum() == 3
