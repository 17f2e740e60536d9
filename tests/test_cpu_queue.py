"""The CPU queue (scripts/cpu_queue.sh) as a dry run: a fake ``datalens`` command stands in for
training, evaluation and DP-SGD, so these tests check the queue's own logic -- DP-SGD jobs
next to each other run in lanes of one thread, a control job waits for the search it reuses,
every other job runs alone after the lanes, records are copied to data/results."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FAKE_DL_HEAD

ROOT = Path(__file__).resolve().parents[1]

# fake `datalens`: writes the files the queue expects; logs its start and its end, with its
# threads, one line each in LOG. The lines' order is the tests' clock: no time is read, no work
# is slept; jobs that must run side by side wait for each other (barriers)
FAKE_DL = FAKE_DL_HEAD + r"""exec 9>"$LOG.lock"
args="$*"
note() { flock 9; echo "$1 ${OMP_NUM_THREADS:-all} $cmd $args" >> "$LOG"; flock -u 9; }
starts() { local n=0; [[ -f $LOG ]] && n=$(grep -c "^start $1" "$LOG"); echo "$n"; }  # PREFIX
hold() {  # until "$@" holds: a barrier, not a duration; the cap only keeps a broken queue from
  # hanging the test (a correct one never reaches it)
  local cap=$((SECONDS + ${FAKE_CAP_S:-600}))
  until "$@"; do
    ((SECONDS < cap)) || { echo "$cmd $args: gave up waiting until $*" >> "$LOG.stuck"; return; }
    sleep 0.1
  done
}
# FAKE_PAIRS="CMD N": the first N one-thread calls of CMD run in pairs, each lasting until the
# other of its pair has started (two lanes side by side)
read -r pair npair <<<"${FAKE_PAIRS:-}"
paired() { (($(starts "1 $pair ") >= $1)); }
seq=-1
flock 9
[[ $cmd == "$pair" && ${OMP_NUM_THREADS:-} == 1 ]] && seq=$(starts "1 $cmd ")
echo "start ${OMP_NUM_THREADS:-all} $cmd $args" >> "$LOG"
flock -u 9
((seq >= 0 && seq < ${npair:-0})) && hold paired $(((seq / 2 + 1) * 2))
# FAKE_SEARCH_WAITS: a DP-SGD call that reads a search (--search DIR: the search job's and the
# control job's) lasts until another call that reads it has started, or until another job waits
# for that search's lock (/proc/locks): without the lock they would run at once
partner() {  # DIR LOCKFILE
  (($(grep "^start " "$LOG" | grep -cF -- "--search $1") >= 2)) && return
  local inode
  inode=$(stat -c %i "$2" 2>/dev/null) && grep -q -- "-> FLOCK .*:$inode " /proc/locks
}
search=$(arg --search "$@")
if [[ -n ${FAKE_SEARCH_WAITS:-} && $cmd == dpsgd && -n $search && $search != *"{cell}"* ]]; then
  hold partner "$search" "runs/queue/locks/search-$(basename "$(dirname "$search")").lock"
