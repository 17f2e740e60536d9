"""Run the book's notebooks or a grid of training runs as many jobs at once, on an existing
engine: `submitit <https://github.com/facebookincubator/submitit>`_ (Slurm on a cluster, its
local executor on one machine). Nothing here schedules: submitit submits, Slurm (or a local
subprocess per job) runs; this module only builds the jobs, skips finished ones and summarises.

* A **job** is one notebook execution (:func:`runner.run_notebook`) or one training run
  (``datalens train``, optionally followed by ``datalens evaluate``).
* **Idempotent**: a job whose output is complete is skipped before submission (a notebook whose
  executed copy carries the same parameter and source hash; a run folder whose ``run.json``
  says ``complete`` and, when asked, its evaluation record). A cut training job resumes from
  its last checkpoint when the sweep is submitted again.
* **Results root**: outputs go under :func:`provenance.runs_root` / :func:`runner.notebooks_root`,
  i.e. ``$DATALENS_RESULTS_ROOT`` when set (a cluster's shared file system), never necessarily
  the code checkout. The executor's logs go to ``<runs root>/submitit/``.
* **Failures** are summarised (job, status, the error's last line, the log folder); a failed job
  never stops the others.

Grids: ``expand_grid({"seed": [0, 1], "k": [100, 200]})`` is the cartesian product, one job per
point. A training job's folder is ``<runs root>/sweep/<method>/<config>/<profile>-<hash>``, the
hash covering method, config, profile, seed and overrides (:func:`store.params_hash`).
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._validate import choice
from .provenance import runs_root
from .store import params_hash

EXECUTORS = ("local", "slurm")


@dataclass(frozen=True)
class Job:
    """One unit of work: ``kind`` ``notebook`` (spec: name, parameters, canonical) or
    ``train`` (spec: method, config, profile, seed, overrides, out, eval_epochs)."""

    kind: str
    name: str
    spec: dict[str, Any] = field(hash=False)

    @property
    def point(self) -> str:
        """The grid point in words, e.g. ``seed=1 k=100``."""
        if self.kind == "notebook":
            items = self.spec["parameters"].items()
        else:
            items = [("seed", self.spec["seed"]), *self.spec["overrides"].items()]
        return " ".join(f"{k}={json.dumps(v)}" for k, v in items)

    def finished(self) -> bool:
        if self.kind == "notebook":
            from . import runner

            return runner.is_up_to_date(self.spec["notebook"], self.spec["parameters"],
                                        canonical=self.spec["canonical"])
        out = Path(self.spec["out"])
        try:
            done = json.loads((out / "run.json").read_text()).get("status") == "complete"
        except (OSError, ValueError):
            return False
        epochs = self.spec.get("eval_epochs")
        return done and (not epochs or (out / f"eval-{epochs}ep.json").exists())


def expand_grid(grid: dict[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Cartesian product of ``{key: values}`` as a list of dicts (one point: ``[{}]``)."""
    for k, vs in grid.items():
        if not isinstance(vs, (list, tuple)) or not vs:
            raise ValueError(f"grid values of {k!r} must be a non-empty list, got {vs!r}")
    keys = list(grid)
    return [dict(zip(keys, combo, strict=True))
            for combo in itertools.product(*(grid[k] for k in keys))]


def notebook_jobs(names: Iterable[str], points: Iterable[dict[str, Any]], *,
                  canonical: bool = False) -> list[Job]:
    """One job per notebook and parameter point. ``canonical`` (the book's run-all): the
    output is ``book/notebooks/<name>.ipynb``, so each name may appear once."""
    from .runner import notebook_path

    jobs = []
    for name in names:
        path = str(notebook_path(name))
        for params in points:
            label = name if canonical else f"{Path(path).stem}-{params_hash(params)}"
            jobs.append(Job("notebook", label, {"notebook": path, "parameters": dict(params),
                                                "canonical": canonical}))
    return jobs


