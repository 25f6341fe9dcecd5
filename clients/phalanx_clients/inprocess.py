"""``InProcessTransport``: a test double of Flower's runtime.

It runs the same workers and the same coordinator in one process, without
Flower, for large evaluation grids and unit tests. Results it produces are
labelled as such; every defence is also run through Flower's simulation engine.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from torch import Tensor

from phalanx.channel import Downlink
from phalanx.exchange import Exchange, Listener
from phalanx.faults import describe, fault_kind, is_interrupt
from phalanx.federated_evaluation import EvaluationExchange, EvaluationReport, EvaluationTask
from phalanx.payload_pool import PayloadPool
from phalanx.replies import Rejection, Reply, Task
from phalanx_clients.worker import Worker

Tamper = Callable[[Reply], Reply | None]
TamperReport = Callable[[EvaluationReport], EvaluationReport | None]

log = logging.getLogger(__name__)


class InProcessTransport:
    """Calls each worker directly.

    Parameters
    ----------
    workers : Mapping[int, Worker]
        Worker index -> worker.
    tamper : callable, optional
        Rewrites (or drops, by returning ``None``) a reply on its way back; tests
        use it to play a network or a worker that sends garbage.
    tamper_report : callable, optional
        The same for federated evaluation reports.
    """

    def __init__(
        self,
        workers: Mapping[int, Worker],
        *,
        tamper: Tamper | None = None,
        tamper_report: TamperReport | None = None,
    ) -> None:
        self.workers = dict(workers)
        self.tamper = tamper
        self.tamper_report = tamper_report

    def evaluate(self, tasks: Sequence[EvaluationTask], weights: Tensor) -> EvaluationExchange:
        """Have every task's worker evaluate ``weights``; a worker that raises is a fault."""
        reports = []
        failures = []
        for task in tasks:
            try:
                measured = self.workers[task.worker].evaluate(task, weights)
            except BaseException as exc:  # the worker failed, not the run
                if is_interrupt(exc):
                    raise
                log.info("worker %d failed to evaluate", task.worker, exc_info=True)
                failures.append(Rejection(task.worker, fault_kind(exc), describe(exc)))
                continue
            report: EvaluationReport | None = EvaluationReport(
                task.worker, measured.loss, measured.accuracy, measured.num_samples
            )
            if self.tamper_report is not None and report is not None:
                report = self.tamper_report(report)
            if report is not None:
                reports.append(report)
        return EvaluationExchange(
            reports=reports, failures=failures, bytes_down=len(tasks) * weights.numel() * 4
        )

    def exchange(
        self, tasks: Sequence[Task], downlink: Downlink, listener: Listener | None = None
    ) -> Exchange:
        """Run every task and return the replies; a worker that raises is a fault.

        The fault's kind is the one its error names (``data_mismatch`` for data that
        does not fit the run's model), as the ClientApp reports it.

        There is no clock here: a ``listener`` hears of every reply and fault as
        arriving at once (a simulated round's arrival times come from the systems
        model instead).
        """
        replies = []
        faults = []
        pool = PayloadPool()
        for task in tasks:
            try:
                reply: Reply | None = self.workers[task.worker].handle(task, downlink)
            except BaseException as exc:  # as Flower's runtime does: the worker failed, not the run
                if is_interrupt(exc):
                    raise
                log.info("worker %d failed", task.worker, exc_info=True)
                faults.append(Rejection(task.worker, fault_kind(exc), describe(exc)))
                continue
            if self.tamper is not None and reply is not None:
                reply = self.tamper(reply)
            if reply is not None:
                replies.append(pool.shared(reply))
        if listener is not None:
            for reply in replies:
                listener.arrived(reply, 0.0)
            for fault in faults:
                listener.failed(fault.worker, 0.0)
        return Exchange(
            replies=replies, bytes_down=len(tasks) * downlink.num_bytes, malformed=faults
        )
