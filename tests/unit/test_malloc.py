"""The collector fixes glibc's mmap threshold, so request-sized blocks are given back when freed
instead of staying in malloc's arenas (collector/malloc.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

# In a process of its own: the threshold is process-wide and cannot be moved back.
PROBE = textwrap.dedent(
    """
    import ctypes, sys
    from collector.malloc import fix_mmap_threshold
    from collector.memprofile import MallInfo2

    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.mallinfo2.restype = MallInfo2
    if sys.argv[1] == "fixed":
        print(fix_mmap_threshold())
    size = 460 * 1024  # a 512-span OTLP request
    libc.free(libc.malloc(size))  # freeing a mapped block raises a moving threshold past it
    before = libc.mallinfo2().hblkhd
    block = libc.malloc(size)
    print(libc.mallinfo2().hblkhd - before >= size)  # the second one is mapped too
    libc.free(block)
    """
)


def probe(mode: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_TUNABLES"))}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True, env=env
    )
    return out.stdout.split()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_a_freed_request_sized_block_no_longer_moves_the_threshold() -> None:
    assert probe("fixed") == ["True", "True"]
    # glibc's default, for contrast: the second block comes from the arena and stays there
    assert probe("default") == ["False"]


def test_an_operators_own_threshold_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    from collector.malloc import fix_mmap_threshold

    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")
    assert fix_mmap_threshold() is False
