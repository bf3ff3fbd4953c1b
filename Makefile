# The two commands: `make demo` and `make test`. Both set everything up first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PATCHIT_HOME ?= $(CURDIR)/var

.PHONY: demo test lint typecheck install clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e ".[dbt,airflow,llm,dev]"
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/patchit demo

test: install
	$(BIN)/ruff check patchit tests
	$(BIN)/mypy
	$(BIN)/python -m pytest -q

lint: install
	$(BIN)/ruff check patchit tests
	$(BIN)/ruff format --check patchit tests

typecheck: install
	$(BIN)/mypy

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache
