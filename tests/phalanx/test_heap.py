"""Freed heap memory goes back to the operating system."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from phalanx import heap
from phalanx.heap import return_freed_memory

PLATFORM = Path(heap.__file__).resolve().parents[1]


@pytest.mark.skipif(not return_freed_memory(), reason="the C library has no malloc_trim")
def test_freed_heap_memory_goes_back_to_the_operating_system() -> None:
    # In a process of its own: the allocator's state is then known. Once a buffer of
    # 2 MB has been freed, glibc serves buffers of 1 MB from its heap, and keeps them
    # mapped after they are freed.
    script = textwrap.dedent(
        """
        import psutil
        from phalanx.heap import return_freed_memory
        rss = lambda: psutil.Process().memory_info().rss
        warm = b"w" * 2_000_000
        del warm
        junk = [b"x" * 1_000_000 for _ in range(300)]
        tail = b"t" * 100_000  # above them on the heap: they cannot just be cut off its top
        full = rss()
        del junk[:]
        kept = rss()
        return_freed_memory()
        print(full, kept, rss())
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(PLATFORM), "PATH": "/usr/bin:/bin"},
    ).stdout
    full, kept, returned = (int(x) for x in out.split())
    megabytes = 1 << 20
    assert full - kept < 50 * megabytes  # freed, yet still resident
    assert kept - returned > 250 * megabytes


def test_finding_malloc_trim_starts_no_process(monkeypatch: pytest.MonkeyPatch) -> None:
    # A child forked from a coordinator holding gigabytes counts them again in the
    # process tree's resident memory (ctypes.util.find_library runs ldconfig).
    started: list[object] = []

    def no_process(*args: object, **kwargs: object) -> None:
        started.append(args)
        raise AssertionError("a process was started")

    monkeypatch.setattr(subprocess, "Popen", no_process)
    heap._malloc_trim.cache_clear()
    try:
        assert return_freed_memory()
    finally:
        heap._malloc_trim.cache_clear()
    assert started == []
