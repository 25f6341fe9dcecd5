"""What the coordinator and its transport exchange in a round: tasks out, replies back.

A :class:`Transport` is the coordinator's only way to reach workers: Flower's
Grid in a run (``phalanx.flower.transport.GridTransport``), an in-process
double in tests and benchmarks (docs/architecture.md, section 4). A transport
that waits for replies in real time hands each one to a :class:`Listener` as it
arrives and stops waiting once the listener says the round is closed: that is
how a collection policy closes a deployed round without waiting for its
slowest worker.

Asynchronous mode in a deployment keeps tasks out while others come back: a
:class:`Stream` sends tasks whenever the coordinator has some and hands back
each answer (:class:`Arrival`) as it comes, with no round around them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

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


@dataclass(frozen=True)
class Arrival:
    """One task's answer as it came back from a :class:`Stream`.

    ``outcome`` is the worker's reply, or why there is none (its ClientApp failed,
    or what it sent could not be read): a fault of that worker alone.
    """

    task: Task
    outcome: Reply | Rejection
    seconds: float
    """How long after the task went out it came."""


@runtime_checkable
class Stream(Protocol):
    """Keeps tasks out while others come back: each answer handed over as it comes."""

    def now(self) -> float:
        """Seconds on the stream's clock (any origin): what arrivals are timed by."""
        ...

    def send(self, tasks: Sequence[Task], downlink: Downlink) -> int:
        """Send each task with ``downlink`` at once; return the bytes that went down."""
        ...

    def receive(self, timeout: float) -> Sequence[Arrival]:
        """Return the answers that came since the last call, waiting for one at most ``timeout``.

        Returns as soon as anything came; an empty sequence once nothing did within
        ``timeout`` seconds (waited out even when nothing is out). Every answer of a
        task sent is handed over once, however late.
        """
        ...