def train_jobs(method: str, config: str, profile: str, points: Iterable[dict[str, Any]], *,
               eval_epochs: int | None = None, root: Path | None = None) -> list[Job]:
    """One training job per point; a point's ``seed`` is the run's seed (default 0), every other
    key a config override (``datalens train --set key=value``)."""
    from .config import load_config
    from .methods import method_class

    method_class(method)  # refuses an unknown method, naming the valid ones
    load_config(config, profile, method=method)  # refuses an unknown config or profile
    if eval_epochs is not None and eval_epochs < 1:
        raise ValueError(f"eval_epochs must be >= 1, got {eval_epochs}")
    base = (root or runs_root()) / "sweep" / method / config
    jobs = []
    for point in points:
        point = dict(point)
        seed = point.pop("seed", 0)
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        load_config(config, profile, method=method, **point)  # an unknown key fails here
        h = params_hash({"method": method, "config": config, "profile": profile, "seed": seed,
                         "overrides": point})
        out = base / f"{profile}-{h}"
        jobs.append(Job("train", f"{method}/{config}/{profile}-{h}",
                        {"method": method, "config": config, "profile": profile, "seed": seed,
                         "overrides": point, "out": str(out), "eval_epochs": eval_epochs}))
    return jobs


def execute(job: Job) -> dict[str, Any]:
    """Run one job in this process (what a submitit worker calls). Raises on failure, so the
    executor records the job as failed with its traceback."""
    if job.kind == "notebook":
        from .runner import run_notebook

        res = run_notebook(job.spec["notebook"], job.spec["parameters"],
                           canonical=job.spec["canonical"], force=False)
        if res["status"] == "failed":
            raise RuntimeError(f"notebook {job.name} failed: {res['error']}")
        return res
    from .cli import main

    s = job.spec
    argv = ["train", "--method", s["method"], "--config", s["config"], "--profile",
            s["profile"], "--seed", str(s["seed"]), "--out", s["out"], "--resume"]
    for k, v in s["overrides"].items():
        argv += ["--set", f"{k}={json.dumps(v)}"]
    t0 = time.perf_counter()
    err = io.StringIO()
    with contextlib.redirect_stderr(_Tee(sys.stderr, err)):
        code = main(argv)
    if code != 0:
        said = [ln for ln in err.getvalue().splitlines() if ln.startswith("error:")]
        raise RuntimeError(f"training {job.name} failed: {said[-1] if said else f'exit {code}'}"
                           f" (datalens {' '.join(argv)})")
    if s.get("eval_epochs") and not (Path(s["out"]) / f"eval-{s['eval_epochs']}ep.json").exists():
        if main(["evaluate", s["out"], "--epochs", str(s["eval_epochs"]),
                 "--seed", str(s["seed"])]) != 0:
            raise RuntimeError(f"evaluation of {job.name} failed")
    return {"notebook": None, "status": "ok", "output": s["out"],
            "seconds": round(time.perf_counter() - t0, 1)}


class _Tee(io.TextIOBase):
    """Writes to two streams: the job's log keeps everything, the error keeps the CLI's reason."""

    def __init__(self, *streams):
        self.streams = streams

    def write(self, text: str) -> int:
        for st in self.streams:
            st.write(text)
        return len(text)

    def flush(self) -> None:
        for st in self.streams:
            st.flush()


def make_executor(executor: str = "local", *, folder: Path | None = None,
                  partition: str | None = None, gpus_per_job: int = 0, cpus_per_job: int = 2,
                  timeout_min: int = 24 * 60, mem_gb: float | None = None):
    """A submitit executor: ``local`` (one subprocess per job on this machine) or ``slurm``
    (``partition``, ``gpus_per_job`` GPUs, ``cpus_per_job`` CPUs, ``mem_gb``, time limit)."""
    submitit = _import_submitit()
    choice("executor", executor, EXECUTORS)
    if gpus_per_job < 0 or cpus_per_job < 1 or timeout_min < 1:
        raise ValueError("gpus_per_job must be >= 0, cpus_per_job and timeout_min >= 1")
    if partition is not None and executor != "slurm":
        raise ValueError("partition applies to the slurm executor only")
    try:
        ex = submitit.AutoExecutor(folder=str(folder or runs_root() / "submitit" / "%j"),
                                   cluster=executor)
    except RuntimeError as e:  # submitit: no srun on PATH
        raise ValueError(f"the slurm executor needs Slurm's srun and sbatch on PATH (run it "
                         f"on a cluster's login node): {e}") from e
    params: dict[str, Any] = {"timeout_min": timeout_min, "gpus_per_node": gpus_per_job,
                              "cpus_per_task": cpus_per_job, "name": "datalens"}
    if mem_gb is not None:
        params["mem_gb"] = mem_gb
    if partition is not None:
        params["slurm_partition"] = partition
    ex.update_parameters(**params)
    return ex


