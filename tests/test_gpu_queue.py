"""The lent-GPU queue (scripts/gpu_queue.sh, scripts/gpu_pack.py) as a dry run on the CPU: a
fake ``datalens`` command stands in for training, evaluation and DP-SGD, so these tests check
the queue's own logic — records staged whole and packed into tars that fit what a call brings
back, evaluations overlapping but never more than the parallel limit, everything finished
before the script exits, a second call returning only what the first did not, the time budget
and the hard limit respected."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from conftest import FAKE_DL_HEAD

ROOT = Path(__file__).resolve().parents[1]

# fake `datalens`: writes the files the queue expects, logs evaluation start/end times
FAKE_DL = FAKE_DL_HEAD + r"""case $cmd in
  train) out=$(arg --out "$@"); mkdir -p "$out"; sleep "${FAKE_TRAIN_SLEEP:-0.2}"
         echo "end $(date +%s.%N) $out $*" >> "$EVAL_LOG.train"
         echo '{"status": "complete"}' > "$out/run.json" ;;
  evaluate) out=$1; snap=$(arg --snapshot "$@")
         echo "start $(date +%s.%N) $out" >> "$EVAL_LOG"; sleep "${FAKE_EVAL_SLEEP:-1}"
         echo "end $(date +%s.%N) $out" >> "$EVAL_LOG"
         if [[ -n $snap ]]; then echo '{}' > "$out/snapshot-eps$snap-eval-600ep.json"
         else echo '{}' > "$out/eval-600ep.json"; fi ;;
  publish-samples) dest=$(arg --dest "$@")
         head -c "${FAKE_NPZ_BYTES:-100}" /dev/zero > "$dest/samples-10k.npz"
         echo "$dest/samples-10k.npz: 10000 images" ;;
  dpsgd) out=$(arg --out "$@"); search=$(arg --search "$@"); scope=$(arg --set "$@")
         tag=""; [[ $scope == scope=layer ]] && tag=layer-
         echo "dpsgd $(date +%s.%N) $*" >> "$EVAL_LOG.dpsgd"; sleep 0.5
         if [[ -n $search ]]; then mkdir -p "$search"; echo '{}' > "$search/point0.json"
           echo '{}' > "$search/search.json"; [[ -n ${FAKE_SEEDS_CUT:-} ]] && exit 124; fi
         if [[ " $* " == *" --control "* ]]; then
           k=$(arg --k "$@"); e=$(arg --epsilon "$@")
           for s in topagg topk-gm-dp topk-sgd gm-dp clipped-sgd; do
             d=$out/control-$tag""k$k-eps$e-$s; mkdir -p "$d"; echo '{}' > "$d/seed0.json"
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
    for name in ("gpu_queue.sh", "gpu_pack.py", "queue_copy.sh"):
        shutil.copy(ROOT / "scripts" / name, tmp_path / "scripts" / name)
    fake = tmp_path / "fake-dl"
    fake.write_text(FAKE_DL)
    fake.chmod(0o755)
    gpu = tmp_path / "runs" / "gpu"
    gpu.mkdir(parents=True)
    for key in ("gpate", "dpgan", "datalens", "datalens-snap", "dcgan"):
        (gpu / f"cell-{key}_seconds").write_text("3\n")
    (gpu / "dpsgd_seconds").write_text("1\n")
    (gpu / "dpsgd-search_seconds").write_text("1\n")
    bench = tmp_path / "benchmarks" / "results"
    bench.mkdir(parents=True)
    (bench / "ensemble-fake-gpu-nchw.json").write_text("{}")  # the benchmark: committed
    # one committed cell, which the queue must skip
    done = tmp_path / "data" / "results" / "gpate" / "mnist-eps1" / "paper"
    done.mkdir(parents=True)
    (done / "eval-600ep.json").write_text("{}")
    return tmp_path