fi
case $cmd in
  train) out=$(arg --out "$@"); mkdir -p "$out"
         if [[ " $* " == *" --until-last-snapshot "* ]]; then
           echo '{"status": "snapshots"}' > "$out/snapshots.json"
         else echo '{"status": "complete"}' > "$out/run.json"; fi ;;
  evaluate) snap=$(arg --snapshot "$@"); name=$(arg --name "$@")
            if [[ -n $snap ]]; then echo '{}' > "$1/snapshot-eps$snap-eval-1ep.json"
            elif [[ -n $name ]]; then echo '{}' > "$1/$name"
            else echo '{}' > "$1/eval-1ep.json"; fi ;;
  publish-samples) d=$(arg --dest "$@"); echo x > "$d/samples-10k.npz"  # then, as the real
                   # command, the subset is recorded in run.json
                   echo '{"status": "complete", "published_samples": {}}' > "$d/run.json" ;;
  dpsgd) out=$(arg --out "$@"); eps=$(arg --epsilon "$@")
         if [[ $eps == *,* ]]; then  # several budgets: each cell's folders ({cell} in them)
           for e in ${eps//,/ }; do
             c=$(arg --method "$@")-k$(arg --k "$@")-eps$e
             mkdir -p "${search//\{cell\}/$c}" "${out//\{cell\}/$c}"
             for f in point0 search; do echo '{}' > "${search//\{cell\}/$c}/$f.json"; done
             for f in seed0 summary; do echo '{}' > "${out//\{cell\}/$c}/$f.json"; done
           done
           note end; exit 0
         fi
         # as the real command: a search whose points are all there is not trained again
         if [[ -n $search && ! -f $search/point0.json ]]; then
           echo "searched $search" >> "$LOG.search"
           mkdir -p "$search"; echo '{}' > "$search/point0.json"; fi
         [[ -n $search ]] && echo '{}' > "$search/search.json"
         # a progress bar as tqdm draws it (redraws separated by \r, no newline) and the
         # redraw interval the queue sets
         printf 'bar 1/2 tqdm=%s\rbar 2/2 tqdm=%s\r' "${TQDM_MININTERVAL:-unset}" \
           "${TQDM_MAXINTERVAL:-unset}" >&2
         if [[ " $* " == *" --control "* ]]; then
           k=$(arg --k "$@"); e=$(arg --epsilon "$@")
           for s in topagg topk-gm-dp topk-sgd gm-dp clipped-sgd; do
             d=$out/control-k$k-eps$e-$s; mkdir -p "$d"; echo '{}' > "$d/seed0.json"
             echo '{}' > "$d/summary.json"; done
         else mkdir -p "$out"; echo '{}' > "$out/seed0.json"; echo '{}' > "$out/summary.json"
         fi ;;
  *) echo "fake dl: unknown command $cmd" >&2; exit 2 ;;
esac
note end
"""

JOBS = [
    "dpsgd gmdp 1 0.05 1",
    "dpsgd normtopk 0.6 0.05 1",
    "dpsgd-search normtopk 0.8 0.1 1",
    "dpsgd-control 0.8 0.1 1",
    "datalens mnist-eps1 paper-x 1",
    "dpsgd gmdp 1 0.2 1",
]


@pytest.fixture()
def queue_dir(tmp_path: Path) -> Path:
    if shutil.which("flock") is None:
        pytest.skip("flock (util-linux) is not installed")
    (tmp_path / "scripts").mkdir()
    for name in ("cpu_queue.sh", "queue_copy.sh"):
        shutil.copy(ROOT / "scripts" / name, tmp_path / "scripts" / name)
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    py = tmp_path / ".venv" / "bin" / "python"  # (a symlink would lose the venv's packages)
    py.write_text('#!/usr/bin/env bash\necho call >> "${LOG:-/dev/null}.python"\n'
                  f'exec "{sys.executable}" "$@"\n')
    py.chmod(0o755)
    fake = tmp_path / "fake-dl"
    fake.write_text(FAKE_DL)
    fake.chmod(0o755)
    return tmp_path


def _log(queue_dir: Path) -> list[tuple[str, int, str, str]]:
    """The fake's calls: start or end, its place in the log (the order things happened: the
    tests' clock), its threads and its command line."""
    rows = []
    for n, line in enumerate((queue_dir / "dl.log").read_text().splitlines()):
        kind, threads, rest = line.split(" ", 2)
        rows.append((kind, n, threads, rest))
    return rows


def _queue(queue_dir: Path, env: dict[str, str], *jobs: str) -> subprocess.CompletedProcess:
    """Run the queue (the timeout: a hang guard only); no barrier of the fake gave up."""
    res = subprocess.run(["bash", "scripts/cpu_queue.sh", *jobs], cwd=queue_dir, env=env,
                         capture_output=True, text=True, timeout=900)
    stuck = queue_dir / "dl.log.stuck"
    assert not stuck.exists(), stuck.read_text() + res.stdout[-2000:]
    return res


