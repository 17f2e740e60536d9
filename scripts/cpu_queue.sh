#!/usr/bin/env bash
# The queue of paper-scale jobs for the project's 2-core CPU, run in order. Each job trains a
# paper-setting run (resumable: checkpoints every 10 steps), evaluates its samples for
# EPOCHS classifier epochs (resumable: checkpoints every 10 epochs) and copies run.json and
# eval-<EPOCHS>ep.json to data/results/datalens/<config>/<folder>/ when both are complete.
# Finished jobs are skipped, so rerunning the script after a kill continues where it stopped.
#
#   bash scripts/cpu_queue_pinned.sh     # all jobs, from a clean worktree pinned to HEAD
#   bash scripts/cpu_queue.sh            # all jobs, from this checkout
#   bash scripts/cpu_queue.sh 2          # only job 2 (1-based)
#   bash scripts/cpu_queue.sh 42 32 43   # these jobs in this order (a failed one retried once)
#
# While this checkout is being edited, start it with scripts/cpu_queue_pinned.sh: records
# written from an edited checkout carry "<sha>-dirty" and may have imported half-edited code.
#
# "eval CONFIG/FOLDER NAME EPOCHS ARGS" evaluates a finished DataLens run again with other
# evaluation settings (issue 12, item 3) and copies NAME beside its committed records;
# "eval-published CONFIG/FOLDER EPOCHS" evaluates its committed 10k subset (issue 14).
# DP-SGD jobs (issue 13) read "dpsgd METHOD K EPS SEEDS": records (one per seed, then the
# summary) go to data/results/dpsgd/mnist/<cell>/paper/; "dpsgd-search METHOD K EPS SEEDS"
# first searches on a validation split (records in <cell>/search/); "dpsgd-family METHOD K
# EPS,EPS,... SEEDS" does that for several budgets in one job, training each run once for all
# the budgets it passes through (train.run_search_family: ε = 0.3 and 0.5 read off the runs to
# 0.7; ~0.6 of the three cells' cost).
# Jobs: method, config, results folder, evaluation epochs, then `datalens train --set`
# overrides (the token seed=N sets the training seed); records go to
# data/results/<method>/<config>/<folder>/. The token `+snap` keeps generator snapshots at
# eps = 0.2, 0.4, 0.6, 0.8 (tab:lowdp; methods.harness) and evaluates each. (Edit this file
# by writing a new one and renaming it over: a running bash keeps reading the file it started
# from.)
# DP-SGD jobs (and DC-GAN's cells, and DP-GAN's small-batch cells where
# CPU_QUEUE_DPGAN_LANES=1: lane_job) next to each other in
# JOBS run in CPU_QUEUE_DPSGD_LANES lanes (default 2), one torch thread each, each lane taking the next job
# no lane has taken: on this 2-core machine two 1-thread DP-SGD processes did 1.22x (TopAgg,
# B = 512) to 1.46x (GM-DP, B = 128) the steps per second of one 2-thread process
# (benchmarks/results/cpu-lanes-cpu-2core.json; a 2-thread process beside any other busy one
# slows down far more). Every other job runs alone, with every core, after the lanes have
# finished; a job's own evaluations may run in lanes too (evaluate_lanes). CPU_QUEUE_JOBS
# (one job per line) replaces JOBS (the tests' dry run).
# G-PATE at the paper setting measured 240-295 s per step here (131 steps: ~9 h), against
# 33-46 s for a DataLens step with the same teachers: its shuffled split gives every teacher
# its own label sequence, so the exact per-teacher fakes (BatchNorm over the teacher's own
# batch, as in the official code) are 4000 generator passes per step (~7 TFLOP), where
# DataLens's class-ordered split needs ~10. The GPU queue runs those cells at the paper
# profile; here G-PATE's eps = 1 cells run its cpu profile (one class table of fakes per step,
# the change stated in configs/gpate/*.json).
# bfloat16 Adam moments are what lets 4000 MNIST teachers fit 24 GiB (datalens_lib.ensemble).
set -euo pipefail
SELF="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$0")/.."
export DATALENS_DATA_DIR=${DATALENS_DATA_DIR:-$(cd .. && pwd)/shared/datasets}
DL=${DL:-.venv/bin/datalens}
LANES=${CPU_QUEUE_DPSGD_LANES:-2}
EVAL_LANES=${CPU_QUEUE_EVAL_LANES:-2}  # (evaluate_lanes)
((EVAL_LANES >= 1)) || EVAL_LANES=1
LOCKS=runs/queue/locks  # flock files: the lanes' job counter, one per searched DP-SGD cell
# progress bars (tqdm reads TQDM_* settings from the environment): every job shows its steps
# (the DP-SGD jobs too: one bar per seed and search point, named by its budget and seed),
# redrawn about every 30 s (the monitor thread's maxinterval too) so that a log of hours of
# training stays small; in lanes each redraw becomes a line of its own (bars)
export TQDM_MININTERVAL=${TQDM_MININTERVAL:-30}
export TQDM_MAXINTERVAL=${TQDM_MAXINTERVAL:-$TQDM_MININTERVAL}
bars() {  # PREFIX: a job's output with each progress-bar redraw ('\r') on a line of its own,
  # prefixed, line by line as it comes (a lane's bar would otherwise show only when it closes)
  stdbuf -oL tr '\r' '\n' | sed -u "/^$/d; s/^/$1 /"
}

