#!/usr/bin/env bash
# Ensemble benchmark on a lent GPU (device tool); the record comes back in $OUT.
# usage: bash scripts/gpu_bench.sh    (then commit $OUT/ensemble-*.json to benchmarks/results/)
set -euo pipefail
. scripts/gpu_setup.sh
gpu=$(python3 -c "import torch; print(torch.cuda.get_device_name(0))" | tr -cs 'A-Za-z0-9' '-' \
  | tr 'A-Z' 'a-z' | sed 's/-$//')   # e.g. nvidia-h100-80gb-hbm3
python3 benchmarks/bench_ensemble.py --device cuda --teachers 50 200 1000 4000 --chunk 1000 \
  --peak-n 4000 --record "$OUT/ensemble-$gpu.json"
