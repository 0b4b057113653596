SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# constraints.txt pins torch so that pip does not download a multi-GB build; drop it (PIP_CONSTRAINT=) to choose your own torch
PIP_CONSTRAINT ?= constraints.txt
LINT_PATHS = sb3_trpo_plus/ tests/ benchmarks/

.PHONY: install demo pytest test docs docs-screenshot type lint format check-codestyle commit-checks clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

install: $(BIN)/python
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install $(if $(PIP_CONSTRAINT),-c $(PIP_CONSTRAINT)) -e ".[tests]"

# Train TRPOPlus on CartPole-v1 and print the evaluation (the README's first command)
demo: $(BIN)/python
	$(BIN)/python -m pip install $(if $(PIP_CONSTRAINT),-c $(PIP_CONSTRAINT)) -e .
	$(BIN)/python -m sb3_trpo_plus.quickstart

pytest:
	$(BIN)/python -m pytest -n 2 -v --durations=15 tests/

# Install everything and run the test suite (the README's second command, called by .ci/run)
test: install pytest

# Build the documentation site (docs/ -> docs/_build/html), warnings as errors as in CI (tests/test_docs.py)
docs: $(BIN)/python
	$(BIN)/python -c "import sphinx, myst_parser, sphinx_rtd_theme" 2>/dev/null || \
		$(BIN)/python -m pip install $(if $(PIP_CONSTRAINT),-c $(PIP_CONSTRAINT)) -e ".[docs]"
	$(BIN)/python -m sphinx -W --keep-going -b html docs docs/_build/html
	@echo "open docs/_build/html/index.html"

# The README's picture of the site: the TRPOPlus page in headless Chromium (Debian package chromium)
docs-screenshot: docs
	chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,1600 \
		--screenshot=docs/images/site_trpo_plus.png "file://$(CURDIR)/docs/_build/html/trpo_plus.html"

type:
	$(BIN)/python -m mypy sb3_trpo_plus/

lint:
	$(BIN)/python -m ruff check $(LINT_PATHS) --output-format=full

format:
	$(BIN)/python -m ruff format $(LINT_PATHS)
	$(BIN)/python -m ruff check --fix $(LINT_PATHS)

check-codestyle:
	$(BIN)/python -m ruff format --check $(LINT_PATHS)

commit-checks: format type lint

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache docs/_build
