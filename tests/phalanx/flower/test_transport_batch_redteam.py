"""Attacks on a batch: one message carrying a virtual node's tasks, one reply carrying its answers.

In Flower's simulation every worker of a node answers in one ClientApp, so whoever
controls a node controls what each of its workers' parts says: the boundary is the
node. What the coordinator must hold to is narrower and checkable: part ``i`` answers
for the task it sent at index ``i`` and no other, is checked against that worker's
key, and nothing a node adds, repeats, moves or withholds reaches another node's
workers, crashes the round, or calls a failure a lie.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from types import SimpleNamespace

import pytest
from flwr.app import ConfigRecord, Message
from hypothesis import given
from hypothesis import strategies as st

import phalanx.flower.records as records
import phalanx.flower.transport as grid_transport
from phalanx.event_kinds import FAULT_KINDS
from phalanx.flower.records import BATCH_TYPE, FAULT, MESSAGE_TYPE, REPLY
from phalanx.flower.transport import _Unsent
from phalanx.replies import Task
from phalanx.reports import RoundReport
from phalanx_clients.app import REPLICA_STATE, state_key
from tests.support.batch_grid import (
    NODES,
    CountingGrid,
    Records,
    part_of,
    rewrite_records,
    run_batched,
)
from tests.support.clock import FakeClock
from tests.support.configs import small_config
from tests.support.fake_grid import server_task_identity

HONEST = small_config(rounds=1, attack={"name": None, "q": 0})


@pytest.fixture(autouse=True)
def _server_task_identity() -> Iterator[None]:
    with server_task_identity():
        yield


def judged(report: RoundReport) -> list[tuple[int, str]]:
    return sorted((e.worker, e.kind) for e in report.events)


def at(records: Records, name: str, worker: int) -> ConfigRecord:
    return records[f"{name}.{part_of(worker)}"]


def relabelled(record: ConfigRecord, **fields: object) -> ConfigRecord:
    return ConfigRecord({**dict(record), **fields})  # type: ignore[dict-item]


# Workers 0, 2, 4 and 6 share the first node (parts 0 to 3); 1, 3 and 5 the second.
def swapped(records: Records) -> Records:
    reply_2, reply_4 = at(records, REPLY, 2), at(records, REPLY, 4)
    return {**records, f"{REPLY}.{part_of(2)}": reply_4, f"{REPLY}.{part_of(4)}": reply_2}


def duplicated(records: Records) -> Records:
    return {**records, f"{REPLY}.{part_of(4)}": at(records, REPLY, 2)}


def relabelled_as_neighbour(records: Records) -> Records:
    """Worker 2's signed reply put in worker 4's place, claiming to be worker 4's."""
    return {**records, f"{REPLY}.{part_of(4)}": relabelled(at(records, REPLY, 2), worker=4)}


def forged_for_neighbour(records: Records) -> Records:
    """Worker 2's update and signature under worker 4's header: only 4's key can tell."""
    neighbour = at(records, REPLY, 2)
    forged = relabelled(
        at(records, REPLY, 4),
        **{k: neighbour[k] for k in ("payloads", "digests", "signature")},
    )
    return {**records, f"{REPLY}.{part_of(4)}": forged}


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (swapped, [(2, "malformed_reply"), (4, "malformed_reply")]),
        (duplicated, [(4, "malformed_reply")]),
        (relabelled_as_neighbour, [(4, "malformed_reply")]),
        (forged_for_neighbour, [(4, "bad_signature")]),
    ],
    ids=["swapped", "duplicated", "relabelled", "forged-with-neighbours-client-id"],
)
def test_a_part_answers_only_for_the_task_sent_at_its_index_checked_with_that_workers_key(
    change: object, expected: list[tuple[int, str]]
) -> None:
    (report,), _ = run_batched(HONEST, rewrite=rewrite_records(0, change))  # type: ignore[arg-type]
    assert judged(report) == expected
    assert report.rejected == tuple(w for w, _ in expected)
    assert report.flagged == ()
    # The part moved away still answers for its own worker when left in place.
    assert report.metrics["accepted_files"] == 7