def _run(queue_dir: Path, seconds: int, out: str = "out", **env_extra: str
         ) -> tuple[int, str, float, float]:
    """Run the queue; returns its exit status, output, start and exit times (the output goes to
    a file, so the exit time is the script's own, not that of jobs it left behind)."""
    (queue_dir / out).mkdir(exist_ok=True)
    env = {**os.environ, "GPU_SETUP": ":", "DL": str(queue_dir / "fake-dl"),
           "GPU_NAME": "Fake GPU", "OUT": str(queue_dir / out),
           "GPU_QUEUE_SECONDS": str(seconds), "GPU_QUEUE_PARALLEL": "3",
           "GPU_QUEUE_GAN_PARALLEL": "2",
           "EVAL_LOG": str(queue_dir / "eval.log"), "PYTHONPATH": str(ROOT),
           "PY": sys.executable, **env_extra}
    log = queue_dir / f"{out}.log"
    t0 = time.time()
    with open(log, "w") as f:
        rc = subprocess.run(["bash", "scripts/gpu_queue.sh"], cwd=queue_dir, env=env,
                            stdout=f, stderr=subprocess.STDOUT, timeout=120).returncode
    return rc, log.read_text(), t0, time.time()


def _tars(folder: Path) -> dict[str, list[str]]:
    out = {}
    for t in sorted(folder.glob("records-*.tar")):
        with tarfile.open(t) as tar:
            out[t.name] = [m.name for m in tar.getmembers() if m.isfile()]
    return out


def _eval_times(queue_dir: Path, where: str = "", lane: bool | None = None
                ) -> tuple[list[float], list[float]]:
    """Start and end times of the evaluations whose run folder contains ``where``; ``lane``:
    only those of the GAN lane's methods (True) or only the foreground's (False)."""
    rows = [line.split() for line in (queue_dir / "eval.log").read_text().splitlines()]
    rows = [r for r in rows if where in r[2] and (
        lane is None or lane == any(m in r[2] for m in ("/dpgan/", "/dcgan/")))]
    return ([float(t) for k, t, _ in rows if k == "start"],
            [float(t) for k, t, _ in rows if k == "end"])


def _peak(starts: list[float], ends: list[float]) -> int:
    level, peak = 0, 0
    for _, d in sorted([(t, 1) for t in starts] + [(t, -1) for t in ends]):
        level += d
        peak = max(peak, level)
    return peak


def test_dry_run_stages_whole_cells_overlaps_within_the_limit_and_waits(queue_dir: Path):
    # evaluations of 3 s: the last ones outlive the walk down the list, so only the final wait
    # keeps them inside the script's lifetime
    rc, log, _, t_exit = _run(queue_dir, seconds=25, FAKE_EVAL_SLEEP="3")
    assert rc == 0, log[-2000:]
    files = [f for names in _tars(queue_dir / "out").values() for f in names]
    assert len(files) == len(set(files))  # each record in one tar
    # the committed G-PATE cell is skipped; the next one arrives whole, with its subset
    assert not any(f.startswith("data/results/gpate/mnist-eps1/paper/") for f in files)
    cell = "data/results/gpate/mnist-eps1/paper-official-stop"
    assert {f"{cell}/run.json", f"{cell}/eval-600ep.json", f"{cell}/samples-10k.npz"} <= set(
        files)
    assert not any(".tmp" in f or ".old" in f for f in files)
    # five control scenarios, each with its records
    assert sum(f.endswith("/paper/summary.json") and "/control-k0.6-eps1-" in f
               for f in files) == 5, log
    starts, ends = _eval_times(queue_dir)
    assert len(starts) == len(ends) > 3
    # every evaluation ended before the script exited (its final wait), and was packed
    assert max(ends) <= t_exit
    assert sum(f.endswith("eval-600ep.json") for f in files) == len(ends)
    # the foreground's evaluations overlapped, never more than GPU_QUEUE_PARALLEL (3) at a
    # time; the GAN lane's (DP-GAN, DC-GAN) never more than its own 2, and they did run
    assert 2 <= _peak(*_eval_times(queue_dir, lane=False)) <= 3
    assert 1 <= _peak(*_eval_times(queue_dir, lane=True)) <= 2
    assert "data/results/dpgan/mnist-eps1/paper/eval-600ep.json" in files
    assert _peak(starts, ends) <= 5