def test_dpsgd_jobs_run_in_one_thread_lanes_and_the_rest_alone(queue_dir: Path):
    # the first two DP-SGD jobs each last until the other has started; the search job and the
    # control job, until the other has started or waits for the search's lock (/proc/locks)
    env = {**os.environ, "DL": str(queue_dir / "fake-dl"), "LOG": str(queue_dir / "dl.log"),
           "PYTHONPATH": str(ROOT), "CPU_QUEUE_JOBS": "\n".join(JOBS),
           "CPU_QUEUE_DPSGD_LANES": "2", "FAKE_PAIRS": "dpsgd 2",
           "FAKE_SEARCH_WAITS": "1" if Path("/proc/locks").exists() else ""}
    env.pop("OMP_NUM_THREADS", None)
    res = _queue(queue_dir, env)
    assert res.returncode == 0 and "FAILED" not in res.stdout, res.stdout + res.stderr
    rows = _log(queue_dir)
    dpsgd = [r for r in rows if r[3].startswith("dpsgd")]
    # every job shows its progress bars (one per seed and search point), none runs --quiet;
    # in a lane each redraw is a line of its own, prefixed, redrawn every 30 s at most
    assert dpsgd and not any("--quiet" in r[3] for r in dpsgd)
    lines = res.stdout.splitlines()
    for lane in ("[lane 1]", "[lane 2]"):
        assert f"{lane} bar 1/2 tqdm=30" in lines and f"{lane} bar 2/2 tqdm=30" in lines, \
            res.stdout[-2000:]
    assert "\r" not in res.stdout
    # the first four jobs ran in two lanes of one torch thread: some of them overlapped
    first = [r for r in dpsgd if "--epsilon 0.2 " not in r[3]]
    assert {r[2] for r in first} == {"1"}
    spans = {}
    for kind, t, _, rest in first:
        spans.setdefault(rest, {})[kind] = t
    # the first two jobs started together, one in each lane: they overlapped
    (a0, a1), (b0, b1) = sorted((v["start"], v["end"]) for k, v in spans.items()
                                if "--epsilon 0.05 " in k)
    assert b0 < a1, spans
    # the control (eps = 0.1) and TopAgg's search job share that search: they never ran at
    # the same time (the lock; either may come first) and the search was trained once
    search = next(v for k, v in spans.items() if "--search" in k and "--control" not in k)
    control = next(v for k, v in spans.items() if "--control" in k)
    assert control["start"] >= search["end"] or search["start"] >= control["end"]
    assert "--search runs/queue/dpsgd/mnist/normtopk-k0.8-eps0.1/search" in next(
        k for k in spans if "--control" in k)
    assert len((queue_dir / "dl.log.search").read_text().splitlines()) == 1
    # the DataLens job ran alone, with every thread, after the lanes; so did the last DP-SGD
    # job (alone in its run of DP-SGD jobs), after it
    train = next(r for r in rows if r[3].startswith("train") and r[0] == "start")
    assert train[2] == "all" and train[1] >= max(v["end"] for v in spans.values())
    last = [r for r in dpsgd if "--epsilon 0.2 " in r[3]]
    assert {r[2] for r in last} == {"all"}
    assert min(r[1] for r in last) >= max(
        r[1] for r in rows if r[3].startswith(("train", "evaluate")))
    res_dir = queue_dir / "data" / "results"
    for rel in ("dpsgd/mnist/gmdp-eps0.05/paper/summary.json",
                "dpsgd/mnist/normtopk-k0.8-eps0.1/search/search.json",
                "dpsgd/mnist/control-k0.8-eps0.1-clipped-sgd/paper/summary.json",
                "dpsgd/mnist/gmdp-eps0.2/paper/summary.json",
                "datalens/mnist-eps1/paper-x/run.json"):
        assert (res_dir / rel).exists(), rel
    assert "[lane 2]" in res.stdout and "[lane 1]" in res.stdout
    # the cells' names came from one Python call at the start, not one per job
    assert len((queue_dir / "dl.log.python").read_text().splitlines()) == 1
    assert not list((queue_dir / "runs" / "queue" / "locks").glob("cells-*"))
    # a job run alone by number computes its own cell name
    res = _queue(queue_dir, env, "6")
    assert res.returncode == 0 and "gmdp-eps0.2: already committed" in res.stdout, res.stdout
    assert len((queue_dir / "dl.log.python").read_text().splitlines()) == 2


def test_a_committed_search_is_reused_not_searched_again(queue_dir: Path):
    """With TopAgg's search committed (by the GPU queue, say) and its seeds not, both the
    search job and the control job hand its points to --search: nothing is searched again."""
    d = queue_dir / "data" / "results" / "dpsgd" / "mnist" / "normtopk-k0.8-eps0.1" / "search"
    d.mkdir(parents=True)
    for n in ("search.json", "point0.json"):
        (d / n).write_text("{}")
    env = {**os.environ, "DL": str(queue_dir / "fake-dl"), "LOG": str(queue_dir / "dl.log"),
           "PYTHONPATH": str(ROOT), "CPU_QUEUE_JOBS": "\n".join(JOBS[2:4]),
           "CPU_QUEUE_DPSGD_LANES": "2"}
    res = _queue(queue_dir, env)
    assert res.returncode == 0 and "FAILED" not in res.stdout, res.stdout + res.stderr
    assert not (queue_dir / "dl.log.search").exists()
    assert (queue_dir / "runs/queue/dpsgd/mnist/normtopk-k0.8-eps0.1/search/point0.json"
            ).exists()