# commit_copy, copy_new: each file under a temporary name, then renamed
# shellcheck source=queue_copy.sh
source "$(dirname "$SELF")/queue_copy.sh"
JOBS=(
  # issue 12, item 1 and tab:lowdp: a second training seed of the CPU setting, with generator
  # snapshots at eps = 0.2 ... 0.8 (T2's budgets from the eps = 1 run); first since 2026-11-28,
  # also an 86-step paper-setting run of issue 9's fast path on the current host
  "datalens mnist-eps1 paper-cpu-seed1 30 moment_dtype=bfloat16 chunk=12 seed=1 +snap"
  # issue 12, item 3: evaluation variants of a committed setting's 100k samples, while they are
  # on this machine (runs/ does not survive a change of machine: paper-cpu-fast's are gone)
  # (G-PATE's MNIST evaluation lr)
  "eval mnist-eps1/paper-cpu-seed1 eval-30ep-lr0.001.json 30 --lr 1e-3"
  # issue 10: DP-GAN's small-batch cells (no DP-GAN cell was committed before 2026-11-28), two
  # at a time in one-thread lanes (lane_job): 18,750 discriminator steps each, ~2.5 h a pair
  "dpgan mnist-eps1 cpu 30" "dpgan fashion-mnist-eps1 cpu 30"
  # issue 12, tab:compression (T5): the cells that spend eps = 1 in 2-16 generator steps
  # (~20 min each with their evaluation; 2026-11-28: moved up from after the DP-SGD jobs, so
  # that T5 needs only the two FetchSGD-as-coded runs)
  "datalens mnist-eps1 paper-cpu-fetchsgd-sound 30 moment_dtype=bfloat16 chunk=12 aggregator=fetchsgd-sound"
  "datalens fashion-mnist-eps1 paper-cpu-d2pfed-paper 30 moment_dtype=bfloat16 chunk=12 aggregator=d2pfed-paper"
  "datalens fashion-mnist-eps1 paper-cpu-fetchsgd-sound 30 moment_dtype=bfloat16 chunk=12 aggregator=fetchsgd-sound"
  "datalens fashion-mnist-eps1 paper-cpu-d2pfed-coded 30 moment_dtype=bfloat16 chunk=12 aggregator=d2pfed-coded"
  "dpgan mnist-eps10 cpu 30" "dpgan fashion-mnist-eps10 cpu 30"
  # issue 12, item 1: the evaluation's own spread (book.eval_seed_spread), three more
  # classifier seeds on the same 100k samples while they are on this machine (15-45 min each:
  # the committed 30-epoch CPU evaluations took 753-3769 s, depending on what ran beside them)
  "eval mnist-eps1/paper-cpu-seed1 eval-30ep-seed1.json 30 --seed 1"
  "eval mnist-eps1/paper-cpu-seed1 eval-30ep-seed2.json 30 --seed 2"
  "eval mnist-eps1/paper-cpu-seed1 eval-30ep-seed3.json 30 --seed 3"
  # issue 10's other missing cells (2026-11-28: ahead of issue 12's, which has far more of
  # them): DC-GAN with carpedm20's discriminator widths (df_dim 64, dfc_dim 1024; the committed
  # MNIST run, now cpu-datalens-d, had DataLens's 32 and 256), ~1.2 h each; G-PATE at eps = 10
  # (cpu profile: class-table fakes, 50 steps, 2000 teachers); DP-GAN's large-batch setting
  # (DPImageBench's; its cpu profile: 15 of 150 epochs, 220 discriminator steps; alone: with
  # physical batches of 1024 a step peaked at 5.4 GB and took 36-41 s at one thread beside
  # the two DP-GAN lanes, 2026-11-29, so ~1-1.5 h per cell alone with both threads)
  "dcgan mnist-epsinf cpu 30"
  "dcgan fashion-mnist-epsinf cpu 30"
  "gpate mnist-eps10 cpu 30" "gpate fashion-mnist-eps10 cpu 30"
  "dpgan mnist-eps1-large cpu 30" "dpgan fashion-mnist-eps1-large cpu 30"
  # 2026-12-01: the last sessions each started on a new machine without runs/, so a job that
  # does not finish within one session (~2.5 h of CPU, CI included) is lost. Each job from
  # here runs alone with both threads (~1.5-2 h with its evaluation), DP-GAN's small-batch
  # cells too (lane_job: a pair in lanes takes ~2.5-3.5 h and would be lost whole).
  # issue 10: DP-GAN's large-batch setting (DPImageBench's, the one whose discriminator learns)
  # at eps = 10
  "dpgan mnist-eps10-large cpu 30"
  "dpgan fashion-mnist-eps10-large cpu 30"
  # issue 10: G-PATE eps = 1 at its cpu profile with snapshots, T2's G-PATE budgets
  # (configs/gpate/*.json say what the cpu profiles change; 2026-11-29: moved up from after the
  # DP-SGD jobs, so that issue 10's cells come before issue 12's)
  "gpate mnist-eps1 cpu 30 +snap"
  # issue 12, tab:lowdp (T2): the Fashion-MNIST eps = 0.4 ... 0.8 snapshots of the committed
  # paper-cpu-fast run, lost with a machine's runs/ on 2026-11-27 before their evaluation:
  # trained again up to its last snapshot (55 of its 86 steps) and checked step by step
  # against its run.json (2026-12-02; its committed eps = 0.2 evaluation is kept)
  "datalens fashion-mnist-eps1 paper-cpu-fast 30 moment_dtype=bfloat16 chunk=12 +snap"
  "gpate fashion-mnist-eps1 cpu 30 +snap"
  # 2026-12-02: issue 10's cells are all committed once the job above is; issue 12's
  # DataLens cells (item 2's teacher slots, T7 and T4 on both datasets, T5's FetchSGD as
  # coded, item 4's eps = 10 text settings, item 1's seeds; ~1-1.5 h each alone) come next,
  # ahead of issue 10's optional extras (DP-GAN's large-batch budgets below 1, clip_fake,
  # DC-GAN with one generator step)
  # issue 12, item 2: teachers as the official code trains them (80 batches x 50 slots: 50
  # initialisations; Adam state shared by the 80 teachers of a slot), against paper-cpu-fast
  "datalens mnist-eps1 paper-cpu-official-slots 30 moment_dtype=bfloat16 chunk=10 init_slots=50 adam_slots=50"
  "datalens mnist-eps1 paper-cpu-init-slots 30 moment_dtype=bfloat16 chunk=10 init_slots=50"
  "datalens mnist-eps1 paper-cpu-fetchsgd-coded 30 moment_dtype=bfloat16 chunk=12 aggregator=fetchsgd-coded"
  "datalens fashion-mnist-eps1 paper-cpu-fetchsgd-coded 30 moment_dtype=bfloat16 chunk=12 aggregator=fetchsgd-coded"
  # issue 12, item 4: the paper text's eps = 10 settings (k = 350, sigma = 900; 118 steps)
  "datalens mnist-eps10 paper-cpu-text-k350-s900 30 moment_dtype=bfloat16 chunk=12 k=350 sigma=900"
  # issue 12: tab:hyperparam (T4) and tab:components (T7) on MNIST; beta = 0 is also T7's
  # "no thresholding"; k = 784 is "no top-k" (4x the sensitivity: ~21 steps)
  "datalens mnist-eps1 paper-cpu-k784 30 moment_dtype=bfloat16 chunk=12 k=784"
  "datalens mnist-eps1 paper-cpu-stochasticfalse 30 moment_dtype=bfloat16 chunk=12 stochastic=false"
  "datalens mnist-eps1 paper-cpu-beta0.0 30 moment_dtype=bfloat16 chunk=12 beta=0.0"
  "datalens mnist-eps1 paper-cpu-k100 30 moment_dtype=bfloat16 chunk=12 k=100"
  "datalens mnist-eps1 paper-cpu-k300 30 moment_dtype=bfloat16 chunk=12 k=300"
  "datalens mnist-eps1 paper-cpu-teachers2000 30 moment_dtype=bfloat16 chunk=12 teachers=2000"
  "datalens mnist-eps1 paper-cpu-teachers3000 30 moment_dtype=bfloat16 chunk=12 teachers=3000"
  "datalens mnist-eps1 paper-cpu-beta0.1 30 moment_dtype=bfloat16 chunk=12 beta=0.1"
  "datalens mnist-eps1 paper-cpu-beta0.3 30 moment_dtype=bfloat16 chunk=12 beta=0.3"
  "datalens mnist-eps1 paper-cpu-beta0.5 30 moment_dtype=bfloat16 chunk=12 beta=0.5"
  "datalens mnist-eps1 paper-cpu-beta0.9 30 moment_dtype=bfloat16 chunk=12 beta=0.9"
  # issue 12: tab:components (T7) and tab:hyperparam (T4) on Fashion-MNIST (2026-12-02: not
  # queued before; its default beta is 0.9, so beta = 0.7 is a grid cell here)
  "datalens fashion-mnist-eps1 paper-cpu-k784 30 moment_dtype=bfloat16 chunk=12 k=784"
  "datalens fashion-mnist-eps1 paper-cpu-stochasticfalse 30 moment_dtype=bfloat16 chunk=12 stochastic=false"
  "datalens fashion-mnist-eps1 paper-cpu-beta0.0 30 moment_dtype=bfloat16 chunk=12 beta=0.0"
  "datalens fashion-mnist-eps1 paper-cpu-k100 30 moment_dtype=bfloat16 chunk=12 k=100"
  "datalens fashion-mnist-eps1 paper-cpu-k300 30 moment_dtype=bfloat16 chunk=12 k=300"
  "datalens fashion-mnist-eps1 paper-cpu-teachers2000 30 moment_dtype=bfloat16 chunk=12 teachers=2000"
  "datalens fashion-mnist-eps1 paper-cpu-teachers3000 30 moment_dtype=bfloat16 chunk=12 teachers=3000"
  "datalens fashion-mnist-eps1 paper-cpu-beta0.1 30 moment_dtype=bfloat16 chunk=12 beta=0.1"
  "datalens fashion-mnist-eps1 paper-cpu-beta0.3 30 moment_dtype=bfloat16 chunk=12 beta=0.3"
  "datalens fashion-mnist-eps1 paper-cpu-beta0.5 30 moment_dtype=bfloat16 chunk=12 beta=0.5"
  "datalens fashion-mnist-eps1 paper-cpu-beta0.7 30 moment_dtype=bfloat16 chunk=12 beta=0.7"
  # issue 10: the label-free teacher split (standard replace-one DP; data.partition): every
  # teacher its own label sequence, so G-PATE's cost per step (~4-5x a DataLens step here)
  "datalens mnist-eps1 paper-cpu-shuffled 30 moment_dtype=bfloat16 chunk=12 partition=shuffled"
  "datalens fashion-mnist-eps1 paper-cpu-seed1 30 moment_dtype=bfloat16 chunk=12 seed=1 +snap"
  # (2026-12-02: the official Fashion-MNIST evaluation's "first 10k of the 100k rows" is
  # measured on paper-cpu-fast's published 10k subset, whose rows are distributed as those
  # of the first 10k: book.GAP_EVAL_VARIANTS; its job here is dropped)
  # issue 12, item 1: three training seeds of each of the four main settings in the CPU
  # family (seed_spread: paper-cpu-fast is seed 0), ~1.3 h per eps = 1 cell, ~1.5 h per
  # eps = 10 cell (109 / 110 steps)
  "datalens mnist-eps1 paper-cpu-seed2 30 moment_dtype=bfloat16 chunk=12 seed=2"
  "datalens fashion-mnist-eps1 paper-cpu-seed2 30 moment_dtype=bfloat16 chunk=12 seed=2"
  "datalens mnist-eps10 paper-cpu-fast 30 moment_dtype=bfloat16 chunk=12"
  "datalens fashion-mnist-eps10 paper-cpu-fast 30 moment_dtype=bfloat16 chunk=12"
  "datalens mnist-eps10 paper-cpu-seed1 30 moment_dtype=bfloat16 chunk=12 seed=1"
  "datalens fashion-mnist-eps10 paper-cpu-seed1 30 moment_dtype=bfloat16 chunk=12 seed=1"
  "datalens mnist-eps10 paper-cpu-seed2 30 moment_dtype=bfloat16 chunk=12 seed=2"
  "datalens fashion-mnist-eps10 paper-cpu-seed2 30 moment_dtype=bfloat16 chunk=12 seed=2"
  # issue 10, tab:lowdp (T2): DP-GAN calibrates its noise to the budget, so each budget below
  # eps = 1 is a run of its own. 2026-12-02: in the large-batch setting, not the small-batch
  # one: the small-batch discriminator calls every image fake (probe-discriminator.json), and
  # with each real example clipped together with one fake it stays at chance for 1,500 steps
  # (logits within 0.02 of 0, d_loss 1.40 ~ log 4: probe-discriminator-1500.json), while the
  # large-batch cells' discriminators learn (hinge d_loss ~0.9-1.2, chance 2.0). Each alone,
  # evaluation included: ~1.6 h on MNIST, ~2.4 h on Fashion-MNIST (the eps = 1 cells); T2
  # shows them as "DP-GAN (large batch)" (book.lowdp_methods_table)
  "dpgan mnist-eps1-large cpu-eps0.2 30 epsilon=0.2"
  "dpgan fashion-mnist-eps1-large cpu-eps0.2 30 epsilon=0.2"
  "dpgan mnist-eps1-large cpu-eps0.4 30 epsilon=0.4"
  "dpgan fashion-mnist-eps1-large cpu-eps0.4 30 epsilon=0.4"
  "dpgan mnist-eps1-large cpu-eps0.6 30 epsilon=0.6"
  "dpgan fashion-mnist-eps1-large cpu-eps0.6 30 epsilon=0.6"
  "dpgan mnist-eps1-large cpu-eps0.8 30 epsilon=0.8"
  "dpgan fashion-mnist-eps1-large cpu-eps0.8 30 epsilon=0.8"
  # issue 10: the small-batch DP-GAN cells with each real example clipped together with one
  # fake (cpu-clipfake; the committed small-batch cells' discriminator calls every image fake:
  # clipping caps the real half's pull, not the fake half's, methods/dpgan.py, 2026-11-29).
  # 2026-12-02: demoted behind the large-batch cells: the probe's 1,500 steps with clip_fake
  # keep D at chance (probe-discriminator-1500.json); the full runs say whether it ever learns
  # (0.3 s per step alone, 18,750 steps)
  "dpgan mnist-eps10 cpu-clipfake 30 clip_fake=true"
  "dpgan fashion-mnist-eps10 cpu-clipfake 30 clip_fake=true"
  "dpgan mnist-eps1 cpu-clipfake 30 clip_fake=true"
  "dpgan fashion-mnist-eps1 cpu-clipfake 30 clip_fake=true"
  # issue 10: the non-private reference with one generator step per discriminator step
  # (carpedm20 takes two; with two, D's logits end equal on real and fake and the Fashion-MNIST
  # generator collapses within each class: methods/dcgan.py), ~2.2 h each in a lane (2.75 h
  # alone: longer than a session here, so they finish only on a machine kept between
  # sessions, or on a lent GPU)
  "dcgan mnist-epsinf cpu-g1 30 g_steps=1"
  "dcgan fashion-mnist-epsinf cpu-g1 30 g_steps=1"
  "datalens mnist-eps1 paper-cpu-fast 30 moment_dtype=bfloat16 chunk=12"
  "datalens mnist-eps1 paper-cpu-bf16 30 moment_dtype=bfloat16 chunk=12 compute_dtype=bfloat16"
  "datalens mnist-eps1 paper-cpu-d2pfed-coded 30 moment_dtype=bfloat16 chunk=12 aggregator=d2pfed-coded"
  # issue 14: a Fashion-MNIST eps = 1 run whose 10k subset is published (the committed GPU
  # cell predates publishing); issue 12: its eps = 0.2 ... 0.8 snapshots (tab:lowdp)
  # (its eps = 0.4 ... 0.8 snapshots were lost with this machine's runs/ on 2026-11-27, before
  # their evaluations; they are recovered by the +snap job of the same folder above)
  "datalens fashion-mnist-eps1 paper-cpu-fast 30 moment_dtype=bfloat16 chunk=12"
  # issue 14: its published subset re-evaluated at the full run's number of SGD steps (10k
  # images x 300 epochs = 100k x 30), as done for MNIST
  "eval-published fashion-mnist-eps1/paper-cpu-fast 300"
  # the official script as it runs: 10k rows followed by 90k zero rows (zero targets), for its
  # 600 epochs (the zero rows dilute every batch mean tenfold: 30 epochs are far from its
  # peak); the committed 10k subset stands in for its first pickle (issue 12, item 3; ~1 h)
  "eval-published fashion-mnist-eps1/paper-cpu-fast 600 samples-10k-eval-600ep-padto100000.json --pad-to 100000"
  # issue 12: tab:compression (T5). D2P-Fed and the sound FetchSGD spend eps = 1 in 2-16
  # generator steps (cheap); FetchSGD as coded takes TopAgg's 86 steps (~1.5 h)
  "datalens mnist-eps1 paper-cpu-d2pfed-paper 30 moment_dtype=bfloat16 chunk=12 aggregator=d2pfed-paper"
  # issue 13: tab:dpsgd-mnist at the budgets tab:dpsgd-search lists (5 seeds, ~5 min each here, ~30 s on an H200)
  "dpsgd gmdp 1 1.0 5" "dpsgd normtopk 0.7 1.0 5" "dpsgd normtopk 0.6 1.0 5"
  "dpsgd normtopk 0.8 1.0 5"
  # the budgets tab:dpsgd-search gives (2026-11-27: moved ahead of the DataLens jobs; a
  # 5-seed cell is 10-25 min here, a DataLens cell hours, and the GPU queue runs those first)
  "dpsgd gmdp 1 0.2 5" "dpsgd normtopk 0.7 0.2 5"
  "dpsgd normtopk 0.6 0.2 5" "dpsgd normtopk 0.8 0.2 5"
  # tab:control as the paper runs it (k = 0.8, eps = 1; its eps = 0.1 needs a searched
  # setting and comes later)
  "dpsgd-control 0.8 1 5"
  # ours: its compressing scenarios with the selection within each layer (the paper's
  # TopK-SGD, 98.03, against ours flat and per layer says which selection it used)
  "dpsgd-control 0.8 1 5 layer"
  "dpsgd gmdp 1 0.05 5"
  "dpsgd normtopk 0.7 0.05 5" "dpsgd normtopk 0.6 0.05 5" "dpsgd normtopk 0.8 0.05 5"
  # ours: eps = 0.05 with top-k within each layer (flat fell 17-29 points under the paper there,
  # while per layer cut the flat selection's cost at eps = 1 from 3.07 to 1.27 points)
  "dpsgd normtopk 0.6 0.05 5 mnist layer" "dpsgd normtopk 0.7 0.05 5 mnist layer"
  "dpsgd normtopk 0.8 0.05 5 mnist layer"
  # tab:dpsgd-ablation: dimension-based top-k at eps 0.05 and 0.2 (eps 0.1 is searched, below)
  "dpsgd dimtopk 0.2 0.05 5" "dpsgd dimtopk 0.4 0.05 5" "dpsgd dimtopk 0.6 0.05 5"
  "dpsgd dimtopk 0.2 0.2 5" "dpsgd dimtopk 0.4 0.2 5" "dpsgd dimtopk 0.6 0.2 5"
  # 2026-11-27 (no GPU lent): every cell issue 13 still needs first, ahead of issue 10 and 12's
  # CPU jobs, so that the issue can close on this CPU within a few sessions
  # eps = inf: clipping and compression, no noise, the eps = 1 settings and steps
  "dpsgd gmdp 1 inf 5" "dpsgd normtopk 0.6 inf 5" "dpsgd normtopk 0.7 inf 5"
  "dpsgd normtopk 0.8 inf 5"
  # issue 13: the budgets tab:dpsgd-search lacks, each after a clean search (held-out 10k;
  # 4-16 grid points, one seed each)
  # (cheapest budgets first)
  "dpsgd-search gmdp 1 0.1 5" "dpsgd-search normtopk 0.7 0.1 5"
  "dpsgd-search normtopk 0.6 0.1 5" "dpsgd-search normtopk 0.8 0.1 5"
  # tab:dpsgd-ablation at the searched eps = 0.1
  "dpsgd-search dimtopk 0.2 0.1 5" "dpsgd-search dimtopk 0.4 0.1 5"
  "dpsgd-search dimtopk 0.6 0.1 5"
  # tab:control at the paper's second budget, with TopAgg k = 0.8's searched setting (a few
  # jobs after that search, so that the lanes rarely make it wait on the search's lock)
  "dpsgd-control 0.8 0.1 5"
  # ours: its compressing scenarios with the selection within each layer (flat TopK-SGD fell
  # to 64.30 +- 11.94 against the paper's 91.96 at eps = 0.1, 2026-11-28)
  "dpsgd-control 0.8 0.1 5 layer"
  # eps 0.3, 0.5 and 0.7 share one grid (between tab:dpsgd-search's 0.2 and 1.0): one job per
  # method and k trains every point and seed once, to the largest budget (2026-11-28)
  "dpsgd-family gmdp 1 0.3,0.5,0.7 5" "dpsgd-family normtopk 0.8 0.3,0.5,0.7 5"
  "dpsgd-family normtopk 0.7 0.3,0.5,0.7 5" "dpsgd-family normtopk 0.6 0.3,0.5,0.7 5"
  # issue 13's offline extra (ours, not the paper's): Fashion-MNIST at eps = 1, MNIST settings
  "dpsgd gmdp 1 1.0 5 fashion-mnist" "dpsgd normtopk 0.6 1.0 5 fashion-mnist"
  "dpsgd normtopk 0.7 1.0 5 fashion-mnist" "dpsgd normtopk 0.8 1.0 5 fashion-mnist"
  # tab:control at the k whose eps = 1 cell fell 6 points under GM-DP on an H200 (2026-11-27)
  "dpsgd-control 0.6 1 5"
  # ours: the same cell with top-k within each layer (300 noiseless steps, one seed: flat 0.81,
  # per layer 0.91)
  "dpsgd normtopk 0.6 1.0 5 mnist layer"
  # issue 12 (2026-12-04): the Adam moments' precision, a candidate for the Fashion-MNIST gap
  # (the paper's 0.6478 is above the prediction interval of our three bfloat16 CPU seeds,
  # book.seed_spread). float32 moments fit 24 GiB at 2000 teachers (~13.4 GB of weights and
  # moments), so this is paper-teachers2000 exactly, against the bfloat16 paper-cpu-teachers2000
  # (book.GAP_RUN_VARIANTS); ~1.2 h with its evaluation. Job 129: run it ahead of the grids
  "datalens fashion-mnist-eps1 paper-cpu-teachers2000-float32 30 moment_dtype=float32 chunk=12 teachers=2000"
  # (2026-12-05) job 129 measured +2.8 points for float32, under one pair's noise threshold
  # (3.4 points); a second seed of both sides makes it a paired mean over two training seeds
  # (book.gap_analysis pairs <baseline>-seed<S> with <variant>-seed<S>; with two seeds of the
  # baseline setting its own spread is the noise). Jobs 130, 131: ~1.3 h with their evaluations
  "datalens fashion-mnist-eps1 paper-cpu-teachers2000-seed1 30 moment_dtype=bfloat16 chunk=12 teachers=2000 seed=1"
  "datalens fashion-mnist-eps1 paper-cpu-teachers2000-float32-seed1 30 moment_dtype=float32 chunk=12 teachers=2000 seed=1"
  # (2026-12-05) item 2 on Fashion-MNIST, where the gap is beyond the noise (the paper's 0.6478
  # sits 6.7 points above the mean of three seeds whose sd is 0.55 points) and an effect is
  # easier to read than on MNIST (official slots +4.75 there, within its sd of 3.7 points).
  # Job 132: ~1.6 h with its evaluation (chunk 10: a chunk must divide the 50 Adam slots)
  "datalens fashion-mnist-eps1 paper-cpu-official-slots 30 moment_dtype=bfloat16 chunk=10 init_slots=50 adam_slots=50"
  # (2026-12-05) the official README's Fashion-MNIST eps = 1 command writes to a folder named
  # ..._pt_30_... while passing --pretrain_teacher 10: the published run may have taken 30
  # teacher steps on the first generator step (model.py: pretrain_teacher steps at epoch 0,
  # d_step after). Job 133, ~1.5 h with its evaluation
  "datalens fashion-mnist-eps1 paper-cpu-pretrain30 30 moment_dtype=bfloat16 chunk=12 pretrain_teacher=30"
  # (2026-12-05) MNIST's official slots measured +4.75 points (98 % of that cell's gap) on one
  # seed, within the noise (sd 3.7 points): a second pair (against paper-cpu-seed1) makes it a
  # paired mean over two training seeds (book.gap_analysis). Job 134, ~1.2 h with its evaluation
  "datalens mnist-eps1 paper-cpu-official-slots-seed1 30 moment_dtype=bfloat16 chunk=10 init_slots=50 adam_slots=50 seed=1"
  # (2026-12-05) job 48 put Fashion-MNIST's beta = 0.1 (0.5525) 4.3 points under beta = 0
  # (0.5956) and 2.8 under the beta = 0.9 mean, against a seed sd of 0.55 points measured at
  # beta = 0.9 only: book.beta_gap_trend finds the gap growing with beta, but its cells
  # scatter about the line more than that noise allows. A second seed at beta = 0.1 and at
  # beta = 0 measures the noise there (pooled into the test). Jobs 135, 136: ~1.3 h each
  "datalens fashion-mnist-eps1 paper-cpu-beta0.1-seed1 30 moment_dtype=bfloat16 chunk=12 beta=0.1 seed=1"
  "datalens fashion-mnist-eps1 paper-cpu-beta0.0-seed1 30 moment_dtype=bfloat16 chunk=12 beta=0.0 seed=1"
)
if [[ -n ${CPU_QUEUE_JOBS:-} ]]; then mapfile -t JOBS <<<"$CPU_QUEUE_JOBS"; fi