def test_tars_stay_under_the_size_limit_and_a_second_call_returns_only_what_is_new(
        queue_dir: Path):
    rc, log, _, _ = _run(queue_dir, seconds=8, FAKE_NPZ_BYTES="6000",
                         GPU_QUEUE_TAR_BYTES="30000")
    assert rc == 0, log[-2000:]
    first = _tars(queue_dir / "out")
    assert len(first) >= 2  # split: three cells' subsets do not fit one 30000-byte tar
    for name in first:
        assert (queue_dir / "out" / name).stat().st_size <= 30000
    sent = {f for names in first.values() for f in names}
    # an item staged but never returned (a kill between its rename and the pack): forget it
    packed = queue_dir / "runs" / "gpu" / "packed"
    items = packed.read_text().split()
    lost = next(i for i in items if i.startswith("data/results/gpate/"))
    packed.write_text("".join(i + "\n" for i in items if i != lost))
    rc, log, _, _ = _run(queue_dir, seconds=12, out="out2", FAKE_NPZ_BYTES="6000",
                         GPU_QUEUE_TAR_BYTES="30000")
    assert rc == 0, log[-2000:]
    second = {f for names in _tars(queue_dir / "out2").values() for f in names}
    assert {f for f in second if f.startswith(lost + "/")}  # returned again
    again = {f for f in second & sent if not f.startswith(lost + "/")}
    assert not again  # nothing else the first call returned
    assert any(f.startswith("data/results/dpsgd/") for f in second)  # the queue went on


def test_no_time_left_starts_nothing(queue_dir: Path):
    rc, log, _, _ = _run(queue_dir, seconds=0)
    assert rc == 0, log[-2000:]
    assert "skipped" in log
    assert not _tars(queue_dir / "out")
    assert not (queue_dir / "eval.log").exists()
    assert not (queue_dir / "eval.log.dpsgd").exists()  # nor did a lane start an item


def test_the_hard_limit_kills_jobs_and_leaves_no_half_record(queue_dir: Path):
    rc, log, t0, t_exit = _run(queue_dir, seconds=3, GPU_QUEUE_HARD="8",
                               FAKE_EVAL_SLEEP="60")
    assert rc == 0, log[-2000:]
    assert t_exit - t0 < 30  # not the 60 s an evaluation would take
    files = [f for names in _tars(queue_dir / "out").values() for f in names]
    assert not any(f.endswith("eval-600ep.json") for f in files)  # none finished
    assert not list((queue_dir / "runs" / "gpu" / "stage").rglob("eval-600ep.json"))


def test_gpu_pack_leaves_out_what_fits_no_tar(tmp_path: Path):
    stage = tmp_path / "stage"
    for name, size in (("a", 10), ("b", 20000), ("c", 10)):
        (stage / name).mkdir(parents=True)
        (stage / name / "f.bin").write_bytes(b"x" * size)
    (tmp_path / "call").write_text("a\nb\nc\nmissing\n")
    (tmp_path / "out").mkdir()
    packed = tmp_path / "packed"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_pack.py"), str(stage),
                    str(tmp_path / "call"), str(tmp_path / "out"), str(packed), "12000"],
                   check=True, capture_output=True)
    tars = _tars(tmp_path / "out")
    assert list(tars) == ["records-1.tar"] and sorted(tars["records-1.tar"]) == [
        "a/f.bin", "c/f.bin"]
    assert packed.read_text().split() == ["a", "c"]  # b stays for a later call