def _import_submitit():
    """Import submitit without letting it reconfigure this process's logging.

    At import, submitit calls ``logging.config.dictConfig``, which closes every handler already
    configured in the process (``logging.config._clearExistingHandlers``): absl's handler
    (imported with dp_accounting) then closes the stream it holds — a notebook's or pytest's
    stderr — and submitit binds its own handlers to whatever ``sys.stdout``/``sys.stderr`` are at
    that moment. Its documented switch ``SUBMITIT_LOG_LEVEL=NOCONFIG`` skips that; it is set for
    the import only, and only when the user has not set the variable, so the job subprocesses
    (fresh processes) log as usual and submitit's warnings here reach the root logger."""
    if "submitit" in sys.modules or "SUBMITIT_LOG_LEVEL" in os.environ:
        import submitit

        return submitit
    os.environ["SUBMITIT_LOG_LEVEL"] = "NOCONFIG"
    try:
        import submitit
    finally:
        del os.environ["SUBMITIT_LOG_LEVEL"]
    return submitit


def run_jobs(jobs: Sequence[Job], executor: str = "local", *, max_parallel: int = 0,
             poll_s: float = 1.0, progress: bool = True, **executor_kw) -> list[dict[str, Any]]:
    """Submit every unfinished job to ``executor`` and wait for all; returns one summary per
    job (``status`` skipped / ok / failed, ``error``, ``seconds``, ``log``).

    ``max_parallel`` (0: no limit) caps how many jobs are submitted at once — on Slurm the
    queue itself is the limit, so this matters for the local executor on a small machine."""
    from tqdm import tqdm

    if max_parallel < 0:
        raise ValueError(f"max_parallel must be >= 0, got {max_parallel}")
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        raise ValueError("two jobs have the same output; a grid point is repeated")
    results: dict[str, dict[str, Any]] = {}
    todo = []
    for j in jobs:
        if j.finished():
            results[j.name] = {"job": j.name, "point": j.point, "status": "skipped",
                               "error": None, "seconds": 0.0, "log": None}
        else:
            todo.append(j)
    if todo:
        ex = make_executor(executor, **executor_kw)
        limit = max_parallel or len(todo)
        running: list[tuple[Job, Any, float]] = []
        queue = list(todo)
        bar = tqdm(total=len(todo), desc=f"jobs ({executor})", disable=not progress)
        while queue or running:
            while queue and len(running) < limit:
                j = queue.pop(0)
                running.append((j, ex.submit(execute, j), time.perf_counter()))
            still = []
            for j, sj, t0 in running:
                if not sj.done():
                    still.append((j, sj, t0))
                    continue
                try:
                    sj.result()
                    status, error = "ok", None
                except Exception as exc:  # submitit re-raises the job's error (FailedJobError)
                    status, error = "failed", _last_line(str(exc))
                results[j.name] = {"job": j.name, "point": j.point, "status": status,
                                   "error": error,
                                   "seconds": round(time.perf_counter() - t0, 1),
                                   "log": str(sj.paths.folder)}
                bar.update()
            running = still
            if running:
                time.sleep(poll_s)
        bar.close()
    return [results[n] for n in names]


def _last_line(text: str) -> str:
    """The most telling line of a job's error: the last non-empty line that names an error."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if "Error" in ln or "error" in ln:
            return ln[:500]
    return (lines[-1] if lines else text)[:500]


def summarise(results: Sequence[dict[str, Any]]) -> str:
    """One line per job and a total, failures with their error and log folder."""
    out = []
    for r in results:
        out.append(f"  {r['status']:7s} {r['job']:40s} {r.get('point', ''):30s} "
                   f"{r['seconds']:8.1f} s")
        if r["status"] == "failed":
            out.append(f"          {r['error']}  (log: {r['log']})")
    n = {s: sum(r["status"] == s for r in results) for s in ("ok", "skipped", "failed")}
    out.append(f"{n['ok']} ran, {n['skipped']} already finished (skipped), {n['failed']} failed")
    return "\n".join(out)