# A DP-SGD job's cell (its records' folder, dpsgd.train.cell_name) from CELLS, the table the
# queue writes at its start with one Python import for all jobs (an import per job costs 3-5 s
# of a lane, mostly on jobs already committed); a job run alone by number imports it itself.
CELLS=${CPU_QUEUE_CELLS:-}
cell_of() {  # METHOD K EPS SCOPE
  local name=""
  [[ -n $CELLS && -f $CELLS ]] && name=$(awk -F'\t' -v key="$1 $2 $3 $4" \
    '$1 == key { print $2; exit }' "$CELLS")
  if [[ -z $name ]]; then
    name=$(.venv/bin/python -c "from datalens_lib.dpsgd.train import cell_name; \
print(cell_name('$1', float('$2'), float('$3'), '$4'))") || return 1
  fi
  [[ -n $name ]] || return 1  # (set -e does not reach into the callers' $(...))
  echo "$name"
}

write_cells() {  # FILE: "METHOD K EPS SCOPE<tab>cell" for every DP-SGD job of JOBS
  local j kind a b c d e f keys=()
  for j in "${JOBS[@]}"; do
    read -r kind a b c d e f <<<"$j"
    case $kind in
      dpsgd) keys+=("$a $b $c ${f:-flat}") ;;  # dpsgd METHOD K EPS SEEDS [DATASET [SCOPE]]
      dpsgd-search) keys+=("$a $b $c flat") ;;  # dpsgd-search METHOD K EPS SEEDS
      dpsgd-family) for e in ${c//,/ }; do keys+=("$a $b $e flat"); done ;;  # METHOD K EPS,..
      dpsgd-control) keys+=("normtopk $a $b ${d:-flat}") ;;  # its TopAgg cell: K EPS SEEDS [SCOPE]
    esac
  done
  mkdir -p "$(dirname "$1")"
  printf '%s\n' "${keys[@]}" | .venv/bin/python -c "
