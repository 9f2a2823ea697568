"""A saved Hugging Face data set runs through notebooks 01, 03 and 06 by parameter (issue 43).

The runs are test_notebooks.py's runs on the user's own data (USER_DATA), with each data parameter
pointing at the same data saved with save_to_disk (tests/hf_datasets.py) instead of at its files.
The folders keep the files' names, so the notebooks record the same data names.
"""

import json
from pathlib import Path

import pytest
from test_notebooks import USER_DATA, _run, isolated_cache  # noqa: F401 (isolated_cache is a fixture)

from bertology_utils.run.harness import DEFAULT_NOTEBOOKS_DIR

pytest.importorskip("datasets", reason="the hf extra is not installed: pip install 'bertology-utils[hf]'")
import hf_datasets as hf  # noqa: E402 (it builds data sets with the datasets package)


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> dict[str, str]:
    """The German treebank, the sample pairs and the user's task as hf: sources of save_to_disk folders."""
    root = tmp_path_factory.mktemp("hf")
    return {
        "treebank": hf.german_treebank(root / "de_mini"),
        "pairs": hf.sample_pairs(root / "pairs"),
        "task": hf.user_task(root / "user_task"),
    }


#: Each notebook's data parameters, as sources of the saved data sets.
HF_PARAMETERS = {
    "01_patterns": lambda saved: {"treebank": saved["treebank"], "pair_sets": [saved["pairs"]]},
    "03_syntax_coref": lambda saved: {"treebank": saved["treebank"]},
    "06_pruning": lambda saved: {"tasks": [saved["task"]]},
}


@pytest.mark.slow
@pytest.mark.notebook
@pytest.mark.usefixtures("isolated_cache")
@pytest.mark.parametrize("stem", HF_PARAMETERS)
def test_a_saved_hugging_face_data_set_runs_through_the_notebook(stem, saved, tmp_path):
    result = _run(DEFAULT_NOTEBOOKS_DIR / f"{stem}.ipynb", tmp_path, {**USER_DATA[stem], **HF_PARAMETERS[stem](saved)})
    assert result.status == "ok", result.describe_error()
    assert not result.skipped
    metrics = json.loads(Path(result.metrics).read_text())
    if stem == "06_pruning":
        assert metrics["pruning.tasks"] == ["user_task"]
        assert metrics["pruning.user_task.dev_examples"] == 8
    else:
        assert "de_mini/validation" in json.dumps(metrics), f"{stem} did not record that it read the saved treebank"
    if stem == "01_patterns":  # the pair set read, not replaced by the sample pairs as missing data is
        assert saved["pairs"] in metrics["patterns.items"], metrics["patterns.items"]
