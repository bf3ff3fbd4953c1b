# The two commands: `make demo` and `make test`. Both set everything up first.
# `make test-fast` runs the tests that start no dbt, Airflow, Postgres or docker (the guard in
# tests/conftest.py fails any that does); `make test` runs everything, slow tests included.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PATCHIT_HOME ?= $(CURDIR)/var
# Most of the suite waits on dbt and Airflow child processes, so more workers than cores pay;
# whole files per worker keep module-scoped fixtures (a warm Airflow harness) built once;
# files are handed out in collection order, which tests/conftest.py starts with the longest
# (HEAVY_FILES), not xdist's most-tests-first order that left those for last.
PYTEST_WORKERS ?= 4
PYTEST_XDIST := -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder

.PHONY: demo test test-fast fuzz lint typecheck install bubblewrap chromium postgres clean fault race bench docs

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e ".[dbt,airflow,llm,postgres,dev,docs]"
	touch $(STAMP)

# The Snowflake tests' local emulator (`fakesnow -s -p PORT`, tests/sf_server.py) in its own
# environment: fakesnow 0.12 pins sqlglot and duckdb, which patchit's own environment must not
# take from it (users get the sqlglot `pip install patchit` resolves); connector 5 dropped a
# module fakesnow 0.12 imports.
FAKESNOW_VENV := .venv-fakesnow
FAKESNOW := $(FAKESNOW_VENV)/bin/fakesnow

$(FAKESNOW):
	$(PYTHON) -m venv $(FAKESNOW_VENV)
	$(FAKESNOW_VENV)/bin/python -m pip install --quiet "fakesnow[server]==0.12.*" "snowflake-connector-python<5"

install: $(STAMP) $(FAKESNOW)

demo: install
	$(BIN)/patchit demo

# Harness runs are sandboxed with bubblewrap where it works; the test suite proves it, so as
# root on Debian (CI) this installs it. Elsewhere it only says what is missing.
bubblewrap:
	@command -v bwrap >/dev/null 2>&1 || { \
	  SUDO=; [ "$$(id -u)" = 0 ] || { sudo -n true 2>/dev/null && SUDO="sudo -n"; }; \
	  if { [ "$$(id -u)" = 0 ] || [ -n "$$SUDO" ]; } && command -v apt-get >/dev/null 2>&1; then \
	    export DEBIAN_FRONTEND=noninteractive; \
	    $$SUDO apt-get install -y -q bubblewrap || \
	      { $$SUDO apt-get update -q && $$SUDO apt-get install -y -q bubblewrap; }; \
	  else \
	    echo "bubblewrap (bwrap) is missing: install it (apt-get install bubblewrap);" \
	         "the sandbox tests need it"; \
	  fi; }

# The HTML report is checked as a reader sees it, in headless Chromium (a slow test); as root
# on Debian (CI) this installs it. Elsewhere it only says what is missing.
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  SUDO=; [ "$$(id -u)" = 0 ] || { sudo -n true 2>/dev/null && SUDO="sudo -n"; }; \
	  if { [ "$$(id -u)" = 0 ] || [ -n "$$SUDO" ]; } && command -v apt-get >/dev/null 2>&1; then \
	    export DEBIAN_FRONTEND=noninteractive; \
	    $$SUDO apt-get install -y -q chromium || \
	      { $$SUDO apt-get update -q && $$SUDO apt-get install -y -q chromium; }; \
	  else \
	    echo "chromium is missing: install it (apt-get install chromium);" \
	         "the HTML report's browser test needs it"; \
	  fi; }

# The Postgres tests start a throw-away PostgreSQL 15 cluster (initdb/pg_ctl, no Docker); as
# root on Debian (CI) this installs the server. Elsewhere it only says what is missing.
PG_INITDB := /usr/lib/postgresql/15/bin/initdb
postgres:
	@[ -x $(PG_INITDB) ] || { \
	  SUDO=; [ "$$(id -u)" = 0 ] || { sudo -n true 2>/dev/null && SUDO="sudo -n"; }; \
	  if { [ "$$(id -u)" = 0 ] || [ -n "$$SUDO" ]; } && command -v apt-get >/dev/null 2>&1; then \
	    export DEBIAN_FRONTEND=noninteractive; \
	    $$SUDO apt-get install -y -q postgresql-15 || \
	      { $$SUDO apt-get update -q && $$SUDO apt-get install -y -q postgresql-15; }; \
	  else \
	    echo "PostgreSQL 15 ($(PG_INITDB)) is missing: install it (apt-get install" \
	         "postgresql-15); the Postgres tests need it"; \
	  fi; }

test: install bubblewrap chromium postgres
	$(BIN)/ruff check patchit tests docs/hooks
	$(BIN)/mypy
	$(BIN)/python -m pytest -q $(PYTEST_XDIST) --durations=15

test-fast: install bubblewrap
	PATCHIT_FAST_TIER=1 $(BIN)/python -m pytest -q -m "not slow" $(PYTEST_XDIST)

# Crash safety: 100 SIGKILLs at random points of real dbt heals (a timer, and every 4th kill at
# a named checkpoint), each resumed; prints corrupt databases, stray worktrees, lost incidents
# and lost verified fixes (all must be 0) and whether the user's trees are untouched.
FAULT_KILLS ?= 100
fault: install bubblewrap
	$(BIN)/python -m patchit.bench.fault --kills $(FAULT_KILLS)

# The whole scenario corpus (benchmarks/corpus, every scenario through the real runner; results
# in benchmarks/results/latest.*). `make test` runs a sample of it: one scenario per expected
# verdict (tests/bench/corpus_subset.py), and two scenarios on Postgres.
bench: install bubblewrap
	$(BIN)/patchit bench

# Racing workers: 4 worker processes x 1,000 spooled events; each incident healed once.
race: install
	$(BIN)/python -m patchit.bench.race --workers 4 --events 1000 $(RACE_ARGS)

# hypothesis over every parser of outside input (events, spool rows, run_results, manifests,
# Airflow contexts, logs, model answers): FUZZ_EXAMPLES inputs each, one process so the tallies
# print at the end. `make test` runs the same tests with a few dozen inputs each.
FUZZ_EXAMPLES ?= 10000
fuzz: install
	PATCHIT_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest -q -m fuzz -p no:cacheprovider

lint: install
	$(BIN)/ruff check patchit tests docs/hooks
	$(BIN)/ruff format --check patchit tests docs/hooks

# The docs site into site/: strict, so a broken link or anchor, or a page left out of the nav,
# fails it; the reference pages are generated from the code (docs/hooks/reference.py).
# tests/docs/test_site.py runs the same build in `make test`.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

typecheck: install
	$(BIN)/mypy

clean:
	rm -rf $(VENV) var site .pytest_cache .mypy_cache .ruff_cache