def test_the_script_waits_for_its_background_evaluations(queue_dir: Path):
    """Evaluations of 6 s started in the first seconds outlive the walk down the list: only
    the final wait keeps them (and their records) inside the script's lifetime."""
    rc, log, _, t_exit = _run(queue_dir, seconds=4, FAKE_EVAL_SLEEP="6")
    assert rc == 0, log[-2000:]
    starts, ends = _eval_times(queue_dir)
    assert starts and len(ends) == len(starts) and max(ends) <= t_exit
    files = [f for names in _tars(queue_dir / "out").values() for f in names]
    assert sum(f.endswith("eval-600ep.json") for f in files) == len(ends)


def _commit(queue_dir: Path, rel: str, *names: str) -> None:
    d = queue_dir / rel
    d.mkdir(parents=True, exist_ok=True)
    for n in names:
        (d / n).write_text("{}")


def test_dpsgd_lanes_run_beside_the_trainings_and_bring_searches_whole(queue_dir: Path):
    """The DP-SGD items run in their own lanes from the start (beside the G-PATE trainings, not
    after them); a searched cell arrives with the search that chose its setting, and a
    committed search is reused, not returned again; the per-layer control brings its missing
    compressing scenarios under their own names, never a committed one."""
    base = "data/results/dpsgd/mnist"
    _commit(queue_dir, f"{base}/control-layer-k0.8-eps1-topagg/paper", "seed0.json",
            "summary.json")
    _commit(queue_dir, f"{base}/normtopk-k0.7-eps0.5/search", "search.json", "point0.json")
    # trainings of 3 s: the six G-PATE cells outlast the lanes' start (one import) by far,
    # even on a loaded machine
    rc, log, _, _ = _run(queue_dir, seconds=40, GPU_QUEUE_DPSGD_LANES="2",
                         FAKE_TRAIN_SLEEP="3")
    assert rc == 0, log[-2000:]
    files = {f for names in _tars(queue_dir / "out").values() for f in names}
    cell = f"{base}/normtopk-k0.6-eps0.5"
    assert {f"{cell}/search/search.json", f"{cell}/search/point0.json",
            f"{cell}/paper/summary.json"} <= files, log[-3000:]
    reused = f"{base}/normtopk-k0.7-eps0.5"
    assert f"{reused}/paper/summary.json" in files
    assert not any(f.startswith(f"{reused}/search/") for f in files)
    layer = {f.split("/")[4] for f in files if "/control-layer-k0.8-eps1-" in f}
    assert layer == {"control-layer-k0.8-eps1-topk-gm-dp", "control-layer-k0.8-eps1-topk-sgd"}
    assert f"{base}/gmdp-epsinf/paper/summary.json" in files
    assert "data/results/dpsgd/fashion-mnist/gmdp-eps1/paper/summary.json" in files
    calls = (queue_dir / "eval.log.dpsgd").read_text().splitlines()
    gpate_ends = [float(x.split()[1]) for x in
                  (queue_dir / "eval.log.train").read_text().splitlines() if "/gpate/" in x]
    assert len(gpate_ends) >= 3
    first = min(float(c.split()[1]) for c in calls)
    assert first < max(gpate_ends)  # the lanes ran while G-PATE still trained
    # two lanes: some DP-SGD processes overlapped (each sleeps 0.5 s)
    starts = sorted(float(c.split()[1]) for c in calls)
    assert any(b - a < 0.5 for a, b in zip(starts, starts[1:], strict=False))


def test_a_search_whose_seeds_were_cut_still_comes_back_without_its_seeds(queue_dir: Path):
    # 45 s: the one lane walks ~30 cells before that search; 20 s was too few on a loaded
    # machine (the CPU queue's two lanes beside it)
    rc, log, _, _ = _run(queue_dir, seconds=45, GPU_QUEUE_DPSGD_LANES="1", FAKE_SEEDS_CUT="1")
    assert rc == 0, log[-2000:]
    files = {f for names in _tars(queue_dir / "out").values() for f in names}
    cell = "data/results/dpsgd/mnist/gmdp-eps0.5"
    assert f"{cell}/search/search.json" in files, log[-3000:]
    assert not any(f.startswith(f"{cell}/paper/") for f in files)


