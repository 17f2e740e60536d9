"""The run loop every generator method shares: train until the method's budget is spent,
checkpoint and resume, a progress bar, sample, then write ``samples.npz`` and ``run.json``.

A method is an object with this contract (``Method``); the harness knows nothing else about
it. It follows DPImageBench's load -> train -> generate shape, with what that harness lacks:
every method reports its privacy spent under each ledger, and records are files, not logs.

Files in the output folder:

- ``checkpoint.pt``: ``method.state_dict()`` plus the commit the run started from, written
  every ``checkpoint_every`` steps (temp file, then rename). Resuming memory-maps it on the CPU
  and the method copies it into its own tensors, so a paper-size state (18 GB on CPU) is never
  held twice.
- ``samples.npz`` (``x`` float16 images, ``y`` int64 labels), then ``run.json`` last with
  ``"status": "complete"``: a folder without ``run.json`` is not a finished run.
- ``snapshots/eps<b>.pt`` and ``samples-eps<b>.npz`` for every smaller budget b asked for
  (``snapshot_budgets``): the generator as it was after the last step whose spent ε stays
  within b. For a method whose settings do not depend on the budget (``exact_snapshots``:
  DataLens, G-PATE) that generator *is* the run with budget b -- the same steps, RNG streams
  and stopping rule -- so one ε = 1 run yields the ε = 0.2 ... 0.8 cells of ``tab:lowdp``.
- ``snapshots.json`` instead of ``samples.npz`` and ``run.json`` when the run stops at its
  last snapshot (``until_last_snapshot``): the snapshots of a finished run whose folder was
  lost (a run folder does not survive a change of machine here), recovered by training the
  same config and seed again only as far as they need. With ``prefix_of`` (the finished run's
  ``run.json``) it also records whether the steps trained again are the finished run's own
  (:func:`prefix_check`): only then are its snapshots that run's.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from tqdm import tqdm

from .. import failpoints
from .._validate import nonneg_int
from ..ensemble import conv_layout
from ..privacy.accountant import DATA_DEPENDENT, delta_note
from ..provenance import (
    _nan_to_none,
    atomic_save,
    atomic_write_json,
    git_sha,
    peak_rss_gib,
    provenance,
)
from ..records import (
    RECORD_SCHEMA,
    CheckpointError,
    RecordError,
    load_checkpoint,
    read_record,
)

SAMPLE_SEED_OFFSET = 4  # the sampling generator is seeded with seed + 4 (DataLens's streams)
SNAPSHOTS_RECORD = "snapshots.json"  # a run stopped at its last snapshot (until_last_snapshot)
#: two ε of the same steps count as equal within this relative tolerance: PLD's FFT-based
#: conversion (dp_accounting) differs in its last bits from one process to the next (a
#: recovered G-PATE snapshot: 0.12470596999372435 against 0.12470596999372456, 2026-12-02)
EPSILON_RTOL = 1e-9


def same_epsilon(a: float | None, b: float | None) -> bool:
    """Whether two ε values of the same steps agree (:data:`EPSILON_RTOL`; None only with
    None; equal infinities agree)."""
    if a is None or b is None:
        return a is b
    return a == b or math.isclose(a, b, rel_tol=EPSILON_RTOL, abs_tol=0.0)


def snapshot_differences(snap: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """The fields in which two snapshots of one budget differ: ``step`` and
    ``epsilon.<ledger>`` (ε within :data:`EPSILON_RTOL`)."""
    mine, theirs = snap.get("epsilon") or {}, other.get("epsilon") or {}
    return (["step"] if snap.get("step") != other.get("step") else []) + [
        f"epsilon.{k}" for k in sorted(set(mine) | set(theirs))
        if not same_epsilon(mine.get(k), theirs.get(k))]


def same_privacy(fields: list[str]) -> bool:
    """Whether :func:`snapshot_differences` leave the privacy side alone: the same step and
    the same ε under every data-independent ledger (a data-dependent one follows the votes,
    hence the history)."""
    return not any(f == "step" or (f.startswith("epsilon.") and f != f"epsilon.{DATA_DEPENDENT}")
                   for f in fields)


def check_prefix_reference(reference: dict[str, Any], method: str, config: Any, seed: int,
                           profile: str) -> None:
    """Refuse (``ValueError``) a finished run's record that is not the run this one trains
    again: another method, config, seed or profile, or no per-step history to compare.
    ``config``: the method's config object (its ``from_dict`` gives fields added since the
    reference was written their defaults, as for snapshots)."""
    if reference.get("status") != "complete":
        raise ValueError("the reference is not a finished run's run.json (status "
                         f"{reference.get('status')!r})")
    theirs = {"method": reference.get("method"), "seed": reference.get("seed"),
              "profile": reference.get("profile")}
    ours = {"method": method, "seed": seed, "profile": profile}
    for key in theirs:
        if theirs[key] != ours[key]:
            raise ValueError(f"the reference run has {key} {theirs[key]!r}, this one "
                             f"{ours[key]!r}: it would not be the same run")
    if type(config).from_dict(reference["config"]) != config:
        ref = type(config).from_dict(reference["config"]).to_dict()
        diff = sorted(k for k, v in config.to_dict().items() if ref.get(k) != v)
        raise ValueError(f"the reference run's config differs in {diff}: it would not be the "
                         "same run")
    if not reference.get("history"):
        raise ValueError("the reference run.json has no per-step history to compare with")


def prefix_check(history: list[dict[str, Any]], reference: dict[str, Any],
                 rows: int | None = None,
                 snapshots: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Whether ``history`` (rows of a run trained again) is the first rows of a finished run's
    ``reference["history"]``: every field but wall-clock times (names holding ``second``)
    compared exactly, as JSON stores them (both sides pass through the JSON writer's
    normalisation: NaN as null; equal infinities are equal). Losses and data-dependent counts
    (answered or agreed dimensions) make this a check of the whole computation, not only of
    the privacy ledger. ``snapshots`` (the run trained again's, with ``budget``, ``step`` and
    ``epsilon``) are compared with the reference's snapshots of the same budgets, where it
    has them (``snapshot_differences`` names the fields, ε within :data:`EPSILON_RTOL`;
    ``snapshots_same_privacy``: the same steps and the same ε under every data-independent
    ledger, whatever the history).
    ``identical`` is False when any value differs, or when fewer than ``rows`` history rows
    (default: all of ``history``; the last snapshot's row count) were compared."""
    def norm(x: Any) -> Any:
        return json.loads(json.dumps(_nan_to_none(x)))

    ours, ref = norm(history), norm(reference["history"])
    need = len(ours) if rows is None else rows
    n = min(len(ours), len(ref))
    worst: dict[str, float] = {}
    first_diff = None
    for i, (a, b) in enumerate(zip(ours[:n], ref[:n], strict=True)):
        for key in sorted(set(a) | set(b)):
            if "second" in key:
                continue
            va, vb = a.get(key), b.get(key)
            numbers = all(isinstance(v, int | float) and not isinstance(v, bool)
                          for v in (va, vb))
            if va == vb and type(va) is type(vb):
                continue
            if first_diff is None:
                first_diff = {"row": i, "field": key, "ours": va, "reference": vb}
            if numbers and math.isfinite(va) and math.isfinite(vb):
                worst[key] = max(worst.get(key, 0.0), abs(float(va) - float(vb)))
    snap_diff = []
    theirs = {s["budget"]: s for s in reference.get("snapshots", []) if "step" in s}
    for snap in norm(snapshots or []):
        other = theirs.get(snap["budget"])
        if other is not None and (fields := snapshot_differences(snap, other)):
            snap_diff.append({"budget": snap["budget"], "fields": fields,
                              "step": snap.get("step"), "reference_step": other["step"]})
    return {"rows_compared": n, "rows_trained": len(ours), "reference_rows": len(ref),
            "rows_needed": need, "first_difference": first_diff,
            "snapshot_differences": snap_diff,
            "snapshots_same_privacy": same_privacy([f for d in snap_diff for f in d["fields"]]),
            "identical": (first_diff is None and not snap_diff and n == len(ours)
                          and n >= max(need, 1)),
            "max_abs_difference": worst, "reference_git_sha": reference.get("git_sha"),
            "reference_hardware": (reference.get("hardware") or {}).get("cpu")}


