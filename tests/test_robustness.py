"""Corrupt or foreign state, a full or read-only disk, and concurrent writers: each gets a clear
error naming the file and what to do, and nothing is overwritten.

The harness-level cases use a tiny stand-in method (``Toy``: a few float steps, no data), so
they test the harness's own handling in milliseconds; the command-line cases go through
``datalens`` itself."""

from __future__ import annotations

import dataclasses
import errno
import json
import multiprocessing
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from datalens_lib import cli, provenance, store
from datalens_lib.methods.harness import LOCK_FILE, Run, run_folder_lock
from datalens_lib.provenance import ResultsWriteError, atomic_write_json
from datalens_lib.records import (
    RECORD_SCHEMA,
    CheckpointError,
    RecordError,
    load_checkpoint,
    read_record,
)


@dataclasses.dataclass(frozen=True)
class ToyConfig:
    dataset: str = "mnist"
    epsilon: float = float("inf")
    n_samples: int = 8
    steps: int = 4
    lr: float = 0.5

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ToyConfig:
        return cls(**d)


class Toy:
    """A method in the harness's contract (``methods.harness.Method``) with a tensor of
    state: each step moves it by a random amount."""

    profile = "smoke"
    device = torch.device("cpu")

    def __init__(self, cfg: ToyConfig = ToyConfig(), seed: int = 0, name: str = "toy"):
        self.name, self.cfg, self.seed = name, cfg, seed
        self.gen = torch.Generator().manual_seed(seed)
        self.w = torch.zeros(16)
        self.history: list[dict[str, Any]] = []
        self._steps = 0

    @property
    def steps_done(self) -> int:
        return self._steps

    @property
    def train_seconds(self) -> float:
        return 0.0

    def can_step(self) -> bool:
        return self._steps < self.cfg.steps

    def total_steps(self) -> int:
        return self.cfg.steps

    def step(self) -> dict[str, Any]:
        self.w += self.cfg.lr * torch.rand(16, generator=self.gen)
        self._steps += 1
        row = {"step": self._steps, "d_loss": float(self.w.sum())}
        self.history.append(row)
        return row

    def sample(self, n: int, generator: torch.Generator) -> tuple[np.ndarray, np.ndarray]:
        x = torch.rand(n, 1, 28, 28, generator=generator).numpy()
        return x, np.arange(n) % 10

    def state_dict(self) -> dict[str, Any]:
        return {"config": self.cfg.to_dict(), "seed": self.seed, "w": self.w.clone(),
                "gen": self.gen.get_state(), "steps": self._steps, "history": self.history}

    def load_state_dict(self, st: dict[str, Any]) -> None:
        if ToyConfig.from_dict(st["config"]) != self.cfg or st["seed"] != self.seed:
            raise ValueError("the checkpoint was written by a different config or seed")
        self.w = st["w"].clone()
        self.gen.set_state(st["gen"])
        self._steps, self.history = st["steps"], st["history"]

    def record(self) -> dict[str, Any]:
        return {"epsilon": {}, "privacy": None}


def _cut(folder: Path, steps: int = 2, **kw) -> Run:
    run = Run(Toy(**kw), folder, checkpoint_every=1, progress=False)
    assert run.run(stop_after=steps)["status"] == "interrupted"
    return run


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.name != LOCK_FILE}


# ------------------------------------------------------------------ corrupt or foreign state


