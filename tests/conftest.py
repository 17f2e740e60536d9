import gzip
import os
import struct
from pathlib import Path

import numpy as np
import pytest

from datalens_lib.data import DatasetNotFoundError, resolve_dataset_dir

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"


def write_idx(path: Path, array: np.ndarray, compress: bool = True) -> bytes:
    """Write ``array`` (uint8) in IDX format; returns the uncompressed bytes."""
    array = np.asarray(array, dtype=np.uint8)
    raw = struct.pack(">HBB", 0, 0x08, array.ndim)
    raw += struct.pack(">" + "I" * array.ndim, *array.shape) + array.tobytes()
    if compress:
        with gzip.open(path, "wb") as fh:
            fh.write(raw)
    else:
        path.write_bytes(raw)
    return raw


#: the start of every skip reason for a dataset the test could not find: the suite counts
#: them (``pytest_terminal_summary``) and fails where ``$DATALENS_REQUIRE_DATA`` is set (CI)
MISSING_DATA = "missing data:"


def real_dataset_dir(name: str) -> Path:
    """Folder of a real dataset, or skip (CI sets DATALENS_DATA_DIR to ../shared/datasets)."""
    try:
        return resolve_dataset_dir(name)
    except DatasetNotFoundError:
        if (SHARED / name).is_dir():
            return SHARED / name
        pytest.skip(f"{MISSING_DATA} real {name} not available here (`make data`)")


def require_datasets(*names: str) -> None:
    """Skip unless the code itself finds each dataset (``$DATALENS_DATA_DIR``, ``data/raw``):
    for tests whose subject reads real data by its own lookup, e.g. a notebook, a sweep or
    a ledger that needs the training set's size. A clone without ``../shared/datasets``
    skips them with the reason instead of failing on a missing file."""
    for name in names:
        try:
            resolve_dataset_dir(name)
        except DatasetNotFoundError:
            pytest.skip(f"{MISSING_DATA} real {name} not found by the code's lookup "
                        "(`make data`, or set DATALENS_DATA_DIR)")


def _missing_data_skips(terminalreporter) -> int:
    return sum(1 for rep in terminalreporter.stats.get("skipped", [])
               if MISSING_DATA in str(getattr(rep, "longrepr", "")))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Say how many tests were skipped because a dataset was missing; with
    ``$DATALENS_REQUIRE_DATA`` set (``.ci/run``), any such skip fails the run."""
    n = _missing_data_skips(terminalreporter)
    if n:
        terminalreporter.write_line(f"{n} test(s) skipped for missing data: run `make data` "
                                    "(or set DATALENS_DATA_DIR)", yellow=True)
        if os.environ.get("DATALENS_REQUIRE_DATA"):
            terminalreporter.write_line("DATALENS_REQUIRE_DATA is set: a skip for missing data "
                                        "fails the run", red=True)


def pytest_sessionfinish(session, exitstatus):
    if (os.environ.get("DATALENS_REQUIRE_DATA") and exitstatus == 0
            and not hasattr(session.config, "workerinput")):
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None and _missing_data_skips(reporter):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


#: Unit tests of single functions first, then the end-to-end ones (trainer runs, the CLI,
#: notebook execution); within a file, collection order.
UNIT_FIRST = ("test_topagg.py", "test_privacy.py", "test_validation.py", "test_partition.py",
              "test_io.py", "test_ensemble.py", "test_evaluate.py", "test_data.py",
              "test_results.py", "test_pipeline.py")


#: the tests that execute the book's notebooks in this checkout (its run cache, the book's
#: canonical outputs): one pytest-xdist group (``--dist loadgroup``), so one worker runs them
#: in order and never two at once. xdist hands out the largest group first (its default
#: ``loadscope`` reordering), so that worker starts them at once while the other takes the
#: rest in the order below.
NOTEBOOK_GROUP = "repo-notebooks"


def pytest_collection_modifyitems(config, items):
    """Fast tests first: unit tests, then end-to-end tests, and the ``slow``-marked ones last.
    A broken change fails within seconds, and a mutation run (``pytest -x`` on the tests that
    reach the mutated function) stops at the cheapest failing test."""
    def rank(item):
        name = item.path.name
        unit = UNIT_FIRST.index(name) if name in UNIT_FIRST else len(UNIT_FIRST)
        return (item.get_closest_marker("slow") is not None, unit)

    items.sort(key=rank)


#: the start of the fake ``datalens`` commands of the queue dry runs (test_cpu_queue.py,
#: test_gpu_queue.py): the subcommand in ``$cmd`` and ``arg --opt "$@"``, an option's value
FAKE_DL_HEAD = r"""#!/usr/bin/env bash
cmd=$1; shift
arg() {
  local want=$1; shift
  while (($#)); do [[ $1 == "$want" ]] && { echo "$2"; return; }; shift; done
}
"""
