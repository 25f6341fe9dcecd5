"""A coordinator transport over Flower's ``Grid`` (simulation engine or SuperLink)."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from flwr.app import Message, RecordDict
from flwr.serverapp import Grid
from torch import Tensor

from phalanx.channel import Downlink
from phalanx.event_kinds import EventKind
from phalanx.exchange import Arrival, Exchange, LateReply, Listener
from phalanx.faults import one_line
from phalanx.federated_evaluation import EvaluationExchange, EvaluationReport, EvaluationTask
from phalanx.flower.evaluation_records import (
    EVALUATE_TYPE,
    evaluation_task_content,
    read_evaluation,
)
from phalanx.flower.records import (
    BATCH_TYPE,
    MAX_BATCH,
    MESSAGE_TYPE,
    MalformedRecordError,
    batch_content,
    batch_part,
    read_fault,
    read_reply,
    task_content,
)
from phalanx.payload_pool import PayloadPool
from phalanx.replies import Rejection, Reply, Task

log = logging.getLogger(__name__)

Answer = TypeVar("Answer", Reply, EvaluationReport)

LATE_WINDOW = 8
"""Exchanges after its own during which a late reply is still recognised and counted."""


class GridTransport:
    """Pushes one message per task and pulls replies until all arrived or time runs out.

    A task may be a worker's whole task or a part of it (one message per file,
    ``collect.messages = "per_file"``): each reply is marked with the files its
    message asked (``Reply.asked``), from this transport's own record of the message.

    Two costs of Flower's ``InMemoryLinkState`` (the simulation engine's, and a
    SuperLink's by default) shape how it uses the Grid:

    - A pull costs time in proportion to the message ids it names, so replies are
      pulled in batches with backoff: the wait between pulls starts at
      ``poll_interval``, doubles while nothing arrives up to ``max_poll_interval``,
      and starts over when something does.
    - The simulation engine asks the link state for every node's next message every
      0.1 s, and each ask walks every stored message: a message stays stored from its
      push until its reply is pulled, so with all of a round's K messages stored a
      sweep costs K x K steps (about 8 us each; 9.5 s at K = 1,000). With ``window``
      set, at most that many of a round's messages are out at once, the next pushed
      as replies are pulled, so a sweep costs K x window. The simulation engine sets
      it (its Ray actors work on a few messages at a time anyway); a deployment, whose
      SuperNodes all work at once, sends every task at once (``None``).

    Asynchronous mode streams instead (:meth:`send`, :meth:`receive`): tasks go out
    one message each whenever the coordinator has some, and each answer is handed
    back as it is pulled, whatever else is still out.

    With a window, a node also has at most one of the round's messages out at once:
    a node of the simulation engine may host several workers, whose messages it is
    sent in turn, as a SuperNode handles its own, so that two messages to one node
    are never computed at once on one copy of its state.

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
    poll_interval, max_poll_interval : float
        The shortest and the longest wait between two pulls.
    window : int, optional
        The most messages of a round out at once; ``None``: all of them.
    batch : bool
        Send a node's tasks of a round in one message (:data:`BATCH_TYPE`) when the
        round waits for every reply (no listener): a virtual node of the simulation
        hosts several workers, and each message costs the ServerApp's process a Ray
        submission and a copy of the model whatever it carries.
    """

    def __init__(
        self,
        grid: Grid,
        node_of_worker: Mapping[int, int],
        run_config_json: str,
        *,
        timeout: float = 600.0,
        poll_interval: float = 0.005,
        max_poll_interval: float = 0.1,
        window: int | None = None,
        batch: bool = False,
    ) -> None:
        if window is not None and window < 1:
            raise ValueError(f"window must be at least 1 message, got {window}")
        if not 0 <= poll_interval <= max_poll_interval:
            raise ValueError(
                "poll intervals must satisfy 0 <= poll_interval <= max_poll_interval, got "
                f"{poll_interval} and {max_poll_interval}"
            )
        self.grid = grid
        self.node_of_worker = dict(node_of_worker)
        self.run_config_json = run_config_json
        self.timeout = timeout
        self.poll_interval = poll_interval
        self.max_poll_interval = max_poll_interval
        self.window = window
        self.batch = batch
        # Messages of the last LATE_WINDOW exchanges still unanswered when theirs
        # returned, by id: (workers, when pushed, exchange, round). A reply to one that
        # comes during a later exchange is late, and said so.
        self._outstanding: dict[str, tuple[tuple[int, ...], float, int, int]] = {}
        self._exchanges = 0
        # Streamed messages not answered yet, by id: (task, when pushed).
        self._streamed: dict[str, tuple[Task, float]] = {}
        # Pulls made so far: what the backoff saves is counted, never timed.
        self.pulls = 0

    def exchange(
        self, tasks: Sequence[Task], downlink: Downlink, listener: Listener | None = None
    ) -> Exchange:
        """Send every task with the downlink and collect the replies.

        Without a ``listener`` the round waits for every reply up to the timeout; with
        one, each reply is handed to it as it is pulled, and the wait ends as soon as
        the listener says the round is closed. Replies still out are not waited for;
        one that comes during one of the next :data:`LATE_WINDOW` exchanges is counted
        there as late. A task not yet sent when its round closes (with a ``window``)
        is not sent at all.

        With ``batch`` and no listener, a node's tasks go out in one message; with a
        listener each task has its own, so that each reply is timed as it comes.
        """
        self._exchanges += 1
        oldest = self._exchanges - LATE_WINDOW
        earlier = {mid: seen for mid, seen in self._outstanding.items() if seen[2] >= oldest}
        unsent = _Unsent(
            tasks,
            self.node_of_worker,
            one_per_node=self.window is not None,
            batch=self.batch and listener is None,
        )
        bytes_down = 0
        pushed: dict[str, float] = {}
        tasks_of_message: dict[str, tuple[Task, ...]] = {}
        pending: set[str] = set()

        def push(count: int) -> None:
            nonlocal bytes_down
            batches = unsent.take(count)
            if not batches:
                return
            messages = [self._message(batch, downlink) for batch in batches]
            # Each worker is counted as sent its own copy: what a deployment would carry.
            sent = sum(len(batch) for batch in batches)
            bytes_down += sent * (downlink.num_bytes + len(self.run_config_json))
            now = time.monotonic()
            for mid, batch in zip(self.grid.push_messages(messages), batches, strict=True):
                if mid:
                    tasks_of_message[mid] = batch
                    pushed[mid] = now
                    pending.add(mid)
                else:  # not stored: its node is free for the next
                    unsent.answered(batch)

        push(len(unsent) if self.window is None else self.window)
        started = time.monotonic()
        replies: list[Reply] = []
        pool = PayloadPool()
        malformed: list[Rejection] = []
        late: list[LateReply] = []
        deadline = started + self.timeout
        wait = self.poll_interval
        while (pending or unsent) and time.monotonic() < deadline:
            self.pulls += 1
            arrived = False
            for message in self.grid.pull_messages([*pending, *earlier]):
                mid = message.metadata.reply_to_message_id
                if mid in earlier:
                    workers, sent_at, _, round_ = earlier.pop(mid)
                    seconds = time.monotonic() - sent_at
                    late.extend(LateReply(worker, seconds, round_) for worker in workers)
                    continue
                if mid not in pending:
                    continue
                arrived = True
                pending.discard(mid)
                batch = tasks_of_message[mid]
                unsent.answered(batch)
                for task, outcome in zip(batch, _outcomes(message, batch), strict=True):
                    if isinstance(outcome, Reply):
                        # What the message asked, by the transport's own record of it.
                        outcome = dataclasses.replace(pool.shared(outcome), asked=task.files)
                        replies.append(outcome)
                        if listener is not None:
                            listener.arrived(outcome, time.monotonic() - started)
                    else:
                        malformed.append(outcome)
                        if listener is not None:
                            listener.failed(task.worker, time.monotonic() - started, task.files)
            if listener is not None and listener.closed(time.monotonic() - started):
                break
            # A node's next batch, once its last is answered (more than MAX_BATCH workers).
            push(len(unsent) if self.window is None else self.window - len(pending))
            if pending:
                wait = self.poll_interval if arrived else min(2 * wait, self.max_poll_interval)
                time.sleep(wait)
        else:
            if listener is not None and (pending or unsent):  # timed out: say how long it waited
                listener.closed(time.monotonic() - started)
        self._outstanding = {
            **earlier,
            **{
                mid: (
                    tuple(task.worker for task in tasks_of_message[mid]),
                    pushed[mid],
                    self._exchanges,
                    tasks_of_message[mid][0].round,
                )
                for mid in pending
            },
        }
        return Exchange(replies=replies, bytes_down=bytes_down, malformed=malformed, late=late)

    def now(self) -> float:
        """Seconds on the monotonic clock: what streamed answers are timed by."""
        return time.monotonic()

    def send(self, tasks: Sequence[Task], downlink: Downlink) -> int:
        """Push one message per task now, answers to be had from :meth:`receive`.

        Returns the bytes that went down. A message the Grid did not store (its node
        is gone) is never answered: the coordinator gives up on it in time.
        """
        if not tasks:
            return 0
        messages = [self._message((task,), downlink) for task in tasks]
        now = time.monotonic()
        for mid, task in zip(self.grid.push_messages(messages), tasks, strict=True):
            if mid:
                self._streamed[mid] = (task, now)
            else:
                log.warning("worker %d's task was not stored by the Grid", task.worker)
        return len(tasks) * (downlink.num_bytes + len(self.run_config_json))

    def receive(self, timeout: float) -> list[Arrival]:
        """Pull the answers to streamed tasks, waiting up to ``timeout`` s for the first.

        Pulls back off as :meth:`exchange`'s do. With nothing out (every task sent was
        answered, or the Grid stored none) it waits out ``timeout`` all the same: a
        caller waiting for an answer that cannot come must not spin.
        """
        deadline = time.monotonic() + timeout
        wait = self.poll_interval
        while self._streamed:
            arrivals = self._pull_streamed()
            remaining = deadline - time.monotonic()
            if arrivals or remaining <= 0:
                return arrivals
            time.sleep(min(wait, remaining))
            wait = min(2 * wait, self.max_poll_interval)
        time.sleep(max(0.0, deadline - time.monotonic()))
        return []

    def _pull_streamed(self) -> list[Arrival]:
        self.pulls += 1
        arrivals: list[Arrival] = []
        for message in self.grid.pull_messages(list(self._streamed)):
            entry = self._streamed.pop(message.metadata.reply_to_message_id, None)
            if entry is None:
                continue
            task, sent_at = entry
            outcome = _outcome(message, task.worker)
            if isinstance(outcome, Reply):
                outcome = dataclasses.replace(outcome, asked=task.files)
            arrivals.append(Arrival(task, outcome, time.monotonic() - sent_at))
        return arrivals

    def _message(self, batch: tuple[Task, ...], downlink: Downlink) -> Message:
        """Build the message that carries ``batch`` and the downlink to its workers' node.

        One task goes as a task message; several (the workers of one virtual node), as
        a batch.
        """
        first = batch[0]
        if len(batch) == 1:
            content = task_content(first, downlink, self.run_config_json)
        else:
            content = batch_content(batch, downlink, self.run_config_json)
        return Message(
            content=content,
            dst_node_id=self.node_of_worker[first.worker],
            message_type=MESSAGE_TYPE if len(batch) == 1 else BATCH_TYPE,
            group_id=str(first.round),
        )

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
        wait = self.poll_interval
        while pending and time.monotonic() < deadline:
            self.pulls += 1
            arrived = False
            for message in self.grid.pull_messages(list(pending)):
                mid = message.metadata.reply_to_message_id
                if mid not in pending:
                    continue
                arrived = True
                pending.discard(mid)
                worker = worker_of_message[mid]
                outcome = _report(message, worker)
                if isinstance(outcome, EvaluationReport):
                    reports.append(outcome)
                else:
                    failures.append(outcome)
            if pending:
                wait = self.poll_interval if arrived else min(2 * wait, self.max_poll_interval)
                time.sleep(wait)
        bytes_down = len(messages) * (weights.numel() * 4 + len(self.run_config_json))
        return EvaluationExchange(reports=reports, failures=failures, bytes_down=bytes_down)


def _report(message: Message, worker: int) -> EvaluationReport | Rejection:
    """Read one worker's evaluation report, or why there is none (as :func:`_outcome`)."""
    return _read(message, worker, read_evaluation)