def prefix_summary(check: dict[str, Any]) -> str:
    """One line for a :func:`prefix_check`: identical, where it first differs, or how few
    rows could be compared."""
    if check["identical"]:
        return f"identical over {check['rows_compared']} steps"
    if (d := check.get("first_difference")) is not None:
        return f"differs from step {d['row'] + 1} ({d['field']})"
    if check.get("snapshot_differences"):
        d = check["snapshot_differences"][0]
        return f"snapshot at eps {d['budget']:g}: {', '.join(d['fields'])} differ"
    return f"only {check['rows_compared']} of {check['rows_needed']} steps compared"


class Method(Protocol):
    """What the harness needs from a generator method.

    ``name``: registry key (``datalens``, ``dcgan``, ...). ``cfg``: the method's frozen config
    (``to_dict()``, ``dataset``, ``epsilon``, ``n_samples``). ``seed``, ``profile``,
    ``device``. ``steps_done`` and ``train_seconds``: progress so far (part of the state).
    ``can_step()``: whether one more step fits the budget (privacy or schedule).
    ``step()``: one step; returns its history row (``epsilon`` spent so far, losses, ...).
    ``total_steps()``: the planned number of steps (for the progress bar), or None.
    ``sample(n, generator)``: n images (float, in [0, 1]) and labels, as numpy arrays.
    ``state_dict()`` / ``load_state_dict(st)``: everything a resumed run needs to continue
    exactly (weights, optimisers, RNG states, ledgers, history); ``load_state_dict`` refuses a
    state written with another config or seed.
    ``record()``: the method's own part of ``run.json``: ``epsilon`` (ε under each ledger),
    ``privacy`` (mechanism, sensitivity, neighbouring relation, accountant, which ledger is a
    DP guarantee: ``dp_guarantee`` in words and ``dp_ledgers``, the keys of ``epsilon`` that
    are a DP guarantee, empty for a non-private run or one without a guarantee) and anything
    else it measures.
    """

    name: str
    cfg: Any
    seed: int
    profile: str
    device: torch.device
    history: list[dict[str, Any]]

    @property
    def steps_done(self) -> int: ...

    @property
    def train_seconds(self) -> float: ...

    def can_step(self) -> bool: ...

    def step(self) -> dict[str, Any]: ...

    def total_steps(self) -> int | None: ...

    def sample(self, n: int, generator: torch.Generator) -> tuple[np.ndarray, np.ndarray]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...

    def record(self) -> dict[str, Any]: ...


