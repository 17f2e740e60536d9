#!/usr/bin/env bash
# Run one paper-profile config end to end on a lent GPU (device tool) and copy its records to
# $OUT: train (resumable), then the utility evaluation (600 epochs, both protocols).
# usage: bash scripts/gpu_job.sh CONFIG [EVAL_EPOCHS]
set -euo pipefail
cfg=$1
. scripts/gpu_setup.sh
out=runs/$cfg
python3 -m datalens_lib.cli train --config "$cfg" --profile paper --out "$out" --device cuda \
  --set chunk=1000 --checkpoint-every 0 --resume 2>&1 | tr '\r' '\n' | grep -v "^DataLens.*it/s\]$" | tail -3
cp "$out/run.json" "$OUT/$cfg-run.json"
python3 -m datalens_lib.cli evaluate "$out" --device cuda ${2:+--epochs $2} 2>&1 | tr '\r' '\n' | awk 'NR%100==0' | tail -8
cp "$out"/eval-*.json "$OUT/"
for f in "$out"/eval-*.json; do cp "$f" "$OUT/$cfg-$(basename "$f")"; done
