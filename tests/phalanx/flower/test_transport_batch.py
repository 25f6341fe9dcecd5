"""GridTransport with ``batch``: a virtual node's tasks of a round go out in one message.

Over the test double of Flower's Grid that runs the real ClientApp. A batch must
change how many messages travel, never what a run decides; and a batch reply is as
hostile as any reply: one worker's part may be missing, forged or another worker's,
and only that worker answers for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pytest
from flwr.app import ConfigRecord, Error, Message, RecordDict

from phalanx.config import RunConfig
from phalanx.flower.records import BATCH_TYPE, MESSAGE_TYPE, REPLY, fault_content
from phalanx.flower.transport import GridTransport
from phalanx.reports import RoundReport
from phalanx.runs import execute_run
from phalanx_clients.app import build_client_app
from tests.support.configs import small_config
from tests.support.fake_grid import NODE_BASE, FakeGrid, Rewrite, server_task_identity, untouched

RUN_ID = "run-in-batches"
NODES = 2
"""Seven workers on two virtual nodes: four on the first, three on the second."""


@pytest.fixture(autouse=True)
def _server_task_identity() -> Iterator[None]:
    with server_task_identity():
        yield


class CountingGrid(FakeGrid):
    """The Grid double, counting the messages pushed by type."""

    def __init__(self, nodes: Iterable[int], rewrite: Rewrite = untouched) -> None:
        super().__init__(build_client_app(), nodes, rewrite)
        self.types: list[str] = []

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        messages = list(messages)
        self.types.extend(m.metadata.message_type for m in messages)
        return super().push_messages(messages)


def run_on_shared_nodes(
    config: RunConfig, *, batch: bool, rewrite: Rewrite = untouched
) -> tuple[list[RoundReport], CountingGrid]:
    node_of_worker = {w: NODE_BASE + w % NODES for w in range(config.assignment.num_workers)}
    grid = CountingGrid(sorted(set(node_of_worker.values())), rewrite)
    transport = GridTransport(  # type: ignore[arg-type]
        grid, node_of_worker, config.model_dump_json(), poll_interval=0.0, window=NODES, batch=batch
    )
    reports: list[RoundReport] = []

    class ListSink:
        def round_finished(self, report: RoundReport, checkpoint: bytes) -> None:
            reports.append(report)

    execute_run(config, run_id=RUN_ID, sink=ListSink(), transport=transport)
    return reports, grid


def decided(report: RoundReport) -> tuple[object, ...]:
    """What a round decided: whom it flagged or refused, what it dropped, the model it made."""
    return (
        report.flagged,
        report.rejected,
        report.dropped_files,
        sorted((e.worker, e.kind) for e in report.events),
        report.model_digest,
        report.accuracy,
        report.bytes_down,
    )


def test_a_batched_run_decides_what_one_message_per_task_does_in_one_message_per_node() -> None:
    config = small_config(rounds=2, codec={"enabled": True})
    batched, grid = run_on_shared_nodes(config, batch=True)
    single, single_grid = run_on_shared_nodes(config, batch=False)
    assert [decided(r) for r in batched] == [decided(r) for r in single]
    assert batched[0].flagged != ()  # the attack was seen, in both
    assert grid.types == [BATCH_TYPE] * (NODES * 2)
    assert single_grid.types == [MESSAGE_TYPE] * (7 * 2)


def test_a_round_that_listens_for_each_reply_sends_one_message_per_task() -> None:
    config = small_config(
        rounds=1,
        attack={"name": None, "q": 0},
        deployment={"backend": "deployment"},
        collect={"policy": "quorum", "m": 2},
    )
    (report,), grid = run_on_shared_nodes(config, batch=True)
    # The quorum closed the round before the last task went out: each heard alone.
    assert grid.types == [MESSAGE_TYPE] * 6
    assert report.metrics["missing_replies"] == 1


def rewrite_part(victim: int, part: RecordDict | None) -> Rewrite:
    """Replace worker ``victim``'s part of its node's batch reply (``None``: leave it out)."""
    index = sorted(w for w in range(7) if w % NODES == victim % NODES).index(victim)

    def rewrite(node: int, reply: Message) -> Message:
        if node != victim % NODES or reply.has_error():
            return reply
        records = {
            k: v for k, v in reply.content.config_records.items() if not k.endswith(f".{index}")
        }
        for name, record in part.config_records.items() if part is not None else ():
            records[f"{name}.{index}"] = record
        return Message(RecordDict(records), reply_to=_request(reply))  # type: ignore[arg-type]

    return rewrite


def _request(reply: Message) -> Message:
    """A stand-in for the request a reply answers (Flower's reply_to needs one)."""
    request = Message(RecordDict(), dst_node_id=1, message_type=BATCH_TYPE)
    request.metadata.__dict__["_message_id"] = reply.metadata.reply_to_message_id
    request.metadata.__dict__["_src_node_id"] = reply.metadata.dst_node_id
    return request


HONEST = small_config(rounds=1, attack={"name": None, "q": 0})


@pytest.mark.parametrize(
    ("part", "kind"),
    [
        (None, "malformed_reply"),
        (RecordDict({REPLY: ConfigRecord({"worker": 2, "files": [0]})}), "malformed_reply"),
        (RecordDict({REPLY: ConfigRecord({"worker": 4})}), "malformed_reply"),
        (fault_content(OSError("disk full")), "worker_error"),
    ],
    ids=["left-out", "claims-another-worker", "forged", "own-fault"],
)
def test_one_workers_part_of_a_batch_reply_answers_for_that_worker_alone(
    part: RecordDict | None, kind: str
) -> None:
    victim = 4  # on the first node, beside workers 0, 2 and 6
    (report,), _ = run_on_shared_nodes(HONEST, batch=True, rewrite=rewrite_part(victim, part))
    assert [(e.worker, e.kind) for e in report.events] == [(victim, kind)]
    assert report.rejected == (victim,)
    assert report.flagged == ()
    assert report.metrics["accepted_files"] == 7


@pytest.mark.parametrize(
    "reply",
    [
        lambda request: Message(Error(code=2, reason="OSError: no space"), reply_to=request),
        lambda request: Message(fault_content(MemoryError("out of memory")), reply_to=request),
    ],
    ids=["clientapp-raised", "batch-unreadable"],
)
def test_a_node_whose_whole_batch_failed_is_a_fault_of_each_of_its_workers_never_a_lie(
    reply: object,
) -> None:
    def fail_second_node(node: int, answer: Message) -> Message:
        return reply(_request(answer)) if node == 1 else answer  # type: ignore[operator]

    (report,), _ = run_on_shared_nodes(HONEST, batch=True, rewrite=fail_second_node)
    assert sorted(e.worker for e in report.events) == [1, 3, 5]
    assert {(e.kind, e.severity) for e in report.events} == {("worker_error", "low")}
    assert report.flagged == ()
