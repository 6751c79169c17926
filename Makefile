# `make run` and `make test` work on a fresh machine: the first call creates .venv/
# and installs the project into it; the stamp file keeps later calls from reinstalling.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/gradcheck run cases/

test: $(STAMP)
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples

bench: $(STAMP)
	$(BIN)/python bench/run_overhead.py

clean:
	rm -rf $(VENV) .pytest_cache build src/*.egg-info
