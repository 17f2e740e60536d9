#!/usr/bin/env bash
# The ready queue of work for a lent GPU (device tool), run in order, so that a lent machine is
# used at once and fully. Each finished item's records are packed into $OUT/records-N.tar (at
# most 15 MiB each: scripts/gpu_pack.py) as soon as it ends, paths as they belong in the repo,
# so a call cut at its time limit still brings back everything finished. Finished items are
# skipped: calling it again on the same warm machine continues where it stopped (it returns
# only what the earlier call did not; a paper cell cut mid-way restarts: it takes minutes).
#
# Here, before the call: `bash scripts/gpu_prepare.sh` (git sha, data, wheels; moves the
# published subsets out of the 64 MiB that a call sends)
# The call: run(command="bash scripts/gpu_queue.sh", carry=[".whl", "data/raw", ".git-sha"])
# After it: `bash scripts/gpu_prepare.sh --restore; for t in <files_at>/records-*.tar; do tar -xf
# $t; done` (then review and commit). Set timeout_s above GPU_QUEUE_HARD (default budget + 25).
#
# GPU_QUEUE_SECONDS (default 560): no new item starts after this many seconds of the call, and
# an item starts only if its last measured duration still fits.
#
# Overlap. A 600-epoch evaluation of 100k samples is a small CNN at batch 512, bound by kernel
# launches (2.6-2.8 epochs/s on an H200, 228 s, against 64 s for G-PATE's whole training), and a
# DP-SGD cell is the same kind of work. So trainings run one at a time in the foreground, while
# each finished training's evaluations (the run and each snapshot, all at once) run in the
# background, at most GPU_QUEUE_PARALLEL (default 4) at a time; whichever of a run's evaluations
# ends last stages the run. Issue 13's DP-SGD items run from the start of the call in
# GPU_QUEUE_DPSGD_LANES (default 2) lanes of their own (DPSGD_ITEMS, below), and issue 10's
# DP-GAN and DC-GAN cells in one more (GAN_ITEMS; its evaluations in GPU_QUEUE_GAN_PARALLEL,
# default 2, slots of its own): a record's training time is measured beside all that. Records
# reach the stage (one rename per item) and the tars under a lock. Every job is killed at
# GPU_QUEUE_HARD, so the final wait ends before the call's own limit.
# For a dry run off the GPU (tests/test_gpu_queue.py): GPU_SETUP, DL, GPU_NAME, OUT and
# QUEUE_CLOCK (now, below).
set -uo pipefail
: "${OUT:?OUT names the folder whose files come back}"
${GPU_SETUP:-. scripts/gpu_setup.sh} || { echo "wheel install failed"; exit 1; }
BUDGET=${GPU_QUEUE_SECONDS:-560}          # no item starts after this (seconds into the call)
HARD=${GPU_QUEUE_HARD:-$((BUDGET + 25))}  # every job is killed by then: keep under timeout_s
PARALLEL=${GPU_QUEUE_PARALLEL:-4}         # background evaluations at a time
LANE_PIDS=()                              # the DP-SGD lanes (below), apart from them
TAR_BYTES=${GPU_QUEUE_TAR_BYTES:-$((15 << 20))}  # one returned file: at most 16 MiB
PY=${PY:-python3}
DL=${DL:-$PY -m datalens_lib.cli}
GPU=${GPU_NAME:-$($PY -c "import torch; print(torch.cuda.get_device_name(0))")}
GPU=$(echo "$GPU" | tr -cs 'A-Za-z0-9' '-' | tr 'A-Z' 'a-z' | sed 's/-$//')  # nvidia-h200
STAGE=runs/gpu/stage       # finished records, laid out as in the repo
LOCK=runs/gpu/.stage.lock
STAGED=runs/gpu/staged     # items (paths under STAGE) ever staged on this machine
PACKED=runs/gpu/packed     # items already in a tar that came back
CALL=runs/gpu/call-items   # items this call returns: staged here, or staged and not returned
mkdir -p "$STAGE"
touch "$STAGED" "$PACKED"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}  # several processes share the machine's cores

