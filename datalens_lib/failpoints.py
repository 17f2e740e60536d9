"""Named kill points for testing what a run leaves behind when it is killed (SIGKILL).

A long command (training, evaluation) can be killed anywhere: by a scheduler's time limit,
the out-of-memory killer, or a user. ``tests/test_kill.py`` kills commands at chosen points
of their life, deterministically (never by a timer, so the verdict does not depend on the
machine's speed), then resumes them and checks that they end as an uninterrupted run would,
and that no folder ever holds a complete-looking record without its complete outputs.

The points are named places in the code that call :func:`hit`. With the environment variable
``DATALENS_KILL_AT=NAME:N`` set, the ``N``-th hit of ``NAME`` in the process kills the process
with SIGKILL (no cleanup, no ``finally``); without it, :func:`hit` only counts (a dict
increment). Names in use:

- ``step``: after a training or evaluation step (epoch) is done, before its checkpoint;
- ``write.partial``: inside an atomic write (``provenance.atomic_save``), with the temporary
  file cut to half its length, as a kill in the middle of writing leaves it;
- ``write.before_rename``: the temporary file complete, not yet renamed onto the target;
- ``write.after_rename``: the target replaced, before the command goes on.

A write's points are also counted under the target file's name: ``write.partial@run.json:1``
is the first write of ``run.json``. ``DATALENS_KILL_AT`` may name several points,
comma-separated; the first one reached fires.
Hand-written: fault-injection libraries for Python patch functions inside one process, and a
SIGKILL of the real command is what this needs.
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from pathlib import Path

ENV = "DATALENS_KILL_AT"
_hits: Counter[str] = Counter()


def _targets() -> dict[str, int]:
    spec = os.environ.get(ENV, "")
    out = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        name, _, n = item.rpartition(":")
        if not name or not n.isdigit() or int(n) < 1:
            raise ValueError(f"{ENV} must be NAME:N[,NAME:N...] with N >= 1, got {spec!r}")
        out[name] = int(n)
    return out


def hit(name: str, partial_file: str | Path | None = None, target: str | None = None) -> None:
    """Count a hit of ``name`` (and of ``name@target``, e.g. ``write.partial@run.json``: the
    write of that file); kill the process where ``DATALENS_KILL_AT`` says so
    (``partial_file``: cut this file to half its length first, for ``write.partial``)."""
    names = (name,) if target is None else (name, f"{name}@{target}")
    for n in names:
        _hits[n] += 1
    if ENV not in os.environ:
        return
    plan = _targets()
    if any(plan.get(n) == _hits[n] for n in names):
        if partial_file is not None and Path(partial_file).exists():
            size = Path(partial_file).stat().st_size
            os.truncate(partial_file, size // 2)
        os.kill(os.getpid(), signal.SIGKILL)


def hits() -> dict[str, int]:
    """The hits counted so far in this process (to size a kill plan)."""
    return dict(_hits)


def run_cli_child(argv: list[str], kill_at: str | None, hits_file: str | None) -> None:
    """Run ``datalens ARGV`` in a (forked) child process with ``kill_at`` as
    ``DATALENS_KILL_AT``, then write this process's hits to ``hits_file`` and exit with the
    command's status. For ``tests/test_kill.py`` (a forkserver that imported the library
    once starts each child, so a kill plan costs no imports)."""
    import contextlib
    import io
    import json

    from . import cli

    if kill_at:
        os.environ[ENV] = kill_at
    else:
        os.environ.pop(ENV, None)
    os.environ["TQDM_DISABLE"] = "1"  # (no progress bars, nor their locks, in a killed child)
    _hits.clear()
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        rc = cli.main(argv)
    if hits_file:
        Path(hits_file).write_text(json.dumps({"hits": hits(), "rc": rc,
                                               "stderr": err.getvalue()[-2000:]}))
    os._exit(rc)
