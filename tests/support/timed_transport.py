"""A transport double whose replies arrive after set delays, on a clock of its own."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from phalanx.channel import Downlink
from phalanx.config import RunConfig
from phalanx.exchange import Exchange, LateReply, Listener
from phalanx.replies import Reply, Task
from phalanx.runs import execute_run
from phalanx_clients.inprocess import InProcessTransport, Tamper
from tests.support.configs import small_config
from tests.support.coordinator_runs import RUN_ID, FakeSink, transport


@dataclass
class TimedTransport:
    """Replies of the in-process workers, worker ``w``'s arriving ``delays[w]`` seconds late.

    With a listener it delivers replies in the order of their delays and stops as soon
    as the listener closes the round, as the Grid transport does; the replies still in
    flight come during the next exchange, which lists them as late, each at its delay.
    Without one, every reply arrives.

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
    in_flight: list[LateReply] = field(default_factory=list)

    def exchange(
        self, tasks: Sequence[Task], downlink: Downlink, listener: Listener | None = None
    ) -> Exchange:
        self.listened.append(listener is not None)
        computed = self.inner.exchange(tasks, downlink)
        late, self.in_flight = self.in_flight, []
        if listener is None:
            return replace(computed, late=late)
        events = sorted(
            [(self.delays.get(r.worker, 1.0), r.worker, r) for r in computed.replies]
            + [(self.delays.get(f.worker, 1.0), f.worker, f) for f in computed.malformed],
            key=lambda event: (event[0], event[1]),
        )
        delivered = []
        undelivered = len(events)
        for index, (seconds, worker, outcome) in enumerate(events):
            if self.timeout_s is not None and seconds > self.timeout_s:
                listener.closed(self.timeout_s)
                undelivered = index
                break
            if listener.closed(seconds):
                undelivered = index
                break
            if isinstance(outcome, Reply):
                delivered.append(outcome)
                listener.arrived(outcome, seconds)
            else:
                listener.failed(worker, seconds)
        round_ = tasks[0].round if tasks else 0
        self.in_flight = [LateReply(w, seconds, round_) for seconds, w, _ in events[undelivered:]]
        return replace(computed, replies=delivered, late=late)


def deployed(rounds: int = 2, **collect: object) -> RunConfig:
    """A small honest run config with deployment's backend, closed by ``collect``."""
    return small_config(
        rounds=rounds,
        attack={"name": None, "q": 0},
        deployment={"backend": "deployment"},
        collect=collect,
    )


def run_timed(
    config: RunConfig, delays: dict[int, float], tamper: Tamper | None = None
) -> tuple[FakeSink, TimedTransport]:
    """Run ``config`` over a :class:`TimedTransport` with ``delays``."""
    timed = TimedTransport(transport(config, tamper), delays)
    sink = FakeSink()
    execute_run(config, run_id=RUN_ID, sink=sink, transport=timed)
    return sink, timed
