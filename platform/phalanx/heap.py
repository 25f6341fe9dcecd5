"""Give the memory a round freed back to the operating system.

glibc's ``malloc`` serves buffers of about a megabyte (a worker's payload, a decoded
update) from its heap once a few have been freed, and keeps what is freed there
mapped: at K = 1,000 workers the round's payloads (0.94 GB) stayed resident after
they were dropped, and the stack of updates that detection and aggregation build,
mapped on its own, came on top of them. ``malloc_trim`` hands the free pages back.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """Return glibc's ``malloc_trim``, or ``None`` where the C library has none.

    Looked up among the symbols the interpreter has loaded (``CDLL(None)``), not with
    ``ctypes.util.find_library``, which runs ``ldconfig`` in a child process: forked
    from a coordinator holding 19 GB, it doubled the process tree's resident memory.
    """
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError, TypeError):  # no such symbol, or no CDLL(None) here
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def return_freed_memory() -> bool:
    """Return the heap's free pages to the operating system.

    Returns
    -------
    bool
        Whether the C library could (glibc); elsewhere nothing happens.
    """
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
