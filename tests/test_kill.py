"""Kill anywhere: ``datalens train`` (every registered method) and ``datalens evaluate`` are
killed with SIGKILL at named points of their life (``datalens_lib.failpoints``: after a step,
inside and around every kind of write — checkpoint, ``samples.npz``, ``run.json``, the
evaluation's checkpoint and record), each kill followed by a resume that may itself be
killed, and finally resumed to the end. The finished run must be the uninterrupted run's
(samples, ledger, per-step record), and after every kill the folder must hold no
complete-looking record without its complete outputs.

The first kill of each chain (after step 2, before its checkpoint) is the case of a process
killed between checkpoints: the resumed run redoes the lost step from the last checkpoint.

The points are reached deterministically (the n-th hit of a named point), never by a timer: the
verdict does not depend on the machine's speed. A forkserver that imported the library once
starts each command, so a kill costs no imports."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import numpy as np
import pytest
from conftest import require_datasets

from datalens_lib import failpoints
from datalens_lib.methods import METHODS
from datalens_lib.records import load_checkpoint, read_record

pytestmark = pytest.mark.slow

#: a smoke run of each method small enough to be killed several times (as test_methods.py;
#: DC-GAN on half its smoke images, DP-GAN for 4 steps)
TRAIN = {"datalens": ["--config", "mnist-eps1", "--set", "max_steps=3", "--set", "n_samples=60"],
         "dcgan": ["--config", "mnist-epsinf", "--set", "n_samples=128",
                   "--set", "train_limit=160"],
         "gpate": ["--config", "mnist-eps1", "--set", "n_samples=60"],
         "dpgan": ["--config", "mnist-eps1", "--set", "n_samples=64", "--set", "epochs=0.4"]}

#: where each method's training is killed, in order; every command after the first resumes
#: the folder the previous one left (the counts are the resumed process's own)
TRAIN_KILLS = [
    "step:2",                               # between a step and its checkpoint
    "write.partial@checkpoint.pt:1",        # a checkpoint half-written
    "write.before_rename@checkpoint.pt:1",  # a checkpoint written, not renamed
    "write.after_rename@checkpoint.pt:1",   # just after a checkpoint
    "write.partial@samples.npz:1",          # the samples half-written
    "write.after_rename@samples.npz:1",     # samples written, run.json not yet
    "write.partial@run.json:1",             # the record half-written
    "write.before_rename@run.json:1",       # the record written, not renamed
]
#: the baselines' kills: one of each kind of write (the shared harness writes them)
BASELINE_KILLS = [TRAIN_KILLS[i] for i in (0, 1, 4, 5, 7)]
EVAL_EPOCHS = 3
EVAL_RECORD = f"eval-{EVAL_EPOCHS}ep.json"
#: the evaluation's (checkpoints every 10 epochs and after the last: one here, then its record)
EVAL_KILLS = ["step:1", "step:2", "write.partial:1", "write.before_rename:1",
              "write.after_rename:1", f"write.partial@{EVAL_RECORD}:1",
              f"write.before_rename@{EVAL_RECORD}:1"]


@pytest.fixture(scope="module")
def ctx():
    require_datasets("mnist")
    c = multiprocessing.get_context("forkserver")
    c.set_forkserver_preload(["datalens_lib.cli", "datalens_lib.methods", "torch"])
    return c


def _run(ctx, argv: list[str], kill_at: str | None, tmp: Path) -> tuple[int, dict]:
    """``datalens ARGV`` in a child; its exit code (-9: killed) and, when it finished, the
    hits it counted."""
    hits = tmp / "hits.json"
    hits.unlink(missing_ok=True)
    p = ctx.Process(target=failpoints.run_cli_child, args=(argv, kill_at, str(hits)))
    p.start()
    p.join()
    return p.exitcode, (json.loads(hits.read_text()) if hits.exists() else {})


def _assert_nothing_looks_complete_that_is_not(folder: Path) -> None:
    """After a kill: every visible file is whole (a reader may trust what it sees), and a
    ``run.json`` means the samples it names are there in full."""
    for f in folder.iterdir():
        if f.name.startswith("."):
            continue  # temporary names of writes cut by the kill (and the lock file)
        if f.suffix == ".json":
            json.loads(f.read_text())
        elif f.suffix == ".npz":
            with np.load(f) as z:
                assert len(z["x"]) == len(z["y"]) > 0
        elif f.suffix == ".pt":
            load_checkpoint(f)
    if (folder / "run.json").exists():
        rec = read_record(folder / "run.json")
        assert rec["status"] == "complete"
        with np.load(folder / rec["samples"]["file"]) as z:
            assert len(z["x"]) == rec["samples"]["n"]


def _same_run(a: Path, b: Path) -> None:
    ra, rb = (read_record(d / "run.json") for d in (a, b))
    assert rb["resumed"] is True and ra["resumed"] is False
    for key in ("steps", "epsilon", "privacy", "config", "method", "seed", "status"):
        assert ra.get(key) == rb.get(key), key
    drop = {"seconds", "time", "wall"}
    for h1, h2 in zip(ra["history"], rb["history"], strict=True):
        assert ({k: v for k, v in h1.items() if not any(d in k for d in drop)}
                == {k: v for k, v in h2.items() if not any(d in k for d in drop)})
    with np.load(a / "samples.npz") as za, np.load(b / "samples.npz") as zb:
        assert np.array_equal(za["x"], zb["x"]) and np.array_equal(za["y"], zb["y"])


@pytest.mark.parametrize("method", sorted(METHODS))
def test_training_killed_anywhere_resumes_to_the_uninterrupted_run(method, ctx, tmp_path):
    assert set(TRAIN) == set(METHODS)  # every registered method is killed
    base = ["train", "--method", method, "--profile", "smoke", "--seed", "3",
            "--checkpoint-every", "1", *TRAIN[method]]
    rc, whole = _run(ctx, [*base, "--out", str(tmp_path / "whole")], None, tmp_path)
    assert rc == 0, whole
    killed = tmp_path / "killed"
    survived = 0
    for i, point in enumerate(TRAIN_KILLS if method == "datalens" else BASELINE_KILLS):
        argv = [*base, "--out", str(killed)] + (["--resume"] if i else [])
        rc, out = _run(ctx, argv, point, tmp_path)
        assert rc == -9, f"{point}: not reached (exit {rc}): {out}"
        _assert_nothing_looks_complete_that_is_not(killed)
        survived += 1
    rc, out = _run(ctx, [*base, "--out", str(killed), "--resume"], None, tmp_path)
    assert rc == 0, out
    _same_run(tmp_path / "whole", killed)
    assert not list(killed.glob(".*.tmp"))  # a resume clears what the kills left
    print(f"{method}: {survived} kill points survived")


def test_evaluation_killed_anywhere_resumes_to_the_uninterrupted_one(ctx, tmp_path):
    run = tmp_path / "run"
    train = ["train", "--method", "datalens", "--profile", "smoke", "--out", str(run),
             *TRAIN["datalens"]]
    assert _run(ctx, train, None, tmp_path)[0] == 0
    (tmp_path / "copy").mkdir()
    for f in ("run.json", "samples.npz"):
        (tmp_path / "copy" / f).write_bytes((run / f).read_bytes())
    ev = ["evaluate", "--epochs", str(EVAL_EPOCHS)]
    assert _run(ctx, [*ev, str(tmp_path / "copy")], None, tmp_path)[0] == 0
    for point in EVAL_KILLS:
        rc, out = _run(ctx, [*ev, str(run)], point, tmp_path)
        assert rc == -9, f"{point}: not reached (exit {rc}): {out}"
        _assert_nothing_looks_complete_that_is_not(run)
    assert _run(ctx, [*ev, str(run)], None, tmp_path)[0] == 0
    a, b = (json.loads((d / EVAL_RECORD).read_text()) for d in (tmp_path / "copy", run))
    assert b["continued_from_epoch"] > 0 and a["continued_from_epoch"] == 0
    for key in ("paper", "clean", "test_accuracy_per_epoch", "best_epoch"):
        assert a.get(key) == b.get(key), key
