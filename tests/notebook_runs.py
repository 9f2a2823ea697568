"""The notebook runs slow tests share: each notebook on the test suite's small parameters, with the data
folder or as a fresh clone offline (no data folder, no network), run once per test session.

The notebook tests check a run's metrics against its reference, the browser tests audit the deck made from
the same run: both ask :class:`SmallRuns` for it, and whichever asks first runs it while the other waits
(a lock on the session's shared folder, so test processes side by side share it too).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict
from pathlib import Path

import pytest

from bertology_utils.core.cache import cache_lock
from bertology_utils.run.harness import DEFAULT_NOTEBOOKS_DIR, NotebookResult, run_notebooks

#: Notebook stem -> parameters small enough for the test suite (the defaults are for real runs).
SMALL_PARAMETERS = {
    "00_tour": {"n_sentences": 4},
    "01_patterns": {"n_sentences": 8, "n_pairs": 4, "n_glue": 4},
    "02_sep_noop": {
        "seeds": 1,
        "n_sentences": 8,
        "n_sst2": 8,
        "sst2_train_examples": 32,
        "sst2_epochs": 1,
        "sst2_eval_examples": 32,
        "n_ablation": 4,
        "batch_size": 4,
        "precision": "fp32",
    },
    "03_syntax_coref": {"n_sentences": 40, "n_gap": 40, "gap_max_tokens": 128},
    "04_probes": {
        "n_train": 60,
        "n_dev": 20,
        "n_test": 20,
        "max_epochs": 2,
        "structural_layers": [0, 3],
        "structural_max_epochs": 2,
        "precision": "fp32",  # the default, "auto", is bf16 where the CPU has bfloat16 units: references are fp32
    },
    "05_clustering": {"n_sentences": 12, "n_permutations": 200},
    "06_pruning": {
        "seeds": 1,
        "tasks": ["SST-2"],
        "train_examples": 32,
        "epochs": 1,
        "eval_examples": 16,
        "dev_examples": 8,
        "cosine_examples": 8,
        "random_seeds": [0, 1],
        "step": 0.25,
        "batch_size": 8,
        "precision": "fp32",
    },
    "07_head_roles": {
        "seeds": 1,
        "n_sentences": 40,
        "tasks": ["SST-2"],
        "share_tasks": ["SST-2", "RTE"],
        "n_share_examples": 8,
        "train_examples": 32,
        "epochs": 1,
        "eval_examples": 16,
        "dev_examples": 8,
        "ig_steps": 4,
        "lambdas": [0.03, 0.3, 3.0],
        "gate_steps": 60,
        "n_qk_sentences": 16,
        "step": 0.25,
        "random_seeds": [0, 1],
        "n_permutations": 200,
        "batch_size": 8,
        "precision": "fp32",
    },
    "08_context_mixing": {
        "seeds": 1,
        "n_sentences": 8,
        "n_examples": 12,
        "train_examples": 32,
        "epochs": 1,
        "eval_examples": 32,
        "batch_size": 4,
        "precision": "fp32",
    },
    "09_atlas": {},  # alone, it finds no other notebook's results and records that it skipped
    "10_sinks": {"n_sentences": 12, "batch_size": 4},
}

NOTEBOOKS = sorted(DEFAULT_NOTEBOOKS_DIR.glob("*.ipynb"))
#: The two ways the suite runs every notebook: with the data folder, and as a fresh clone offline.
VARIANTS = ("data", "no-data")
#: What a fresh clone offline lacks: the data folder (only the project's own sample is found) and the network.
_OFFLINE = ("BERTOLOGY_OFFLINE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


class SmallRuns:
    """Each notebook's small-parameter run, made once in ``root`` and read by every test that asks for it.

    Each variant has a cache of its own, shared by its notebooks as one ``bertology run`` shares it.
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    def run_dir(self, stem: str, variant: str = "data") -> Path:
        """The run folder (``<run>/<stem>/`` holds the notebook's results)."""
        return self.root / variant / stem / "test"

    def cache_dir(self, variant: str = "data") -> Path:
        """The cache the variant's runs share."""
        return self.root / variant / "cache"

    def get(self, stem: str, variant: str = "data") -> NotebookResult:
        """The notebook's result, running it first when no test of this session has."""
        if variant not in VARIANTS:
            raise ValueError(f"variant {variant!r} is none of {VARIANTS}")
        done = self.root / variant / f"{stem}.result.json"
        with cache_lock(done):
            if not done.is_file():
                with pytest.MonkeyPatch.context() as patch:
                    patch.setenv("BERTOLOGY_CACHE_DIR", str(self.cache_dir(variant)))
                    if variant == "no-data":
                        patch.delenv("BERTOLOGY_DATA_DIR", raising=False)
                        for name in _OFFLINE:
                            patch.setenv(name, "1")
                    report = run_notebooks(
                        [DEFAULT_NOTEBOOKS_DIR / f"{stem}.ipynb"],
                        run_name="test",
                        parameters=SMALL_PARAMETERS[stem],
                        results_root=self.run_dir(stem, variant).parent,
                        progress=False,
                    )
                done.write_text(json.dumps(asdict(report.notebooks[0])))
        return NotebookResult(**json.loads(done.read_text()))


def whole_run(runs: SmallRuns, variant: str, folder: Path) -> Path:
    """The variant's runs of every notebook joined into one run folder, as ``bertology run`` would have written
    it: each notebook's results copied in, ``run.json`` listing every notebook. Returns the folder."""
    records = []
    for path in NOTEBOOKS:
        runs.get(path.stem, variant)
        source = runs.run_dir(path.stem, variant)
        shutil.copytree(source / path.stem, folder / path.stem)
        records.append(json.loads((source / "run.json").read_text()))
    joined = {**records[0], "run_dir": str(folder), "notebooks": [nb for r in records for nb in r["notebooks"]]}
    (folder / "run.json").write_text(json.dumps(joined))
    return folder


def shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This session's folder that every test process sees (pytest-xdist gives each its own base below it)."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "small-runs"
