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
# the Node clients the proxy's tests run (tests/node, from its lockfile); without npm they skip
NODE_CLIENTS := tests/node/node_modules/.installed
# Some machines set PYTHONDONTWRITEBYTECODE: then every process (each pytest worker, each
# `tracetape run` a test starts) compiles this checkout's modules and rewrites every test
# module's asserts again, a third of the suite's time. Here Python keeps its bytecode, as it
# does by default (site-packages are compiled when installed; the checkout is not).
unexport PYTHONDONTWRITEBYTECODE
# pip says what it installs (a line a package) and, on a terminal, how far its downloads are:
# the dev extra takes minutes on a fresh machine. CI (which sets CI) gets the lines without
# the progress bars.
PIP_INSTALL = -m pip install$(if $(CI), --progress-bar off)

.PHONY: demo test test-deep lint bench docs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	@echo "== installing tracetape with its server extra into $(VENV)"
	$(BIN)/python $(PIP_INSTALL) -e '.[server]'
	touch $@

$(STAMP): pyproject.toml | $(BIN)/python
	@echo "== installing tracetape with its dev extra into $(VENV) (minutes on a fresh machine)"
	$(BIN)/python $(PIP_INSTALL) -e '.[dev]'
	touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/python -m examples.demo

$(INSTRUCTOR)/.installed: pyproject.toml
	$(PYTHON) -m venv $(INSTRUCTOR)
	$(INSTRUCTOR)/bin/python -m pip install -q --upgrade pip
	@echo "== installing tracetape with instructor into $(INSTRUCTOR)"
	$(INSTRUCTOR)/bin/python $(PIP_INSTALL) -e '.[instructor]'
	touch $@

$(OLDEST)/.installed: pyproject.toml
	$(PYTHON) -m venv $(OLDEST)
	$(OLDEST)/bin/python -m pip install -q --upgrade pip
	@echo "== installing tracetape with the oldest SDKs it supports into $(OLDEST)"
	$(OLDEST)/bin/python $(PIP_INSTALL) -e '.[oldest-sdks]'
	touch $@

$(STRANDS)/.installed: pyproject.toml
	$(PYTHON) -m venv $(STRANDS)
	$(STRANDS)/bin/python -m pip install -q --upgrade pip
	@echo "== installing tracetape with strands-agents into $(STRANDS)"
	$(STRANDS)/bin/python $(PIP_INSTALL) -e '.[strands]'
	touch $@

# npm ci empties node_modules first, the stamp with it: a failed install is tried again
$(NODE_CLIENTS): tests/node/package.json tests/node/package-lock.json
	@if command -v npm >/dev/null; then \
		echo "== installing the Node clients of the proxy tests (npm ci in tests/node)"; \
		cd tests/node && npm ci --no-audit --no-fund$(if $(CI), --loglevel=error) && touch node_modules/.installed; \
	else \
		echo "== no npm: the Node client tests (tests/integrations/test_proxy_node.py) will skip"; \
	fi

test: $(STAMP) $(INSTRUCTOR)/.installed $(OLDEST)/.installed $(STRANDS)/.installed $(NODE_CLIENTS)
	@echo "== lint: ruff check, ruff format --check"
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/ruff format --check src tests benchmarks examples
	@echo "== types: mypy"
	$(BIN)/mypy
	@echo "== tests: pytest on every core (a line per test module as it ends; the slowest at the end)"
	$(BIN)/python -m pytest -n auto --dist worksteal -m "not slow" --durations=10

# What make test leaves out or bounds (tests/suite.py): the property tests at their full
# counts, and the slow tests (a framework's or an SDK's whole program in child processes, see
# tests/suite.py). .ci/run runs it.
test-deep: $(STAMP) $(INSTRUCTOR)/.installed $(OLDEST)/.installed $(STRANDS)/.installed $(NODE_CLIENTS)
	@echo "== deep: the slow tests, and the bounded property tests at every example"
	HYPOTHESIS_PROFILE=deep $(BIN)/python -m pytest -n auto --dist worksteal -m "deep or slow" --durations=5

# the documentation site, from docs/ into site/ (make test builds it too, in tests/test_docs.py)
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

bench: $(STAMP)
	$(BIN)/python $(PIP_INSTALL) -e '.[dev,bench]'
	for b in benchmarks/bench_*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) $(INSTRUCTOR) $(OLDEST) $(STRANDS) tests/node/node_modules .pytest_cache .mypy_cache .ruff_cache .hypothesis site