# commit_copy, copy_new: each file under a temporary name, then renamed (a kill never leaves a
# truncated record that a resumed command reads as done)
# shellcheck source=queue_copy.sh
source "$(dirname "$0")/queue_copy.sh"
pack() { $PY scripts/gpu_pack.py "$STAGE" "$CALL" "$OUT" "$PACKED" "$TAR_BYTES"; }  # under LOCK
(  # a new call: drop half-staged folders, return what an earlier call staged but never returned
  flock 9
  # stage() moves an item aside as ITEM.old before renaming its new copy in: a kill between
  # the two renames leaves ITEM.old alone, the last whole copy, which is put back
  find "$STAGE" -depth -name '*.old' -print0 | while IFS= read -r -d '' o; do
    if [[ -e ${o%.old} ]]; then rm -rf "$o"; else mv -T "$o" "${o%.old}"; fi
  done
  find "$STAGE" -depth -name '*.tmp' -exec rm -rf {} +
  grep -vxF -f "$PACKED" "$STAGED" > "$CALL" || true
  [[ -s $CALL ]] && pack
) 9>"$LOCK"

# now: the call's clock, in seconds since its start (bash's SECONDS); every reading of the time
# below goes through it. A dry run (tests/test_gpu_queue.py) sets QUEUE_CLOCK to a file that
# holds a fake clock instead (whole seconds, replaced by a rename), which its fake jobs advance
# by their declared durations, and puts a fake `timeout` first in PATH that applies run_job's
# limit on that clock too: no verdict there depends on how fast the machine is.
now() { if [[ -n ${QUEUE_CLOCK:-} ]]; then echo "$(<"$QUEUE_CLOCK")"; else echo "$SECONDS"; fi; }
left() { echo $((BUDGET - $(now))); }
run_job() {  # a command, killed at the hard limit
  local t=$((HARD - $(now)))
  ((t > 5)) || { echo "[gpu-queue] no time left for: $*" >&2; return 124; }
  timeout "$t" "$@"
}
estimate() {  # key, default: the last measured duration of such an item on this machine
  local v; v=$(cat "runs/gpu/$1_seconds" 2>/dev/null)
  [[ $v =~ ^[0-9]+$ ]] && echo "$v" || echo "$2"
}
set_estimate() {  # a temporary file per process: lanes and evaluations set estimates at once
  echo "$2" > "runs/gpu/$1_seconds.$BASHPID" && mv "runs/gpu/$1_seconds.$BASHPID" "runs/gpu/$1_seconds"
}
throttle() {  # a free slot: background jobs other than the lanes (PARALLEL 0 reads as 1)
  while (( $(jobs -rp | grep -cvxF -f <(printf '%s\n' "${LANE_PIDS[@]}")) >= (PARALLEL > 0 ? PARALLEL : 1) )); do
    wait -n
  done
}
quiet() { tr '\r' '\n' | grep -v "it/s\]$" | tail -"$1"; }

register() {  # item: listed before its rename, so a kill after it still returns it next call
  grep -qxF "$1" "$STAGED" || echo "$1" >> "$STAGED"
  grep -qxF "$1" "$CALL" || echo "$1" >> "$CALL"
}

stage() {  # source folder, item (a folder relative to the repo), files: copy, then one rename
  local src=$1 rel=$2; shift 2
  (
    flock 9
    tmp=$STAGE/$rel.tmp
    rm -rf "$tmp" && mkdir -p "$tmp" || exit 1
    for f in "$@"; do cp "$src/$f" "$tmp/" || { rm -rf "$tmp"; exit 1; }; done
    register "$rel"
    if [[ -d $STAGE/$rel ]]; then rm -rf "$STAGE/$rel.old" && mv "$STAGE/$rel" "$STAGE/$rel.old"; fi
    mv -T "$tmp" "$STAGE/$rel" && rm -rf "$STAGE/$rel.old" && pack
  ) 9>"$LOCK"
}