def test_a_family_job_searches_its_budgets_in_one_command_and_copies_every_cell(
        queue_dir: Path):
    env = {**os.environ, "DL": str(queue_dir / "fake-dl"), "LOG": str(queue_dir / "dl.log"),
           "PYTHONPATH": str(ROOT), "CPU_QUEUE_JOBS": "dpsgd-family normtopk 0.8 0.3,0.5 1",
           "CPU_QUEUE_DPSGD_LANES": "2"}
    res = _queue(queue_dir, env)
    assert res.returncode == 0 and "FAILED" not in res.stdout, res.stdout + res.stderr
    calls = [r for r in _log(queue_dir) if r[0] == "start"]
    assert len(calls) == 1 and "--epsilon 0.3,0.5 " in calls[0][3]
    assert "--search runs/queue/dpsgd/mnist/{cell}/search" in calls[0][3]
    for e in ("0.3", "0.5"):
        cell = queue_dir / "data/results/dpsgd/mnist" / f"normtopk-k0.8-eps{e}"
        for rel in ("search/search.json", "search/point0.json", "paper/seed0.json",
                    "paper/summary.json"):
            assert (cell / rel).exists(), (e, rel)
    res = _queue(queue_dir, env)
    assert "(searched together): already committed, skipped" in res.stdout, res.stdout
    assert len([r for r in _log(queue_dir) if r[0] == "start"]) == 1


def test_a_family_job_keeps_a_committed_cell_and_hands_its_seeds_to_the_command(
        queue_dir: Path):
    """eps 0.5 committed (by the GPU queue, say), eps 0.3 not: the job runs for 0.3, the
    committed seeds and points of 0.5 are where the command reuses them, and 0.5's committed
    records are left as they are; a tab:dpsgd-search budget in a family is refused."""
    done = queue_dir / "data/results/dpsgd/mnist/normtopk-k0.8-eps0.5"
    for rel in ("search/search.json", "search/point0.json", "paper/seed0.json",
                "paper/summary.json"):
        (done / rel).parent.mkdir(parents=True, exist_ok=True)
        (done / rel).write_text('{"committed": true}')
    env = {**os.environ, "DL": str(queue_dir / "fake-dl"), "LOG": str(queue_dir / "dl.log"),
           "PYTHONPATH": str(ROOT), "CPU_QUEUE_DPSGD_LANES": "2",
           "CPU_QUEUE_JOBS": "dpsgd-family normtopk 0.8 0.3,0.5 1\n"
                             "dpsgd-family normtopk 0.8 0.5,1.0 1"}
    res = _queue(queue_dir, env)
    assert "normtopk-k0.8-eps0.5: committed before, left as it is" in res.stdout, res.stdout
    for rel in ("search/search.json", "paper/seed0.json", "paper/summary.json"):
        assert json.loads((done / rel).read_text()) == {"committed": True}, rel
    runs = queue_dir / "runs/queue/dpsgd/mnist/normtopk-k0.8-eps0.5"
    assert (runs / "search/point0.json").exists() and (runs / "paper/seed0.json").exists()
    assert (queue_dir / "data/results/dpsgd/mnist/normtopk-k0.8-eps0.3/paper/seed0.json"
            ).exists()
    assert "a tab:dpsgd-search budget is in it" in res.stdout
    assert "FAILED (exit 2): dpsgd-family normtopk 0.8 0.5,1.0 1" in res.stdout
    assert len([r for r in _log(queue_dir) if r[0] == "start"]) == 1


