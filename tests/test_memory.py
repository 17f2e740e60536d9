"""memory.reuse_freed_memory: within the block a freed large tensor's pages stay with the
process (the next one of that size reuses them), after it they go back to the OS."""

import sys

import pytest
import torch

from datalens_lib.memory import _glibc, reuse_freed_memory

MB = 2 ** 20


def _rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096


def _touch_and_free(nbytes: int) -> None:
    t = torch.empty(nbytes // 4, dtype=torch.float32)
    t.fill_(1.0)  # every page touched
    del t


@pytest.mark.skipif(not sys.platform.startswith("linux") or _glibc() is None,
                    reason="glibc only")
def test_freed_pages_stay_within_the_block_and_go_back_after():
    size = 96 * MB  # above glibc's largest mmap threshold: served by mmap by default
    base = _rss()
    _touch_and_free(size)
    assert _rss() - base < size // 4  # unmapped on free
    with reuse_freed_memory() as active:
        assert active
        before = _rss()
        _touch_and_free(size)
        assert _rss() - before > size * 3 // 4  # kept by the heap
        _touch_and_free(size)  # (the aligned request may not fit the first freed block)
        kept = _rss()
        for _ in range(3):
            _touch_and_free(size)  # reuses the same pages: no growth
        assert _rss() - kept < size // 4
    assert _rss() - base < size // 4  # malloc_trim gave them back
    _touch_and_free(size)
    assert _rss() - base < size // 4  # and mmap is on again


def test_disabled_does_nothing():
    with reuse_freed_memory(False) as active:
        assert not active