stage_file() {  # source file, item (a file path relative to the repo): copy, then one rename
  (
    flock 9
    mkdir -p "$(dirname "$STAGE/$2")" && cp "$1" "$STAGE/$2.tmp" || exit 1
    register "$2"
    mv "$STAGE/$2.tmp" "$STAGE/$2" && pack
  ) 9>"$LOCK"
}

bench() {  # name, then bench_ensemble.py arguments
  local name=$1; shift
  local rel=benchmarks/results/ensemble-$GPU$name.json
  [[ -f $STAGE/$rel || -f $rel ]] && return  # done, or committed
  (( $(left) > 60 )) || return
  echo "[gpu-queue] bench$name ($(left) s left)"
  mkdir -p runs/gpu/bench
  run_job $PY benchmarks/bench_ensemble.py --device cuda "$@" \
    --record "runs/gpu/bench/ensemble-$GPU$name.json" \
    && stage_file "runs/gpu/bench/ensemble-$GPU$name.json" "$rel"
}

eval_job() {  # out, item, label, t0, estimate key (empty: none), target (main|snapshot budget|-),
  # budgets...: one evaluation; whichever of a run's evaluations ends last stages the run
  local out=$1 rel=$2 label=$3 t0=$4 key=$5 target=$6 b f; shift 6
  if [[ $target == main ]]; then
    run_job $DL evaluate "$out" --device cuda 2>&1 | quiet 2
  elif [[ $target != - ]]; then
    run_job $DL evaluate "$out" --device cuda --snapshot "$target" 2>&1 | quiet 1
  fi
  (
    flock 8
    [[ -f $out/.staged ]] && exit 0
    files=(run.json eval-600ep.json)
    for b in "$@"; do files+=("snapshot-eps$b-eval-600ep.json"); done
    for f in "${files[@]}"; do [[ -f $out/$f ]] || exit 0; done  # another one still runs
    # issue 14: samples-10k.npz beside the run, recorded in its run.json
    run_job $DL publish-samples "$out" --dest "$out" | tail -1 || exit 1
    stage "$out" "$rel" "${files[@]}" samples-10k.npz || exit 1
    touch "$out/.staged"
    [[ -n $key ]] && set_estimate "$key" $(($(now) - t0 + 15))
    echo "[gpu-queue] $label: done in $(($(now) - t0)) s"
  ) 8>"$out/.finish.lock"
}