def test_a_snapshot_job_evaluates_its_own_samples_alone_then_the_snapshots_in_lanes(
        queue_dir: Path):
    """+snap: five equally long evaluations. The run's own samples first, alone with every
    thread (the remainder of 5 over 2 lanes), then the four snapshots two at a time, one torch
    thread each, overlapping; every record is copied. A killed job's finished evaluations are
    not run again."""
    # each one-thread evaluation lasts until the other of its pair (in start order) has started
    env = {**os.environ, "DL": str(queue_dir / "fake-dl"), "LOG": str(queue_dir / "dl.log"),
           "PYTHONPATH": str(ROOT), "CPU_QUEUE_JOBS": "datalens mnist-eps1 paper-x 1 +snap",
           "FAKE_PAIRS": "evaluate 4"}
    env.pop("OMP_NUM_THREADS", None)
    env.pop("CPU_QUEUE_EVAL_LANES", None)
    res = _queue(queue_dir, env)
    assert res.returncode == 0 and "FAILED" not in res.stdout, res.stdout + res.stderr
    ev = {}
    for kind, t, threads, rest in _log(queue_dir):
        if rest.startswith("evaluate"):
            snap = rest.split("--snapshot ")[1].split()[0] if "--snapshot" in rest else "run"
            ev.setdefault(snap, {})[kind] = t
            ev[snap]["threads"] = threads
    assert set(ev) == {"run", "0.2", "0.4", "0.6", "0.8"}, ev
    assert ev["run"]["threads"] == "all"
    assert all(ev[b]["threads"] == "1" for b in ("0.2", "0.4", "0.6", "0.8"))
    assert ev["run"]["end"] <= min(ev[b]["start"] for b in ("0.2", "0.4", "0.6", "0.8"))
    # two pairs, each pair overlapping, the second after the first
    assert ev["0.4"]["start"] < ev["0.2"]["end"] and ev["0.2"]["start"] < ev["0.4"]["end"]
    assert ev["0.8"]["start"] < ev["0.6"]["end"] and ev["0.6"]["start"] < ev["0.8"]["end"]
    assert min(ev["0.6"]["start"], ev["0.8"]["start"]) >= max(ev["0.2"]["end"],
                                                              ev["0.4"]["end"])
    dest = queue_dir / "data/results/datalens/mnist-eps1/paper-x"
    for name in ("run.json", "eval-1ep.json", "samples-10k.npz",
                 *(f"snapshot-eps{b}-eval-1ep.json" for b in ("0.2", "0.4", "0.6", "0.8"))):
        assert (dest / name).exists(), name
    # a job killed after two snapshot evaluations: the other two run, as one pair
    for b in ("0.6", "0.8"):
        (queue_dir / f"runs/queue/mnist-eps1/paper-x/snapshot-eps{b}-eval-1ep.json").unlink()
        (dest / f"snapshot-eps{b}-eval-1ep.json").unlink()
    (queue_dir / "dl.log").unlink()
    res = _queue(queue_dir, env)
    assert res.returncode == 0 and "FAILED" not in res.stdout, res.stdout + res.stderr
    starts = [r for r in _log(queue_dir) if r[0] == "start"]
    assert sorted(r[3].split("--snapshot ")[1].split()[0] for r in starts) == ["0.6", "0.8"]
    assert {r[2] for r in starts} == {"1"}
    assert (dest / "snapshot-eps0.8-eval-1ep.json").exists()


def test_a_committed_run_whose_snapshots_were_lost_is_trained_again_up_to_its_last(
        queue_dir: Path):
    """+snap on a committed run (records, evaluation, published subset) without its snapshot
    evaluations and without its folder: the queue trains it again only up to its last
    snapshot, checked against the committed run.json, evaluates the snapshots not evaluated
    before (not the run's own samples again, nor a snapshot whose record is committed),
    copies them and snapshots.json beside the committed records and leaves those as they
    were; run again, the job is skipped."""
    dest = queue_dir / "data/results/gpate/mnist-eps1/cpu"
    dest.mkdir(parents=True)
    committed = '{"status": "complete", "published_samples": {}, "mark": 1}'
    (dest / "run.json").write_text(committed)
    (dest / "eval-1ep.json").write_text("{}")
    (dest / "samples-10k.npz").write_text("x")
    (dest / "snapshot-eps0.2-eval-1ep.json").write_text('{"kept": 1}')  # evaluated before
    (queue_dir / "runs/queue/gpate/mnist-eps1/cpu").mkdir(parents=True)  # (and copied:
    (queue_dir / "runs/queue/gpate/mnist-eps1/cpu/snapshot-eps0.2-eval-1ep.json").write_text(
        '{"here": 1}')  # a committed record is never overwritten by the run folder's)
    env = {**os.environ, "DL": str(queue_dir / "fake-dl"), "LOG": str(queue_dir / "dl.log"),
           "PYTHONPATH": str(ROOT), "CPU_QUEUE_JOBS": "gpate mnist-eps1 cpu 1 +snap"}
    res = _queue(queue_dir, env)
    assert res.returncode == 0 and "FAILED" not in res.stdout, res.stdout + res.stderr
    starts = [r[3] for r in _log(queue_dir) if r[0] == "start"]
    trains = [r for r in starts if r.startswith("train")]
    assert len(trains) == 1 and "--until-last-snapshot" in trains[0], starts
    assert f"--prefix-of {dest.relative_to(queue_dir)}/run.json" in trains[0]
    assert "--profile cpu" in trains[0] and "--snapshot-budgets 0.2 0.4 0.6 0.8" in trains[0]
    evals = [r for r in starts if r.startswith("evaluate")]
    assert sorted(r.split("--snapshot ")[1].split()[0] for r in evals) == [
        "0.4", "0.6", "0.8"], evals
    assert json.loads((dest / "snapshot-eps0.2-eval-1ep.json").read_text()) == {"kept": 1}
    assert not [r for r in starts if r.startswith("publish-samples")]
    assert (dest / "run.json").read_text() == committed
    assert json.loads((dest / "snapshots.json").read_text())["status"] == "snapshots"
    assert "WARNING" in res.stdout  # the fake's snapshots.json has no identical prefix check
    for b in ("0.2", "0.4", "0.6", "0.8"):
        assert (dest / f"snapshot-eps{b}-eval-1ep.json").exists()
    (queue_dir / "dl.log").unlink()
    res = _queue(queue_dir, env)
    assert "already committed, skipped" in res.stdout and not (queue_dir / "dl.log").exists()


