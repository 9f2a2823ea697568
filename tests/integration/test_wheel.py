"""A built wheel carries the project's own data: an installed (not editable) package finds the sample, the
labelled pattern maps, the trained pattern classifiers and the atlas page's script and style without the checkout."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Runs in the installed copy: loads through the normal data API, says where each file was found.
LOAD = """
import json
import bertology_utils
from bertology_utils.analyses.pattern_maps import planted_layout
from bertology_utils.analyses.pattern_models import best_method, classify_map
from bertology_utils.analyses.pattern_types import LABELS_DIR, load_labelled_maps
from bertology_utils.data import load_sample, load_sample_pairs, resolve_data_file
from bertology_utils.present.atlas_page import render_atlas_page

table, maps = load_labelled_maps()
print(json.dumps({
    "package": bertology_utils.__file__,
    "sample": [len(load_sample()), str(resolve_data_file("sample", "all"))],
    "pairs": [len(load_sample_pairs()), str(resolve_data_file("sample-pairs", "all"))],
    "labels": [len(table), len(maps), str(LABELS_DIR)],
    "classified": [best_method(), classify_map(__import__("numpy").eye(8), *planted_layout(6))],
    "atlas_page": render_atlas_page({"version": 1}),
}))
"""


def test_an_installed_wheel_finds_the_sample_and_the_pattern_labels(tmp_path):
    pytest.importorskip("hatchling", reason="the build backend is not installed (make setup installs it)")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", "--no-cache-dir"]
    # No build isolation: the environment's own hatchling builds it, with nothing downloaded.
    subprocess.run(
        [*pip, "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", tmp_path / "dist", ROOT], check=True
    )
    (wheel,) = (tmp_path / "dist").glob("bertology_utils-*.whl")
    site = tmp_path / "site"
    subprocess.run([*pip, "install", "-q", "--no-deps", "--target", site, wheel], check=True)

    # The installed copy comes first on the path; its dependencies come from this environment. Offline,
    # with no data directory and an empty cache, the copy inside the package is the only place left.
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERTOLOGY_")}
    env.update(PYTHONPATH=str(site), BERTOLOGY_OFFLINE="1", BERTOLOGY_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run(
        [sys.executable, "-c", LOAD], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[-1])
    assert Path(found["package"]).is_relative_to(site)
    assert found["sample"][0] == 40 and found["pairs"][0] == 12 and found["labels"][:2] == [455, 455]
    assert found["classified"] == ["features", "diagonal"]  # the shipped classifier, read from the wheel
    assert "function openCard" in found["atlas_page"] and "#atlas-card" in found["atlas_page"]  # its JS and CSS
    for path in (found["sample"][1], found["pairs"][1], found["labels"][2]):
        assert Path(path).is_relative_to(site / "bertology_utils" / "_data"), path