cell() {  # method, config, results folder, seed, then --set overrides (+snap: tab:lowdp)
  local method=$1 cfg=$2 folder=$3 seed=$4; shift 4
  local out=runs/gpu/$method/$cfg/$folder rel=data/results/$method/$cfg/$folder
  local label=$method/$cfg/$folder need key t0=$(now) sets=() budgets=() kv b
  [[ -f $STAGE/$rel/eval-600ep.json || -f $rel/eval-600ep.json ]] && return
  for kv in "$@"; do  # +snap: generator snapshots at eps 0.2 .. 0.8 (tab:lowdp), evaluated
    if [[ $kv == +snap ]]; then budgets=(0.2 0.4 0.6 0.8); else sets+=(--set "$kv"); fi
  done
  key=cell-$method; ((${#budgets[@]})) && key=$key-snap
  need=$(estimate "$key" 360)  # per kind of cell: a G-PATE cell is not a DataLens cell
  # DC-GAN's 25 epochs of batch 64 take > 465 s on an H200, more than one call allows: its
  # training checkpoints every epoch (a few MB) and resumes in the next call on the same warm
  # machine, so it starts whenever a few epochs still fit
  local resumable=0; [[ $method == dcgan ]] && resumable=1 need=${GPU_QUEUE_RESUMABLE_NEED:-120}
  if (( $(left) < need )); then
    echo "[gpu-queue] $label: skipped, $(left) s left < $need s per cell"; return
  fi
  echo "[gpu-queue] $label seed $seed ($(left) s left)"
  ((${#budgets[@]})) && sets+=(--snapshot-budgets "${budgets[@]}")
  if ! grep -qs '"status": "complete"' "$out/run.json"; then
    if ((resumable)); then
      [[ -d $out ]] && key=  # resumed: its duration says nothing about a whole cell
      run_job $DL train --method "$method" --config "$cfg" --profile paper --out "$out" \
        --device cuda --seed "$seed" --resume --checkpoint-every 1 "${sets[@]}" 2>&1 | quiet 3
    else
      rm -rf "$out"  # no training checkpoints (a DataLens ensemble: 27 GB per save): restart
      run_job $DL train --method "$method" --config "$cfg" --profile paper --out "$out" \
        --device cuda --seed "$seed" --checkpoint-every 0 "${sets[@]}" 2>&1 | quiet 3
    fi
    if ! grep -qs '"status": "complete"' "$out/run.json"; then
      echo "[gpu-queue] $label: training failed or cut"
      ((!resumable && $(now) - t0 > need)) && set_estimate "$key" $(($(now) - t0 + 15))
      return
    fi
  else
    key=  # resumed: its duration says nothing about a whole cell
  fi  # the evaluations resume from their own checkpoints (every 10 epochs)
  local targets=()
  [[ -f $out/eval-600ep.json ]] || targets+=(main)
  for b in "${budgets[@]}"; do
    [[ -f $out/snapshot-eps$b-eval-600ep.json ]] || targets+=("$b")
  done
  ((${#targets[@]})) || targets=(-)  # all evaluated in an earlier call: only stage
  for b in "${targets[@]}"; do
    throttle
    eval_job "$out" "$rel" "$label" "$t0" "$key" "$b" "${budgets[@]}" &
  done
}

dpsgd_cell() {  # cell, method, k, eps, seeds[, scope[, dataset]]: one tab:dpsgd cell (issue
  # 13), in the calling lane; scope "layer": top-k within each parameter tensor (ours; its own
  # cell name); dataset fashion-mnist: ours, the offline extra
  local cell=$1 m=$2 k=$3 eps=$4 seeds=$5 scope=${6:-flat} ds=${7:-mnist} need t0
  local out=runs/gpu/dpsgd/$ds/$cell/paper rel=data/results/dpsgd/$ds/$cell/paper
  [[ -f $STAGE/$rel/summary.json || -f $rel/summary.json ]] && return
  need=$(estimate dpsgd 150)
  if (( $(left) < need )); then
    echo "[gpu-queue] dpsgd $ds $cell: skipped, $(left) s left < $need s per cell"; return
  fi
  echo "[gpu-queue] dpsgd $ds $cell, $seeds seeds ($(left) s left)"
  t0=$(now)
  if run_job $DL dpsgd --dataset "$ds" --method "$m" --k "$k" --epsilon "$eps" \
      --seeds "$seeds" --profile paper --out "$out" --device cuda --set "scope=$scope" \
      --quiet 2>&1 | tail -1; then  # seeds finished in an earlier call are skipped
    stage "$out" "$rel" $(cd "$out" && ls seed*.json) summary.json
    (( $(now) - t0 > 60 )) && set_estimate dpsgd $(($(now) - t0 + 10))
  fi
}

dpsgd_search() {  # cell, method, k, eps, seeds: a budget tab:dpsgd-search lacks (issue 13):
  # the validation-split grid search (resumable point by point), then the seeds with its choice
  local cell=$1 m=$2 k=$3 eps=$4 seeds=$5 need t0
  local base=runs/gpu/dpsgd/mnist/$cell rel=data/results/dpsgd/mnist/$cell
  [[ -f $STAGE/$rel/paper/summary.json || -f $rel/paper/summary.json ]] && return
  need=$(estimate dpsgd-search 400)
  if (( $(left) < need )); then
    echo "[gpu-queue] dpsgd-search $cell: skipped, $(left) s left < $need s"; return
  fi
  echo "[gpu-queue] dpsgd-search $cell, then $seeds seeds ($(left) s left)"
  local resumed=0 ok=0
  [[ -d $base ]] && resumed=1  # points or seeds of an earlier call on this machine
  if [[ -f $rel/search/search.json ]]; then  # a committed search: its points are reused
    copy_new "$base/search" "$rel"/search/point*.json && resumed=1
  fi
  t0=$(now)
  run_job $DL dpsgd --dataset mnist --method "$m" --k "$k" --epsilon "$eps" \
    --seeds "$seeds" --profile paper --search "$base/search" --out "$base/paper" \
    --device cuda --quiet 2>&1 | tail -2 && ok=1
  # a finished search comes back even when its seeds were cut (the CPU queue's run of the same
  # cell reuses it); the seeds never come back without the search that chose their setting
  if [[ -f $base/search/search.json && ! -f $STAGE/$rel/search/search.json \
        && ! -f $rel/search/search.json ]]; then
    stage "$base/search" "$rel/search" $(cd "$base/search" && ls ./*.json) || ok=0
  fi
  if ((ok)) && [[ -f $base/paper/summary.json ]]; then
    stage "$base/paper" "$rel/paper" $(cd "$base/paper" && ls seed*.json) summary.json
    ((resumed)) || set_estimate dpsgd-search $(($(now) - t0 + 10))
  fi
}

CONTROL_SCENARIOS=(topagg topk-gm-dp topk-sgd gm-dp clipped-sgd)  # train.CONTROL, as folders

dpsgd_control() {  # topagg, k, eps [scope]: tab:control's five scenarios on MNIST, 5 seeds each
  # (issue 13), in the calling lane; scope "layer" (ours): the three compressing scenarios only;
  # topagg: the TopAgg cell whose search sets the setting, "-" at a searched budget (dpsgd_names).
  # The scenarios run one after another; each one that finishes comes back, so a cut call still
  # returns whole scenarios, and committed ones are neither retrained (their seed records are
  # put in the run folder, which the command skips) nor returned again.
  local topagg=$1 k=$2 eps=$3 scope=${4:-flat} out=runs/gpu/dpsgd/mnist/control-paper
  local name need s t0 n=0
  local missing=() scen=("${CONTROL_SCENARIOS[@]}") rel
  name=control-k$k-eps$eps
  if [[ $scope != flat ]]; then name=control-$scope-k$k-eps$eps scen=("${scen[@]:0:3}"); fi
  for s in "${scen[@]}"; do
    rel=data/results/dpsgd/mnist/$name-$s/paper
    if [[ -f $rel/summary.json ]]; then
      copy_new "$out/$name-$s" "$rel"/seed*.json
    elif [[ ! -f $STAGE/$rel/summary.json ]]; then
      missing+=("$s")
    fi
  done
  ((${#missing[@]})) || return
  # every scenario takes TopAgg's setting: at a budget tab:dpsgd-search lacks, the one chosen
  # by TopAgg's clean search (its item, in the other lane, may still run: wait for it)
  local srel search searchargs=()
  if [[ $topagg != - ]]; then
    srel=data/results/dpsgd/mnist/$topagg/search search=runs/gpu/dpsgd/mnist/$topagg/search
    searchargs=(--search "$search")
    if [[ -f $srel/search.json ]]; then
      copy_new "$search" "$srel"/point*.json
    elif [[ -f $STAGE/$srel/search.json ]]; then
      copy_new "$search" "$STAGE/$srel"/point*.json
    elif [[ ! -f $search/search.json ]]; then
      echo "[gpu-queue] dpsgd $name: skipped, TopAgg's search ($topagg) has not finished"
      return
    fi
  fi
  need=$(estimate dpsgd 150)  # one scenario: each finished one comes back
  if (( $(left) < need )); then
    echo "[gpu-queue] dpsgd $name: skipped, $(left) s left < $need s"; return
  fi
  echo "[gpu-queue] dpsgd $name: ${#missing[@]} scenarios to run, 5 seeds each ($(left) s left)"
  t0=$(now)
  run_job $DL dpsgd --control --dataset mnist --k "$k" --epsilon "$eps" --seeds 5 \
    --profile paper --out "$out" --device cuda --set "scope=$scope" "${searchargs[@]}" \
    --quiet 2>&1 | tail -5
  for s in "${missing[@]}"; do  # each missing scenario whose five seeds finished
    d=$out/$name-$s
    [[ -f $d/summary.json ]] || continue
    stage "$d" "data/results/dpsgd/mnist/$name-$s/paper" $(cd "$d" && ls ./*.json) \
      && n=$((n + 1))
  done
  echo "[gpu-queue] dpsgd $name: $n scenarios in $(($(now) - t0)) s"
}

# Issue 13's DP-SGD items, in order of need. They run in DPSGD_LANES background lanes (item i
# in lane i mod LANES, one item at a time per lane) beside the foreground trainings from the
# start of the call: a DP-SGD process trains a 26k-parameter CNN, a few percent of the GPU, so
# the lanes cost the GAN cells little (the cells' recorded durations are measured beside them,
# as beside their evaluations). An item starts only if its last measured duration still fits;
# a committed or staged item is skipped. Every MNIST cell of tab:dpsgd, tab:dpsgd-ablation and
# tab:control is here; the CPU queue runs them too (whichever finishes first commits).
DPSGD_LANES=${GPU_QUEUE_DPSGD_LANES:-2}
DPSGD_ITEMS=(
  "control 0.8 1 layer"
  "cell gmdp 1 0.05 5" "cell normtopk 0.6 0.05 5" "cell normtopk 0.7 0.05 5"
  "cell normtopk 0.8 0.05 5"
  "cell normtopk 0.6 0.05 5 layer" "cell normtopk 0.7 0.05 5 layer"
  "cell normtopk 0.8 0.05 5 layer"
  "cell gmdp 1 inf 5" "cell normtopk 0.6 inf 5" "cell normtopk 0.7 inf 5"
  "cell normtopk 0.8 inf 5"
  "cell dimtopk 0.2 0.05 5" "cell dimtopk 0.4 0.05 5" "cell dimtopk 0.6 0.05 5"
  "cell dimtopk 0.2 0.2 5" "cell dimtopk 0.4 0.2 5" "cell dimtopk 0.6 0.2 5"
  "control 0.6 1"
  "search gmdp 1 0.5 5" "search normtopk 0.6 0.5 5" "search normtopk 0.7 0.5 5"
  "search normtopk 0.8 0.5 5"
  "search gmdp 1 0.1 5" "search normtopk 0.6 0.1 5" "search normtopk 0.7 0.1 5"
  "search normtopk 0.8 0.1 5"
  "search gmdp 1 0.3 5" "search normtopk 0.6 0.3 5" "search normtopk 0.7 0.3 5"
  "search normtopk 0.8 0.3 5"
  "search gmdp 1 0.7 5" "search normtopk 0.6 0.7 5" "search normtopk 0.7 0.7 5"
  "search normtopk 0.8 0.7 5"
  "search dimtopk 0.2 0.1 5" "search dimtopk 0.4 0.1 5" "search dimtopk 0.6 0.1 5"
  "control 0.8 0.1"
  "cell gmdp 1 1.0 5 flat fashion-mnist" "cell normtopk 0.6 1.0 5 flat fashion-mnist"
  "cell normtopk 0.7 1.0 5 flat fashion-mnist" "cell normtopk 0.8 1.0 5 flat fashion-mnist"
  "control 0.8 1" "cell normtopk 0.6 1.0 5 layer"
  "cell gmdp 1 1.0 5" "cell normtopk 0.6 1.0 5" "cell normtopk 0.7 1.0 5"
  "cell normtopk 0.8 1.0 5" "cell gmdp 1 0.2 5" "cell normtopk 0.6 0.2 5"
  "cell normtopk 0.7 0.2 5" "cell normtopk 0.8 0.2 5"
)
dpsgd_names() {  # each item's cell name (datalens_lib.dpsgd.train.cell_name), in one import;
  # for a control item, TopAgg's cell whose search sets its hyper-parameters ("-" at a budget
  # tab:dpsgd-search lists)
  $PY - "${DPSGD_ITEMS[@]}" <<'PY'
import sys
from datalens_lib.dpsgd.train import cell_name, searched_budgets
for item in sys.argv[1:]:
    kind, *a = item.split()
    if kind == "control":
        k, eps, scope = float(a[0]), float(a[1]), a[2] if len(a) > 2 else "flat"
        print("-" if eps in searched_budgets("mnist") else cell_name("normtopk", k, eps, scope))
        continue
    scope = a[4] if kind == "cell" and len(a) > 4 else "flat"
    print(cell_name(a[0], float(a[1]), float(a[2]), scope))
PY
}
dpsgd_lane() {  # lane index: its items, one after another
  local i kind args
  for ((i = $1; i < ${#DPSGD_ITEMS[@]}; i += DPSGD_LANES)); do
    (( $(left) > 0 )) || return
    read -r kind args <<<"${DPSGD_ITEMS[$i]}"
    # shellcheck disable=SC2086
    case $kind in
      cell) dpsgd_cell "${DPSGD_NAMES[$i]}" $args ;;
      search) dpsgd_search "${DPSGD_NAMES[$i]}" $args ;;
      control) dpsgd_control "${DPSGD_NAMES[$i]}" $args ;;
    esac
  done
}

bench "-nchw" --teachers 1000 4000 --chunk 1000 --loop-max 0 --conv-layout contiguous
# the lanes start after the benchmark: a timing is taken with nothing beside it
lanes() {  # in the background: the names (one import), then the lanes, then their end
  if ! mapfile -t DPSGD_NAMES < <(dpsgd_names) \
      || ((${#DPSGD_NAMES[@]} != ${#DPSGD_ITEMS[@]})); then
    echo "[gpu-queue] DP-SGD lanes not started: the cell names could not be computed" >&2
    return 1
  fi
  for ((lane = 0; lane < DPSGD_LANES; lane++)); do dpsgd_lane "$lane" & done
  wait
}
lanes & LANE_PIDS+=($!)
# Issue 10's small-model cells in a lane of their own, beside the foreground's ensembles:
# DP-GAN (18,750 Opacus discriminator steps of expected batch 64 per cell; the large-batch
# setting, DPImageBench's: expected batch 4096, 150 epochs) and DC-GAN (25 epochs of batch 64,
# two generator steps each) are a DCGAN pair trained with small batches, bound by kernel
# launches like the evaluations. The lane's evaluations take at most GPU_QUEUE_GAN_PARALLEL
# (default 2) slots of their own, and the lane waits for them before it ends.
GAN_ITEMS=(
  "dpgan mnist-eps1 paper 0" "dpgan fashion-mnist-eps1 paper 0"
  "dpgan mnist-eps10 paper 0" "dpgan fashion-mnist-eps10 paper 0"
  "dcgan fashion-mnist-epsinf paper 0"
  "dpgan mnist-eps1-large paper 0" "dpgan fashion-mnist-eps1-large paper 0"
  "dcgan mnist-epsinf paper 0"
  "dpgan mnist-eps10-large paper 0" "dpgan fashion-mnist-eps10-large paper 0"
)
gan_lane() {
  local PARALLEL=${GPU_QUEUE_GAN_PARALLEL:-2} item
  for item in "${GAN_ITEMS[@]}"; do
    (( $(left) > 0 )) || break
    # shellcheck disable=SC2086
    cell $item
  done
  wait
}
gan_lane & LANE_PIDS+=($!)
# 2. Issue 10: the baselines at paper scale. G-PATE in the foreground (a DataLens-sized
#    ensemble: the GPU's strength); DP-GAN and DC-GAN in their lane (above).
cell gpate mnist-eps1 paper 0 chunk=1000
# the official stopping rule (data-dependent ledger; not DP): how much of the gap to the
# paper's 0.581 comes from the extra steps it allows (sound stop: 131 steps, 0.388)
cell gpate mnist-eps1 paper-official-stop 0 chunk=1000 stop_on=data_dependent
cell gpate fashion-mnist-eps1 paper 0 chunk=1000
cell gpate mnist-eps10 paper 0 chunk=1000
cell gpate fashion-mnist-eps10 paper 0 chunk=1000
# a sound stop on the tightest data-independent ledger (PLD): the official data-dependent stop
# took 236 steps on MNIST (PLD 1.02 there), the default paper-ledger stop 131 (PLD 0.74)
cell gpate mnist-eps1 paper-pld-stop 0 chunk=1000 conversion=pld
cell gpate fashion-mnist-eps1 paper-pld-stop 0 chunk=1000 conversion=pld
# eps = 10: the sound ledgers allow 50 (paper) to 65 (PLD) steps of 30 queries; the official
# rule runs until its data-dependent eps reaches 10 (at most 1000 steps): the stopping rule's
# share of the gap there
cell gpate mnist-eps10 paper-official-stop 0 chunk=1000 stop_on=data_dependent
cell gpate fashion-mnist-eps10 paper-official-stop 0 chunk=1000 stop_on=data_dependent
# tab:lowdp's G-PATE cells: a second training seed of the eps = 1 cells, with snapshots at
# eps = 0.2 .. 0.8 (the committed `paper` runs predate them)
cell gpate mnist-eps1 paper-seed1 1 chunk=1000 +snap
cell gpate fashion-mnist-eps1 paper-seed1 1 chunk=1000 +snap
# 3. Issue 12: more seeds of the four main cells (the committed `paper` folders are seed 0).
for seed in 1 2; do
  for cfg in mnist-eps1 fashion-mnist-eps1 mnist-eps10 fashion-mnist-eps10; do
    snap=(); [[ $cfg == *eps1 ]] && snap=(+snap)  # T2's budgets from the eps = 1 runs
    cell datalens "$cfg" "paper-seed$seed" "$seed" chunk=1000 "${snap[@]}"
  done
done
# issue 12: tab:compression (the CPU queue runs these too; whichever finishes first commits)
for cfg in mnist-eps1 fashion-mnist-eps1; do
  for agg in fetchsgd-coded d2pfed-coded d2pfed-paper fetchsgd-sound; do
    cell datalens "$cfg" "paper-$agg" 0 chunk=1000 "aggregator=$agg"
  done
done
# issue 12, item 2: the official teacher slots (a chunk must not exceed the 50 slots)
cell datalens mnist-eps1 paper-official-slots 0 chunk=50 init_slots=50 adam_slots=50
cell datalens mnist-eps1 paper-init-slots 0 chunk=1000 init_slots=50
# issue 10: the label-free teacher split (standard replace-one DP; data.partition)
cell datalens mnist-eps1 paper-shuffled 0 chunk=1000 partition=shuffled
# issue 12, item 4: the paper text's eps = 10 settings (k = 350, sigma = 900)
cell datalens mnist-eps10 paper-text-k350-s900 0 chunk=1000 k=350 sigma=900
cell datalens fashion-mnist-eps10 paper-text-k350-s900 0 chunk=1000 k=350 sigma=900
# issue 12: tab:hyperparam (T4) and tab:components (T7) at paper scale; beta = 0 is also T7's
# "no thresholding" (the default beta, k and teachers are the main cells)
for cfg in mnist-eps1 fashion-mnist-eps1; do
  for kv in k=100 k=300 teachers=2000 teachers=3000 beta=0.0 beta=0.1 beta=0.3 beta=0.5 \
      beta=0.7 beta=0.9 k=784 stochastic=false; do
    [[ $cfg == mnist-eps1 && $kv == beta=0.7 ]] && continue  # MNIST's default
    [[ $cfg == fashion-mnist-eps1 && $kv == beta=0.9 ]] && continue  # Fashion's default
    cell datalens "$cfg" "paper-${kv/=/}" 0 chunk=1000 "$kv"
  done
done
echo "[gpu-queue] queue walked after $(now) s; waiting for the background jobs"
wait
echo "[gpu-queue] stopped after $(now) s; $(cat "$OUT"/records-*.tar 2>/dev/null | tar -tif - 2>/dev/null | grep -c json) records in $(ls "$OUT" | grep -c '^records-') tar(s)"
