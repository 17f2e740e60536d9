# DataLens reproducibility book. `make book` builds the book, `make test` runs the tests.
# Both create the virtual environment .venv on first use (CPU torch wheel first, then the
# pinned project with its book and dev extras).
PYTHON ?= python3
VENV ?= .venv
PROFILE ?= smoke
BIN := $(VENV)/bin

# The public datasets the book and the tests read (MNIST, Fashion-MNIST): found in the lookup
# order ($DATALENS_DATA_DIR, data/raw/, /usr/share/datasets/) and checksum-verified, else
# fetched into the first of those folders, else a clear error saying what to copy where
DATASETS ?= mnist fashion-mnist

.PHONY: venv data verify quality-records test test-fast mutation mutation-report lint notebooks sync-notebooks lab book clean-book bench

venv: $(VENV)/.installed

data: venv
	$(BIN)/datalens data ensure $(DATASETS)

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $@

# IS/FID of every published 10k subset without a current committed score (quality.json beside
# its records; T3 reads it instead of scoring the subset at every build): run before committing
# a newly published run (FORCE=1: every published run, e.g. after SCORES_VERSION changed)
quality-records: venv
	dirs=$$($(BIN)/python -c "from datalens_lib.quality.report import \
	    stale_quality_records as s; print(*s(every=bool('$(FORCE)')))") || exit 1; \
	if [ -n "$$dirs" ]; then $(BIN)/datalens quality $$dirs; fi

# the suite in TEST_WORKERS processes of one thread each (pytest-xdist; `-n 0` runs it in this
# process): the tests that execute the book's notebooks in this checkout form one group, run in
# order by one worker from the start (tests/conftest.py), the rest are shared out
TEST_WORKERS ?= 2
PYTEST := OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup

test: data
	$(PYTEST)

# every committed record and published subset against data/results/SHA256SUMS and the record
# schemas, the paper's CSVs against data/paper/SHA256SUMS; after committing new records:
# `.venv/bin/datalens verify --update`, then review the diff of the SHA256SUMS files
verify: venv
	$(BIN)/datalens verify

# the fast set only (slow-marked tests deselected); `make test` runs everything
test-fast: data
	$(PYTEST) -m "not slow"

# mutation testing of the privacy-critical modules (tests/README.md); about 1-2 h on 2 cores,
# resumable (mutmut keeps its results in mutants/); not part of CI
mutation: venv
	$(BIN)/python -m pip install -q -e ".[mutation]"
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/mutmut run --max-children 2 || true
	$(MAKE) mutation-report

mutation-report:
	$(BIN)/python scripts/mutation_report.py --out tests/mutation-report.md

lint: venv
	$(BIN)/ruff check datalens_lib tests benchmarks notebooks scripts

# the notebooks/*.ipynb and their jupytext scripts notebooks/*.py, after editing either side
# (the newer file wins; tests/test_notebooks.py fails while a pair differs)
sync-notebooks: venv
	$(BIN)/jupytext --sync notebooks/*.ipynb
	$(BIN)/jupyter nbconvert --clear-output --inplace --log-level=WARN notebooks/*.ipynb

# JupyterLab on the book's notebooks (http://localhost:8888; add --allow-root as root)
lab: venv
	$(BIN)/jupyter lab notebooks/

notebooks: data
	$(BIN)/datalens run-all --profile $(PROFILE)

book: notebooks
	$(BIN)/jupyter-book build . --toc book/_toc.yml -W --keep-going
	@echo "book: _build/html/index.html"

bench: venv
	$(BIN)/python benchmarks/bench_topagg.py

clean-book:
	rm -rf _build
