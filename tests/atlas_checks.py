"""What the atlas tests share: a synthetic run folder, the check that every cell of an atlas
table is the value its notebook recorded, and a colour as a browser's computed style writes it."""

import json

import numpy as np
import pandas as pd

from bertology_utils.attention.alignment import LEADING_SPECIAL, SEPARATOR, WORD
from bertology_utils.attention.store import AttentionStore
from bertology_utils.attention.word_attention import ItemAttention
from bertology_utils.present.atlas import COLUMNS


def rgb(hex_colour: str) -> str:
    """``#e6550d`` as ``getComputedStyle`` gives it: ``rgb(230, 85, 13)``."""
    r, g, b = (int(hex_colour[k : k + 2], 16) for k in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


def write_json(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def grid(rng, layers, heads, kind="float"):
    if kind == "bool":
        return (rng.random((layers, heads)) > 0.5).tolist()
    if kind == "str":
        return rng.choice(["vertical", "diagonal", "block"], size=(layers, heads)).tolist()
    return rng.random((layers, heads)).round(6).tolist()


def store_items(layers, heads, lengths, seed):
    rng = np.random.default_rng(seed)
    items = []
    for index, n in enumerate(lengths):
        logits = rng.normal(size=(layers, heads, n, n)) * 2
        maps = (np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)).astype(np.float16).astype(np.float32)
        kinds = np.array([LEADING_SPECIAL] + [WORD] * (n - 2) + [SEPARATOR], dtype=np.int8)
        words = ("[CLS]", *[f"w{i}" for i in range(n - 2)], "[SEP]")
        items.append(ItemAttention(index, f"s{index}", words, kinds, np.zeros(n, np.int8), maps, n))
    return items


def make_run(
    root, name="run", layers=2, heads=3, seed=0, model="tiny/model", store=True, corpus="c0", lengths=(14, 13, 15, 9)
):
    """A run of notebooks 05, 06 and 07 recording per-head metrics, 04 and 10 recording per-state ones, 03
    that skipped its coreference section, and with ``store`` 00's attention store of sentences of ``lengths``
    words (specials included)."""
    rng = np.random.default_rng(seed)
    run = root / name
    shape = {"num_layers": layers, "num_heads": heads}
    write_json(
        run / "06_pruning" / "metrics.json",
        {
            "pruning.model": model,
            **{f"pruning.{k}": v for k, v in shape.items()},
            "pruning.SST-2.importance": grid(rng, layers, heads),
            "pruning.SST-2.head_deltas": grid(rng, layers, heads),
            "pruning.SST-2.layer_deltas": rng.random(layers).tolist(),  # per layer: not a column
        },
    )
    write_json(
        run / "06_pruning" / "claims.json",
        {
            "claims": [
                {
                    "key": "pruning.claims.heads_prunable.SST-2",
                    "id": "heads_prunable.SST-2",
                    "claim": "Many heads can be pruned",
                    "paper": "Michel et al. 2019",
                    "paper_value": "40%",
                    "ours": "50%",
                    "verdict": "holds",
                    "rule": "",
                    "values": {},
                    "note": "",
                }
            ]
        },
    )
    importance_with_nan = np.array(grid(rng, layers, heads), dtype=object)
    importance_with_nan[0, 0] = None
    write_json(
        run / "07_head_roles" / "metrics.json",
        {
            "head_roles.model": model,
            **{f"head_roles.{k}": v for k, v in shape.items()},
            "head_roles.confidence": importance_with_nan.tolist(),
            "head_roles.specialised": grid(rng, layers, heads, "bool"),
            "head_roles.syntactic_relations": grid(rng, layers, heads, "str"),
            "head_roles.SST-2.l0_lambdas": [0.1, 1.0],
            "head_roles.SST-2.l0_masks": [grid(rng, layers, heads, "bool") for _ in range(2)],
            "head_roles.mystery": grid(rng, layers, heads),  # described by no spec: kept under its key
        },
    )
    nearest = [[[f"{(l + 1) % layers + 1}-{h + 1}"] for h in range(heads)] for l in range(layers)]
    write_json(
        run / "05_clustering" / "metrics.json",
        {
            "clustering.model": model,
            "clustering.head.nearest": nearest,
            "clustering.head.nearest_distance": [[[0.5] for _ in range(heads)] for _ in range(layers)],
        },
    )
    # a hidden state's metrics: one key per state (the last layer's missing), and a list over the states
    write_json(
        run / "04_probes" / "metrics.json",
        {
            "probes.model": model,
            **{f"probes.structural.distance.layer_{s}.test_uuas": round(float(rng.random()), 6) for s in range(layers)},
            "probes.structural.distance.layer_1.dev_uuas": 0.5,  # another split: not a column
            "probes.structural.distance.layer_1.rank_4.test_uuas": 0.5,  # the rank sweep: not a column
        },
    )
    write_json(
        run / "10_sinks" / "metrics.json",
        {
            "sinks.model": model,
            "sinks.outliers_by_state": rng.random(layers + 1).round(6).tolist(),
            "sinks.ratio_by_state": rng.random(layers).tolist(),  # not one per state: not a column
        },
    )
    write_json(run / "03_syntax_coref" / "metrics.json", {"syntax.model": model})
    write_json(
        run / "03_syntax_coref" / "skipped.json",
        {"everything": False, "sections": [{"section": "coref", "reason": "GAP data missing"}]},
    )
    names = ("03_syntax_coref", "04_probes", "05_clustering", "06_pruning", "07_head_roles", "10_sinks")
    entries = [{"name": n, "status": "ok"} for n in names]
    if store:
        items = store_items(layers, heads, lengths, seed)
        metadata = {"model": {"name": model, **shape}, "corpus": {"name": "toy", "sha256": corpus}}
        s = AttentionStore.open_or_create(run / "00_tour" / "tour.zarr", metadata, len(items))
        s.writer(0, len(items), keep_tokens=False).append(items)
        write_json(
            run / "00_tour" / "metrics.json", {"tour.model": model, **{f"tour.{k}": v for k, v in shape.items()}}
        )
        entries.insert(0, {"name": "00_tour", "status": "ok"})
    write_json(run / "run.json", {"notebooks": entries})
    return run


def _flat(metrics: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in metrics.items():
        out.update(_flat(value, f"{prefix}{key}.") if isinstance(value, dict) else {f"{prefix}{key}": value})
    return out


def assert_cells_are_recorded(atlas, folders: dict) -> int:
    """Compare every recorded column of ``atlas.table`` with the notebooks' metrics.json, run by run
    (``folders``: run name -> run folder); returns the number of cells compared."""
    compared = 0
    rows = atlas.dictionary[atlas.dictionary["status"] == "recorded"]
    assert set(rows["column"]) == set(atlas.columns)
    for run, folder in folders.items():
        part = atlas.table[atlas.table["run"] == run]
        for row in rows.itertuples():
            path = folder / row.notebook / "metrics.json"
            metrics = _flat(json.loads(path.read_text())) if path.is_file() else {}
            if "{layer}" in row.metric:  # one key per hidden state: each layer's heads show its output's
                for layer, cells in part.groupby("layer")[row.column]:
                    expected = metrics.get(row.metric.format(layer=layer))
                    assert cells.isna().all() if expected is None else (cells == expected).all(), (run, row.column)
                    compared += len(cells)
                continue
            if row.metric in metrics and row.metric.endswith("_by_state"):
                value = np.repeat(
                    np.array(metrics[row.metric][1:], dtype=object), len(part) // (len(metrics[row.metric]) - 1)
                )
                assert list(part[row.column]) == list(value), (run, row.column)
                compared += len(part)
                continue
            if row.metric not in metrics:
                assert part[row.column].isna().all(), (run, row.column)
                continue
            value = np.array(metrics[row.metric], dtype=object)
            spec = next((s for s in COLUMNS if s.match(row.metric) is not None), None)
            if spec is not None and spec.along is not None:  # one column per value of the leading axis
                labels = metrics[spec.along.format(**spec.match(row.metric))]
                value = value[[float(v) for v in labels].index(float(row.column.rsplit("=", 1)[1]))]
            assert value.size == len(part), (run, row.column)
            for cell, expected in zip(part[row.column], value.ravel()):
                if expected is None:
                    assert pd.isna(cell), (run, row.column, cell)
                else:
                    assert cell == expected, (run, row.column, cell, expected)
                compared += 1
    return compared
