# DataLens reproducibility book. `make book` builds the book, `make test` runs the tests.
# Both create the virtual environment .venv on first use (CPU torch wheel first, then the
# pinned project with its book and dev extras).
PYTHON ?= python3
VENV ?= .venv
PROFILE ?= smoke
BIN := $(VENV)/bin

.PHONY: venv test lint notebooks book clean-book bench

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $@

test: venv
	$(BIN)/python -m pytest -q

lint: venv
	$(BIN)/ruff check datalens_lib tests benchmarks notebooks

notebooks: venv
	$(BIN)/datalens run-all --profile $(PROFILE)

book: notebooks
	$(BIN)/jupyter-book build . --toc book/_toc.yml -W --keep-going
	@echo "book: _build/html/index.html"

bench: venv
	$(BIN)/python benchmarks/bench_topagg.py

clean-book:
	rm -rf _build