def test_a_failed_snapshot_evaluation_fails_the_job(queue_dir: Path):
    """One of a pair fails: the job fails after the pair, with no snapshot record copied."""
    fake = queue_dir / "fake-dl"
    fake.write_text(fake.read_text().replace(
        'evaluate) snap=$(arg --snapshot "$@");',
        'evaluate) snap=$(arg --snapshot "$@"); [[ $snap == 0.4 ]] && exit 3;'))
    env = {**os.environ, "DL": str(fake), "LOG": str(queue_dir / "dl.log"),
           "PYTHONPATH": str(ROOT), "CPU_QUEUE_JOBS": "datalens mnist-eps1 paper-x 1 +snap"}
    res = _queue(queue_dir, env)
    assert "an evaluation FAILED" in res.stdout, res.stdout + res.stderr
    assert "FAILED (exit" in res.stdout
    dest = queue_dir / "data/results/datalens/mnist-eps1/paper-x"
    # the run's own records were copied before the snapshots' group ran; no snapshot's was
    assert (dest / "eval-1ep.json").exists() and (dest / "samples-10k.npz").exists()
    assert not list(dest.glob("snapshot-*"))


def test_a_published_subset_missing_from_run_json_is_published_again(queue_dir: Path):
    """A kill between publish-samples' two writes (samples-10k.npz, then run.json's
    published_samples) leaves a run that looks committed by its files: the queue publishes it
    again instead of skipping it; records land under their own names, no temporary file."""
    env = {**os.environ, "DL": str(queue_dir / "fake-dl"), "LOG": str(queue_dir / "dl.log"),
           "PYTHONPATH": str(ROOT), "CPU_QUEUE_JOBS": "datalens mnist-eps1 paper-x 1"}
    res = _queue(queue_dir, env)
    assert res.returncode == 0 and "FAILED" not in res.stdout, res.stdout + res.stderr
    dest = queue_dir / "data/results/datalens/mnist-eps1/paper-x"
    assert sorted(p.name for p in dest.iterdir()) == ["eval-1ep.json", "run.json",
                                                      "samples-10k.npz"]
    (dest / "run.json").write_text('{"status": "complete"}')  # the kill's leftover
    (queue_dir / "dl.log").unlink()
    res = _queue(queue_dir, env)
    assert res.returncode == 0 and "already committed" not in res.stdout, res.stdout
    starts = [r[3].split()[0] for r in _log(queue_dir) if r[0] == "start"]
    assert starts == ["publish-samples"], starts  # trained and evaluated before: only this
    assert "published_samples" in (dest / "run.json").read_text()
    res = _queue(queue_dir, env)
    assert "already committed, skipped" in res.stdout, res.stdout