def test_dcgan_trains_resumably_and_the_ensembles_without_checkpoints(queue_dir: Path):
    """DC-GAN's paper cell is longer than a call: it checkpoints every epoch and resumes on the
    same warm machine; the ensemble methods never write their 27-GB checkpoints there."""
    rc, log, _, _ = _run(queue_dir, seconds=25, GPU_QUEUE_RESUMABLE_NEED="1")
    assert rc == 0, log[-2000:]
    trains = (queue_dir / "eval.log.train").read_text().splitlines()
    dc = [t for t in trains if "/dcgan/" in t]
    assert dc and all("--resume" in t and "--checkpoint-every 1" in t for t in dc)
    others = [t for t in trains if "/dcgan/" not in t]
    assert others and all("--checkpoint-every 0" in t and "--resume" not in t for t in others)


@pytest.mark.parametrize("committed", [True, False])
def test_control_at_an_unsearched_budget_waits_for_topaggs_search(queue_dir: Path,
                                                                 committed: bool):
    """tab:control at eps = 0.1 (a budget tab:dpsgd-search lacks) runs its five scenarios with
    TopAgg k = 0.8's searched setting: with that search committed, its points are handed to the
    command's --search; without it (here: no search fits the time left), the control waits."""
    base = "data/results/dpsgd/mnist"
    search = "runs/gpu/dpsgd/mnist/normtopk-k0.8-eps0.1/search"
    if committed:
        _commit(queue_dir, f"{base}/normtopk-k0.8-eps0.1/search", "search.json", "point0.json",
                "point1.json")
        # a point an earlier call on this machine wrote is kept, not overwritten
        (queue_dir / search).mkdir(parents=True)
        (queue_dir / search / "point1.json").write_text('{"mine": 1}')
    (queue_dir / "runs" / "gpu" / "dpsgd-search_seconds").write_text("100000\n")
    rc, log, _, _ = _run(queue_dir, seconds=100, GPU_QUEUE_DPSGD_LANES="1")
    assert rc == 0, log[-2000:]
    files = {f for names in _tars(queue_dir / "out").values() for f in names}
    ran = {f.split("/")[4] for f in files if "/control-k0.8-eps0.1-" in f}
    calls = [c for c in (queue_dir / "eval.log.dpsgd").read_text().splitlines()
             if "--control" in c and "--epsilon 0.1 " in c]
    if committed:
        assert len(ran) == 5, log[-3000:]
        assert len(calls) == 1 and f"--search {search} " in calls[0]
        assert (queue_dir / search / "point0.json").exists()
        assert (queue_dir / search / "point1.json").read_text() == '{"mine": 1}'
        assert not list((queue_dir / search).glob(".*.tmp"))
    else:
        assert not ran and not calls
        assert "TopAgg's search (normtopk-k0.8-eps0.1) has not finished" in log


def test_an_item_cut_between_its_two_renames_comes_back_whole(queue_dir: Path):
    """stage() moves an item's last copy aside (ITEM.old) before renaming the new one in: a
    kill between the two leaves only ITEM.old, which the next call puts back and returns (it
    used to delete it with the half-staged ITEM.tmp folders)."""
    item = "data/results/datalens/mnist-eps1/paper-x"
    stage = queue_dir / "runs" / "gpu" / "stage"
    (stage / f"{item}.old").mkdir(parents=True)
    (stage / f"{item}.old" / "run.json").write_text('{"status": "complete"}')
    (stage / f"{item}.tmp").mkdir(parents=True)
    (stage / f"{item}.tmp" / "run.json").write_text("{")  # the new copy, half written
    (queue_dir / "runs" / "gpu" / "staged").write_text(item + "\n")
    rc, log, _, _ = _run(queue_dir, seconds=0)
    assert rc == 0, log[-2000:]
    assert (stage / item / "run.json").read_text() == '{"status": "complete"}'
    assert not (stage / f"{item}.old").exists() and not (stage / f"{item}.tmp").exists()
    files = {f for names in _tars(queue_dir / "out").values() for f in names}
    assert f"{item}/run.json" in files