@pytest.mark.parametrize("damage", ["truncate", "bitflip", "empty", "not_a_checkpoint"])
def test_a_damaged_checkpoint_is_named_and_kept(tmp_path, damage):
    _cut(tmp_path)
    ckpt = tmp_path / "checkpoint.pt"
    raw = bytearray(ckpt.read_bytes())
    if damage == "truncate":
        raw = raw[: len(raw) // 2]
    elif damage == "bitflip":  # in the pickled state, past the zip's local header
        for i in range(60, len(raw), max(1, len(raw) // 40)):
            raw[i] ^= 0xFF
    elif damage == "empty":
        raw = bytearray()
    else:
        torch.save([1, 2, 3], ckpt)
        raw = bytearray(ckpt.read_bytes())
    ckpt.write_bytes(bytes(raw))
    before = _snapshot(tmp_path)
    with pytest.raises(CheckpointError, match=r"checkpoint\.pt") as e:
        Run(Toy(), tmp_path, checkpoint_every=1, progress=False).run(resume=True)
    assert "nothing was written" in str(e.value).lower() or "move it away" in str(e.value)
    assert _snapshot(tmp_path) == before  # the damaged file stays for the user to inspect


def test_a_checkpoint_of_another_config_seed_or_method_is_refused(tmp_path):
    _cut(tmp_path)
    before = _snapshot(tmp_path)
    for other in (Toy(ToyConfig(lr=0.25)), Toy(seed=1)):
        with pytest.raises(CheckpointError, match="different config or seed"):
            Run(other, tmp_path, progress=False).run(resume=True)
    with pytest.raises(CheckpointError, match="written by method 'toy', not 'other'"):
        Run(Toy(name="other"), tmp_path, progress=False).run(resume=True)
    assert _snapshot(tmp_path) == before


def test_a_checkpoint_of_a_newer_schema_is_refused(tmp_path):
    _cut(tmp_path)
    st = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    torch.save({**st, "schema": RECORD_SCHEMA + 1}, tmp_path / "checkpoint.pt")
    with pytest.raises(CheckpointError, match="newer version"):
        Run(Toy(), tmp_path, progress=False).run(resume=True)


def test_a_fresh_start_never_overwrites_an_unfinished_run(tmp_path):
    _cut(tmp_path)
    before = _snapshot(tmp_path)
    with pytest.raises(FileExistsError, match="holds an unfinished run; pass resume"):
        Run(Toy(), tmp_path, progress=False).run()
    assert _snapshot(tmp_path) == before
    rec = Run(Toy(), tmp_path, checkpoint_every=1, progress=False).run(resume=True)
    whole = Run(Toy(), tmp_path / "whole", checkpoint_every=1, progress=False).run()
    assert rec["history"] == whole["history"] and rec["schema"] == RECORD_SCHEMA


def test_a_finished_run_of_another_method_is_never_rewritten(tmp_path):
    Run(Toy(name="dcgan"), tmp_path, progress=False).run()
    before = _snapshot(tmp_path)
    (tmp_path / "checkpoint.pt").unlink()  # (even without its checkpoint)
    before.pop("checkpoint.pt")
    with pytest.raises(RecordError, match="is a 'dcgan' run, not 'toy'"):
        Run(Toy(), tmp_path, progress=False).run(resume=True)
    assert _snapshot(tmp_path) == before


def test_a_resume_clears_what_a_killed_write_left(tmp_path):
    _cut(tmp_path)
    (tmp_path / ".checkpoint.pt.abc123.tmp").write_bytes(b"half")
    (tmp_path / ".eval-3ep.json.xyz.tmp").write_bytes(b"{")  # (another command's)
    Run(Toy(), tmp_path, checkpoint_every=1, progress=False).run(resume=True)
    assert not (tmp_path / ".checkpoint.pt.abc123.tmp").exists()
    assert (tmp_path / ".eval-3ep.json.xyz.tmp").exists()


@pytest.mark.parametrize("content, match", [
    ("{not json", "is not valid JSON"),
    ("[1, 2]", "holds a JSON list"),
    ('{"status": "complete"}', "has no 'config' object"),
    ('{"config": {"dataset": "mnist"}, "schema": 99}', "newer version"),
    ('{"config": {"dataset": "mnist"}, "schema": "x"}', "not a layout version"),
    ('{"config": {"dataset": "mnist"}}', "config lacks 'eval_epochs'"),
])
def test_evaluate_names_a_record_it_cannot_use_and_writes_nothing(tmp_path, capsys, content,
                                                                   match):
    (tmp_path / "run.json").write_text(content)
    np.savez(tmp_path / "samples.npz", x=np.zeros((4, 1, 28, 28), np.float32),
             y=np.zeros(4, np.int64))
    before = _snapshot(tmp_path)
    assert cli.main(["evaluate", str(tmp_path), "--epochs", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(tmp_path / "run.json") in err and match in err
    assert "Traceback" not in err
    assert _snapshot(tmp_path) == before


def test_read_record_accepts_what_train_writes(tmp_path):
    Run(Toy(), tmp_path, progress=False).run()
    rec = read_record(tmp_path / "run.json", need_config=("dataset", "lr"))
    assert rec["schema"] == RECORD_SCHEMA and rec["method"] == "toy"
    rec.pop("schema")  # a record from before the schema key: version 1
    (tmp_path / "old.json").write_text(json.dumps(rec))
    assert read_record(tmp_path / "old.json")["status"] == "complete"
    with pytest.raises(FileNotFoundError):
        read_record(tmp_path / "none.json")


@pytest.mark.parametrize("x, y, match", [
    (np.full((4, 1, 28, 28), 2.0, np.float32), np.zeros(4, np.int64), r"must lie in \[0, 1\]"),
    (np.full((4, 1, 28, 28), -0.5, np.float32), np.zeros(4, np.int64), r"must lie in \[0, 1\]"),
    (np.zeros((4, 1, 28, 28), np.float32), np.zeros(3, np.int64), "vector of 4 labels"),
    (np.zeros((4, 1, 28, 28), np.float32), np.full(4, 10), r"labels must lie in \[0, 10\)"),
    (np.zeros((4, 1, 28, 28), np.float32), np.zeros(4, np.float32), "must be integers"),
    (np.zeros((4, 3, 8, 8), np.float32), np.zeros(4, np.int64), "expected \\(1, 28, 28\\)"),
    (np.full((4, 1, 28, 28), np.nan, np.float32), np.zeros(4, np.int64), "NaN or infinity"),
])
def test_evaluate_refuses_a_sample_file_that_is_not_images_in_0_1(tmp_path, capsys, x, y,
                                                                  match):
    from conftest import require_datasets

    require_datasets("mnist")
    np.savez(tmp_path / "s.npz", x=x, y=y)
    assert cli.main(["evaluate", str(tmp_path / "s.npz"), "--dataset", "mnist",
                     "--epochs", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(tmp_path / "s.npz") in err, err
    assert re.search(match, err), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.npz"]


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_a_damaged_sample_file_is_named(tmp_path, damage):
    from datalens_lib.samples import load_samples

    np.savez_compressed(tmp_path / "s.npz", x=np.zeros((4, 1, 28, 28), np.float32),
                        y=np.zeros(4, np.int64))
    raw = (tmp_path / "s.npz").read_bytes()
    (tmp_path / "s.npz").write_bytes(raw[: len(raw) // 2] if damage == "truncate"
                                     else b"\x00garbage" * 10)
    with pytest.raises(ValueError, match=r"s\.npz cannot be read .*truncated or corrupt"):
        load_samples(tmp_path / "s.npz")


def test_an_unreadable_evaluation_checkpoint_is_named(tmp_path):
    from datalens_lib.evaluate import train_classifier

    ckpt = tmp_path / ".eval-seed0.ckpt"
    ckpt.write_bytes(b"PK\x03\x04 not really a zip")
    x, y = np.zeros((8, 1, 28, 28), np.float32), np.arange(8) % 10
    with pytest.raises(CheckpointError, match=r"\.eval-seed0\.ckpt cannot be read"):
        train_classifier(x, y, x, y, 10, epochs=1, checkpoint=ckpt, progress=False)
    assert ckpt.read_bytes() == b"PK\x03\x04 not really a zip"


# ------------------------------------------------------------------ a full or read-only disk


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS, errno.EDQUOT])
def test_a_failed_write_keeps_the_previous_file_and_says_why(tmp_path, monkeypatch, code):
    """The writer fails as a full, read-only or over-quota file system makes it fail (at the
    sync of the new bytes, as a full disk does): a clear ``ResultsWriteError`` naming the file,
    the previous version intact, no temporary file left."""
    path = tmp_path / "run.json"
    atomic_write_json(path, {"a": 1})

    def fail(fd):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(provenance.os, "fsync", fail)
    with pytest.raises(ResultsWriteError, match=r"cannot write .*run\.json: .*intact") as e:
        atomic_write_json(path, {"a": 2})
    assert e.value.errno == code
    assert json.loads(path.read_text()) == {"a": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


def test_a_full_disk_during_training_keeps_the_last_checkpoint(tmp_path, monkeypatch):
    run = _cut(tmp_path, steps=2)
    good = (tmp_path / "checkpoint.pt").read_bytes()
    real_save = torch.save

    def full(obj, f, *a, **k):
        real_save(obj, f, *a, **k)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", full)
    with pytest.raises(ResultsWriteError, match="the disk is full"):
        Run(Toy(), tmp_path, checkpoint_every=1, progress=False).run(resume=True)
    assert (tmp_path / "checkpoint.pt").read_bytes() == good
    assert not list(tmp_path.glob(".*.tmp"))
    monkeypatch.setattr(torch, "save", real_save)  # space again: the run continues
    rec = Run(Toy(), tmp_path, checkpoint_every=1, progress=False).run(resume=True)
    assert rec["steps"] == run.method.cfg.steps


def test_a_read_only_file_system_is_a_clear_error(tmp_path, monkeypatch):
    """A real read-only file system where the test may make one (a tmpfs mounted read-only;
    root is needed to mount), else the patched writer above stands in."""
    import shutil
    import subprocess

    mnt = tmp_path / "ro"
    mnt.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m,ro", "tmpfs", str(mnt)],
            capture_output=True).returncode != 0:
        pytest.skip("cannot mount a read-only tmpfs here (needs root)")
    try:
        with pytest.raises(ResultsWriteError, match="read-only"):
            atomic_write_json(mnt / "x.json", {"a": 1})
        monkeypatch.setenv("DATALENS_RESULTS_ROOT", str(mnt))
        with pytest.raises(ResultsWriteError, match="read-only"):  # (the results store)
            store.save_result("tab:x", {"a": 1}, {"r": 1}, profile="smoke",
                              root=mnt / "store")
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_a_full_tmpfs_is_a_clear_error(tmp_path):
    """A real full file system: a 64 KiB tmpfs (root only), filled by one write too many."""
    import shutil
    import subprocess

    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)],
            capture_output=True).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        atomic_write_json(mnt / "a.json", {"a": 1})
        with pytest.raises(ResultsWriteError, match="the disk is full"):
            provenance.atomic_write_bytes(mnt / "a.json", b"x" * (1 << 20))
        assert json.loads((mnt / "a.json").read_text()) == {"a": 1}
        assert sorted(p.name for p in mnt.iterdir()) == ["a.json"]
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


# ------------------------------------------------------------------ concurrent writers


def _write_many(path: str, tag: int, n: int, barrier) -> None:
    barrier.wait()
    for i in range(n):
        atomic_write_json(Path(path), {"writer": tag, "i": i, "pad": "x" * 20000})
        store.save_result("tab:race", {"p": i % 3}, {"writer": tag, "i": i}, profile="smoke",
                          root=Path(path).parent / "store")
    os._exit(0)


def _read_many(path: str, n: int, barrier, bad) -> None:
    barrier.wait()
    for _ in range(n):
        try:
            json.loads(Path(path).read_text())
        except FileNotFoundError:
            continue
        except json.JSONDecodeError:
            bad.value += 1
    os._exit(0)


def test_concurrent_writers_never_interleave_or_leave_half_records(tmp_path):
    """Two processes write the same record and the same store entries 200 times each while a
    third reads: every read parses, every final file is one writer's whole record."""
    ctx = multiprocessing.get_context("fork")
    barrier, bad = ctx.Barrier(3), ctx.Value("i", 0)
    path = tmp_path / "run.json"
    procs = [ctx.Process(target=_write_many, args=(str(path), t, 200, barrier)) for t in (1, 2)]
    procs.append(ctx.Process(target=_read_many, args=(str(path), 2000, barrier, bad)))
    for p in procs:
        p.start()
    for p in procs:
        p.join()
        assert p.exitcode == 0
    assert bad.value == 0
    final = json.loads(path.read_text())
    assert final["writer"] in (1, 2) and final["i"] == 199
    recs = store.load_results("tab:race", root=tmp_path / "store")
    assert sorted(r["params"]["p"] for r in recs) == [0, 1, 2]
    assert not list(tmp_path.rglob(".*.tmp"))


def _train_into(folder: str, barrier, out) -> None:
    barrier.wait()
    try:
        Run(Toy(ToyConfig(steps=200)), folder, checkpoint_every=1, progress=False).run(
            resume=True)
        out.put("done")
    except FileExistsError as e:
        out.put(str(e))
    os._exit(0)


def test_two_processes_never_train_into_the_same_folder(tmp_path):
    """A sweep submitted twice: the second process is refused with the holder's pid while the
    first trains; the first finishes with a whole run, and the lock dies with its holder."""
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(2), ctx.SimpleQueue()
    with run_folder_lock(tmp_path):  # (held here: the two must meet a held lock)
        procs = [ctx.Process(target=_train_into, args=(str(tmp_path), barrier, out))
                 for _ in range(2)]
        for p in procs:
            p.start()
        msgs = [out.get() for _ in procs]
        for p in procs:
            p.join()
    assert all(f"pid {os.getpid()}" in m and "in use by another process" in m for m in msgs)
    ctx2 = multiprocessing.get_context("fork")
    barrier2, out2 = ctx2.Barrier(2), ctx2.SimpleQueue()
    procs = [ctx2.Process(target=_train_into, args=(str(tmp_path), barrier2, out2))
             for _ in range(2)]
    for p in procs:
        p.start()
    msgs = sorted(out2.get() for _ in procs)
    for p in procs:
        p.join()
    # one trains; the other either met the lock or found the finished run and resumed it
    assert "done" in msgs
    assert all(m == "done" or "in use by another process" in m for m in msgs)
    rec = read_record(tmp_path / "run.json")
    assert rec["steps"] == 200 and len(rec["history"]) == 200
    load_checkpoint(tmp_path / "checkpoint.pt", method="toy")