@pytest.mark.parametrize("dpgan_lanes", ["1", None])
def test_small_batch_dpgan_cells_share_lanes_only_if_asked_and_a_large_batch_one_runs_alone(
        queue_dir: Path, dpgan_lanes):
    """CPU_QUEUE_DPGAN_LANES=1: two small-batch cells side by side in one-thread lanes; by
    default (a pair takes longer than a session on a machine not kept between sessions) one
    after the other, each with every thread."""
    jobs = ["dpgan mnist-eps1 cpu 1", "dpgan fashion-mnist-eps1 cpu 1",
            "dpgan mnist-eps1-large cpu 1", "dpgan mnist-eps1 cpu-eps0.2 1 epsilon=0.2"]
    # two one-thread trainings: each lasts until the other has started
    env = {**os.environ, "DL": str(queue_dir / "fake-dl"), "LOG": str(queue_dir / "dl.log"),
           "PYTHONPATH": str(ROOT), "CPU_QUEUE_JOBS": "\n".join(jobs),
           "CPU_QUEUE_DPSGD_LANES": "2", "FAKE_PAIRS": "train 2"}
    env.pop("CPU_QUEUE_DPGAN_LANES", None)
    if dpgan_lanes:
        env["CPU_QUEUE_DPGAN_LANES"] = dpgan_lanes
    env.pop("OMP_NUM_THREADS", None)
    res = _queue(queue_dir, env)
    assert res.returncode == 0 and "FAILED" not in res.stdout, res.stdout + res.stderr
    spans: dict[str, dict] = {}
    budget = [rest for kind, _, _, rest in _log(queue_dir)
              if kind == "start" and "cpu-eps0.2" in rest and rest.startswith("train")]
    # a cpu-<variant> folder trains at the cpu profile with its overrides (tab:lowdp's DP-GAN
    # budgets)
    assert len(budget) == 1 and "--profile cpu" in budget[0], budget
    assert "--set epsilon=0.2" in budget[0]
    assert "--out runs/queue/dpgan/mnist-eps1/cpu-eps0.2" in budget[0]
    for kind, t, threads, rest in _log(queue_dir):
        if rest.startswith("train") and "cpu-eps0.2" not in rest:
            cfg = rest.split("--config ")[1].split()[0]
            spans.setdefault(cfg, {})[kind] = t
            spans[cfg]["threads"] = threads
    small, other = spans["mnist-eps1"], spans["fashion-mnist-eps1"]
    if dpgan_lanes:
        assert small["threads"] == other["threads"] == "1"
        assert small["start"] < other["end"] and other["start"] < small["end"]  # side by side
    else:
        assert small["threads"] == other["threads"] == "all"
        assert small["end"] <= other["start"]  # one after the other
    large = spans["mnist-eps1-large"]
    assert large["threads"] == "all" and large["start"] >= max(small["end"], other["end"])
    for cfg in ("mnist-eps1", "fashion-mnist-eps1", "mnist-eps1-large"):
        assert (queue_dir / f"data/results/dpgan/{cfg}/cpu/eval-1ep.json").exists(), cfg


def test_an_eval_job_scores_a_runs_samples_under_its_own_name_and_only_once(queue_dir: Path):
    """``eval CONFIG/FOLDER NAME EPOCHS ARGS``: an evaluation variant (here another classifier
    seed) of a finished run's samples, copied beside its committed records; skipped once
    committed, and skipped with a message where the samples are not on this machine."""
    run = queue_dir / "runs" / "queue" / "mnist-eps1" / "paper-x"
    run.mkdir(parents=True)
    (run / "samples.npz").write_text("x")
    jobs = ["eval mnist-eps1/paper-x eval-1ep-seed2.json 1 --seed 2",
            "eval mnist-eps1/paper-gone eval-1ep-seed2.json 1 --seed 2"]
    env = {**os.environ, "DL": str(queue_dir / "fake-dl"), "LOG": str(queue_dir / "dl.log"),
           "PYTHONPATH": str(ROOT), "CPU_QUEUE_JOBS": "\n".join(jobs)}
    res = _queue(queue_dir, env)
    assert res.returncode == 0, res.stdout + res.stderr
    calls = [rest for kind, _, _, rest in _log(queue_dir) if kind == "start"]
    assert calls == ["evaluate runs/queue/mnist-eps1/paper-x --epochs 1 --name eval-1ep-seed2.json "
                     "--seed 2"]
    dest = queue_dir / "data" / "results" / "datalens" / "mnist-eps1" / "paper-x"
    assert (dest / "eval-1ep-seed2.json").exists()
    assert "paper-gone/eval-1ep-seed2.json: skipped, the run's 100k samples" in res.stdout
    again = _queue(queue_dir, env)
    assert "eval mnist-eps1/paper-x/eval-1ep-seed2.json: already committed, skipped" \
        in again.stdout
    assert len([r for r in _log(queue_dir) if r[0] == "start"]) == 1


