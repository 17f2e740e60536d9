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
# back by --restore. While stashed, the tracked ones are marked skip-worktree, so a `git add -A`
# in between does not record them as deleted. Wheels: the packages the device image lacks
# (KINDS.md lists its packages), one version each.
set -euo pipefail
cd "$(dirname "$0")/.."
STASH=.gpu-stash
if [[ ${1:-} == --restore ]]; then
  [[ -d $STASH ]] || { echo "nothing stashed"; exit 0; }
  conflicts=0
  while IFS= read -r -d '' f; do
    f=${f#./}
    mkdir -p "$(dirname "$f")"
    if [[ -e $f ]]; then
      echo "kept $f (it is back in the tree); the stashed copy stays in $STASH/$f" >&2
      conflicts=1
    else
      mv "$STASH/$f" "$f"
    fi
    git ls-files --error-unmatch "$f" >/dev/null 2>&1 && git update-index --no-skip-worktree "$f"
  done < <(cd "$STASH" && find . -type f -print0)
  ((conflicts)) || rm -rf "$STASH"
  echo "restored"; exit 0
fi
git rev-parse HEAD > .git-sha
mkdir -p data/raw
for ds in mnist fashion-mnist; do  # copied whole or not at all
  if [[ ! -d data/raw/$ds ]]; then
    rm -rf "data/raw/$ds.tmp"
    cp -r "${DATALENS_DATA_DIR:-../shared/datasets}/$ds" "data/raw/$ds.tmp"
    mv "data/raw/$ds.tmp" "data/raw/$ds"
  fi
done
WHEELS=(dp-accounting==0.6.0 opacus==1.6.0 "dm-tree~=0.1.8")
if ! ls .whl/dp_accounting-0.6.0-*.whl .whl/opacus-1.6.0-*.whl .whl/dm_tree-*.whl >/dev/null 2>&1
then
  rm -rf .whl  # two versions of one package stop the install there
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl "${WHEELS[@]}"
fi
# tracked and untracked subsets (a records tar just extracted holds new ones)
git ls-files -z --cached --others --exclude-standard 'data/results/**/samples-10k*.npz' \
  | while IFS= read -r -d '' f; do
      [[ -e $f ]] || continue  # stashed by an earlier run of this script
      mkdir -p "$STASH/$(dirname "$f")" && mv "$f" "$STASH/$f"
      git ls-files --error-unmatch "$f" >/dev/null 2>&1 && git update-index --skip-worktree "$f"
    done
sent=$(python3 - <<'PY'
import os, subprocess
out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                     capture_output=True, check=True).stdout.decode().split("\0")
print(sum(os.path.getsize(f) for f in set(out) if f and os.path.isfile(f)))
PY
)
carried=$(du -scb .whl data/raw .git-sha | tail -1 | cut -f1)
total=$((sent + carried))
echo "working tree $((sent >> 20)) MiB + carried $((carried >> 20)) MiB = $((total >> 20)) MiB (limit 64)"
if ((total > 64 << 20)); then
  echo "over the limit: carry one dataset (data/raw/mnist) or stash more" >&2; exit 1
fi
echo "after the call: bash scripts/gpu_prepare.sh --restore"
