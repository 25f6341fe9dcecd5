"""A test double of a deployment's stream: each worker answers after its delay, on a fake clock."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence

from torch import Tensor

from phalanx.channel import Downlink
from phalanx.exchange import Arrival, Exchange, Listener
from phalanx.federated_evaluation import EvaluationExchange, EvaluationTask
from phalanx.replies import Task
from phalanx_clients.inprocess import InProcessTransport

Delay = Callable[[int, int], float | None]
"""Seconds worker ``w``'s ``n``-th task takes to come back; ``None``: it never does."""


class FakeStream:
    """Streams tasks to in-process workers; each answer comes back after its worker's delay.

    An answer is computed when its task is sent, and handed over once the virtual
    clock reaches the sending time plus the delay. :meth:`receive` moves the clock to
    the next answer (by at most its timeout) and never sleeps, so a run on it replays
    exactly. ``sent`` lists every task sent, in order.
    """

    def __init__(self, inner: InProcessTransport, delay: Delay) -> None:
        self.inner = inner
        self.delay = delay
        self.clock = 0.0
        self.sent: list[Task] = []
        self._due: list[tuple[float, int, Arrival]] = []
        self._count: dict[int, int] = {}

    def now(self) -> float:
        return self.clock

    def send(self, tasks: Sequence[Task], downlink: Downlink) -> int:
        exchange = self.inner.exchange(tasks, downlink)
        by_worker = {task.worker: task for task in tasks}
        outcomes = {reply.worker: reply for reply in exchange.replies}
        outcomes.update({fault.worker: fault for fault in exchange.malformed})
        for worker, task in by_worker.items():
            self.sent.append(task)
            self._count[worker] = self._count.get(worker, 0) + 1
            delay = self.delay(worker, self._count[worker])
            outcome = outcomes.get(worker)
            if delay is None or outcome is None:
                continue
            arrival = Arrival(task, outcome, delay)
            heapq.heappush(self._due, (self.clock + delay, len(self.sent), arrival))
        return exchange.bytes_down

    def receive(self, timeout: float) -> list[Arrival]:
        if not self._due:
            self.clock += timeout
            return []
        first = self._due[0][0]
        if first > self.clock + timeout:
            self.clock += timeout
            return []
        self.clock = max(self.clock, first)
        arrivals = []
        while self._due and self._due[0][0] <= self.clock:
            arrivals.append(heapq.heappop(self._due)[2])
        return arrivals

    def exchange(
        self, tasks: Sequence[Task], downlink: Downlink, listener: Listener | None = None
    ) -> Exchange:
        return self.inner.exchange(tasks, downlink, listener)

    def evaluate(self, tasks: Sequence[EvaluationTask], weights: Tensor) -> EvaluationExchange:
        return self.inner.evaluate(tasks, weights)
