"""A coordinator transport over Flower's ``Grid`` (simulation engine or SuperLink)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from flwr.app import Message
from flwr.serverapp import Grid
from torch import Tensor

from phalanx.channel import Downlink
from phalanx.event_kinds import EventKind
from phalanx.exchange import Exchange, LateReply, Listener
from phalanx.faults import one_line
from phalanx.federated_evaluation import EvaluationExchange, EvaluationReport, EvaluationTask
from phalanx.flower.evaluation_records import (
    EVALUATE_TYPE,
    evaluation_task_content,
    read_evaluation,
)
from phalanx.flower.records import (
    MESSAGE_TYPE,
    MalformedRecordError,
    read_fault,
    read_reply,
    task_content,
)
from phalanx.replies import Rejection, Reply, Task

log = logging.getLogger(__name__)

Answer = TypeVar("Answer", Reply, EvaluationReport)

LATE_WINDOW = 8
"""Exchanges after its own during which a late reply is still recognised and counted."""


class GridTransport:
    """Pushes one message per task and pulls replies until all arrived or time runs out.

    Parameters
    ----------
    grid : Grid
        Flower's grid of the running ServerApp.
    node_of_worker : Mapping[int, int]
        Worker index -> Flower node id.
    run_config_json : str
        The run configuration, sent with every task.
    timeout : float
        Seconds to wait for the replies of one round; late replies are dropped.
    """

    def __init__(
        self,
        grid: Grid,
        node_of_worker: Mapping[int, int],
        run_config_json: str,
        *,
        timeout: float = 600.0,
        poll_interval: float = 0.02,
    ) -> None:
        self.grid = grid
        self.node_of_worker = dict(node_of_worker)
        self.run_config_json = run_config_json
        self.timeout = timeout
        self.poll_interval = poll_interval
        # Messages of the last LATE_WINDOW exchanges still unanswered when theirs
        # returned, by id: (worker, when pushed, exchange, round). A reply to one that
        # comes during a later exchange is late, and said so.
        self._outstanding: dict[str, tuple[int, float, int, int]] = {}
        self._exchanges = 0

    def exchange(
        self, tasks: Sequence[Task], downlink: Downlink, listener: Listener | None = None
    ) -> Exchange:
        """Send every task with the downlink and collect the replies.

        Without a ``listener`` the round waits for every reply up to the timeout; with
        one, each reply is handed to it as it is pulled, and the wait ends as soon as
        the listener says the round is closed. Replies still out are not waited for;
        one that comes during one of the next :data:`LATE_WINDOW` exchanges is counted
        there as late.
        """
        messages = []
        bytes_down = 0
        for task in tasks:
            content = task_content(task, downlink, self.run_config_json)
            bytes_down += downlink.num_bytes + len(self.run_config_json)
            messages.append(
                Message(
                    content=content,
                    dst_node_id=self.node_of_worker[task.worker],
                    message_type=MESSAGE_TYPE,
                    group_id=str(task.round),
                )
            )
        self._exchanges += 1
        oldest = self._exchanges - LATE_WINDOW
        earlier = {mid: seen for mid, seen in self._outstanding.items() if seen[2] >= oldest}
        sent = list(self.grid.push_messages(messages))
        started = time.monotonic()
        task_of_message = {mid: task for mid, task in zip(sent, tasks, strict=True) if mid}
        worker_of_message = {mid: task.worker for mid, task in task_of_message.items()}
        replies: list[Reply] = []
        malformed: list[Rejection] = []
        late: list[LateReply] = []
        pending = set(worker_of_message)
        deadline = started + self.timeout
        while pending and time.monotonic() < deadline:
            for message in self.grid.pull_messages([*pending, *earlier]):
                mid = message.metadata.reply_to_message_id
                if mid in earlier:
                    worker, pushed, _, round_ = earlier.pop(mid)
                    late.append(LateReply(worker, time.monotonic() - pushed, round_))
                    continue
                if mid not in pending:
                    continue
                pending.discard(mid)
                worker = worker_of_message[mid]
                outcome = _outcome(message, worker)
                if isinstance(outcome, Reply):
                    replies.append(outcome)
                    if listener is not None:
                        listener.arrived(outcome, time.monotonic() - started)
                else:
                    malformed.append(outcome)
                    if listener is not None:
                        listener.failed(worker, time.monotonic() - started)
            if listener is not None and listener.closed(time.monotonic() - started):
                break
            if pending:
                time.sleep(self.poll_interval)
        else:
            if listener is not None and pending:  # timed out: say how long the round waited
                listener.closed(time.monotonic() - started)
        self._outstanding = {
            **earlier,
            **{
                mid: (worker_of_message[mid], started, self._exchanges, task_of_message[mid].round)
                for mid in pending
            },
        }
        return Exchange(replies=replies, bytes_down=bytes_down, malformed=malformed, late=late)

    def evaluate(self, tasks: Sequence[EvaluationTask], weights: Tensor) -> EvaluationExchange:
        """Send every worker its evaluation task with the global weights; pull the reports.

        Waits up to the timeout for every report; a worker that fails, or sends no
        evaluation record, is a failure (the reason goes to the log). Reports still
        out at the timeout are not waited for.
        """
        messages = []
        for task in tasks:
            content = evaluation_task_content(task, weights, self.run_config_json)
            messages.append(
                Message(
                    content=content,
                    dst_node_id=self.node_of_worker[task.worker],
                    message_type=EVALUATE_TYPE,
                    group_id=f"evaluate-{task.round}",
                )
            )
        sent = list(self.grid.push_messages(messages))
        worker_of_message = {mid: t.worker for mid, t in zip(sent, tasks, strict=True) if mid}
        reports: list[EvaluationReport] = []
        failures: list[Rejection] = []
        pending = set(worker_of_message)
        deadline = time.monotonic() + self.timeout
        while pending and time.monotonic() < deadline:
            for message in self.grid.pull_messages(list(pending)):
                mid = message.metadata.reply_to_message_id
                if mid not in pending:
                    continue
                pending.discard(mid)
                worker = worker_of_message[mid]
                outcome = _report(message, worker)
                if isinstance(outcome, EvaluationReport):
                    reports.append(outcome)
                else:
                    failures.append(outcome)
            if pending:
                time.sleep(self.poll_interval)
        bytes_down = len(messages) * (weights.numel() * 4 + len(self.run_config_json))
        return EvaluationExchange(reports=reports, failures=failures, bytes_down=bytes_down)


def _report(message: Message, worker: int) -> EvaluationReport | Rejection:
    """Read one worker's evaluation report, or why there is none (as :func:`_outcome`)."""
    return _read(message, worker, read_evaluation)


def _outcome(message: Message, worker: int) -> Reply | Rejection:
    """Read one worker's answer: its reply, or why there is none.

    A ClientApp that raised (Flower's error message) or that reported its own failure
    is a fault of that worker, with one line of cause; the whole text goes to the log.
    """
    return _read(message, worker, read_reply)


def _read(message: Message, worker: int, read: Callable[..., Answer]) -> Answer | Rejection:
    """Read a worker's answer with ``read``, unless it failed or sent what cannot be read."""
    if message.has_error():
        reason = message.error.reason or ""
        log.info("worker %d's ClientApp failed: %s", worker, reason)
        return Rejection(worker, EventKind.WORKER_ERROR, one_line(reason))
    try:
        fault = read_fault(message.content)
        if fault is not None:
            kind, cause = fault
            log.info("worker %d reported a failure (%s): %s", worker, kind, cause)
            return Rejection(worker, kind, cause)
        return read(message.content, worker=worker)
    except MalformedRecordError as exc:
        return Rejection(worker, EventKind.MALFORMED_REPLY, str(exc))
