"""Red team of the round's intake: what a worker or a transport hands it cannot close a round.

Every reply here is signed with the worker's real key, so only the check under attack
can refuse it. Those attacks that held on the code as it was stay as tests; a reply
that left out assigned files (none at all, or some) once passed every check without
an event and looked quick and complete on the record.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import pytest
import torch
from torch import Tensor

from phalanx.arrivals import TimedReply
from phalanx.assignment import Assignment
from phalanx.collect import CollectionPolicy
from phalanx.event_kinds import EventKind
from phalanx.intake import Intake, RoundChecks
from phalanx.replies import Reply, Task, float32_payload, make_float32_decoder
from phalanx.roster import Member, simulated_identity
from tests.support.signed_replies import signed_reply

RUN_ID = "intake-red-team"
NONCE = "ab" * 16
DIM = 4
#: Workers 0, 1, 2 hold file 0; workers 0 and 3 hold file 1; worker 4 holds file 2.
ASSIGNMENT = Assignment(5, ((0, 1, 2), (0, 3), (4,)))
MEMBERS = {
    w: Member(w, simulated_identity(RUN_ID, w).client_id, simulated_identity(RUN_ID, w).public_key)
    for w in range(6)  # worker 5 is on the roster, and holds no file
}


def honest(file: int) -> Tensor:
    return torch.full((DIM,), float(file + 1))


def task(worker: int) -> Task:
    return Task(RUN_ID, 1, NONCE, worker, ASSIGNMENT.files_of(worker))


def reply(worker: int, files: tuple[int, ...] | None = None, lie: bool = False) -> Reply:
    """``worker``'s reply for ``files`` (its task's by default), well signed."""
    files = ASSIGNMENT.files_of(worker) if files is None else files
    payloads = tuple(float32_payload(-honest(f) if lie else honest(f)) for f in files)
    return signed_reply(RUN_ID, NONCE, worker, files, payloads)


def intake(
    policy: CollectionPolicy,
    dispatched: tuple[int, ...] = (0, 1, 2, 3, 4),
    decode: Callable[[bytes], Tensor] | None = None,
) -> Intake:
    checks = RoundChecks(
        {w: task(w) for w in dispatched}, MEMBERS, decode or make_float32_decoder(DIM), 1
    )
    return Intake(policy, ASSIGNMENT, frozenset(dispatched), checks)


QUORUM = CollectionPolicy("quorum", None, {"m": 2})
FIRST = CollectionPolicy("fastest_k", None, {"k": 1})


def kinds(round_intake: Intake) -> list[tuple[int, str]]:
    return [(e.worker, e.kind) for e in round_intake.checks.events]


@pytest.mark.parametrize("lie", [False, True], ids=["same", "other-values"])
def test_a_second_reply_of_one_worker_is_refused_on_the_record_and_adds_no_vote(
    lie: bool,
) -> None:
    round_intake = intake(QUORUM)
    round_intake.arrived(reply(0), 1.0)
    round_intake.arrived(reply(0, lie=lie), 1.5)

    assert kinds(round_intake) == [(0, EventKind.MALFORMED_REPLY)]
    assert not round_intake.closed(2.0)  # one worker, one vote per file, however often
    collection = round_intake.collection()
    assert [(r.worker, r.file) for r in round_intake.kept_replicas(collection)] == [(0, 0), (0, 1)]
    assert torch.equal(round_intake.kept_replicas(collection)[0].value, honest(0))


def test_a_second_reply_for_another_workers_file_is_refused() -> None:
    round_intake = intake(QUORUM)
    round_intake.arrived(reply(1), 1.0)
    round_intake.arrived(reply(1, files=(1,)), 1.1)  # file 1 is workers 0 and 3's

    assert kinds(round_intake) == [(1, EventKind.MALFORMED_REPLY)]
    assert {(p.worker, p.file) for p in round_intake.pieces} == {(1, 0)}


def test_a_reply_claiming_another_workers_file_is_refused_and_closes_nothing() -> None:
    round_intake = intake(QUORUM)
    round_intake.arrived(reply(4, files=(0,)), 0.5)  # worker 4 holds file 2 only
    round_intake.arrived(reply(1), 1.0)

    assert kinds(round_intake) == [(4, EventKind.UNASSIGNED_FILE)]
    assert not round_intake.closed(1.0)  # file 0 has one checked vote, not two
    assert {p.worker for p in round_intake.pieces} == {1}


@pytest.mark.parametrize(("worker", "client"), [(2, True), (5, True), (99, False)])
def test_a_reply_from_a_worker_given_no_work_is_refused_and_counts_toward_nothing(
    worker: int, client: bool
) -> None:
    # Worker 2 holds file 0 but was not dispatched (benched, or not chosen by the
    # bandit); worker 5 holds nothing; worker 99 is on no roster.
    round_intake = intake(QUORUM, dispatched=(0, 1, 3, 4))
    round_intake.arrived(reply(0), 1.0)
    forged = reply(worker, files=(0,)) if worker < 6 else dataclasses.replace(reply(1), worker=99)
    round_intake.arrived(forged, 1.0)

    (event,) = round_intake.checks.events
    assert (event.worker, event.kind) == (worker, EventKind.UNASSIGNED_FILE)
    assert (event.client_id is not None) == client
    assert all(p.worker != worker for p in round_intake.pieces)
    assert not round_intake.closed(1.0)


@pytest.mark.parametrize("sent", [(), (0,), (1,)], ids=["no-file", "file-0", "file-1"])
def test_a_reply_that_leaves_out_assigned_files_is_refused_and_never_looks_complete(
    sent: tuple[int, ...],
) -> None:
    # Worker 0 holds files 0 and 1. Before the fix such a reply passed every check
    # without an event: the worker looked quick (responses "kept" at its time) while
    # its other files went missing, and the bandit learned it as fast.
    round_intake = intake(FIRST)
    round_intake.arrived(reply(0, files=sent), 0.1)

    assert kinds(round_intake) == [(0, EventKind.MALFORMED_REPLY)]
    assert "leaves out assigned files" in str(round_intake.checks.events[0].evidence["reason"])
    assert 0 in round_intake.checks.rejected
    assert round_intake.pieces == [] and not round_intake.closed(0.1)


def test_a_request_for_the_full_model_is_not_an_answer_and_closes_nothing() -> None:
    round_intake = intake(FIRST)
    asking = dataclasses.replace(reply(4), need_sync=True, signature=b"")
    round_intake.arrived(asking, 0.1)

    assert round_intake.pieces == [] and round_intake.checks.events == []
    assert 4 not in round_intake.arrived_at  # still missing until it answers
    assert not round_intake.closed(0.1)
    round_intake.arrived(reply(4), 2.0)  # its answer after the sync is taken in
    assert round_intake.closed(2.0) and round_intake.collection().closed_at == 2.0


def test_a_reply_arriving_exactly_at_the_close_is_kept_live_and_in_simulation() -> None:
    live = intake(FIRST)
    live.arrived(reply(4), 1.0)
    live.arrived(reply(3), 1.0)  # the same poll of the grid
    assert live.collection().closed_at == 1.0
    assert {p.worker for p in live.collection().kept} == {3, 4}

    simulated = intake(FIRST)
    simulated.feed(
        [TimedReply(reply(w), 1.0, dict.fromkeys(ASSIGNMENT.files_of(w), 1.0)) for w in (3, 4)]
    )
    assert {p.worker for p in simulated.collection().kept} == {3, 4}
    assert simulated.after_close == []


def test_a_reply_handed_over_after_the_close_is_late_and_moves_no_close() -> None:
    round_intake = intake(FIRST)
    round_intake.arrived(reply(4), 1.0)
    assert round_intake.closed(1.0)
    round_intake.arrived(reply(0, lie=True), 0.5 + 1.0)  # a transport that keeps on talking

    collection = round_intake.collection()
    assert collection.closed_at == 1.0
    assert {p.worker for p in collection.late} == {0}
    assert [r.worker for r in round_intake.kept_replicas(collection)] == [4]


def test_a_flood_of_replies_keeps_one_replica_per_worker_and_records_each_refusal() -> None:
    decoded: list[bytes] = []
    plain = make_float32_decoder(DIM)

    def counting(payload: bytes) -> Tensor:
        decoded.append(payload)
        return plain(payload)

    round_intake = intake(QUORUM, decode=counting)
    first = reply(0)
    for i in range(2000):
        round_intake.arrived(first, 1.0 + i / 1000)
    for i in range(500):
        round_intake.arrived(dataclasses.replace(reply(1), worker=1000 + i), 1.0)

    assert len(round_intake.checks.events) == 1999 + 500
    assert len(round_intake.checks.replicas) == 2
    assert len(decoded) == 2  # each distinct payload decoded once a round
    assert not round_intake.closed(5.0)


@pytest.mark.parametrize("seconds", [math.nan, -1.0, math.inf, -math.inf])
@pytest.mark.parametrize("sync", [False, True], ids=["answer", "need-sync"])
def test_a_transport_handing_a_time_that_is_no_time_fails_loudly_before_anything_counts(
    seconds: float, sync: bool
) -> None:
    # The time is the transport's own clock, never the worker's: a bad one is the host's
    # bug, refused before the reply is checked or noted as arrived.
    round_intake = intake(FIRST)
    handed = dataclasses.replace(reply(4), need_sync=sync)
    with pytest.raises(ValueError, match="arrival time"):
        round_intake.arrived(handed, seconds)
    assert round_intake.arrived_at == {} and round_intake.checks.replicas == []
    assert round_intake.pieces == [] and round_intake.checks.events == []
