"""Notebook 09 at the end of a real run: the atlas of notebooks 00, 01, 03 and 05 (small parameters), every
cell the value its notebook recorded, the absent notebooks said, the page written beside the run."""

import json

import pytest
from atlas_checks import assert_cells_are_recorded
from notebook_runs import SMALL_PARAMETERS

from bertology_utils.present.atlas import PAGE_FILE, TABLE_FILE, read_atlas
from bertology_utils.run.harness import DEFAULT_NOTEBOOKS_DIR, run_notebooks

STEMS = ("00_tour", "01_patterns", "03_syntax_coref", "05_clustering", "09_atlas")


@pytest.mark.slow
@pytest.mark.notebook
def test_the_atlas_notebook_joins_the_runs_notebooks(tmp_path, monkeypatch):
    monkeypatch.setenv("BERTOLOGY_CACHE_DIR", str(tmp_path / "cache"))
    # 09 is listed first: the harness still starts it after the others
    notebooks = [DEFAULT_NOTEBOOKS_DIR / f"{stem}.ipynb" for stem in (STEMS[-1], *STEMS[:-1])]
    parameters = {stem: SMALL_PARAMETERS.get(stem, {}) for stem in STEMS}
    report = run_notebooks(
        notebooks, run_name="atlas", notebook_parameters=parameters, results_root=tmp_path, progress=False
    )
    assert report.ok, report.summary()
    run = tmp_path / "atlas"
    assert all(nb.status == "ok" for nb in report.notebooks), report.summary()

    from bertology_utils.present.atlas import build_atlas

    atlas = build_atlas(run)
    assert read_atlas(run / TABLE_FILE).equals(atlas.table)
    compared = assert_cells_are_recorded(atlas, {"atlas": run})
    assert compared == len(atlas.table) * len(atlas.columns) > 0
    columns = set(atlas.columns)
    assert {"to_previous", "pattern_type", "syntax.best_relation", "mds.x", "behaviour"} <= columns
    assert any(c.startswith("syntax.") for c in columns) and "entropy" in columns
    reasons = atlas.dictionary.set_index("column")["reason"]
    assert "06_pruning did not run" in reasons["importance.<task>"]
    recorded = json.loads((run / "09_atlas" / "metrics.json").read_text())
    assert recorded["atlas.n_columns"] == len(atlas.columns) and recorded["atlas.n_heads"] == len(atlas.table)
    page = run / PAGE_FILE
    assert page.is_file() and page.stat().st_size < 10e6
    assert "09_atlas/figures/atlas_grid.png" in {str(p.relative_to(run)) for p in run.glob("09_atlas/figures/*")}