import sys
from datalens_lib.dpsgd.train import cell_name
for line in sys.stdin:
    if line.strip():
        m, k, eps, scope = line.split()
        print(f'{line.strip()}\t{cell_name(m, float(k), float(eps), scope)}')" > "$1.tmp" \
    && mv "$1.tmp" "$1"
}

run_dpsgd() {  # dpsgd METHOD K EPS SEEDS [DATASET [SCOPE]]: one tab:dpsgd cell (default MNIST,
  # flat; SCOPE layer: top-k within each parameter tensor, ours, a cell of its own name)
  read -r _ m k eps seeds ds scope <<<"$1"
  ds=${ds:-mnist} scope=${scope:-flat}
  local cell out dest
  cell=$(cell_of "$m" "$k" "$eps" "$scope")
  out=runs/queue/dpsgd/$ds/$cell/paper dest=data/results/dpsgd/$ds/$cell/paper
  if [[ -f $dest/summary.json ]] && (( $(ls "$dest"/seed*.json | wc -l) >= seeds )); then
    echo "[queue] dpsgd $ds $cell: already committed, skipped"; return
  fi
  echo "[queue] dpsgd $ds $cell: $seeds seeds (finished seeds are skipped)"
  "$DL" dpsgd --dataset "$ds" --method "$m" --k "$k" --epsilon "$eps" --seeds "$seeds" \
    --profile paper --out "$out" --set "scope=$scope"
  commit_copy "$dest" "$out"/seed*.json "$out/summary.json"  # the summary last: the marker
  echo "[queue] dpsgd $ds $cell: records copied to $dest"
}

