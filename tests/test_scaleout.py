"""Scale-out on submitit (datalens_lib.scaleout): jobs run concurrently on the local executor,
a failing job is summarised without stopping the others, a resubmitted sweep skips what
finished, outputs go to the configurable results root, and Slurm gets the resources asked."""

import json
import os
import stat
import subprocess
import sys

import pytest
from conftest import NOTEBOOK_GROUP, require_datasets

from datalens_lib import runner, scaleout
from datalens_lib.cli import main

SLEEPER = '''# %% tags=["parameters"]
out = ""
fail = False
# %%
import pathlib
import time

if fail:
    raise ValueError("this job fails on purpose")
# a barrier, not a timer: each job says it started, then waits until its peer has too, so
# both ran at the same time whatever the machine's speed (the cap only prevents a hang)
started = pathlib.Path(out).with_suffix(".started")
started.write_text(str(__import__("os").getpid()))
for _ in range(12000):
    if len(list(started.parent.glob("*.started"))) >= 2:
        break
    time.sleep(0.05)
pathlib.Path(out).write_text(f"{len(list(started.parent.glob('*.started')))} "
                             f"{__import__('os').getpid()}")
'''


@pytest.fixture
def results_root(tmp_path, monkeypatch):
    root = tmp_path / "shared-results"
    monkeypatch.setenv("DATALENS_RESULTS_ROOT", str(root))
    return root


@pytest.mark.slow
def test_local_executor_runs_jobs_at_once_and_summarises_the_failure(tmp_path, results_root):
    src = tmp_path / "sleeper.py"
    src.write_text(SLEEPER)
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    points = [{"out": str(a)}, {"out": str(b)}, {"out": str(tmp_path / "c.txt"), "fail": True}]
    jobs = scaleout.notebook_jobs([str(src)], points)
    res = scaleout.run_jobs(jobs, "local", progress=False, poll_s=0.2)
    assert [r["status"] for r in res] == ["ok", "ok", "failed"]
    assert "this job fails on purpose" in res[2]["error"]
    assert res[2]["log"].startswith(str(results_root / "runs" / "submitit"))
    (n1, p1), (n2, p2) = ([int(x) for x in f.read_text().split()] for f in (a, b))
    assert p1 != p2 and p1 != os.getpid()  # separate worker processes ...
    assert n1 == n2 == 2  # ... each of which saw the other start before it ended
    # executed copies are named by their parameters, under the results root, not the checkout
    outs = sorted(p.name for p in (results_root / "notebooks").glob("sleeper-*.ipynb"))
    assert len(outs) == 2 and not (runner.OUTPUT_DIR / "sleeper.ipynb").exists()
    text = scaleout.summarise(res)
    assert "2 ran, 0 already finished (skipped), 1 failed" in text
    assert "this job fails on purpose" in text and 'fail=true' in text

    # resubmitted: the finished jobs are skipped, the failed one runs (and fails) again
    a.unlink()
    for f in tmp_path.glob("*.started"):
        f.unlink()
    again = scaleout.run_jobs(jobs, "local", progress=False, poll_s=0.2)
    assert [r["status"] for r in again] == ["skipped", "skipped", "failed"]
    assert not a.exists()


@pytest.mark.slow
def test_sweep_trains_a_grid_resumes_and_reports_the_failed_point(tmp_path, results_root,
                                                                  capsys):
    require_datasets("mnist")
    argv = ["sweep", "--method", "dcgan", "--config", "mnist-epsinf", "--profile", "smoke",
            "--grid", "seed=0,1", "--grid", "batch_size=32,1000", "--grid", "epochs=1",
            "--max-parallel", "2"]
    assert main(argv) == 1  # one point of the grid cannot run
    out = capsys.readouterr().out
    assert "2 ran, 0 already finished (skipped), 2 failed" in out
    assert "batch_size 1000 exceeds the 320 training images" in out
    runs = sorted((results_root / "runs" / "sweep" / "dcgan" / "mnist-epsinf").iterdir())
    done = [r for r in runs if (r / "run.json").exists()]
    assert len(done) == 2
    recs = [json.loads((r / "run.json").read_text()) for r in done]
    assert sorted(r["seed"] for r in recs) == [0, 1]
    assert all(r["status"] == "complete" and r["config"]["batch_size"] == 32 for r in recs)

    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "0 ran, 2 already finished (skipped), 2 failed" in out


IMPORT_KEEPS_LOGGING = """
import io, logging, sys
class Closing(logging.StreamHandler):  # as absl's handler: close() closes the stream it holds
    def close(self):
        super().close()
        self.stream.close()
stream = io.StringIO()
logging.getLogger("other").addHandler(Closing(stream))
from datalens_lib import scaleout
scaleout.make_executor("local", folder=sys.argv[1])
assert "submitit" in sys.modules
assert not stream.closed, "importing submitit closed another library's logging stream"
assert "SUBMITIT_LOG_LEVEL" not in __import__("os").environ
"""