def test_pinned_collect_copies_complete_records_only(tmp_path: Path):
    """``cpu_queue_pinned.sh --collect`` copies the queue worktree's new records into the
    checkout, skips a temporary name (a record still being written) and never overwrites a
    file that differs."""
    repo, tree = tmp_path / "repo", tmp_path / "tree"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts/cpu_queue_pinned.sh", repo / "scripts")
    rec = tree / "data/results/dpgan/x/cpu"
    rec.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    (rec / "run.json").write_text('{"status": "complete"}')
    (rec / ".eval-30ep.json.tmp").write_text('{"trunc')
    (rec / "eval-30ep.json").write_text('{"paper": 0.5}')
    (repo / "data/results/dpgan/x/cpu").mkdir(parents=True)
    (repo / "data/results/dpgan/x/cpu/eval-30ep.json").write_text('{"paper": 0.4}')
    res = subprocess.run(["bash", "scripts/cpu_queue_pinned.sh", "--collect"], cwd=repo,
                         env={**os.environ, "DATALENS_QUEUE_TREE": str(tree)},
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout + res.stderr
    got = repo / "data/results/dpgan/x/cpu"
    assert sorted(p.name for p in got.iterdir()) == ["eval-30ep.json", "run.json"]
    assert (got / "run.json").read_text() == '{"status": "complete"}'
    assert (got / "eval-30ep.json").read_text() == '{"paper": 0.4}'  # differs: left as it is
    assert "differs, left as it is here: data/results/dpgan/x/cpu/eval-30ep.json" in res.stdout
    assert "1 new record file(s)" in res.stdout


def test_a_list_of_jobs_runs_in_its_order_and_a_failed_job_is_retried_once(queue_dir: Path):
    """``cpu_queue.sh N M ...`` runs those jobs in the order given; a job that fails (here its
    first training call, as a memory-guard refusal would) is retried once and then committed;
    one that fails twice is reported and the list goes on; a bad number runs nothing."""
    flaky = queue_dir / "flaky-dl"
    flaky.write_text(
        "#!/usr/bin/env bash\n"
        # the first training call of paper-flaky fails; paper-broken's always fails
        'if [[ $1 == train && " $* " == *paper-flaky* && ! -e "$LOG.failed" ]]; then\n'
        '  touch "$LOG.failed"; echo refused >&2; exit 1; fi\n'
        'if [[ $1 == train && " $* " == *paper-broken* ]]; then echo refused >&2; exit 1; fi\n'
        f'exec "{queue_dir / "fake-dl"}" "$@"\n')
    flaky.chmod(0o755)
    jobs = ["datalens mnist-eps1 paper-flaky 1", "datalens mnist-eps1 paper-broken 1",
            "datalens mnist-eps1 paper-plain 1"]
    env = {**os.environ, "DL": str(flaky), "LOG": str(queue_dir / "dl.log"),
           "PYTHONPATH": str(ROOT), "CPU_QUEUE_JOBS": "\n".join(jobs), "CPU_QUEUE_RETRY_S": "0"}
    res = _queue(queue_dir, env, "3", "4")
    assert res.returncode == 2 and "usage" in res.stderr and not (queue_dir / "dl.log").exists()
    res = _queue(queue_dir, env, "3", "2", "1")
    assert res.returncode == 0, res.stdout + res.stderr
    trains = [r[3].split("--out ")[1].split()[0] for r in _log(queue_dir)
              if r[0] == "start" and r[3].startswith("train")]
    # the fake logs a call only when it reaches the inner command: broken's calls never do
    assert [t.rsplit("/", 1)[1] for t in trains] == ["paper-plain", "paper-flaky"]
    assert "job 1 failed" in res.stdout and "job 2 failed" in res.stdout
    failed = [line for line in res.stdout.splitlines() if line.startswith("[queue] FAILED")]
    assert failed == ["[queue] FAILED (exit 1): datalens mnist-eps1 paper-broken 1"], failed
    results = queue_dir / "data" / "results" / "datalens" / "mnist-eps1"
    assert (results / "paper-plain" / "run.json").exists()
    assert (results / "paper-flaky" / "run.json").exists()
    assert not (results / "paper-broken").exists()
