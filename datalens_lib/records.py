"""Reading a run's records (``run.json``, ``snapshots.json``) and checkpoints with clear errors.

Every command that continues or reads a run folder goes through here, so that a record or
checkpoint that is corrupt, half-written by hand, from another method or config, or from a
newer version of this code stops the command with the file's path and what to do, before
anything in the folder is written:

- ``RECORD_SCHEMA``: the layout version of the records this code writes (``"schema"`` in
  ``run.json`` and ``snapshots.json``; a record without the key predates it and is version 1).
  A record of a newer schema is refused rather than misread.
- ``read_record``: a record as a dict, or :class:`RecordError` naming the file: not valid JSON,
  not an object, a newer schema, no ``config`` (e.g. a hand-made ``run.json``), or a config
  without the keys the caller needs.
- ``load_checkpoint``: a ``torch.save`` checkpoint as a dict, or :class:`CheckpointError`:
  truncated or bit-flipped (``torch.load`` fails), not a checkpoint of this code, or written by
  another method.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

#: the layout version of ``run.json`` / ``snapshots.json`` (and checkpoints) this code writes
RECORD_SCHEMA = 1


class RecordError(ValueError):
    """A run record that cannot be used as it is; the message names the file."""


class CheckpointError(ValueError):
    """A checkpoint that cannot be resumed from; the message names the file."""


def _schema_problem(path: Path, schema: Any) -> str | None:
    if not isinstance(schema, int) or isinstance(schema, bool) or schema < 1:
        return f"{path}: its 'schema' is {schema!r}, not a layout version (a positive integer)"
    if schema > RECORD_SCHEMA:
        return (f"{path} was written by a newer version of datalens_lib (record schema "
                f"{schema}; this code reads up to {RECORD_SCHEMA}): update this checkout "
                "(git pull; pip install -e .) before reading it")
    return None


def read_record(path: str | Path, *, need_config: Iterable[str] = ()) -> dict[str, Any]:
    """The JSON object in ``path`` (a run's ``run.json`` or ``snapshots.json``), checked.

    ``need_config``: keys the caller reads from the record's ``config``. Raises
    ``FileNotFoundError`` when the file is absent and :class:`RecordError` otherwise.
    """
    path = Path(path)
    text = path.read_text()
    try:
        rec = json.loads(text)
    except json.JSONDecodeError as e:
        raise RecordError(
            f"{path} is not valid JSON ({e.msg} at line {e.lineno}): the record is corrupt "
            "or was cut while written by hand. Restore it (git checkout, or the copy you "
            "made) or run the command that writes it again") from None
    if not isinstance(rec, dict):
        raise RecordError(f"{path} holds a JSON {type(rec).__name__}, not a run record "
                          "(an object); restore it or run the command that writes it again")
    if (problem := _schema_problem(path, rec.get("schema", 1))) is not None:
        raise RecordError(problem)
    cfg = rec.get("config")
    if not isinstance(cfg, dict):
        raise RecordError(
            f"{path} has no 'config' object: it is not a record `datalens train` wrote "
            "(every run record names its config). Point the command at a run folder that "
            "`datalens train` finished, or restore the record")
    missing = [k for k in need_config if k not in cfg]
    if missing:
        raise RecordError(f"{path}: its config lacks {', '.join(map(repr, missing))}; this "
                          "command needs them. Restore the record or train the run again")
    return rec


def load_checkpoint(path: str | Path, *, method: str | None = None) -> dict[str, Any]:
    """The state in a run's ``checkpoint.pt`` (memory-mapped on the CPU), checked to be
    readable, a checkpoint of this code's layout, and ``method``'s (where it says whose)."""
    import pickle
    import zipfile

    import torch

    path = Path(path)
    try:
        st = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except (RuntimeError, EOFError, OSError, ValueError, pickle.UnpicklingError,
            zipfile.BadZipFile) as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise CheckpointError(
            f"{path} cannot be read ({type(e).__name__}: {str(e).splitlines()[0][:160]}): the "
            "checkpoint is truncated or corrupt. Nothing was written. Move it away to start "
            "the run afresh, or restore it from a copy") from None
    if not isinstance(st, dict):
        raise CheckpointError(f"{path} holds a {type(st).__name__}, not a run checkpoint; "
                              "move it away to start the run afresh")
    if (problem := _schema_problem(path, st.get("schema", 1))) is not None:
        raise CheckpointError(problem)
    if method is not None and st.get("method", method) != method:
        raise CheckpointError(
            f"{path} was written by method {st['method']!r}, not {method!r}: this folder "
            "holds another method's run. Choose another output folder (nothing was written)")
    return st
