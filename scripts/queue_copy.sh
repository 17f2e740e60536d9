# The queues' copies into places that are read as "done" when a file exists (sourced by
# scripts/cpu_queue.sh and scripts/gpu_queue.sh: one home for both).
# shellcheck shell=bash

commit_copy() {  # DEST FILE...: each FILE into DEST under a temporary name, then renamed, so
  # that a kill or a full disk never leaves a truncated record that the "already committed"
  # checks (file existence) would take as complete; the files land in the order given
  local dest=$1 f base
  shift
  mkdir -p "$dest"
  for f in "$@"; do
    base=$(basename "$f")
    cp "$f" "$dest/.$base.tmp" && mv -f "$dest/.$base.tmp" "$dest/$base" || {
      rm -f "$dest/.$base.tmp"; return 1; }
  done
}

copy_new() {  # DEST FILE...: as commit_copy, for the files DEST does not hold yet
  local dest=$1 f todo=()
  shift
  for f in "$@"; do [[ -e $dest/$(basename "$f") ]] || todo+=("$f"); done
  ((${#todo[@]} == 0)) || commit_copy "$dest" "${todo[@]}"
}
