"""GridTransport with ``batch``: a virtual node's tasks of a round go out in one message.

Over the test double of Flower's Grid that runs the real ClientApp. A batch must
change how many messages travel, never what a run decides; and a batch reply is as
hostile as any reply: one worker's part may be missing, forged or another worker's,
and only that worker answers for it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from flwr.app import ConfigRecord, Error, Message, RecordDict

from phalanx.config import RunConfig
from phalanx.flower.records import BATCH_TYPE, MESSAGE_TYPE, REPLY, fault_content
from phalanx.reports import RoundReport
from tests.support.batch_grid import (
    NODES,
    CountingGrid,
    Records,
    node_of,
    part_of,
    request_of,
    rewrite_records,
    run_batched,
)
from tests.support.configs import small_config
from tests.support.fake_grid import Rewrite, server_task_identity, untouched


@pytest.fixture(autouse=True)
def _server_task_identity() -> Iterator[None]:
    with server_task_identity():
        yield


def run_on_shared_nodes(
    config: RunConfig, *, batch: bool, rewrite: Rewrite = untouched
) -> tuple[list[RoundReport], list[str]]:
    """Run ``config`` on the shared nodes; return its reports and the types of the messages."""
    reports, grid = run_batched(config, batch=batch, rewrite=rewrite)
    assert isinstance(grid, CountingGrid)
    return reports, [kind for kind, _ in grid.pushed]


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
    batched, batched_types = run_on_shared_nodes(config, batch=True)
    single, single_types = run_on_shared_nodes(config, batch=False)
    assert [decided(r) for r in batched] == [decided(r) for r in single]
    assert batched[0].flagged != ()  # the attack was seen, in both
    assert batched_types == [BATCH_TYPE] * (NODES * 2)
    assert single_types == [MESSAGE_TYPE] * (7 * 2)


def test_a_round_that_listens_for_each_reply_sends_one_message_per_task() -> None:
    config = small_config(
        rounds=1,
        attack={"name": None, "q": 0},
        deployment={"backend": "deployment"},
        collect={"policy": "quorum", "m": 2},
    )
    (report,), types = run_on_shared_nodes(config, batch=True)
    # The quorum closed the round before the last task went out: each heard alone.
    assert types == [MESSAGE_TYPE] * 6
    assert report.metrics["missing_replies"] == 1


def rewrite_part(victim: int, part: RecordDict | None) -> Rewrite:
    """Replace worker ``victim``'s part of its node's batch reply (``None``: leave it out)."""
    index = part_of(victim)

    def change(records: Records) -> Records:
        kept = {k: v for k, v in records.items() if not k.endswith(f".{index}")}
        for name, record in part.config_records.items() if part is not None else ():
            kept[f"{name}.{index}"] = record
        return kept

    return rewrite_records(node_of(victim), change)


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
        return reply(request_of(answer)) if node == 1 else answer  # type: ignore[operator]

    (report,), _ = run_on_shared_nodes(HONEST, batch=True, rewrite=fail_second_node)
    assert sorted(e.worker for e in report.events) == [1, 3, 5]
    assert {(e.kind, e.severity) for e in report.events} == {("worker_error", "low")}
    assert report.flagged == ()