class _Unsent:
    """A round's tasks not sent yet, in order; with ``one_per_node``, one out per node at once.

    :meth:`take` hands out the next messages' tasks: without ``one_per_node`` each task
    alone, in order, whatever its node; with it, the next tasks whose nodes have none
    of the round's messages out (in the order given, a node's own in turn), or with
    ``batch`` each such node's tasks together, :data:`MAX_BATCH` at most.
    :meth:`answered` frees a message's node again.
    """

    def __init__(
        self,
        tasks: Sequence[Task],
        node_of_worker: Mapping[int, int],
        *,
        one_per_node: bool,
        batch: bool = False,
    ) -> None:
        self.node_of_worker = node_of_worker
        self.one_per_node = one_per_node or batch
        self.batch = batch
        self._in_order: deque[Task] = deque(() if self.one_per_node else tasks)
        self._by_node: dict[int, deque[Task]] = {}
        if self.one_per_node:
            for task in tasks:
                self._by_node.setdefault(node_of_worker[task.worker], deque()).append(task)
        self._busy: set[int] = set()
        self._left = len(tasks)

    def __len__(self) -> int:
        return self._left

    def take(self, count: int) -> list[tuple[Task, ...]]:
        """Up to ``count`` next messages' tasks that may go out now."""
        batches: list[tuple[Task, ...]] = []
        if not self.one_per_node:
            n = min(count, len(self._in_order))
            batches.extend((self._in_order.popleft(),) for _ in range(n))
        else:
            for node, waiting in self._by_node.items():
                if len(batches) >= count:
                    break
                if node not in self._busy:
                    if self.batch:
                        size = min(len(waiting), MAX_BATCH)
                        batches.append(tuple(waiting.popleft() for _ in range(size)))
                    else:
                        batches.append((waiting.popleft(),))
                    self._busy.add(node)
            for node in {self.node_of_worker[b[0].worker] for b in batches}:
                if not self._by_node[node]:
                    del self._by_node[node]
        self._left -= sum(len(b) for b in batches)
        return batches

    def answered(self, batch: tuple[Task, ...]) -> None:
        """``batch``'s message is no longer out: its node may be sent the next."""
        self._busy.discard(self.node_of_worker[batch[0].worker])


def _outcomes(message: Message, batch: tuple[Task, ...]) -> list[Reply | Rejection]:
    """Read the answer of each task of ``batch`` from the one message that answers them.

    A failed ClientApp (Flower's error message), or a node that could not read its
    batch (one fault for all of it), fails every task of the batch alike.
    """
    if len(batch) == 1:
        return [_outcome(message, batch[0].worker)]
    if message.has_error() or read_fault(message.content) is not None:
        return [_outcome(message, task.worker) for task in batch]
    return [_read_part(batch_part(message.content, i), t.worker) for i, t in enumerate(batch)]


def _read_part(content: RecordDict, worker: int) -> Reply | Rejection:
    """Read one worker's part of a batch reply: its reply, its fault, or why neither."""
    try:
        fault = read_fault(content)
        if fault is not None:
            kind, cause = fault
            log.info("worker %d reported a failure (%s): %s", worker, kind, cause)
            return Rejection(worker, kind, cause)
        return read_reply(content, worker=worker)
    except MalformedRecordError as exc:
        return Rejection(worker, EventKind.MALFORMED_REPLY, str(exc))


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
