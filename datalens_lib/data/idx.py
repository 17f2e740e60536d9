"""Reader for the IDX format of MNIST and Fashion-MNIST (LeCun et al. 1998).

Hand-written rather than taken from torchvision: the format is 20 lines of ``struct`` and
torchvision's PyPI wheel does not import beside the pinned CPU torch build.
"""

from __future__ import annotations

import gzip
import hashlib
import math
import struct
import zlib
from pathlib import Path

import numpy as np

_DTYPES = {
    0x08: np.uint8,
    0x09: np.int8,
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


class DatasetFileError(ValueError):
    """A dataset file is missing, truncated, corrupt or has the wrong checksum."""


def read_bytes(path: Path) -> bytes:
    """Return the *uncompressed* content of ``path`` (``.gz`` is decompressed)."""
    path = Path(path)
    if not path.is_file():
        raise DatasetFileError(f"dataset file not found: {path}")
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as fh:
                return fh.read()
        return path.read_bytes()
    except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise DatasetFileError(
            f"cannot read {path}: {exc}. The file is truncated or corrupt; delete it and "
            "provide a fresh copy (e.g. `datalens data fetch <name>`)."
        ) from exc


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def parse_idx(data: bytes, source: str = "<bytes>") -> np.ndarray:
    """Parse an IDX byte string into a numpy array, checking header and length."""
    if len(data) < 4:
        raise DatasetFileError(f"{source}: too short to be an IDX file ({len(data)} bytes)")
    zero, dtype_code, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype_code not in _DTYPES or ndim == 0:
        raise DatasetFileError(f"{source}: not an IDX file (bad magic number)")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise DatasetFileError(f"{source}: truncated IDX header")
    shape = struct.unpack(">" + "I" * ndim, data[4:header])
    dtype = np.dtype(_DTYPES[dtype_code])
    expected = math.prod(shape) * dtype.itemsize  # Python ints: np.prod wraps at 2**63
    if len(data) - header != expected:
        raise DatasetFileError(
            f"{source}: IDX payload has {len(data) - header} bytes, header says {expected} "
            f"(shape {shape}); the file is truncated or corrupt"
        )
    try:
        return np.frombuffer(data, dtype=dtype, offset=header).reshape(shape)
    except ValueError as exc:  # numpy's limits: more than 64 axes, a shape whose size overflows
        raise DatasetFileError(f"{source}: numpy cannot hold an IDX array of shape "
                               f"{shape[:8]}{'...' if ndim > 8 else ''} ({ndim} axes): "
                               f"{exc}") from None


def read_idx(path: Path, sha256: str | None = None) -> np.ndarray:
    """Read an IDX file (``.gz`` or raw), verifying the SHA-256 of its uncompressed bytes."""
    data = read_bytes(path)
    if sha256 is not None:
        got = sha256_hex(data)
        if got != sha256:
            raise DatasetFileError(
                f"checksum mismatch for {path}: SHA-256 of the uncompressed file is {got}, "
                f"expected {sha256}. Replace the file with the official one "
                "(`datalens data fetch <name>` or the dataset's site)."
            )
    return parse_idx(data, str(path))
