"""How the process allocates CPU memory: glibc's ``malloc`` set to reuse freed memory.

PyTorch's CPU tensors come from ``malloc``. glibc serves a block above its mmap threshold
(at most 32 MiB) with a fresh ``mmap`` and unmaps it on ``free``; the heap's free top is
given back to the OS above the trim threshold. A training loop that allocates and frees the
same large tensors every batch therefore touches fresh pages every batch, and the kernel
zeroes each on its first touch (a page fault). On the project's 2-core Xeon (2026-11-28) a
zero-filled 44 MB tensor took 12 ms fresh against 2.4 ms in reused memory, and one training
batch of the evaluation CNN ~1.6x as long (``benchmarks/README.md``).

:func:`reuse_freed_memory` turns ``mmap`` off (``M_MMAP_MAX = 0``: every block comes from
the heap) and trimming off (``M_TRIM_THRESHOLD``), so freed blocks are reused, and restores
glibc's defaults after, giving the free memory back (``malloc_trim``). A speed setting only:
no number changes. The price is that freed memory stays with the process while the setting
holds (the peak of what was live, plus fragmentation), so it is used around the evaluation
classifier (< 2 GiB), not around the 18-GiB paper-size DataLens training, whose peak was not
measured with it. Elsewhere than glibc (macOS, musl) it does nothing. Written with ``ctypes``
because no maintained library exposes ``mallopt``.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import sys
from collections.abc import Iterator

M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4  # malloc.h
#: glibc's defaults, restored on exit (the dynamic mmap threshold does not come back)
DEFAULT_TRIM_THRESHOLD, DEFAULT_MMAP_MAX = 128 * 1024, 65536


def _glibc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.gnu_get_libc_version  # noqa: B018 (glibc only)
        return libc
    except (OSError, AttributeError):
        return None


@contextlib.contextmanager
def reuse_freed_memory(enabled: bool = True) -> Iterator[bool]:
    """Within the block, freed memory is reused rather than returned to the OS (module doc).
    Yields whether the setting is active (False: not glibc, or ``enabled`` false)."""
    libc = _glibc() if enabled else None
    if libc is None or not (libc.mallopt(M_MMAP_MAX, 0)
                            and libc.mallopt(M_TRIM_THRESHOLD, 2 ** 31 - 1)):
        yield False
        return
    try:
        yield True
    finally:
        libc.mallopt(M_MMAP_MAX, DEFAULT_MMAP_MAX)
        libc.mallopt(M_TRIM_THRESHOLD, DEFAULT_TRIM_THRESHOLD)
        libc.malloc_trim(0)