def reply_and_fault(records: Records) -> Records:
    return {**records, f"{FAULT}.{part_of(4)}": ConfigRecord({"error": "OSError: disk full"})}


def test_a_part_holding_both_a_reply_and_a_fault_is_one_fault_of_its_worker_alone() -> None:
    (report,), _ = run_batched(HONEST, rewrite=rewrite_records(0, reply_and_fault))
    assert judged(report) == [(4, "worker_error")]
    assert {e.kind for e in report.events} <= FAULT_KINDS
    assert report.flagged == ()


def with_stray_records(records: Records) -> Records:
    """Parts past the batch, at odd indices, and a top-level reply beside the parts."""
    fault = ConfigRecord({"error": "stray"})
    stray = {
        f"{REPLY}.4": relabelled(at(records, REPLY, 0), worker=1),
        f"{FAULT}.4": fault,
        f"{FAULT}.01": fault,  # part 1 only as "1": never worker 2's
        f"{FAULT}.-1": fault,
        f"{FAULT}.{2**64}": fault,
        f"{FAULT}. 1": fault,
        f"{FAULT}.1.0": fault,
        FAULT + "x.1": fault,
        REPLY: at(records, REPLY, 0),
    }
    return {**records, **stray}


def test_parts_past_the_batch_or_at_odd_indices_answer_for_nobody() -> None:
    (report,), _ = run_batched(HONEST, rewrite=rewrite_records(0, with_stray_records))
    assert judged(report) == []
    assert report.metrics["accepted_files"] == 7


def single_reply(records: Records) -> Records:
    """The node answers as if sent one task: worker 0's reply, top level, no parts."""
    return {REPLY: at(records, REPLY, 0)}


def test_a_batch_answered_as_one_task_is_each_of_its_workers_refused_and_no_one_elses() -> None:
    (report,), _ = run_batched(HONEST, rewrite=rewrite_records(0, single_reply))
    assert judged(report) == [(w, "malformed_reply") for w in (0, 2, 4, 6)]
    assert report.flagged == ()


class HoldingGrid(CountingGrid):
    """A grid holding back one node's first reply until the next round's first push.

    What it gives back then may be rewritten (``late``): a late reply is counted, never
    read.
    """

    def __init__(self, nodes: Iterable[int], held: int, late: Records | None = None) -> None:
        super().__init__(nodes)
        self.held_node, self.late, self.held = held, late, ""
        self.pushes = 0

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        self.pushes += 1
        if self.pushes > 1 and self.held:  # the next exchange: let it through
            reply = self.replies[self.held]
            if self.late is not None:
                reply = rewrite_records(self.held_node, lambda _: dict(self.late or {}))(
                    self.held_node, reply
                )
            self.replies[self.held], self.held = reply, ""
            return super().push_messages(messages)
        messages = list(messages)
        ids = list(super().push_messages(messages))
        if self.pushes == 1:
            for mid, message in zip(ids, messages, strict=True):
                if self.nodes.index(message.metadata.dst_node_id) == self.held_node:
                    self.held = mid
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return super().pull_messages(i for i in message_ids if i != self.held)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(grid_transport, "time", SimpleNamespace(monotonic=fake, sleep=fake.sleep))
    return fake


@pytest.mark.parametrize(
    "late",
    [None, {FAULT: ConfigRecord({"error": "x"})}, {f"{REPLY}.0": ConfigRecord({"worker": 5})}],
    ids=["as-sent", "a-fault", "forged"],
)
def test_a_batch_answered_after_its_round_closed_counts_each_of_its_workers_late_judges_none(
    clock: FakeClock, late: Records | None
) -> None:
    config = small_config(rounds=2, attack={"name": None, "q": 0})
    reports, _ = run_batched(
        config, grid=lambda nodes: HoldingGrid(nodes, held=1, late=late), timeout=1.0
    )
    first, second = reports
    assert len(first.seen_clients) == 4  # not workers 1, 3 and 5: the second node
    assert judged(first) == judged(second) == []
    assert sorted((r.round, r.worker) for r in second.late_responses) == [(1, 1), (1, 3), (1, 5)]