def test_submitit_is_imported_without_closing_other_logging_handlers(tmp_path):
    """submitit's import-time ``dictConfig`` closed absl's handler, whose stream was pytest's
    stderr capture: the sweep test failed whenever it was the first to import submitit in its
    process. A fresh process, so that submitit is not imported yet."""
    env = {k: v for k, v in os.environ.items() if k != "SUBMITIT_LOG_LEVEL"}
    proc = subprocess.run([sys.executable, "-c", IMPORT_KEEPS_LOGGING, str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_grid_and_job_validation(tmp_path, results_root):
    assert scaleout.expand_grid({"seed": [0, 1], "k": [5]}) == [{"seed": 0, "k": 5},
                                                               {"seed": 1, "k": 5}]
    assert scaleout.expand_grid({}) == [{}]
    with pytest.raises(ValueError, match="^grid values of 'k' must be a non-empty list"):
        scaleout.expand_grid({"k": []})
    with pytest.raises(ValueError, match="^unknown config keys: \\['kk'\\]"):
        scaleout.train_jobs("datalens", "mnist-eps1", "smoke", [{"kk": 1}])
    with pytest.raises(ValueError, match="^seed must be a non-negative integer"):
        scaleout.train_jobs("datalens", "mnist-eps1", "smoke", [{"seed": -1}])
    jobs = scaleout.train_jobs("datalens", "mnist-eps1", "smoke", [{"seed": 1, "k": 5}],
                               eval_epochs=2)
    (job,) = jobs
    assert job.point == "seed=1 k=5" and not job.finished()
    assert job.spec["out"].startswith(str(results_root / "runs" / "sweep" / "datalens"))
    out = tmp_path / "shared-results" / job.spec["out"]
    out.mkdir(parents=True)
    (out / "run.json").write_text(json.dumps({"status": "complete"}))
    assert not job.finished()  # the evaluation asked for is missing
    (out / "eval-2ep.json").write_text("{}")
    assert job.finished()
    with pytest.raises(ValueError, match="same output"):
        scaleout.run_jobs(jobs * 2, "local", progress=False)
    with pytest.raises(ValueError, match="^max_parallel must be >= 0"):
        scaleout.run_jobs(jobs, "local", max_parallel=-1, progress=False)
    assert scaleout.run_jobs(jobs, "local", progress=False)[0]["status"] == "skipped"
    with pytest.raises(ValueError, match="^executor must be one of"):
        scaleout.make_executor("ray")
    with pytest.raises(ValueError, match="partition applies to the slurm executor only"):
        scaleout.make_executor("local", partition="gpu")
    assert main(["sweep", "--grid", "seed=0"]) == 2  # neither a notebook nor a config
    assert main(["sweep", "--config", "mnist-eps1", "--grid", "seed"]) == 2


def test_slurm_executor_asks_for_the_resources(tmp_path, monkeypatch):
    """No cluster here: a stand-in ``srun`` lets submitit build its sbatch script, which must
    carry the partition, GPUs, CPUs, memory and time limit asked for."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("srun", "sbatch"):
        f = bin_dir / tool
        f.write_text("#!/bin/sh\nexit 1\n")
        f.chmod(f.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    ex = scaleout.make_executor("slurm", folder=tmp_path / "logs" / "%j", partition="gpu",
                                gpus_per_job=1, cpus_per_job=8, timeout_min=90, mem_gb=64)
    script = ex._executor._make_submission_file_text("python -m x", "uid")
    for line in ("#SBATCH --partition=gpu", "#SBATCH --gpus-per-node=1",
                 "#SBATCH --cpus-per-task=8", "#SBATCH --mem=64GB", "#SBATCH --time=90"):
        assert line in script, line


@pytest.mark.slow
@pytest.mark.xdist_group(NOTEBOOK_GROUP)
def test_run_all_on_the_local_executor_builds_every_book_notebook():
    """`datalens run-all --executor local` (the command, in its own process): every notebook
    of the book as its own job (two at a time), the status page last; the book's canonical
    copies are what `make book` then finds up to date, and a second call skips them all."""
    require_datasets("mnist", "fashion-mnist")
    import subprocess
    import sys
    from pathlib import Path

    cmd = [str(Path(sys.executable).parent / "datalens"), "run-all", "--profile", "smoke",
           "--executor", "local", "--max-parallel", "2"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for name in runner.NOTEBOOKS:
        assert runner.is_up_to_date(name, {"profile": "smoke", "seed": 0}, canonical=True), name
    assert "0 failed" in done.stdout
    t1 = json.dumps(json.loads(runner.output_path(
        runner.notebook_path("t1_main_utility"), {}, canonical=True).read_text())["cells"])
    assert "mnist" in t1 and "Traceback" not in t1
    assert "DP-GAN (large batch)" in t1  # issue 10: both DP-GAN settings are shown
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    assert again.returncode == 0
    assert f"{len(runner.NOTEBOOKS) - 1} already finished (skipped)" in again.stdout
