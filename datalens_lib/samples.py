"""Synthetic sample files: the one loader every consumer uses, and the published subsets.

A sample file is an ``.npz`` with ``x`` (images, NCHW or NHW for one channel) and ``y``
(integer class labels). ``x`` is either floating point in [0, 1] (what ``datalens train``
writes, float16) or ``uint8`` in 0..255 (what ``publish_subset`` writes); both load as float32
in [0, 1]. Any user file in either form can be scored with the same protocol
(``datalens evaluate FILE.npz --dataset ...``, ``datalens quality FILE.npz --dataset ...``).

Published subsets (issue 14): for a committed paper-scale run, ``publish_subset`` writes
``samples-<n>.npz`` (uint8, compressed) next to the run's records. The selection is the first
``n`` indices of a permutation of the run's samples drawn from ``numpy.random.default_rng(seed)``,
and the record (``run.json`` → ``published_samples``) gives the seed, the selection rule, the
SHA-256 of the written file and of the source file, so anyone can check or redraw it.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from .provenance import atomic_save

SELECTION = "first n of numpy.random.default_rng(seed).permutation(len(samples))"


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def user_file(path: str | Path | None, *, env: str, name: str, url: str, sha256_prefix: str,
              needed_for: str) -> tuple[Path, str]:
    """A file the user must supply (weights that cannot be downloaded here): ``path``, else
    ``$env``; it must exist and its SHA-256 must start with ``sha256_prefix`` (torch.hub's
    naming convention). Returns the path and its SHA-256; otherwise a clear error that names
    the file to supply and where it comes from."""
    path = path or os.environ.get(env)
    if not path:
        raise FileNotFoundError(f"{needed_for} need(s) the file {name} ({url}), passed as an "
                                f"argument or ${env}")
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{name} not found at {p}; supply it ({url})")
    sha = sha256_file(p)
    if not sha.startswith(sha256_prefix):
        raise ValueError(f"{p} is not {name}: its SHA-256 starts with {sha[:8]}, expected "
                         f"{sha256_prefix} ({url})")
    return p, sha


def check_images(x: np.ndarray, y: np.ndarray, *, shape: tuple[int, int, int] | None = None,
                 num_classes: int | None = None, where: str = "samples",
                 keep_float_dtype: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Validate images and labels; return them as float32 NCHW in [0, 1] and int64
    (``keep_float_dtype``: floating images keep their dtype, e.g. float16 as trained).

    Raises ``ValueError`` with the offending property (shape, range, dtype, label range).
    """
    x, y = np.asarray(x), np.asarray(y)
    if x.ndim == 3:  # NHW: one channel
        x = x[:, None]
    if x.ndim != 4:
        raise ValueError(f"{where}: x must have shape (n, c, h, w) or (n, h, w), got {x.shape}")
    if y.ndim != 1 or len(y) != len(x):
        raise ValueError(f"{where}: y must be a vector of {len(x)} labels, got shape {y.shape}")
    if len(x) == 0:
        raise ValueError(f"{where}: no images")
    if shape is not None and tuple(x.shape[1:]) != tuple(shape):
        raise ValueError(f"{where}: images have shape {tuple(x.shape[1:])}, expected "
                         f"{tuple(shape)} (channels first)")
    if not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"{where}: labels must be integers, got {y.dtype}")
    if y.min() < 0 or (num_classes is not None and y.max() >= num_classes):
        raise ValueError(f"{where}: labels must lie in [0, {num_classes}), got "
                         f"[{y.min()}, {y.max()}]")
    if x.dtype == np.uint8:
        x = x.astype(np.float32) / 255.0
    elif np.issubdtype(x.dtype, np.floating):
        x = x if keep_float_dtype else x.astype(np.float32)
        if not np.isfinite(x).all():
            raise ValueError(f"{where}: images contain NaN or infinity")
        lo, hi = float(x.min()), float(x.max())
        if lo < 0.0 or hi > 1.0:
            raise ValueError(f"{where}: float images must lie in [0, 1], got [{lo:.3g}, "
                             f"{hi:.3g}] (scale 0..255 data to [0, 1] or store it as uint8)")
    else:
        raise ValueError(f"{where}: images must be uint8 or floating point, got {x.dtype}")
    return x, y.astype(np.int64)


def load_samples(path: str | Path, *, shape: tuple[int, int, int] | None = None,
                 num_classes: int | None = None, keep_float_dtype: bool = False
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Load a sample file (module doc) as float32 NCHW in [0, 1] and int64 labels (see
    ``check_images`` for ``keep_float_dtype``)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no sample file at {path}")
    try:
        with np.load(path, allow_pickle=False) as f:
            missing = {"x", "y"} - set(f.files)
            if missing:
                raise ValueError(f"{path}: an .npz with arrays 'x' (images) and 'y' (labels) "
                                 f"is expected; missing {sorted(missing)} (it has {f.files})")
            x, y = f["x"], f["y"]
    except (OSError, EOFError, ValueError, zipfile.BadZipFile, zlib.error) as e:
        if isinstance(e, ValueError) and str(e).startswith(str(path)):
            raise  # (ours, above)
        raise ValueError(f"{path} cannot be read ({type(e).__name__}: {e}): the sample file "
                         "is truncated or corrupt; write it again (train --resume re-samples "
                         "a finished run) or restore it") from None
    return check_images(x, y, shape=shape, num_classes=num_classes, where=str(path),
                        keep_float_dtype=keep_float_dtype)


def to_uint8(x: np.ndarray) -> np.ndarray:
    """[0, 1] floats to 0..255 (round half to even, as numpy rounds)."""
    return np.clip(np.rint(np.asarray(x, dtype=np.float32) * 255.0), 0, 255).astype(np.uint8)


def publish_subset(source: str | Path, dest: str | Path, *, n: int = 10_000,
                   seed: int = 0) -> dict[str, Any]:
    """Write ``n`` samples of ``source`` to ``dest`` (uint8, compressed npz; module doc).

    Returns the record to store under ``published_samples`` in the run's ``run.json``.
    """
    if not (isinstance(n, int) and n > 0):
        raise ValueError(f"n must be a positive integer, got {n!r}")
    x, y = load_samples(source)
    if n > len(x):
        raise ValueError(f"{source} holds {len(x)} samples, fewer than n = {n}")
    idx = np.sort(np.random.default_rng(seed).permutation(len(x))[:n])
    xs, ys = to_uint8(x[idx]), y[idx].astype(np.uint8 if y.max() < 256 else np.int64)
    atomic_save(Path(dest), lambda tmp: _savez(tmp, xs, ys, idx))
    return {"file": Path(dest).name, "n": n, "seed": seed, "selection": SELECTION,
            "order": "sorted by index into the source", "dtype": "uint8 (x * 255, rounded)",
            "sha256": sha256_file(dest), "bytes": Path(dest).stat().st_size,
            "source_sha256": sha256_file(source), "source_n": len(x)}


def _savez(tmp: str, x: np.ndarray, y: np.ndarray, idx: np.ndarray) -> None:
    with open(tmp, "wb") as f:  # a file object: numpy must not append ".npz" to the name
        np.savez_compressed(f, x=x, y=y, index=idx.astype(np.int64))