reuse_search() {  # CELL DIR: a committed search's points go into DIR, so that `dpsgd --search
  # DIR` reuses them (the same choice as the committed search.json) instead of searching again
  local rel=data/results/dpsgd/mnist/$1/search
  if [[ -f $rel/search.json ]]; then
    copy_new "$2" "$rel"/point*.json 2>/dev/null || true
  fi
}

run_dpsgd_search() {  # dpsgd-search METHOD K EPS SEEDS: a budget tab:dpsgd-search lacks
  read -r _ m k eps seeds <<<"$1"
  local cell base dest
  cell=$(cell_of "$m" "$k" "$eps" flat)
  base=runs/queue/dpsgd/mnist/$cell dest=data/results/dpsgd/mnist/$cell
  if [[ -f $dest/paper/summary.json && -f $dest/search/search.json ]] \
      && (( $(ls "$dest"/paper/seed*.json | wc -l) >= seeds )); then
    echo "[queue] dpsgd $cell (searched): already committed, skipped"; return
  fi
  # the control job at this budget reuses this search: it waits on the same lock
  mkdir -p "$LOCKS" && exec {lock}>"$LOCKS/search-$cell.lock" && flock "$lock"
  reuse_search "$cell" "$base/search"
  echo "[queue] dpsgd $cell: validation-split search, then $seeds seeds"
  "$DL" dpsgd --dataset mnist --method "$m" --k "$k" --epsilon "$eps" --seeds "$seeds" \
    --profile paper --search "$base/search" --out "$base/paper"
  # search.json and the seeds' summary.json are the markers: each after the files it lists
  commit_copy "$dest/search" "$base"/search/point*.json "$base/search/search.json"
  commit_copy "$dest/paper" "$base"/paper/seed*.json "$base/paper/summary.json"
  echo "[queue] dpsgd $cell: search and seed records copied to $dest"
}