def check_dp_ledgers(privacy: dict[str, Any] | None, epsilon: dict[str, float] | None,
                     method: str) -> list[str]:
    """A method record's ``privacy.dp_ledgers`` (which ε are a DP guarantee), checked: every
    key names a ledger of the record's ``epsilon``, never the data-dependent one; a record
    without ``privacy`` has none."""
    if privacy is None:
        return []
    dp = privacy.get("dp_ledgers")
    if not isinstance(dp, list):
        raise ValueError(f"{method}'s record() must state privacy['dp_ledgers'] (the keys of "
                         "epsilon that are a DP guarantee; [] for none)")
    if DATA_DEPENDENT in dp:  # a function of the clean votes: never a DP guarantee
        raise ValueError(f"{method}'s privacy['dp_ledgers'] names the data_dependent epsilon, "
                         "which is not a DP guarantee")
    unknown = [c for c in dp if c not in (epsilon or {})]
    if unknown:
        raise ValueError(f"{method}'s privacy['dp_ledgers'] names {unknown}, which are not "
                         f"ledgers of its epsilon ({sorted(epsilon or {})})")
    return dp


class SnapshotMethod(Method, Protocol):
    """Optional: methods that can snapshot their generator at smaller budgets.

    ``exact_snapshots``: True when the run with a smaller budget is exactly this run's prefix.
    ``epsilon_after_next_step()``: spent ε (the stopping conversion) if one more step ran.
    ``epsilon_spent()``: ε under each ledger now. ``generator_state()`` /
    ``load_generator_state(st)``: the student generator's weights."""

    exact_snapshots: bool

    def epsilon_after_next_step(self) -> float: ...

    def epsilon_spent(self) -> dict[str, float]: ...

    def generator_state(self) -> dict[str, torch.Tensor]: ...

    def load_generator_state(self, state: dict[str, torch.Tensor]) -> None: ...


