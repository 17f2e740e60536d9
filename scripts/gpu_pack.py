"""Pack the lent-GPU queue's staged records into the files a device call brings back
(scripts/gpu_queue.sh calls it under its lock).

A call returns at most 8 files of at most 16 MiB, 64 MiB together. So the items of this call
(folders or files under the stage, one per line in CALL_ITEMS; items staged and returned by an
earlier call on the same machine are not in it) go into records-1.tar, records-2.tar, ... each
at most LIMIT bytes, at most MAX_TARS of them and MAX_TOTAL bytes together; an item that fits in
none is left out with a message (it stays staged, so the next call returns it). Each tar is
written to a temporary name and renamed, so a call cut at any moment returns whole tars; then
the items in them are appended to PACKED (returned: a later call does not send them again).

    python3 scripts/gpu_pack.py STAGE CALL_ITEMS OUT PACKED [LIMIT_BYTES]
"""

from __future__ import annotations

import os
import sys
import tarfile
from pathlib import Path

MAX_TARS = 6  # the queue's log is a seventh file
MAX_TOTAL = 60 << 20


def size(p: Path) -> int:
    """Bytes the item takes in a tar: per member a header and a pax header with its block
    (tarfile writes one for sub-second mtimes), contents in 512-byte blocks."""
    def member(f: Path) -> int:
        return 1536 + (-(-f.stat().st_size // 512) * 512 if f.is_file() else 0)
    return member(p) + (sum(member(f) for f in p.rglob("*")) if p.is_dir() else 0)


def tar_bytes(content: int) -> int:
    """A tar's file size: its members, two end blocks, padded to tarfile's 10240-byte record."""
    return -(-(content + 1024) // tarfile.RECORDSIZE) * tarfile.RECORDSIZE


def main(stage: str, call_items: str, out: str, packed: str, limit: str = str(15 << 20)) -> int:
    root, dest, cap = Path(stage), Path(out), int(limit)
    items = list(dict.fromkeys(x for x in Path(call_items).read_text().split("\n") if x))
    items = [i for i in items if (root / i).exists()]  # listed just before its rename: skip
    groups: list[list[str]] = []
    sizes: list[int] = []
    total = 0
    for item in items:
        s = size(root / item)
        if total + s > MAX_TOTAL:
            print(f"[gpu-pack] {item}: left for the next call ({total >> 20} MiB packed)")
            continue
        for j in range(len(groups)):  # the first tar with room
            if tar_bytes(sizes[j] + s) <= cap:
                groups[j].append(item)
                sizes[j] += s
                break
        else:
            if len(groups) == MAX_TARS or tar_bytes(s) > cap:
                print(f"[gpu-pack] {item} ({s >> 20} MiB): no tar has room, left for the "
                      "next call")
                continue
            groups.append([item])
            sizes.append(s)
        total += s
    for n, group in enumerate(groups, 1):
        tmp = dest / f"records-{n}.tar.tmp"
        with tarfile.open(tmp, "w") as tar:
            for item in group:
                tar.add(root / item, arcname=item)
        os.replace(tmp, dest / f"records-{n}.tar")
    for old in dest.glob("records-*.tar"):  # fewer tars than an earlier pack of this call
        if int(old.stem.split("-")[1]) > len(groups):
            old.unlink()
    done = {x for x in Path(packed).read_text().split("\n") if x} if Path(packed).exists() \
        else set()
    new = [i for g in groups for i in g if i not in done]
    if new:
        with open(packed, "a") as f:
            f.write("".join(i + "\n" for i in new))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
