import gzip
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


def real_dataset_dir(name: str) -> Path:
    """Folder of a real dataset, or skip (CI sets DATALENS_DATA_DIR to ../shared/datasets)."""
    try:
        return resolve_dataset_dir(name)
    except DatasetNotFoundError:
        if (SHARED / name).is_dir():
            return SHARED / name
        pytest.skip(f"real {name} not available here")


def pytest_collection_modifyitems(config, items):
    """Run the fast tests first and the ``slow``-marked ones last (otherwise in collection
    order): a broken change fails within seconds, and a mutation run (``pytest -x``) stops at
    the cheapest failing test."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is not None)