LOCK_FILE = ".lock"  # held (flock) by the process training into the folder


@contextlib.contextmanager
def run_folder_lock(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``folder`` while a run trains into it: a second process
    (a sweep submitted twice, a job requeued while the first still runs) is refused at once
    with the holder's pid instead of both writing the same checkpoint and records. The lock
    is the kernel's (``fcntl.flock``): it is released when the holder exits, even by SIGKILL,
    so a killed run never leaves a stale lock."""
    path = Path(folder) / LOCK_FILE
    fh = open(path, "a+")
    try:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "unknown"
            raise FileExistsError(f"{folder} is in use by another process (pid {holder}) "
                                  "training into it; wait for it, or choose another output "
                                  "folder") from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"{os.getpid()}\n")
        fh.flush()
        yield
    finally:
        fh.close()  # (releases the lock)


class Run:
    """One method's run into one output folder (see module doc)."""

    def __init__(self, method: Method, out_dir: str | Path, *, checkpoint_every: int = 10,
                 progress: bool = True, snapshot_budgets: tuple[float, ...] = (),
                 until_last_snapshot: bool = False,
                 prefix_of: dict[str, Any] | None = None, prefix_of_path: str | None = None):
        self.method, self.out = method, Path(out_dir)
        nonneg_int("checkpoint_every", checkpoint_every)
        budgets = tuple(sorted(float(b) for b in snapshot_budgets))
        if budgets:
            if not hasattr(method, "epsilon_after_next_step"):
                raise ValueError(f"method {method.name!r} cannot snapshot smaller budgets")
            if any(not 0 < b < method.cfg.epsilon for b in budgets):
                raise ValueError(f"snapshot budgets must lie in (0, {method.cfg.epsilon}), "
                                 f"got {list(budgets)}")
        self.snapshot_budgets = budgets
        if until_last_snapshot and not budgets:
            raise ValueError("until_last_snapshot needs snapshot budgets to stop at")
        if prefix_of is not None:
            if not until_last_snapshot:
                raise ValueError("prefix_of compares a run trained again up to its last "
                                 "snapshot: pass until_last_snapshot too")
            check_prefix_reference(prefix_of, method.name, method.cfg, method.seed,
                                   method.profile)
        self.until_last_snapshot, self.prefix_of = bool(until_last_snapshot), prefix_of
        self.prefix_of_path = prefix_of_path  # where the reference was read (provenance)
        # budgets found to have no run (see _snapshot) -> why: "below one step" or "passed"
        self._no_snapshot: dict[float, str] = {}
        self.checkpoint_every = int(checkpoint_every)
        self.progress = progress
        self.git_sha_at_start = git_sha()  # the code this process runs, whatever HEAD is later

    @property
    def checkpoint_path(self) -> Path:
        return self.out / "checkpoint.pt"

    def save_checkpoint(self) -> None:
        state = {**self.method.state_dict(), "git_sha_at_start": self.git_sha_at_start,
                 "method": self.method.name, "schema": RECORD_SCHEMA}
        atomic_save(self.checkpoint_path, lambda tmp: torch.save(state, tmp))

    def load_checkpoint(self) -> bool:
        """Continue from ``checkpoint.pt`` where there is one (False: none). A checkpoint that
        is unreadable, another method's, or another config's or seed's raises
        :class:`~datalens_lib.records.CheckpointError` naming it, before anything is
        written."""
        if not self.checkpoint_path.exists():
            return False
        # memory-mapped on the CPU: the method copies the tensors into its own (on its
        # device); generator states stay CPU byte tensors, as ``Generator.set_state`` needs
        st = load_checkpoint(self.checkpoint_path, method=self.method.name)
        try:
            self.method.load_state_dict(st)
        except (KeyError, TypeError, RuntimeError, ValueError) as e:
            raise CheckpointError(
                f"{self.checkpoint_path} does not fit this run ({type(e).__name__}: "
                f"{str(e).splitlines()[0][:200] if str(e) else e!r}): it was written by "
                "another config, seed, method or version. Choose another output folder, or "
                "move the checkpoint away to start afresh (nothing was written)") from None
        # the commit the run started from (checkpoints before this key: the resuming one's)
        self.git_sha_at_start = st.get("git_sha_at_start", self.git_sha_at_start)
        return True

    def run(self, resume: bool = False, stop_after: int | None = None) -> dict[str, Any]:
        """Step until ``method.can_step()`` is False, then write ``samples.npz`` and
        ``run.json`` (``until_last_snapshot``: until every snapshot is taken, then write the
        snapshots' samples and ``snapshots.json``). ``stop_after`` ends this call after that
        many new steps (an interruption: the checkpoint is kept) and returns a partial
        record."""
        self.out.mkdir(parents=True, exist_ok=True)
        with run_folder_lock(self.out):
            return self._run(resume, stop_after)

    def _run(self, resume: bool, stop_after: int | None) -> dict[str, Any]:
        m = self.method
        # what a killed run of this folder left mid-write (its writes' temporary names; this
        # process holds the folder's lock, so no other training writes them now)
        for name in ("checkpoint.pt", "samples.npz", "run.json", SNAPSHOTS_RECORD,
                     "samples-eps*.npz"):
            for tmp in self.out.glob(f".{name}.*.tmp"):
                tmp.unlink(missing_ok=True)
        for name, what in (("run.json", "a finished run"), (SNAPSHOTS_RECORD, "the snapshots "
                           f"of a run stopped at its last snapshot ({SNAPSHOTS_RECORD})")):
            if (self.out / name).exists():
                if not resume:
                    raise FileExistsError(f"{self.out} already holds {what}; pass resume=True "
                                          "to reuse it or choose another output folder")
                self._check_own_record(self.out / name)
        if self.checkpoint_path.exists() and not resume:
            raise FileExistsError(
                f"{self.checkpoint_path} holds an unfinished run; pass resume=True (--resume) "
                "to continue it, or move it away to start afresh (nothing was written)")
        resumed = resume and self.load_checkpoint()
        if not resumed:  # a fresh start: snapshots of an earlier, unfinished run are not ours
            shutil.rmtree(self.out / "snapshots", ignore_errors=True)
            for old in self.out.glob("samples-eps*.npz"):
                old.unlink()
        t_start = time.perf_counter()
        done_here = 0
        bar = tqdm(total=m.total_steps(), initial=m.steps_done, disable=not self.progress,
                   unit="step", desc=f"{m.name} {m.cfg.dataset} eps<={m.cfg.epsilon}")
        try:
            self._snapshot()
            while m.can_step():
                if self.until_last_snapshot and not self._pending_snapshots():
                    break
                row = m.step()
                failpoints.hit("step")
                self._snapshot()
                done_here += 1
                bar.update(1)
                bar.set_postfix({k: f"{v:.3f}" for k, v in row.items()
                                 if k in ("epsilon", "d_loss", "g_loss")
                                 and isinstance(v, float)})
                if self.checkpoint_every and m.steps_done % self.checkpoint_every == 0:
                    self.save_checkpoint()
                if stop_after is not None and done_here >= stop_after:
                    self.save_checkpoint()
                    return {"status": "interrupted", "step": m.steps_done}
        finally:
            bar.close()
        if self.checkpoint_every:
            self.save_checkpoint()
        if self.until_last_snapshot:
            return self._write_snapshots_record(resumed, time.perf_counter() - t_start)
        t_sample = time.perf_counter()
        x, y = m.sample(m.cfg.n_samples,
                        torch.Generator().manual_seed(m.seed + SAMPLE_SEED_OFFSET))
        sample_seconds = time.perf_counter() - t_sample

        def _write(tmp: str) -> None:
            with open(tmp, "wb") as fh:
                np.savez_compressed(fh, x=x, y=y)

        atomic_save(self.out / "samples.npz", _write)
        snapshots = self._sample_snapshots()
        record = self.record(sample_seconds, resumed, time.perf_counter() - t_start)
        if self.snapshot_budgets:
            record["snapshots"] = snapshots
        atomic_write_json(self.out / "run.json", record)
        return record

    def _check_own_record(self, path: Path) -> None:
        """A record already in the folder must be this method's (and readable): a resume
        never rewrites another method's finished run."""
        rec = read_record(path)
        if rec.get("method", self.method.name) != self.method.name:
            raise RecordError(f"{path} is a {rec['method']!r} run, not {self.method.name!r}: "
                              "choose another output folder (nothing was written)")

    # ------------------------------------------------------------------ budget snapshots

    def _snapshot_path(self, budget: float) -> Path:
        return self.out / "snapshots" / f"eps{budget:g}.pt"

    def _snapshot(self) -> None:
        """Save the generator for every budget the next step would exceed (once each)."""
        m = self.method
        pending = self._pending_snapshots()
        if not pending:
            return
        nxt = m.epsilon_after_next_step() if m.can_step() else float("inf")
        crossed = [b for b in pending if nxt > b]
        if not crossed:  # the common case: no ledger conversion beyond the cheap one above
            return
        spent = m.epsilon_spent()  # (all conversions, PLD included: once per budget only)
        now = spent[getattr(m.cfg, "conversion", "rdp")]  # the stopping ledger
        for b in crossed:
            # already passed when snapshots were asked for (a resumed run), or below one step:
            # no run with this budget to keep (recorded as missing)
            if now > b or m.steps_done == 0:
                self._no_snapshot[b] = "passed" if now > b else "below one step"
                continue
            state = {"budget": b, "step": m.steps_done, "epsilon": spent,
                     "generator": m.generator_state(), "history_rows": len(m.history),
                     "config": m.cfg.to_dict(), "seed": m.seed}
            path = self._snapshot_path(b)
            path.parent.mkdir(exist_ok=True)
            atomic_save(path, lambda tmp, st=state: torch.save(st, tmp))

    def _pending_snapshots(self) -> list[float]:
        """The budgets whose snapshot is neither taken nor known to have no run."""
        return [b for b in self.snapshot_budgets
                if b not in self._no_snapshot and not self._snapshot_path(b).exists()]

    def _write_snapshots_record(self, resumed: bool, wall: float) -> dict[str, Any]:
        """``snapshots.json`` of a run stopped at its last snapshot: the run's record as far
        as it trained (ε under each ledger and the history of every step trained, a few past
        the last snapshot when resumed from a later checkpoint), its snapshots and their
        samples, and ``prefix_check`` against ``prefix_of`` over at least the last
        snapshot's history rows."""
        passed = sorted(b for b, why in self._no_snapshot.items() if why == "passed")
        if passed:  # resumed from a checkpoint already past them: they cannot be recovered
            raise ValueError(f"{self.out} was resumed from a checkpoint past the budgets "
                             f"{passed} without their snapshots: move its checkpoint.pt away "
                             "and train again from step 0")
        t_sample = time.perf_counter()
        snapshots = self._sample_snapshots()
        rec = self.record(time.perf_counter() - t_sample, resumed, wall)
        rows = max((s["history_rows"] for s in snapshots if s.get("history_rows") is not None),
                   default=0)
        del rec["samples"]  # no samples of the run itself: it stopped before its budget
        rec.update(status="snapshots", snapshots=snapshots, until_last_snapshot=True,
                   last_snapshot_rows=rows)
        if self.prefix_of is not None:
            rec["prefix_of"] = {**prefix_check(rec["history"], self.prefix_of, rows=rows,
                                               snapshots=snapshots),
                                "reference": self.prefix_of_path}
        atomic_write_json(self.out / SNAPSHOTS_RECORD, rec)
        return rec

    def _sample_snapshots(self) -> list[dict[str, Any]]:
        """Samples of every snapshot's generator (same sampling seed as the final samples)."""
        m = self.method
        out: list[dict[str, Any]] = []
        if not self.snapshot_budgets:
            return out
        final = {k: v.detach().clone() for k, v in m.generator_state().items()}
        try:
            for b in self.snapshot_budgets:
                if not self._snapshot_path(b).exists():
                    out.append({"budget": b, "missing": "below what one step costs, or "
                                "already spent when snapshots were first asked for"})
                    continue
                st = torch.load(self._snapshot_path(b), map_location="cpu", weights_only=True)
                # from_dict: config fields added after the snapshot was written take their
                # defaults (a run resumed across such a change keeps its snapshots)
                if "config" not in st or type(m.cfg).from_dict(st["config"]) != m.cfg \
                        or st.get("seed") != m.seed:
                    raise ValueError(f"{self._snapshot_path(b)} belongs to another config or "
                                     "seed; delete the snapshots folder")
                name = f"samples-eps{b:g}.npz"
                if not (self.out / name).exists():
                    m.load_generator_state(st["generator"])
                    x, y = m.sample(m.cfg.n_samples,
                                    torch.Generator().manual_seed(m.seed + SAMPLE_SEED_OFFSET))

                    def _write(tmp: str, x=x, y=y) -> None:
                        with open(tmp, "wb") as fh:
                            np.savez_compressed(fh, x=x, y=y)

                    atomic_save(self.out / name, _write)
                out.append({"budget": b, "step": st["step"], "epsilon": st["epsilon"],
                            "history_rows": st.get("history_rows"),
                            "samples": name, "exact": bool(m.exact_snapshots)})
        finally:
            m.load_generator_state(final)
        return out

    def record(self, sample_seconds: float, resumed: bool,
               wall_this_call: float) -> dict[str, Any]:
        """``run.json``: the shared fields, the method's own (``method.record()``), then
        provenance; ``git_sha`` is the commit the run started from."""
        m, cfg = self.method, self.method.cfg
        rec: dict[str, Any] = {
            "schema": RECORD_SCHEMA,
            "status": "complete", "method": m.name, "config": cfg.to_dict(),
            "profile": m.profile, "seed": m.seed, "device": str(m.device),
            "target_epsilon": cfg.epsilon if math.isfinite(cfg.epsilon) else None,  # None: ∞
            "delta": getattr(cfg, "delta", None),
            "steps": m.steps_done,
            "timings": {"train_seconds": m.train_seconds, "sample_seconds": sample_seconds,
                        "seconds_per_step": m.train_seconds / max(1, m.steps_done),
                        "wall_seconds_last_call": wall_this_call},
            "peak_rss_gib": peak_rss_gib(), "resumed": resumed,
            "samples": {"file": "samples.npz", "n": cfg.n_samples, "dtype": "float16"},
            "history": m.history,
        }
        rec.update(m.record())
        privacy = rec.get("privacy")
        dp = check_dp_ledgers(privacy, rec.get("epsilon"), m.name)
        if privacy is not None:
            if dp:  # (none: a non-private run, or G-PATE's data-dependent stop)
                privacy["scope"] = (
                    "the guarantee covers what the mechanism releases: the generator and its "
                    "samples; this record's training diagnostics (losses on real data, batch "
                    "sizes, data-dependent epsilon) are computed from private data without "
                    "noise and are for inspection, not release; the sampling and noise come "
                    "from seeded, non-cryptographic generators whose seed this record names "
                    "(reproducibility): a release would keep the seed secret")
            n = getattr(m, "n_private", None)  # the private records of the run's dataset
            if n is not None and rec["delta"] is not None:
                privacy["records"] = n
                if (note := delta_note(rec["delta"], n)) is not None:
                    privacy["delta_note"] = note
        if m.device.type == "cuda":
            rec["cuda_peak_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 3)
        rec.update(provenance())
        rec.setdefault("hardware", {})["conv_layout"] = conv_layout(m.device)  # speed only
        if rec.get("git_sha") not in (None, self.git_sha_at_start):
            rec["git_sha_at_end"] = rec["git_sha"]  # HEAD moved while the run trained
        rec["git_sha"] = self.git_sha_at_start
        return rec
