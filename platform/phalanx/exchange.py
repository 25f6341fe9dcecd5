"""What the coordinator and its transport exchange in a round: tasks out, replies back.

A :class:`Transport` is the coordinator's only way to reach workers: Flower's
Grid in a run (``phalanx.flower.transport.GridTransport``), an in-process
double in tests and benchmarks (docs/architecture.md, section 4). A transport
that waits for replies in real time hands each one to a :class:`Listener` as it
arrives and stops waiting once the listener says the round is closed: that is
how a collection policy closes a deployed round without waiting for its
slowest worker.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from phalanx.channel import Downlink
from phalanx.replies import Rejection, Reply, Task


@dataclass(frozen=True)
class LateReply:
    """A reply to an earlier exchange that came after its round had closed."""

    worker: int
    seconds: float
    """How long after its task went out it came."""
    round: int
    """The round its task was of."""


@dataclass(frozen=True)
class Exchange:
    """The replies of one round, as a transport collected them.

    ``late`` lists the replies to earlier exchanges that came during this one, after
    their round had closed: counted, never checked or judged (slow is not lying).
    """

    replies: Sequence[Reply]
    bytes_down: int
    malformed: Sequence[Rejection] = ()
    late: Sequence[LateReply] = ()


class Listener(Protocol):
    """Told of every reply as it arrives; says when the round stops waiting."""

    def arrived(self, reply: Reply, seconds: float) -> None:
        """Take in ``reply``, arrived ``seconds`` after the tasks went out."""
        ...

    def failed(self, worker: int, seconds: float, files: Sequence[int] | None = None) -> None:
        """Note that ``worker`` answered with no reply to check, ``seconds`` in.

        Its ClientApp failed, or its reply was refused on the way. ``files``: those of
        the message it answered (one message per file); ``None``: all of its task's.
        """
        ...

    def closed(self, seconds: float) -> bool:
        """Whether the round, ``seconds`` after the tasks went out, waits no longer.

        A transport asks after the replies it hands over and, when it gives up waiting
        for another reason (its timeout), once more at that moment: the latest time it
        asked is how long the round waited.
        """
        ...


class Transport(Protocol):
    """Carries a round's tasks and the global model to workers and brings replies back."""

    def exchange(
        self, tasks: Sequence[Task], downlink: Downlink, listener: Listener | None = None
    ) -> Exchange:
        """Send every task with the downlink; return the replies that arrived in time.

        With a ``listener``, the transport hands it each reply (and each failure) as
        it arrives, and a transport that waits in real time returns once
        :meth:`Listener.closed` is true; every reply it returns has been handed to
        the listener. A transport without a clock (the in-process double) hands
        them all over as arriving at once.
        """
        ...
