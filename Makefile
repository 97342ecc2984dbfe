# Quick start: `make demo` and `make test` work on a fresh machine with Python 3.11 and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev
# instructor pins an openai the dev extra excludes: its tests run it in a venv of its own
INSTRUCTOR := .venv-instructor
# the oldest openai/anthropic releases the hooks support, also in a venv of their own
OLDEST := .venv-oldest-sdks
# strands-agents pins an mcp the dev extra excludes: its tests run it in a venv of its own
STRANDS := .venv-strands

.PHONY: demo test test-deep lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[server]'
	touch $@

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/python -m examples.demo

$(INSTRUCTOR)/.installed: pyproject.toml
	$(PYTHON) -m venv $(INSTRUCTOR)
	$(INSTRUCTOR)/bin/python -m pip install -q --upgrade pip
	$(INSTRUCTOR)/bin/python -m pip install -q -e '.[instructor]'
	touch $@

$(OLDEST)/.installed: pyproject.toml
	$(PYTHON) -m venv $(OLDEST)
	$(OLDEST)/bin/python -m pip install -q --upgrade pip
	$(OLDEST)/bin/python -m pip install -q -e '.[oldest-sdks]'
	touch $@

$(STRANDS)/.installed: pyproject.toml
	$(PYTHON) -m venv $(STRANDS)
	$(STRANDS)/bin/python -m pip install -q --upgrade pip
	$(STRANDS)/bin/python -m pip install -q -e '.[strands]'
	touch $@

test: $(STAMP) $(INSTRUCTOR)/.installed $(OLDEST)/.installed $(STRANDS)/.installed
	@echo "== lint: ruff check, ruff format --check"
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/ruff format --check src tests benchmarks examples
	@echo "== types: mypy"
	$(BIN)/mypy
	@echo "== tests: pytest on every core (a line per test module as it ends; the slowest at the end)"
	$(BIN)/python -m pytest -n auto --durations=10

# The property tests that make test bounds (tests/suite.py: bounded), at their full counts.
test-deep: $(STAMP)
	@echo "== deep: the bounded property tests, every example (HYPOTHESIS_PROFILE=deep)"
	HYPOTHESIS_PROFILE=deep $(BIN)/python -m pytest -n auto -m deep --durations=5

bench: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[dev,bench]'
	for b in benchmarks/bench_*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) $(INSTRUCTOR) $(OLDEST) $(STRANDS) .pytest_cache .mypy_cache .ruff_cache .hypothesis
