"""Runs whose workers share virtual nodes over the Grid double, and batch replies rewritten.

Seven workers on :data:`NODES` nodes (worker ``w`` on node ``w % NODES``), each node
sent its workers' tasks of a round in one message (``GridTransport(batch=True)``), the
real ClientApp answering; a rewrite may change what a node's reply holds on its way
back, as a Byzantine node or a broken network could.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from flwr.app import ConfigRecord, Message, RecordDict

from phalanx.config import RunConfig
from phalanx.flower.records import BATCH_TYPE
from phalanx.flower.transport import GridTransport
from phalanx.reports import RoundReport
from phalanx.runs import execute_run
from phalanx_clients.app import build_client_app
from tests.support.fake_grid import NODE_BASE, FakeGrid, Rewrite, untouched

NODES = 2
"""Seven workers on two virtual nodes: 0, 2, 4, 6 on the first; 1, 3, 5 on the second."""

Records = dict[str, ConfigRecord]
"""A batch reply's config records by name (``reply.<i>``, ``fault.<i>``, ...)."""


def node_of(worker: int) -> int:
    """The index of the node ``worker`` shares."""
    return worker % NODES


def part_of(worker: int, workers: int = 7) -> int:
    """The index of ``worker``'s part in its node's batch (its place among the node's)."""
    return sorted(w for w in range(workers) if node_of(w) == node_of(worker)).index(worker)


class CountingGrid(FakeGrid):
    """The Grid double over the real ClientApp, keeping each pushed message's type and node."""

    def __init__(self, nodes: Iterable[int], rewrite: Rewrite = untouched) -> None:
        super().__init__(build_client_app(), nodes, rewrite)
        self.pushed: list[tuple[str, int]] = []

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        messages = list(messages)
        self.pushed.extend(
            (m.metadata.message_type, self.nodes.index(m.metadata.dst_node_id)) for m in messages
        )
        return super().push_messages(messages)


def run_batched(
    config: RunConfig,
    *,
    grid: Callable[[list[int]], FakeGrid] | None = None,
    rewrite: Rewrite = untouched,
    run_id: str = "run-in-batches",
    timeout: float = 600.0,
    window: int | None = NODES,
    batch: bool = True,
) -> tuple[list[RoundReport], FakeGrid]:
    """Run ``config``, a node's tasks of a round sent in one message (``window`` messages out).

    ``batch=False``: the same nodes, sent one message per task, for comparison.
    """
    node_of_worker = {w: NODE_BASE + node_of(w) for w in range(config.assignment.num_workers)}
    nodes = sorted(set(node_of_worker.values()))
    fake = grid(nodes) if grid is not None else CountingGrid(nodes, rewrite)
    transport = GridTransport(  # type: ignore[arg-type]
        fake,
        node_of_worker,
        config.model_dump_json(),
        poll_interval=0.001,  # above 0, so that a fake clock's waits add up
        max_poll_interval=0.01,
        window=window,
        batch=batch,
        timeout=timeout,
    )
    reports: list[RoundReport] = []

    class ListSink:
        def round_finished(self, report: RoundReport, checkpoint: bytes) -> None:
            reports.append(report)

    execute_run(config, run_id=run_id, sink=ListSink(), transport=transport)
    return reports, fake


def rewrite_records(node: int, change: Callable[[Records], Records]) -> Rewrite:
    """Rewrite the config records of node ``node``'s replies with ``change``."""

    def rewrite(index: int, reply: Message) -> Message:
        if index != node or reply.has_error():
            return reply
        records = change(dict(reply.content.config_records))
        return Message(RecordDict(records), reply_to=request_of(reply))  # type: ignore[arg-type]

    return rewrite


def request_of(reply: Message) -> Message:
    """A stand-in for the request a reply answers (Flower's reply_to needs one)."""
    request = Message(RecordDict(), dst_node_id=1, message_type=BATCH_TYPE)
    request.metadata.__dict__["_message_id"] = reply.metadata.reply_to_message_id
    request.metadata.__dict__["_src_node_id"] = reply.metadata.dst_node_id
    return request