run_dpsgd_family() {  # dpsgd-family METHOD K EPS,EPS,... SEEDS: budgets tab:dpsgd-search
  # lacks that share one grid, searched and trained in one job (train.run_search_family)
  read -r _ m k budgets seeds <<<"$1"
  local e cell base dest todo=0 cells=() done_cells=() lock
  # a budget tab:dpsgd-search gives takes its row (no search folder to skip on or copy)
  if ! .venv/bin/python -c "import sys; from datalens_lib.dpsgd.train import searched_budgets
sys.exit(bool({float(e) for e in '$budgets'.split(',')} & set(searched_budgets('mnist'))))"
  then
    echo "[queue] dpsgd-family $budgets: a tab:dpsgd-search budget is in it; use a dpsgd job"
    return 2
  fi
  for e in ${budgets//,/ }; do
    cell=$(cell_of "$m" "$k" "$e" flat)
    cells+=("$cell")
    dest=data/results/dpsgd/mnist/$cell
    if [[ -f $dest/paper/summary.json && -f $dest/search/search.json ]] \
        && (( $(ls "$dest"/paper/seed*.json 2>/dev/null | wc -l) >= seeds )); then
      done_cells+=("$cell")
    else todo=1; fi
  done
  if ((!todo)); then
    echo "[queue] dpsgd ${cells[*]} (searched together): already committed, skipped"; return
  fi
  # every cell's search lock (sorted: two jobs never wait on each other), as dpsgd-search
  mkdir -p "$LOCKS"
  for cell in $(printf '%s\n' "${cells[@]}" | sort); do
    exec {lock}>"$LOCKS/search-$cell.lock" && flock "$lock"
  done
  # committed points and seeds go where the command looks for them: reused, not retrained
  # (a cell the GPU queue committed keeps its records; only the missing cells are copied)
  for cell in "${cells[@]}"; do
    base=runs/queue/dpsgd/mnist/$cell dest=data/results/dpsgd/mnist/$cell
    reuse_search "$cell" "$base/search"
    if ls "$dest"/paper/seed*.json >/dev/null 2>&1; then
      copy_new "$base/paper" "$dest"/paper/seed*.json
    fi
  done
  echo "[queue] dpsgd ${cells[*]}: one validation-split search and $seeds seeds for all"
  "$DL" dpsgd --dataset mnist --method "$m" --k "$k" --epsilon "$budgets" --seeds "$seeds" \
    --profile paper --search "runs/queue/dpsgd/mnist/{cell}/search" \
    --out "runs/queue/dpsgd/mnist/{cell}/paper"
  for cell in "${cells[@]}"; do
    case " ${done_cells[*]} " in *" $cell "*)
      echo "[queue] dpsgd $cell: committed before, left as it is"; continue ;;
    esac
    base=runs/queue/dpsgd/mnist/$cell dest=data/results/dpsgd/mnist/$cell
    commit_copy "$dest/search" "$base"/search/point*.json "$base/search/search.json"
    commit_copy "$dest/paper" "$base"/paper/seed*.json "$base/paper/summary.json"
    echo "[queue] dpsgd $cell: search and seed records copied to $dest"
  done
}

run_control() {  # dpsgd-control K EPS SEEDS [SCOPE]: the five tab:control scenarios on MNIST
  # (SCOPE layer, ours: the three compressing ones with the selection within each layer)
  read -r _ k eps seeds scope <<<"$1"
  scope=${scope:-flat}
  local out=runs/queue/dpsgd/mnist/control-paper dest=data/results/dpsgd/mnist tag="" s
  local scen=(topagg topk-gm-dp topk-sgd gm-dp clipped-sgd) missing=0  # train.CONTROL
  [[ $scope == flat ]] || { tag="$scope-"; scen=("${scen[@]:0:3}"); }  # the compressing ones
  for s in "${scen[@]}"; do
    [[ -f $dest/control-${tag}k$k-eps$eps-$s/paper/summary.json ]] || missing=1
  done
  if ((!missing)); then  # rerunning would rewrite committed summaries (their provenance)
    echo "[queue] dpsgd control ${tag}k=$k eps=$eps: already committed, skipped"; return
  fi
  echo "[queue] dpsgd control ${tag}k=$k eps=$eps: $seeds seeds per scenario"
  # every scenario takes TopAgg's setting: at a budget tab:dpsgd-search lacks, the one its
  # clean search chose (the search job of that cell ran it first; it is reused here)
  local topagg search
  topagg=$(cell_of normtopk "$k" "$eps" "$scope")
  search=runs/queue/dpsgd/mnist/$topagg/search
  # while that cell's search job runs in the other lane, wait for it (then reuse its points)
  mkdir -p "$LOCKS" && exec {lock}>"$LOCKS/search-$topagg.lock" && flock "$lock"
  reuse_search "$topagg" "$search"
  "$DL" dpsgd --control --dataset mnist --k "$k" --epsilon "$eps" --seeds "$seeds" \
    --profile paper --out "$out" --set "scope=$scope" --search "$search"
  for d in "$out"/control-"$tag"k"$k"-eps"$eps"-*; do
    commit_copy "$dest/$(basename "$d")/paper" "$d"/seed*.json "$d/summary.json"
  done
  echo "[queue] dpsgd control k=$k eps=$eps: records copied under $dest"
}

run_eval() {  # eval CONFIG/FOLDER NAME EPOCHS ARGS...: an evaluation variant of a finished run
  read -r _ rel name epochs args <<<"$1"
  local out=runs/queue/$rel dest=data/results/datalens/$rel
  if [[ -f $dest/$name ]]; then echo "[queue] eval $rel/$name: already committed, skipped"; return; fi
  if [[ ! -f $out/samples.npz ]]; then  # runs/ is not kept when the machine is replaced
    echo "[queue] eval $rel/$name: skipped, the run's 100k samples ($out/samples.npz) are not here"
    return
  fi
  echo "[queue] eval $rel/$name ($epochs epochs $args)"
  # shellcheck disable=SC2086
  "$DL" evaluate "$out" --epochs "$epochs" --name "$name" $args
  commit_copy "$dest" "$out/$name"
  echo "[queue] eval $rel/$name: copied to $dest"
}

