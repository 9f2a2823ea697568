"""The check the atlas tests share: every cell of an atlas table is the value its notebook recorded."""

import json

import numpy as np
import pandas as pd

from bertology_utils.present.atlas import COLUMNS


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
