"""Provenance of a result: git sha, package versions, hardware, peak memory; atomic writes."""

from __future__ import annotations

import errno
import functools
import json
import os
import platform
import subprocess
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

from . import failpoints

PACKAGES = ("torch", "numpy", "scipy", "dp-accounting", "opacus", "datalens-lib")
REPO_ROOT = Path(__file__).resolve().parents[1]


def results_root() -> Path | None:
    """``$DATALENS_RESULTS_ROOT``: one folder outside the checkout (e.g. a cluster's shared
    file system) for everything a run writes: training runs (``runs/``), stored notebook
    results (``store/``) and executed notebooks (``notebooks/``). ``None`` where unset: the
    checkout's ``runs/`` and ``data/results/store/``."""
    root = os.environ.get("DATALENS_RESULTS_ROOT")
    return Path(root).expanduser().resolve() if root else None


def runs_root() -> Path:
    """Where training runs go: ``$DATALENS_RESULTS_ROOT/runs`` or the checkout's ``runs/``."""
    root = results_root()
    return root / "runs" if root else REPO_ROOT / "runs"


def notebooks_root() -> Path:
    """Where non-canonical notebook executions go: ``$DATALENS_RESULTS_ROOT/notebooks`` or the
    checkout's ``runs/notebooks``."""
    root = results_root()
    return root / "notebooks" if root else REPO_ROOT / "runs" / "notebooks"


def store_root() -> Path:
    """Where notebooks store their results (``store.save_result``)."""
    root = results_root()
    return root / "store" if root else REPO_ROOT / "data" / "results" / "store"


def git_sha() -> str | None:
    """``$DATALENS_GIT_SHA`` where set (scripts/gpu_setup.sh sets it from the ``.git-sha``
    written here before a lent machine's call: that machine's copy of ``.git`` can name an
    older commit than the tree it receives), else HEAD of this checkout (``-dirty`` if tracked
    files changed), else None."""
    if os.environ.get("DATALENS_GIT_SHA"):
        return os.environ["DATALENS_GIT_SHA"]
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                             text=True, timeout=10)
        sha = out.stdout.strip() if out.returncode == 0 else None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=REPO_ROOT, capture_output=True, text=True, timeout=10)
        if sha and dirty.stdout.strip():
            sha += "-dirty"
        return sha
    except (OSError, subprocess.SubprocessError):
        return None


def git_is_ancestor(ancestor: str, sha: str | None) -> bool | None:
    """Whether commit ``ancestor`` is in the history of ``sha`` (a record's ``git_sha``; a
    ``-dirty`` suffix is dropped: the record ran the committed code of that commit plus edits),
    by ``git merge-base --is-ancestor`` in this checkout. None when it cannot be told: no
    ``sha``, no git, or either commit not in this checkout's history (a shallow clone, a
    record written from a commit that never landed)."""
    if not sha:
        return None
    return _git_is_ancestor(ancestor, sha.removesuffix("-dirty"))


@functools.cache
def _git_is_ancestor(ancestor: str, sha: str) -> bool | None:
    """:func:`git_is_ancestor`, once per pair and process (a book build asks it for every
    committed run, more than once): exit 0 yes, 1 no, anything else (128: a commit git does
    not know) None."""
    try:
        out = subprocess.run(["git", "merge-base", "--is-ancestor", ancestor, sha],
                             cwd=REPO_ROOT, capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return {0: True, 1: False}.get(out.returncode)


def package_versions() -> dict[str, str | None]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def hardware() -> dict[str, Any]:
    import torch

    cpu = platform.processor() or platform.machine()
    family_model: dict[str, str] = {}  # tells CPU generations apart that share a model name
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "model name":
                cpu = value.strip()
            elif key in ("cpu family", "model") and key not in family_model:
                family_model[key] = value.strip()
            if not line.strip() and family_model:
                break  # the first processor's block is enough
    except OSError:
        pass
    info: dict[str, Any] = {"cpu": cpu, "cores": os.cpu_count(),
                            "torch_threads": torch.get_num_threads(),
                            "platform": platform.platform()}
    if len(family_model) == 2:  # e.g. AMD family 25 = Zen 3/4, 26 = Zen 5
        info["cpu_family_model"] = f"{family_model['cpu family']}/{family_model['model']}"
    try:
        import psutil

        info["memory_gib"] = round(psutil.virtual_memory().total / 2**30, 1)
    except ImportError:
        pass
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
        info["cuda_tf32"] = {"cudnn_convolutions": torch.backends.cudnn.allow_tf32,
                             "matmul": torch.backends.cuda.matmul.allow_tf32}
    return info


def peak_rss_gib() -> float:
    """Peak resident set size of this process (and finished children) in GiB."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(own / 2**20, 3)  # Linux reports KiB


def provenance() -> dict[str, Any]:
    return {"git_sha": git_sha(), "packages": package_versions(), "hardware": hardware()}


class ResultsWriteError(OSError):
    """A record, checkpoint or sample file could not be written (disk full, read-only or
    not permitted); the file it would have replaced is intact."""


#: the write failures a user can fix (the message says how), as opposed to a bug
_WRITE_ERRNOS = {errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EDQUOT}


def _write_failed(path: Path, exc: OSError) -> ResultsWriteError:
    what = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is exceeded",
            errno.EROFS: "the file system is read-only"}.get(exc.errno, "writing is not "
                                                           "permitted there")
    return ResultsWriteError(
        exc.errno, f"cannot write {path}: {what} ({exc.strerror}). Nothing was replaced: "
        f"the previous {path.name}, if any, is intact. Free space or choose a writable "
        "results folder (--out, DATALENS_RESULTS_ROOT), then run the command again "
        "(training continues from its last checkpoint with --resume)")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """``data`` to ``path`` through a unique temporary name in the same folder, synced, then
    renamed: readers see the old file or the new one, never a half-written one, and two
    writers never interleave (the last rename wins)."""
    path = Path(path)

    def _write(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())

    atomic_save(path, _write)


def _nan_to_none(obj: Any) -> Any:
    """``obj`` with every float NaN (a missing value from pandas) replaced by None: bare
    ``NaN`` is not JSON. Infinities stay (``Infinity`` marks ε = ∞ in some records)."""
    if isinstance(obj, float) and obj != obj:
        return None
    if isinstance(obj, dict):
        return {k: _nan_to_none(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_nan_to_none(v) for v in obj]
    return obj


def atomic_write_json(path: Path, obj: Any) -> None:
    """``obj`` as indented JSON, written atomically; NaN is written as null."""
    atomic_write_bytes(path, (json.dumps(_nan_to_none(obj), indent=2, sort_keys=True)
                              + "\n").encode())


def atomic_save(path: Path, save_fn) -> None:
    """Call ``save_fn(tmp_path)`` then rename onto ``path``: never a half-written file."""
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.close(fd)
        save_fn(tmp)
        failpoints.hit("write.partial", tmp, target=path.name)
        failpoints.hit("write.before_rename", target=path.name)
        os.replace(tmp, path)
        failpoints.hit("write.after_rename", target=path.name)
    except BaseException as exc:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        if (isinstance(exc, OSError) and not isinstance(exc, ResultsWriteError)
                and exc.errno in _WRITE_ERRNOS):
            raise _write_failed(path, exc) from exc
        raise