run_published() {  # eval-published CONFIG/FOLDER EPOCHS [NAME ARGS...]: evaluate the committed
  # 10k subset (beside the committed records; NAME and evaluate ARGS: a variant, e.g. the
  # official Fashion-MNIST script's zero-row padding)
  read -r _ rel epochs name args <<<"$1"
  local dest=data/results/datalens/$rel
  name=${name:-samples-10k-eval-${epochs}ep.json}
  if [[ -f $dest/$name ]]; then
    echo "[queue] eval-published $rel/$name: already committed, skipped"; return
  fi
  echo "[queue] eval-published $rel: the published 10k subset, $epochs epochs $args"
  # shellcheck disable=SC2086
  "$DL" evaluate "$dest" --epochs "$epochs" --name "$name" $args
}

evaluate_lanes() {  # OUT EPOCHS WHAT...: evaluate a finished run's sample files, WHAT "-"
  # for its own samples, a budget for that snapshot's. Evaluations of one run's files are
  # equally long (the same number of images and epochs), so they run in groups of EVAL_LANES
  # concurrent processes of one torch thread each, and the count's remainder first, alone
  # with every thread (the run's own samples then come first: it is first in WHAT): two
  # 1-thread evaluations trained 1.2-1.4x the epochs per second of one 2-thread evaluation on
  # this 2-core machine (benchmarks/bench_cpu_lanes.py --evaluate), and a lone 1-thread one
  # would leave a core idle. Each evaluation resumes from its own checkpoint after a kill.
  local out=$1 epochs=$2 w pids p q failed=0
  shift 2
  local lanes=$EVAL_LANES alone=$(($# % EVAL_LANES))
  while (($#)); do
    pids=()
    for ((p = 0; p < (alone > 0 ? 1 : lanes); p++)); do
      w=$1
      shift
      local what="its samples" snap=()
      [[ $w == - ]] || { what="the eps = $w snapshot"; snap=(--snapshot "$w"); }
      if ((alone > 0 || lanes == 1)); then
        echo "[queue] $out: evaluating $what ($epochs epochs, every thread; resumes from its checkpoint)"
        "$DL" evaluate "$out" --epochs "$epochs" "${snap[@]}"
      else
        echo "[queue] $out: evaluating $what ($epochs epochs, one of $lanes one-thread lanes)"
        (OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 "$DL" evaluate "$out" --epochs "$epochs" \
          "${snap[@]}" 2>&1 | bars "[eval ${w/#-/run}]") &
        pids+=($!)
      fi
    done
    ((alone > 0)) && alone=$((alone - 1))
    for q in "${pids[@]}"; do wait "$q" || failed=1; done
    ((failed == 0)) || { echo "[queue] $out: an evaluation FAILED"; return 1; }
  done
}

run_job() {
  if [[ $1 == eval-published\ * ]]; then run_published "$1"; return; fi
  if [[ $1 == eval\ * ]]; then run_eval "$1"; return; fi
  if [[ $1 == dpsgd-control* ]]; then run_control "$1"; return; fi
  if [[ $1 == dpsgd-search* ]]; then run_dpsgd_search "$1"; return; fi
  if [[ $1 == dpsgd-family* ]]; then run_dpsgd_family "$1"; return; fi
  if [[ $1 == dpsgd* ]]; then run_dpsgd "$1"; return; fi
  read -r method cfg folder epochs overrides <<<"$1"
  local out=runs/queue/$method/$cfg/$folder dest=data/results/$method/$cfg/$folder
  [[ $method == datalens ]] && out=runs/queue/$cfg/$folder  # where earlier runs trained
  local profile=paper
  [[ $folder == cpu || $folder == cpu-* ]] && profile=cpu  # cpu-<variant>: the cpu profile's
  local sets=() budgets=()
  for kv in $overrides; do
    if [[ $kv == +snap ]]; then budgets=(0.2 0.4 0.6 0.8)
    elif [[ $kv == seed=* ]]; then sets+=(--seed "${kv#seed=}")
    else sets+=(--set "$kv"); fi
  done
  local committed=1 b
  for f in run.json "eval-${epochs}ep.json" samples-10k.npz; do [[ -f $dest/$f ]] || committed=0; done
  # publish-samples writes samples-10k.npz, then records it in run.json: a kill between the
  # two leaves a run.json without it (T3 would silently leave the run out)
  grep -qs '"published_samples"' "$dest/run.json" || committed=0
  for b in "${budgets[@]}"; do
    [[ -f $dest/snapshot-eps$b-eval-${epochs}ep.json ]] || committed=0
  done
  if ((committed)); then echo "[queue] $method/$cfg/$folder: already committed, skipped"; return; fi
  ((${#budgets[@]})) && sets+=(--snapshot-budgets "${budgets[@]}")
  # a committed run whose snapshot evaluations are missing and whose folder is gone (runs/
  # does not survive a change of machine): its snapshots are recovered by training the same
  # config and seed again only up to the last one, checked step by step against the committed
  # run.json (train --until-last-snapshot --prefix-of; snapshots.json, then copied beside it)
  local recover=0
  if ((${#budgets[@]})) && [[ -f $dest/run.json && -f $dest/eval-${epochs}ep.json \
      && -f $dest/samples-10k.npz ]] && grep -qs '"published_samples"' "$dest/run.json" \
      && ! grep -qs '"status": "complete"' "$out/run.json"; then
    recover=1
    if [[ ! -f $out/snapshots.json ]]; then
      echo "[queue] $method/$cfg/$folder: committed, its snapshots lost with its folder:" \
        "training it again up to its last snapshot"
      "$DL" train --method "$method" --config "$cfg" --profile "$profile" --out "$out" \
        --resume --checkpoint-every 10 "${sets[@]}" --until-last-snapshot \
        --prefix-of "$dest/run.json"
    fi
    grep -qs '"identical": true' "$out/snapshots.json" || echo "[queue] WARNING:" \
      "$method/$cfg/$folder: the steps trained again are not shown to be the committed" \
      "run's (snapshots.json prefix_of); its snapshot evaluations say so (T2: rerun)"
  elif ! grep -qs '"status": "complete"' "$out/run.json"; then
    echo "[queue] $method/$cfg/$folder: training"
    local every=10  # generator steps; a DC-GAN step is a whole epoch (~6 min here)
    [[ $method == dcgan ]] && every=1
    [[ $method == dpgan ]] && every=500  # a DP-GAN step is one discriminator step (~0.5 s)
    # (a large-batch one takes seconds, and its cpu cells plan 220 of them)
    [[ $method == dpgan && $cfg == *-large ]] && every=10
    "$DL" train --method "$method" --config "$cfg" --profile "$profile" --out "$out" --resume \
      --checkpoint-every "$every" "${sets[@]}"
  fi
  # the run's samples ("-") and its budget snapshots not yet evaluated (evaluate_lanes)
  local evals=()
  ((recover)) || [[ -f $out/eval-${epochs}ep.json ]] || evals+=(-)
  for b in "${budgets[@]}"; do
    [[ -f $out/snapshot-eps$b-eval-${epochs}ep.json ]] && continue
    # (recovering: a snapshot evaluated before the run's folder was lost keeps its record)
    ((recover)) && [[ -f $dest/snapshot-eps$b-eval-${epochs}ep.json ]] && continue
    evals+=("$b")
  done
  # the group of evaluations that holds the run's own samples first, and its records copied
  # before the other groups run (a kill during the snapshot evaluations keeps them)
  local n=${#evals[@]} first=0
  if ((n)) && [[ ${evals[0]} == - ]]; then
    first=$((n % EVAL_LANES))
    ((first)) || first=$EVAL_LANES
    evaluate_lanes "$out" "$epochs" "${evals[@]:0:first}"
  fi
  mkdir -p "$dest"
  if [[ ! -f $dest/samples-10k.npz ]] || ! grep -qs '"published_samples"' "$dest/run.json"; then
    commit_copy "$dest" "$out/run.json" "$out/eval-${epochs}ep.json"
    "$DL" publish-samples "$out" --dest "$dest"  # issue 14: samples-10k.npz, recorded in run.json
    echo "[queue] $method/$cfg/$folder: run records and published subset copied to $dest"
  fi
  ((n <= first)) || evaluate_lanes "$out" "$epochs" "${evals[@]:first}"
  ((recover)) && copy_new "$dest" "$out/snapshots.json"  # (a committed one stays)
  for b in "${budgets[@]}"; do
    if ((recover)); then  # only what was evaluated here, never over a committed record
      [[ -f $out/snapshot-eps$b-eval-${epochs}ep.json ]] \
        && copy_new "$dest" "$out/snapshot-eps$b-eval-${epochs}ep.json"
    else commit_copy "$dest" "$out/snapshot-eps$b-eval-${epochs}ep.json"; fi
  done
  # A finished run's training checkpoint (an MNIST eps = 1 ensemble: 17.9 GB) is only needed
  # to resume training; samples.npz and the generator snapshots stay. Two of them filled the
  # disk on 2026-11-27 and a CI run failed on it.
  rm -f "$out/checkpoint.pt"
  echo "[queue] $method/$cfg/$folder: records copied to $dest"
}

lane_job() {  # JOB: whether it runs in a lane of one thread when next to another such job:
  # DP-SGD jobs and DC-GAN's cells (1.25x and 1.41x the steps per second of one 2-thread
  # training: bench_cpu_lanes.py --dcgan, 2026-11-28); DP-GAN's small-batch cells only with
  # CPU_QUEUE_DPGAN_LANES=1 (two 1-thread trainings took 1.14-1.34x the steps per second of
  # one 2-thread training here, bench_cpu_lanes.py --dpgan, but a pair takes ~2.5-3.5 h, longer
  # than a session on a machine that is not kept between sessions, 2026-12-01: by default each
  # runs alone); a large-batch cell, 64 times the examples per step, always runs alone
  [[ $1 == dpsgd* || $1 == "dcgan "* ]] || [[ ${CPU_QUEUE_DPGAN_LANES:-0} == 1 \
    && $1 == "dpgan "* && ${1#dpgan } != *-large\ * ]]
}

run_lanes() {  # FIRST LAST: jobs FIRST..LAST (1-based, all lane_job) in LANES lanes of one torch
  # thread; each lane takes the next job no lane has taken (a counter file under a lock)
  local first=$1 last=$2 l counter=$LOCKS/next-$$ f pids=()
  mkdir -p "$LOCKS"
  for f in "$LOCKS"/next-*; do  # counters of queues that were stopped mid-run
    [[ -e $f ]] || continue
    f=${f##*/next-}; f=${f%.lock}
    kill -0 "$f" 2>/dev/null || rm -f "$LOCKS/next-$f" "$LOCKS/next-$f.lock"
  done
  echo "$first" > "$counter"
  echo "[queue] jobs $first-$last (DP-SGD, DP-GAN) in $LANES lanes of 1 thread"
  for ((l = 1; l <= LANES; l++)); do
    (
      while :; do
        n=$(flock "$counter.lock" bash -c 'n=$(<"$1"); echo $((n + 1)) > "$1"; echo "$n"' _ \
          "$counter")
        ((n <= last)) || break
        OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 bash "$SELF" "$n" 2>&1 | bars "[lane $l]" \
          || echo "[queue] FAILED (exit $?): ${JOBS[$((n - 1))]}"
      done
    ) &
    pids+=($!)
  done
  for l in "${!pids[@]}"; do  # a lane that died (not a job that failed) is reported too
    wait "${pids[$l]}" || echo "[queue] lane $((l + 1)) FAILED (exit $?); its jobs may not have run"
  done
  rm -f "$counter" "$counter.lock"
}

for n in "$@"; do
  if ! [[ $n =~ ^[0-9]+$ ]] || (( n < 1 || n > ${#JOBS[@]} )); then
    echo "usage: $0 [JOB ...], each JOB in 1..${#JOBS[@]}" >&2; exit 2
  fi
done
if [[ $# -gt 1 ]]; then
  # several jobs, in the order given (the cells still missing, say), each in its own bash; a
  # job that fails is retried once, after CPU_QUEUE_RETRY_S seconds (default 120), resuming
  # from its checkpoints, then reported, and the list goes on. (2026-12-03: a test run beside
  # a training job OOM-killed it and the memory guard then refused every job of the list
  # within seconds, which a plain loop over the numbers turned into a list of failures.)
  for n in "$@"; do
    bash "$SELF" "$n" && continue
    echo "[queue] job $n failed (exit $?); retrying in ${CPU_QUEUE_RETRY_S:-120} s"
    sleep "${CPU_QUEUE_RETRY_S:-120}"
    bash "$SELF" "$n" || echo "[queue] FAILED (exit $?): ${JOBS[$((n - 1))]}"
  done
elif [[ $# -eq 1 ]]; then
  run_job "${JOBS[$(($1 - 1))]}"
else
  # each job in its own bash (set -e applies inside it): a failing job is reported and the
  # queue goes on with the next one; every job reads the cells' table written here
  for f in "$LOCKS"/cells-*.tsv; do  # tables of queues that were stopped
    [[ -e $f ]] || continue
    p=${f##*/cells-}; p=${p%.tsv}
    kill -0 "$p" 2>/dev/null || rm -f "$f"
  done
  export CPU_QUEUE_CELLS=$LOCKS/cells-$$.tsv
  write_cells "$CPU_QUEUE_CELLS" || echo "[queue] no cells' table (each job imports its own)"
  i=0
  while ((i < ${#JOBS[@]})); do
    j=$i  # a run of lane jobs: JOBS[i..j]
    while ((LANES > 1 && j + 1 < ${#JOBS[@]})) && lane_job "${JOBS[$i]}" \
        && lane_job "${JOBS[$((j + 1))]}"; do j=$((j + 1)); done
    if ((j > i)); then
      run_lanes $((i + 1)) $((j + 1))
    else
      bash "$SELF" $((i + 1)) || echo "[queue] FAILED (exit $?): ${JOBS[$i]}"
    fi
    i=$((j + 1))
  done
  rm -f "$CPU_QUEUE_CELLS"
fi
