"""A transport double whose replies arrive after set delays, on a clock of its own."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from phalanx.channel import Downlink
from phalanx.exchange import Exchange, Listener
from phalanx.replies import Task
from phalanx_clients.inprocess import InProcessTransport


@dataclass
class TimedTransport:
    """Replies of the in-process workers, worker ``w``'s arriving ``delays[w]`` seconds late.

    With a listener it delivers replies in the order of their delays and stops as soon
    as the listener closes the round, as the Grid transport does; the replies still in
    flight are never returned. Without one, every reply arrives.

    Parameters
    ----------
    inner : InProcessTransport
        Computes the replies.
    delays : Mapping[int, float]
        Seconds after the tasks went out at which each worker's reply arrives (1.0
        for a worker not named).
    timeout_s : float, optional
        Seconds after which it gives up, as the Grid transport does: a reply due later
        is never delivered, and the listener is asked once more at that moment.
    """

    inner: InProcessTransport
    delays: Mapping[int, float]
    timeout_s: float | None = None
    listened: list[bool] = field(default_factory=list)

    def exchange(
        self, tasks: Sequence[Task], downlink: Downlink, listener: Listener | None = None
    ) -> Exchange:
        self.listened.append(listener is not None)
        computed = self.inner.exchange(tasks, downlink)
        if listener is None:
            return computed
        ordered = sorted(computed.replies, key=lambda r: (self.delays.get(r.worker, 1.0), r.worker))
        delivered = []
        for reply in ordered:
            seconds = self.delays.get(reply.worker, 1.0)
            if self.timeout_s is not None and seconds > self.timeout_s:
                listener.closed(self.timeout_s)
                break
            if listener.closed(seconds):
                break
            delivered.append(reply)
            listener.arrived(reply, seconds)
        return replace(computed, replies=delivered)
