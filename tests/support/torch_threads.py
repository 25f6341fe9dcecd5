"""Torch with one intra-op thread, as Flower's ClientApp runs it (``phalanx_clients.app``).

Float sums, and so updates, depend on the thread count: an in-process run compared
bit for bit with a Flower run trains its workers with one thread too.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def one_torch_thread() -> Iterator[None]:
    """Run the block with ``torch.set_num_threads(1)``; restore the count afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