class ForgettingGrid(CountingGrid):
    """A grid whose first node loses some of its workers' replicas before the second round."""

    def __init__(self, nodes: Iterable[int], lost: tuple[int, ...]) -> None:
        super().__init__(nodes)
        self.lost = lost
        self.pushes = 0

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        self.pushes += 1
        if self.pushes == 2:  # the second round's first push
            state = self.contexts[self.nodes[0]].state
            for worker in self.lost:
                del state[state_key(REPLICA_STATE, worker)]
        return super().push_messages(messages)


@pytest.mark.parametrize(
    ("lost", "again"),
    [((4,), MESSAGE_TYPE), ((2, 4), BATCH_TYPE)],
    ids=["one-worker", "two-workers"],
)
def test_workers_that_lost_their_replica_on_a_shared_node_get_the_model_and_answer(
    lost: tuple[int, ...], again: str
) -> None:
    config = small_config(rounds=2, attack={"name": None, "q": 0}, codec={"enabled": True})
    reports, grid = run_batched(config, grid=lambda nodes: ForgettingGrid(nodes, lost))
    assert [judged(r) for r in reports] == [[], []]
    assert [r.metrics["accepted_files"] for r in reports] == [7, 7]
    assert isinstance(grid, ForgettingGrid)
    # Round 2: both nodes' batches, then the model again to the first node only.
    assert grid.pushed[NODES:] == [(BATCH_TYPE, 0), (BATCH_TYPE, 1), (again, 0)]


@pytest.mark.parametrize("window", [NODES, None], ids=["window", "no-window"])
def test_a_node_with_more_workers_than_a_batch_holds_is_sent_them_in_turn(
    monkeypatch: pytest.MonkeyPatch, clock: FakeClock, window: int | None
) -> None:
    monkeypatch.setattr(records, "MAX_BATCH", 2)
    monkeypatch.setattr(grid_transport, "MAX_BATCH", 2)
    (report,), grid = run_batched(HONEST, window=window, timeout=1.0)
    assert judged(report) == []
    assert len(report.seen_clients) == 7
    assert report.metrics["accepted_files"] == 7
    assert isinstance(grid, CountingGrid)
    # Workers 0, 2 | 4, 6 on the first node; 1, 3 | 5 on the second.
    assert sorted(grid.pushed) == sorted(
        [(BATCH_TYPE, 0), (BATCH_TYPE, 0), (BATCH_TYPE, 1), (MESSAGE_TYPE, 1)]
    )


@given(
    nodes=st.lists(st.integers(0, 3), min_size=1, max_size=12),
    window=st.integers(1, 4),
    max_batch=st.integers(1, 5),
    order=st.randoms(use_true_random=False),
)
def test_unsent_sends_every_task_once_one_message_per_node_within_the_window(
    nodes: list[int], window: int, max_batch: int, order: object
) -> None:
    tasks = [Task("run", 1, "n", worker, (worker,)) for worker in range(len(nodes))]
    node_of_worker = dict(enumerate(nodes))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(grid_transport, "MAX_BATCH", max_batch)
        unsent = _Unsent(tasks, node_of_worker, one_per_node=True, batch=True)
        out: list[tuple[Task, ...]] = []
        sent: list[Task] = []
        for _ in range(len(tasks) + 1):
            taken = unsent.take(window - len(out))
            out.extend(taken)
            sent.extend(t for batch in taken for t in batch)
            busy = [node_of_worker[b[0].worker] for b in out]
            assert len(out) <= window
            assert len(busy) == len(set(busy))  # one message out per node
            for batch in taken:
                assert 1 <= len(batch) <= max_batch
                assert {node_of_worker[t.worker] for t in batch} == {
                    node_of_worker[batch[0].worker]
                }
            if not out:
                break
            done = out.pop(order.randrange(len(out)))  # type: ignore[attr-defined]
            unsent.answered(done)
        assert not out and len(unsent) == 0
    assert sorted(t.worker for t in sent) == list(range(len(nodes)))
    # A node's tasks go out in the order given.
    for node in set(nodes):
        mine = [t.worker for t in sent if node_of_worker[t.worker] == node]
        assert mine == sorted(mine)
