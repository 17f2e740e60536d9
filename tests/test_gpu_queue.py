"""The lent-GPU queue (scripts/gpu_queue.sh) as a dry run on the CPU: a fake ``datalens``
command stands in for training, evaluation and DP-SGD, so the test checks the queue's own
logic — records staged and packed as each item ends, evaluations overlapping in the
background, everything finished before the script exits, committed work skipped."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FAKE_DL = r"""#!/usr/bin/env bash
# fake `datalens`: writes the files the queue expects, logs evaluation start/end times
cmd=$1; shift
arg() {
  local want=$1; shift
  while (($#)); do [[ $1 == "$want" ]] && { echo "$2"; return; }; shift; done
}
case $cmd in
  train) out=$(arg --out "$@"); mkdir -p "$out"; sleep 0.2
         echo '{"status": "complete"}' > "$out/run.json" ;;
  evaluate) out=$1; snap=$(arg --snapshot "$@")
         echo "start $(date +%s.%N)" >> "$EVAL_LOG"; sleep 1
         echo "end $(date +%s.%N)" >> "$EVAL_LOG"
         if [[ -n $snap ]]; then echo '{}' > "$out/snapshot-eps$snap-eval-600ep.json"
         else echo '{}' > "$out/eval-600ep.json"; fi ;;
  publish-samples) dest=$(arg --dest "$@"); echo npz > "$dest/samples-10k.npz"
         echo "$dest/samples-10k.npz: 10000 images" ;;
  dpsgd) out=$(arg --out "$@"); sleep 0.5
         if [[ " $* " == *" --control "* ]]; then
           k=$(arg --k "$@"); e=$(arg --epsilon "$@")
           for s in topagg topk-gm-dp topk-sgd gm-dp clipped-sgd; do
             d=$out/control-k$k-eps$e-$s; mkdir -p "$d"; echo '{}' > "$d/seed0.json"
             echo '{}' > "$d/summary.json"; done
         else mkdir -p "$out"; for s in 0 1 2 3 4; do echo '{}' > "$out/seed$s.json"; done
           echo '{}' > "$out/summary.json"; fi ;;
  *) echo "fake dl: unknown command $cmd" >&2; exit 2 ;;
esac
"""


@pytest.fixture()
def queue_dir(tmp_path: Path) -> Path:
    if shutil.which("flock") is None:
        pytest.skip("flock (util-linux) is not installed")
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "gpu_queue.sh", tmp_path / "scripts" / "gpu_queue.sh")
    fake = tmp_path / "fake-dl"
    fake.write_text(FAKE_DL)
    fake.chmod(0o755)
    (tmp_path / "runs" / "gpu").mkdir(parents=True)
    for method in ("gpate", "dpgan", "datalens", "dcgan"):
        (tmp_path / "runs" / "gpu" / f"cell-{method}_seconds").write_text("3\n")
    (tmp_path / "runs" / "gpu" / "dpsgd_seconds").write_text("1\n")
    bench = tmp_path / "benchmarks" / "results"
    bench.mkdir(parents=True)
    (bench / "ensemble-fake-gpu-nchw.json").write_text("{}")  # the benchmark: committed
    # one committed cell, which the queue must skip
    done = tmp_path / "data" / "results" / "gpate" / "mnist-eps1" / "paper"
    done.mkdir(parents=True)
    (done / "eval-600ep.json").write_text("{}")
    (tmp_path / "out").mkdir()
    return tmp_path


def _run(queue_dir: Path, seconds: int) -> subprocess.CompletedProcess:
    env = {**os.environ, "GPU_SETUP": ":", "DL": str(queue_dir / "fake-dl"),
           "GPU_NAME": "Fake GPU", "OUT": str(queue_dir / "out"),
           "GPU_QUEUE_SECONDS": str(seconds), "GPU_QUEUE_PARALLEL": "3",
           "EVAL_LOG": str(queue_dir / "eval.log"),
           "PYTHONPATH": str(ROOT), "PY": sys.executable}
    return subprocess.run(["bash", "scripts/gpu_queue.sh"], cwd=queue_dir, env=env,
                          capture_output=True, text=True, timeout=120)


def test_gpu_queue_dry_run_stages_overlaps_and_finishes(queue_dir: Path):
    res = _run(queue_dir, seconds=12)
    assert res.returncode == 0, res.stderr[-2000:]
    with tarfile.open(queue_dir / "out" / "records.tar") as tar:
        names = {n.lstrip("./") for n in tar.getnames()}
    # the committed G-PATE cell is skipped; the next one arrives whole, with its subset
    assert not any(n.startswith("data/results/gpate/mnist-eps1/paper/") for n in names)
    cell = "data/results/gpate/mnist-eps1/paper-official-stop"
    assert {f"{cell}/run.json", f"{cell}/eval-600ep.json", f"{cell}/samples-10k.npz"} <= names
    assert not any(".tmp" in n for n in names)  # no half-staged folder
    # every evaluation that started also ended and was staged before the script exited
    log = (queue_dir / "eval.log").read_text().split()
    starts = [float(t) for k, t in zip(log[::2], log[1::2], strict=True) if k == "start"]
    ends = [float(t) for k, t in zip(log[::2], log[1::2], strict=True) if k == "end"]
    assert len(starts) == len(ends) > 1
    evals = {n for n in names if n.endswith("eval-600ep.json")}
    assert len(evals) == len(ends)
    # the evaluations overlapped (background), more than one at a time
    events = sorted([(t, 1) for t in starts] + [(t, -1) for t in ends])
    level, peak = 0, 0
    for _, d in events:
        level += d
        peak = max(peak, level)
    assert peak >= 2
    assert "queue walked" in res.stdout
    assert "stopped after" in res.stdout


def test_gpu_queue_respects_the_time_budget(queue_dir: Path):
    # with no time left nothing starts and nothing is packed
    res = _run(queue_dir, seconds=0)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "skipped" in res.stdout
    assert not (queue_dir / "out" / "records.tar").exists()
    assert not (queue_dir / "eval.log").exists()
