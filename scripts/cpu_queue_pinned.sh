#!/usr/bin/env bash
# Run scripts/cpu_queue.sh from a clean worktree pinned to one commit, so that every record the
# queue writes names a clean git sha (provenance.git_sha appends "-dirty" when tracked files of
# the checkout that runs the code differ from HEAD) while this checkout is being edited, and no
# half-edited module is ever imported by a job that starts mid-edit.
#
#   bash scripts/cpu_queue_pinned.sh [COMMIT]   # (re)start the queue at COMMIT (default HEAD)
#   bash scripts/cpu_queue_pinned.sh --collect  # copy the worktree's new records here
#   bash scripts/cpu_queue_pinned.sh --stop     # stop the queue and its current job
#
# The worktree ($DATALENS_QUEUE_TREE, default ../queue-tree) shares this checkout's runs/ and
# .venv (symlinks), so resumable run folders and checkpoints carry over between commits;
# PYTHONPATH makes the worktree's datalens_lib win over the editable install of this checkout.
# Records the queue copies land in the worktree's data/results/ (untracked there); --collect
# copies them into this checkout's data/results/ for review and commit (an existing file that
# differs is reported, never overwritten). Restarting at a new commit first collects, then
# stops the old queue (a killed job resumes from its checkpoints) and checks the commit out.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
TREE="${DATALENS_QUEUE_TREE:-$(dirname "$REPO")/queue-tree}"
export DATALENS_DATA_DIR=${DATALENS_DATA_DIR:-$(dirname "$REPO")/shared/datasets}

collect() {
  [[ -d $TREE ]] || { echo "no queue worktree at $TREE"; return; }
  local n=0 f
  while IFS= read -r f; do
    # the queue's own temporary names (commit_copy: .NAME.tmp, renamed when complete)
    [[ $(basename "$f") == .* ]] && continue
    if [[ ! -e $REPO/$f ]]; then
      local tmp
      tmp="$(dirname "$REPO/$f")/.$(basename "$f").collect"
      mkdir -p "$(dirname "$REPO/$f")" && cp -p "$TREE/$f" "$tmp" && mv -f "$tmp" "$REPO/$f" \
        && n=$((n + 1))
      echo "collected $f"
    elif ! cmp -s "$TREE/$f" "$REPO/$f"; then
      echo "differs, left as it is here: $f"
    fi
  done < <(git -C "$TREE" ls-files --others --exclude-standard -- data/results)
  echo "[pinned] $n new record file(s) copied to $REPO/data/results"
}

tree_pids() {  # a process and all its descendants
  local p
  for p in $(pgrep -P "$1" || true); do tree_pids "$p"; done
  echo "$1"
}

stop() {  # the queue started by this script (its pid file) and every job under it
  local pidfile=$REPO/runs/cpu_queue_pinned.pid pid pids i p alive
  [[ -f $pidfile ]] || return 0
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    # the queue leads its own process group (setsid below): TERM the group, and every
    # descendant by the tree too (a job once outlived a tree-only kill, 2026-11-27), then KILL
    # whatever is left after 10 s
    pids=$(tree_pids "$pid")
    kill -TERM -- "-$pid" 2>/dev/null || true
    # shellcheck disable=SC2086
    kill -TERM $pids 2>/dev/null || true
    for i in 1 2 3 4 5 6 7 8 9 10; do
      alive=0
      for p in $pids; do kill -0 "$p" 2>/dev/null && alive=1; done
      ((alive)) || break
      sleep 1
    done
    kill -KILL -- "-$pid" 2>/dev/null || true
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
  fi
  rm -f "$pidfile"
}

case "${1:-}" in
  --collect) collect; exit ;;
  --stop) stop; echo "[pinned] stopped"; exit ;;
esac
commit=$(git -C "$REPO" rev-parse "${1:-HEAD}")
[[ -d $REPO/.venv ]] || { echo "no .venv here: run make venv first" >&2; exit 1; }
if [[ -d $TREE ]]; then
  collect
  stop
  git -C "$TREE" checkout -q -f --detach "$commit"
  # records already collected (or committed at this commit) need not stay untracked there
  git -C "$TREE" clean -fdq -- data/results
else
  git -C "$REPO" worktree add -q --detach "$TREE" "$commit"
fi
for link in runs .venv; do
  [[ -L $TREE/$link ]] || { rm -rf "${TREE:?}/$link"; ln -s "$REPO/$link" "$TREE/$link"; }
done
mkdir -p "$REPO/runs/logs"
log="$REPO/runs/logs/cpu_queue-$(date +%m%d-%H%M).log"
cd "$TREE"
# setsid: the queue leads a session and process group of its own, which stop() signals as a
# whole; the queue's own shell writes its pid (setsid may fork, so $! need not be it)
pidfile=$REPO/runs/cpu_queue_pinned.pid
rm -f "$pidfile"
PYTHONPATH="$TREE" setsid bash -c 'echo $$ > "$1"; exec nohup bash "$2"' _ "$pidfile" \
  "$TREE/scripts/cpu_queue.sh" > "$log" 2>&1 &
for _ in $(seq 50); do [[ -s $pidfile ]] && break; sleep 0.1; done
echo "[pinned] queue started at ${commit:0:12} in $TREE (pid $(cat "$pidfile")); log: $log"
