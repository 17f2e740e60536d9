#!/usr/bin/env bash
# Here, before a lent-GPU call (device tool): everything scripts/gpu_queue.sh needs, within the
# 64 MiB that one call may send (tracked files + untracked-not-ignored files + carried paths).
#
#   bash scripts/gpu_prepare.sh            # before the call
#   run(command="bash scripts/gpu_queue.sh", carry=[".whl", "data/raw", ".git-sha"])
#   bash scripts/gpu_prepare.sh --restore  # after it (also after a failed call)
#
# The published 10k subsets (data/results/**/samples-10k*.npz, 2-7 MB each) are tracked but the
# GPU never reads them: they are moved to .gpu-stash/ (ignored, so it does not travel) and moved
# back by --restore. Wheels: the packages the device image lacks (KINDS.md lists its packages).
set -euo pipefail
cd "$(dirname "$0")/.."
STASH=.gpu-stash
if [[ ${1:-} == --restore ]]; then
  [[ -d $STASH ]] || { echo "nothing stashed"; exit 0; }
  (cd "$STASH" && find . -type f -print0) | while IFS= read -r -d '' f; do
    mkdir -p "$(dirname "$f")"; mv "$STASH/$f" "$f"
  done
  rm -rf "$STASH"; git status --short | head; echo "restored"; exit 0
fi
git rev-parse HEAD > .git-sha
mkdir -p data/raw
for ds in mnist fashion-mnist; do
  [[ -d data/raw/$ds ]] || cp -r "${DATALENS_DATA_DIR:-../shared/datasets}/$ds" data/raw/
done
if ! ls .whl/dp_accounting-0.6.0-*.whl .whl/opacus-1.6.0-*.whl .whl/dm_tree-*.whl >/dev/null 2>&1; then
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
    dp-accounting==0.6.0 opacus==1.6.0 "dm-tree~=0.1.8"
fi
git ls-files -z 'data/results/**/samples-10k*.npz' | while IFS= read -r -d '' f; do
  mkdir -p "$STASH/$(dirname "$f")"; mv "$f" "$STASH/$f"
done
sent=$(python3 - <<'PY'
import os, subprocess
out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                     capture_output=True, check=True).stdout.decode().split("\0")
print(sum(os.path.getsize(f) for f in set(out) if f and os.path.isfile(f)))
PY
)
carried=$(du -scb .whl data/raw | tail -1 | cut -f1)
total=$((sent + carried))
echo "working tree $((sent >> 20)) MiB + carried $((carried >> 20)) MiB = $((total >> 20)) MiB (limit 64)"
if ((total > 64 << 20)); then
  echo "over the limit: carry one dataset (data/raw/mnist) or stash more" >&2; exit 1
fi
