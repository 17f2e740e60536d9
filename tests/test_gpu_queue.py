"""The lent-GPU queue (scripts/gpu_queue.sh, scripts/gpu_pack.py) as a dry run on the CPU: a
fake ``datalens`` command stands in for training, evaluation and DP-SGD, so these tests check
the queue's own logic -- records staged whole and packed into tars that fit what a call brings
back, evaluations overlapping but never more than the parallel limit, everything finished
before the script exits, a second call returning only what the first did not, the time budget
and the hard limit respected.

No verdict depends on how fast the machine is. The queue reads the time from a fake clock
(QUEUE_CLOCK: its ``now``), which each fake job advances to its start plus the duration it
declares (FAKE_SECONDS), without sleeping; a fake ``timeout`` first in PATH applies the hard
limit on that clock. Concurrency is counted (jobs running and started per group, and the
peak, under a lock) and forced with barriers, never with durations: a job that must overlap
another waits until that one has started, and an evaluation lasts until the shell that
started it waits for its background jobs (read from /proc), so that evaluations overlap as
far as the queue lets them and the last ones outlive its walk down the list. A barrier's wait
has a cap (FAKE_CAP_S, 600 s) only so that a broken queue fails instead of hanging; a correct
one never reaches it, and every call checks that."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from conftest import FAKE_DL_HEAD

ROOT = Path(__file__).resolve().parents[1]

# fake `datalens`: writes the files the queue expects; its time is the fake clock's
FAKE_DL = FAKE_DL_HEAD + r"""S=$FAKE_STATE
exec 9>"$S/lock"  # the fake clock and the counters: written under this lock
val() { V=0; [[ -f $S/$1 ]] && read -r V < "$S/$1"; return 0; }  # V: a counter (no fork)
put() { echo "$2" > "$S/$1"; }  # a counter (a poll that reads it half written tries again)
seconds() {  # KIND METHOD: the job's declared duration (FAKE_SECONDS: KIND=S, KIND/METHOD=S)
  local w k=0 m=
  for w in ${FAKE_SECONDS:-}; do
    [[ ${w%=*} == "$1" ]] && k=${w#*=}
    [[ ${w%=*} == "$1/$2" ]] && m=${w#*=}
  done
  echo "${m:-$k}"
}
begin() {  # GROUP...: the job starts at T0 on the fake clock; SEQ: how many of GROUP before it
  local g r
  flock 9
  val clock; T0=$V
  val "started-$1"; SEQ=$V
  for g in "$@"; do
    val "started-$g"; put "started-$g" $((V + 1))
    val "running-$g"; r=$((V + 1)); put "running-$g" $r
    val "peak-$g"; ((r > V)) && put "peak-$g" $r
  done
  flock -u 9
}
doomed() { [[ -n ${FAKE_DEADLINE:-} ]] && ((T0 + $1 > FAKE_DEADLINE)); }  # SECONDS
finish() {  # SECONDS GROUP...: the job ends SECONDS after its start on the fake clock; past the
  # deadline of the fake `timeout` it is killed there instead (status 1)
  local d=$1 end=$((T0 + $1)) g killed=0
  shift
  doomed "$d" && end=$FAKE_DEADLINE killed=1
  flock 9
  for g in "$@"; do val "running-$g"; put "running-$g" $((V - 1)); done
  # the clock, read unlocked by the queue (its `now`) and the fake `timeout`: renamed whole
  val clock; ((end > V)) && echo "$end" > "$S/clock.new" && mv -f "$S/clock.new" "$S/clock"
  # the script's last line came first: it did not wait for this job
  grep -qs "stopped after" "$FAKE_SCRIPT_LOG" && echo "$cmd $*" >> "$S/late"
  flock -u 9
  ((!killed))
}
hold() {  # until "$@" holds: a barrier, not a duration; the cap only keeps a broken queue from
  # hanging the test (a correct one never reaches it)
  local cap=$((SECONDS + ${FAKE_CAP_S:-600}))
  until "$@"; do
    ((SECONDS < cap)) || { echo "$cmd: gave up waiting until $*" >> "$S/stuck"; return 1; }
    sleep 0.1
  done
}
started() { val "started-$1"; ((${V:-0} >= $2)); }  # GROUP N
walked() {  # the foreground's walk is over (its line in the script's output)
  local line
  while IFS= read -r line; do [[ $line == *"queue walked"* ]] && return; done \
    < "$FAKE_SCRIPT_LOG"
  return 1
}
# The queue's processes, from /proc: its shell (MAIN), the background jobs of its shells
# (recorded by the fake jobs they run, as bg/PID:START), and whether a shell waits for them
MAIN=$(<"$S/main")
proc() {  # PID: its state (STATE), parent (PARENT) and start time (START); fails if it is gone
  local line f
  read -r line 2>/dev/null < "/proc/$1/stat" || return 1
  f=(${line##*) })
  STATE=${f[0]} PARENT=${f[1]} START=${f[19]}
}
record() {  # this job's ancestors below the queue's shell; LAST: the one nearest that shell
  local p=$PPID
  while ((p > 1)) && [[ $p != "$MAIN" ]] && proc "$p"; do
    : > "$S/bg/$p:$START"
    LAST=$p p=$PARENT
  done
}
waits() {  # PID: that shell sleeps with no child but recorded background jobs: it waits for
  # them (a throttle's wait -n, a final wait), not for a command of its own; it is gone: never
  local c kids=()
  proc "$1" && [[ $STATE == S ]] || return 1
  read -r -a kids 2>/dev/null < "/proc/$1/task/$1/children"
  for c in "${kids[@]}"; do proc "$c" && [[ -e $S/bg/$c:$START ]] || return 1; done
  proc "$1" && [[ $STATE == S ]]
}
released() { { started "$1" "$2" || walked; } && waits "$3"; }  # GROUP N LAUNCHER
case $cmd in
  train) out=$(arg --out "$@"); m=$(arg --method "$@"); mkdir -p "$out"; d=$(seconds train "$m")
         begin "train-$m" train
         # FAKE_GPATE_WAITS: the first G-PATE training lasts until a DP-SGD job has started
         [[ -n ${FAKE_GPATE_WAITS:-} && $m == gpate ]] && ((SEQ == 0)) && ! doomed "$d" \
           && hold started dpsgd 1
         val started-dpsgd; n=$V
         finish "$d" "train-$m" train || exit 124
         echo "train $n $out $*" >> "$EVAL_LOG.train"  # (DP-SGD jobs started by its end)
         echo '{"status": "complete"}' > "$out/run.json" ;;
  evaluate) out=$1; snap=$(arg --snapshot "$@"); m=${out#runs/gpu/}; m=${m%%/*}
         record
         # the GAN lane's evaluations: slots of its own, started by that lane's shell
         g=eval launcher=$MAIN; [[ $m == dpgan || $m == dcgan ]] && g=ganeval launcher=$LAST
         d=$(seconds evaluate "$m"); b=FAKE_BATCH_$g; b=${!b:-0}
         echo "start $g $out" >> "$EVAL_LOG"
         begin "$g" evaluate
         # an evaluation lasts until its batch (FAKE_BATCH_<group>, the group's limit) has
         # started, or the queue's walk is over, and until the shell that started it waits
         # for its background jobs: the evaluations overlap up to the limit, and a shell that
         # would start one more beyond it does so first; the last ones outlive the walk
         # (only a final wait keeps them inside the script's lifetime); one killed at its
         # deadline too (the clock jumps there while that shell waits)
         ((b > 0)) && hold released "$g" $(((SEQ / b + 1) * b)) "$launcher"
         finish "$d" "$g" evaluate || { echo "killed $g $out" >> "$EVAL_LOG"; exit 124; }
         echo "end $g $out" >> "$EVAL_LOG"
         if [[ -n $snap ]]; then echo '{}' > "$out/snapshot-eps$snap-eval-600ep.json"
         else echo '{}' > "$out/eval-600ep.json"; fi ;;
  publish-samples) dest=$(arg --dest "$@"); record
         head -c "${FAKE_NPZ_BYTES:-100}" /dev/zero > "$dest/samples-10k.npz"
         echo "$dest/samples-10k.npz: 10000 images" ;;
  dpsgd) out=$(arg --out "$@"); search=$(arg --search "$@"); scope=$(arg --set "$@")
         tag=""; [[ $scope == scope=layer ]] && tag=layer-
         d=$(seconds dpsgd "$(arg --method "$@")")
         echo "dpsgd $*" >> "$EVAL_LOG.dpsgd"
         record
         begin dpsgd
         # FAKE_DPSGD_PAIR: the first two DP-SGD jobs last until both have started
         [[ -n ${FAKE_DPSGD_PAIR:-} ]] && ((SEQ < 2)) && ! doomed "$d" && hold started dpsgd 2
         finish "$d" dpsgd || exit 124
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

# fake `timeout LIMIT COMMAND...`, first in the queue's PATH: the limit on the fake clock, as
# the command's deadline (the fake jobs are killed there); each deadline is logged
FAKE_TIMEOUT = r"""#!/usr/bin/env bash
deadline=$(($(<"$QUEUE_CLOCK") + $1))
echo "$deadline" >> "$FAKE_STATE/deadlines"
FAKE_DEADLINE=$deadline exec "${@:2}"
"""

#: an estimate no budget here allows: the items it is for are skipped
NEVER = 10**6


@pytest.fixture()
def queue_dir(tmp_path: Path) -> Path:
    if shutil.which("flock") is None:
        pytest.skip("flock (util-linux) is not installed")
    if not Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").exists():
        pytest.skip("the fake reads the queue's processes from Linux's /proc")
    (tmp_path / "scripts").mkdir()
    for name in ("gpu_queue.sh", "gpu_pack.py", "queue_copy.sh"):
        shutil.copy(ROOT / "scripts" / name, tmp_path / "scripts" / name)
    for path, text in (("fake-dl", FAKE_DL), ("bin/timeout", FAKE_TIMEOUT)):
        (tmp_path / path).parent.mkdir(exist_ok=True)
        (tmp_path / path).write_text(text)
        (tmp_path / path).chmod(0o755)
    gpu = tmp_path / "runs" / "gpu"
    gpu.mkdir(parents=True)
    _estimates(tmp_path, {f"cell-{key}": 3 for key in (
        "gpate", "gpate-snap", "dpgan", "datalens", "datalens-snap", "dcgan")}
               | {"dpsgd": 1, "dpsgd-search": 1})
    bench = tmp_path / "benchmarks" / "results"
    bench.mkdir(parents=True)
    (bench / "ensemble-fake-gpu-nchw.json").write_text("{}")  # the benchmark: committed
    # one committed cell, which the queue must skip
    done = tmp_path / "data" / "results" / "gpate" / "mnist-eps1" / "paper"
    done.mkdir(parents=True)
    (done / "eval-600ep.json").write_text("{}")
    return tmp_path


def _estimates(queue_dir: Path, seconds: dict[str, int]) -> None:
    """The queue's measured durations per kind of item (runs/gpu/<key>_seconds)."""
    for key, s in seconds.items():
        (queue_dir / "runs" / "gpu" / f"{key}_seconds").write_text(f"{s}\n")


def _run(queue_dir: Path, seconds: int, out: str = "out", **env_extra: str
         ) -> tuple[int, str, Path]:
    """Run the queue (one call: its fake clock starts at 0); returns its exit status, its
    output and the folder of the fake's clock, counters and logs. Checks what holds for every
    call: no barrier of the fake gave up, and no job was still running, or ended, after the
    script's last line (its final wait)."""
    (queue_dir / out).mkdir(exist_ok=True)
    state = queue_dir / f"fake-{out}"
    (state / "bg").mkdir(parents=True)
    (state / "clock").write_text("0\n")
    log = queue_dir / f"{out}.log"
    env = {**os.environ, "GPU_SETUP": ":", "DL": str(queue_dir / "fake-dl"),
           "GPU_NAME": "Fake GPU", "OUT": str(queue_dir / out),
           "GPU_QUEUE_SECONDS": str(seconds), "GPU_QUEUE_PARALLEL": "3",
           "GPU_QUEUE_GAN_PARALLEL": "2", "FAKE_BATCH_eval": "3", "FAKE_BATCH_ganeval": "2",
           "QUEUE_CLOCK": str(state / "clock"), "FAKE_STATE": str(state),
           "FAKE_SCRIPT_LOG": str(log), "EVAL_LOG": str(state / "eval.log"),
           "PATH": f"{queue_dir / 'bin'}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(ROOT), "PY": sys.executable, **env_extra}
    with open(log, "w") as f:  # (a hang guard only: no call here takes more than seconds)
        rc = subprocess.run(  # (the queue's shell: its process id for the fake)
            ["bash", "-c", 'echo $$ > "$FAKE_STATE/main" && exec bash scripts/gpu_queue.sh'],
            cwd=queue_dir, env=env, stdout=f, stderr=subprocess.STDOUT, timeout=900).returncode
    text = log.read_text()
    assert not (state / "stuck").exists(), (state / "stuck").read_text() + text[-2000:]
    assert not (state / "late").exists(), (state / "late").read_text() + text[-2000:]
    running = {p.name: _count(state, p.name) for p in state.glob("running-*")}
    assert not any(running.values()), running
    return rc, text, state


def _count(state: Path, name: str) -> int:
    """A counter of the fake (started-GROUP, running-GROUP, peak-GROUP; 0 if none)."""
    return int((state / name).read_text()) if (state / name).exists() else 0


def _lines(state: Path, name: str) -> list[str]:
    return (state / name).read_text().splitlines() if (state / name).exists() else []


def _tars(folder: Path) -> dict[str, list[str]]:
    out = {}
    for t in sorted(folder.glob("records-*.tar")):
        with tarfile.open(t) as tar:
            out[t.name] = [m.name for m in tar.getmembers() if m.isfile()]
    return out


def test_dry_run_stages_whole_cells_overlaps_within_the_limit_and_waits(queue_dir: Path):
    # a budget far beyond the fake durations: the whole queue runs, whatever the order of
    # its jobs, but for the DataLens cells and the DP-SGD searches (skipped: the G-PATE cells
    # and the other DP-SGD items are enough here). Each group's evaluations wait until as many
    # as its limit have started (or the walk is over), so the last ones outlive the walk
    _estimates(queue_dir, {"cell-datalens": NEVER, "cell-datalens-snap": NEVER,
                           "dpsgd-search": NEVER})
    rc, log, st = _run(queue_dir, seconds=100000, FAKE_SECONDS="train=1 evaluate=3 dpsgd=1")
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
    evals = _lines(st, "eval.log")
    ends = [e for e in evals if e.startswith("end ")]
    assert _count(st, "started-evaluate") == len(ends) > 3
    # every evaluation ended before the script's last line (its final wait: _run), and was
    # packed
    assert sum(f.endswith("eval-600ep.json") for f in files) == len(ends)
    # the foreground's evaluations overlapped up to GPU_QUEUE_PARALLEL (3) at a time and
    # never more; the GAN lane's (DP-GAN, DC-GAN) up to its own 2, and they did run
    assert _count(st, "peak-eval") == 3
    assert _count(st, "peak-ganeval") == 2
    assert "data/results/dpgan/mnist-eps1/paper/eval-600ep.json" in files
    assert _count(st, "peak-evaluate") <= 5


def test_tars_stay_under_the_size_limit_and_a_second_call_returns_only_what_is_new(
        queue_dir: Path):
    # first call: no DP-SGD or DP-GAN item fits (DC-GAN's needs 120 s), and the foreground's
    # trainings take 1 s each: three G-PATE cells start within the 5 s (each needs 3 s left)
    _estimates(queue_dir, {"dpsgd": NEVER, "dpsgd-search": NEVER, "cell-dpgan": NEVER})
    sizes = {"FAKE_NPZ_BYTES": "6000", "GPU_QUEUE_TAR_BYTES": "30000"}
    rc, log, _ = _run(queue_dir, seconds=5, FAKE_SECONDS="train=1", **sizes)
    assert rc == 0, log[-2000:]
    first = _tars(queue_dir / "out")
    assert len(first) == 3, first  # split: two cells' subsets do not fit one 30000-byte tar
    for name in first:
        assert (queue_dir / "out" / name).stat().st_size <= 30000
    sent = {f for names in first.values() for f in names}
    # an item staged but never returned (a kill between its rename and the pack): forget it
    packed = queue_dir / "runs" / "gpu" / "packed"
    items = packed.read_text().split()
    lost = next(i for i in items if i.startswith("data/results/gpate/"))
    packed.write_text("".join(i + "\n" for i in items if i != lost))
    # second call: only the DP-SGD lane's first two items (1 s each) fit its 2 s
    _estimates(queue_dir, {f"cell-{k}": NEVER for k in ("gpate-snap", "datalens",
                                                         "datalens-snap")} | {"dpsgd": 1})
    rc, log, _ = _run(queue_dir, seconds=2, out="out2", FAKE_SECONDS="dpsgd=1",
                      GPU_QUEUE_DPSGD_LANES="1", **sizes)
    assert rc == 0, log[-2000:]
    second = {f for names in _tars(queue_dir / "out2").values() for f in names}
    assert {f for f in second if f.startswith(lost + "/")}  # returned again
    again = {f for f in second & sent if not f.startswith(lost + "/")}
    assert not again  # nothing else the first call returned
    assert "data/results/dpsgd/mnist/gmdp-eps0.05/paper/summary.json" in second  # went on


@pytest.mark.parametrize("seconds", [0, 2])
def test_no_time_left_starts_nothing(queue_dir: Path, seconds: int):
    # 2 s: time left, but less than any item needs (3 s)
    _estimates(queue_dir, {"dpsgd": 3, "dpsgd-search": 3})
    rc, log, st = _run(queue_dir, seconds=seconds)
    assert rc == 0, log[-2000:]
    assert "skipped" in log
    assert not _tars(queue_dir / "out")
    assert not (st / "eval.log").exists()
    assert not (st / "eval.log.dpsgd").exists()  # nor did a lane start an item


def test_the_hard_limit_kills_jobs_and_leaves_no_half_record(queue_dir: Path):
    # evaluations of 60 s against a hard limit at 8 s (the budget: 3 s), the foreground alone
    # (no lane has an item that fits): its first three cells' evaluations run until the
    # fourth cell waits for a slot
    _estimates(queue_dir, {"dpsgd": NEVER, "dpsgd-search": NEVER, "cell-dpgan": NEVER})
    rc, log, st = _run(queue_dir, seconds=3, GPU_QUEUE_HARD="8", FAKE_SECONDS="evaluate=60")
    assert rc == 0, log[-2000:]
    # every job was handed the hard limit as its deadline, and the evaluations were killed
    # there: none ran its 60 s; the next one had no time left
    assert set(_lines(st, "deadlines")) == {"8"}
    evals = _lines(st, "eval.log")
    assert len([e for e in evals if e.startswith("killed ")]) == 3
    assert not any(e.startswith("end ") for e in evals)
    assert int((st / "clock").read_text()) == 8
    assert "no time left for: " in log
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
                   check=True, capture_output=True, timeout=900)
    tars = _tars(tmp_path / "out")
    assert list(tars) == ["records-1.tar"] and sorted(tars["records-1.tar"]) == [
        "a/f.bin", "c/f.bin"]
    assert packed.read_text().split() == ["a", "c"]  # b stays for a later call


def test_the_script_waits_for_its_background_evaluations(queue_dir: Path):
    """Evaluations still running when the walk down the list ends: only the final wait keeps
    them (and their records) inside the script's lifetime. Here the foreground alone (no
    lane has an item that fits) trains two cells of 1 s within the 4 s; their evaluations
    last until the walk is over."""
    _estimates(queue_dir, {"dpsgd": NEVER, "dpsgd-search": NEVER, "cell-dpgan": NEVER})
    rc, log, st = _run(queue_dir, seconds=4, FAKE_SECONDS="train=1")
    assert rc == 0, log[-2000:]
    evals = _lines(st, "eval.log")
    starts = [e for e in evals if e.startswith("start ")]
    assert len(starts) == 2 and len([e for e in evals if e.startswith("end ")]) == 2
    # (and _run: they ended before the script's last line)
    files = [f for names in _tars(queue_dir / "out").values() for f in names]
    assert sum(f.endswith("eval-600ep.json") for f in files) == 2


def _commit(queue_dir: Path, rel: str, *names: str) -> None:
    d = queue_dir / rel
    d.mkdir(parents=True, exist_ok=True)
    for n in names:
        (d / n).write_text("{}")


#: the foreground's DataLens cells and the GAN lane skipped: tests of the DP-SGD lanes
NO_CELLS = {f"cell-{k}": NEVER for k in ("gpate", "gpate-snap", "datalens", "datalens-snap",
                                         "dpgan")}


def test_dpsgd_lanes_run_beside_the_trainings_and_bring_searches_whole(queue_dir: Path):
    """The DP-SGD items run in their own lanes from the start (beside the G-PATE trainings, not
    after them); a searched cell arrives with the search that chose its setting, and a
    committed search is reused, not returned again; the per-layer control brings its missing
    compressing scenarios under their own names, never a committed one."""
    base = "data/results/dpsgd/mnist"
    _commit(queue_dir, f"{base}/control-layer-k0.8-eps1-topagg/paper", "seed0.json",
            "summary.json")
    _commit(queue_dir, f"{base}/normtopk-k0.7-eps0.5/search", "search.json", "point0.json")
    # no budget binds: every DP-SGD item runs, and the G-PATE cells (not the DataLens ones,
    # nor the GAN lane's: DC-GAN's by GPU_QUEUE_RESUMABLE_NEED). The first G-PATE training
    # lasts until a DP-SGD job has started; the first two DP-SGD jobs last until both have
    _estimates(queue_dir, {k: NEVER for k in NO_CELLS if k != "cell-gpate"})
    rc, log, st = _run(queue_dir, seconds=100000, GPU_QUEUE_DPSGD_LANES="2",
                       GPU_QUEUE_RESUMABLE_NEED=str(NEVER), FAKE_GPATE_WAITS="1",
                       FAKE_DPSGD_PAIR="1")
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
    gpate = [t.split() for t in _lines(st, "eval.log.train") if "/gpate/" in t]
    assert len(gpate) >= 3
    # the lanes ran while G-PATE still trained: a DP-SGD job had started before the first
    # G-PATE training ended (the DP-SGD jobs started by each training's end)
    assert int(gpate[0][1]) >= 1
    # two lanes: two DP-SGD jobs ran at once, never more
    assert _count(st, "peak-dpsgd") == 2


def test_a_search_whose_seeds_were_cut_still_comes_back_without_its_seeds(queue_dir: Path):
    # one lane, DP-SGD jobs of 1 s: its 19 items before that search take 19 s of the 30
    _estimates(queue_dir, NO_CELLS)
    rc, log, _ = _run(queue_dir, seconds=30, GPU_QUEUE_DPSGD_LANES="1", FAKE_SEEDS_CUT="1",
                      FAKE_SECONDS="dpsgd=1")
    assert rc == 0, log[-2000:]
    files = {f for names in _tars(queue_dir / "out").values() for f in names}
    cell = "data/results/dpsgd/mnist/gmdp-eps0.5"
    assert f"{cell}/search/search.json" in files, log[-3000:]
    assert not any(f.startswith(f"{cell}/paper/") for f in files)


def test_dcgan_trains_resumably_and_the_ensembles_without_checkpoints(queue_dir: Path):
    """DC-GAN's paper cell is longer than a call: it checkpoints every epoch and resumes on the
    same warm machine; the ensemble methods never write their 27-GB checkpoints there."""
    _estimates(queue_dir, {"dpsgd": NEVER, "dpsgd-search": NEVER, "cell-datalens": NEVER,
                           "cell-datalens-snap": NEVER})
    rc, log, st = _run(queue_dir, seconds=25, GPU_QUEUE_RESUMABLE_NEED="1")
    assert rc == 0, log[-2000:]
    trains = _lines(st, "eval.log.train")
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
    _estimates(queue_dir, NO_CELLS | {"dpsgd-search": NEVER})
    rc, log, st = _run(queue_dir, seconds=100, GPU_QUEUE_DPSGD_LANES="1")
    assert rc == 0, log[-2000:]
    files = {f for names in _tars(queue_dir / "out").values() for f in names}
    ran = {f.split("/")[4] for f in files if "/control-k0.8-eps0.1-" in f}
    calls = [c for c in _lines(st, "eval.log.dpsgd")
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
    rc, log, _ = _run(queue_dir, seconds=0)
    assert rc == 0, log[-2000:]
    assert (stage / item / "run.json").read_text() == '{"status": "complete"}'
    assert not (stage / f"{item}.old").exists() and not (stage / f"{item}.tmp").exists()
    files = {f for names in _tars(queue_dir / "out").values() for f in names}
    assert f"{item}/run.json" in files
