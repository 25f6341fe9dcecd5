"""What the coordinator and its transport exchange in a round: tasks out, replies back.

A :class:`Transport` is the coordinator's only way to reach workers: Flower's
Grid in a run (``phalanx.flower.transport.GridTransport``), an in-process
double in tests and benchmarks (docs/architecture.md, section 4).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from phalanx.channel import Downlink
from phalanx.replies import Rejection, Reply, Task


@dataclass(frozen=True)
class Exchange:
    """The replies of one round, as a transport collected them."""

    replies: Sequence[Reply]
    bytes_down: int
    malformed: Sequence[Rejection] = ()


class Transport(Protocol):
    """Carries a round's tasks and the global model to workers and brings replies back."""

    def exchange(self, tasks: Sequence[Task], downlink: Downlink) -> Exchange:
        """Send every task with the downlink; return the replies that arrived in time."""
        ...
