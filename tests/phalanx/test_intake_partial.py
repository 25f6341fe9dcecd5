"""A deployed round's intake of partial work: one message per file, and replies cut by a budget.

Each reply is checked against the message it answers (``Reply.asked``, the transport's
record), never against what it claims; a refused message withdraws its own files
alone; a reply a compute budget cut short withdraws the rest, counted as cut and never
judged.
"""

from __future__ import annotations

import dataclasses

import torch

from phalanx.assignment import Assignment
from phalanx.collect import CollectionPolicy
from phalanx.event_kinds import EventKind
from phalanx.intake import Intake, RoundChecks
from phalanx.replies import Reply, Task, float32_payload, make_float32_decoder
from phalanx.roster import Member, simulated_identity
from tests.support.signed_replies import signed_reply

RUN_ID = "partial"
NONCE = "ab" * 16
DIM = 3
# Three workers, three files, each on two of them: worker 0 holds files 0 and 1.
ASSIGNMENT = Assignment(3, ((0, 1), (0, 2), (1, 2)))


def intake(*, partial: bool = False, policy: str = "all") -> Intake:
    members = {
        w: Member(
            w, simulated_identity(RUN_ID, w).client_id, simulated_identity(RUN_ID, w).public_key
        )
        for w in range(3)
    }
    tasks = {w: Task(RUN_ID, 1, NONCE, w, ASSIGNMENT.files_of(w)) for w in range(3)}
    checks = RoundChecks(tasks, members, make_float32_decoder(DIM), 1, partial=partial)
    return Intake(CollectionPolicy(policy), ASSIGNMENT, frozenset(range(3)), checks)


def answer(worker: int, files: tuple[int, ...], asked: tuple[int, ...], **fields: object) -> Reply:
    """``worker``'s signed reply covering ``files``, to its message that asked ``asked``."""
    payloads = tuple(float32_payload(torch.full((DIM,), float(f + 1))) for f in files)
    reply = signed_reply(RUN_ID, NONCE, worker, files, payloads)
    return dataclasses.replace(reply, asked=asked, **fields)  # type: ignore[arg-type]


def kinds(taken: Intake) -> list[tuple[int | None, str]]:
    return [(e.worker, e.kind) for e in taken.checks.events]


def test_each_message_of_one_file_is_checked_against_its_own_file() -> None:
    round_ = intake()
    round_.arrived(answer(0, (0,), (0,)), 1.0)
    round_.arrived(answer(0, (1,), (1,)), 2.0)
    assert [(p.worker, p.file, p.time) for p in round_.pieces] == [(0, 0, 1.0), (0, 1, 2.0)]
    assert kinds(round_) == [] and round_.withdrawn == set()


def test_a_reply_claiming_a_file_its_message_did_not_ask_is_refused_for_that_message() -> None:
    round_ = intake()
    # Worker 0 answers its message for file 0 with file 1, its own but not asked there.
    round_.arrived(answer(0, (1,), (0,)), 1.0)
    assert kinds(round_) == [(0, EventKind.UNASSIGNED_FILE)]
    assert round_.pieces == [] and round_.withdrawn == {(0, 0)}
    # Its message for file 1 still counts.
    round_.arrived(answer(0, (1,), (1,)), 2.0)
    assert [(p.worker, p.file) for p in round_.pieces] == [(0, 1)]


def test_a_second_reply_to_one_message_is_refused_as_a_repeat() -> None:
    round_ = intake()
    round_.arrived(answer(0, (0,), (0,)), 1.0)
    round_.arrived(answer(0, (0,), (0,)), 1.5)
    assert kinds(round_) == [(0, EventKind.MALFORMED_REPLY)]
    assert [(p.worker, p.file) for p in round_.pieces] == [(0, 0)]


def test_a_reply_repeating_a_file_is_refused() -> None:
    round_ = intake(partial=True)
    reply = answer(0, (0, 1), (0, 1))
    doubled = dataclasses.replace(
        reply,
        files=(0, 0),
        payloads=(reply.payloads[0],) * 2,
        digests=(reply.digests[0],) * 2,
    )
    round_.arrived(doubled, 1.0)
    assert kinds(round_) == [(0, EventKind.MALFORMED_REPLY)] and round_.pieces == []


def test_a_failed_message_withdraws_its_own_files_alone() -> None:
    round_ = intake()
    round_.failed(0, 1.0, (1,))
    assert round_.withdrawn == {(0, 1)}
    round_.failed(1, 1.0)  # a whole task's failure withdraws all of it
    assert round_.withdrawn == {(0, 1), (1, 0), (1, 2)}


def test_a_reply_cut_by_its_budget_withdraws_the_rest_counted_as_cut_not_judged() -> None:
    round_ = intake(partial=True)
    round_.arrived(answer(0, (0,), (0, 1)), 1.0)
    round_.arrived(answer(1, (), (0, 2)), 1.5)  # its budget cut every file
    assert kinds(round_) == []
    assert round_.withdrawn == {(0, 1), (1, 0), (1, 2)}
    assert round_.files_cut == 3
    # Worker 2's whole reply closes the round: nothing more is awaited.
    round_.arrived(answer(2, (1, 2), (1, 2)), 3.0)
    assert round_.closed(3.0)
    collection = round_.collection()
    assert {(p.worker, p.file) for p in collection.kept} == {(0, 0), (2, 1), (2, 2)}


def test_without_a_budget_a_reply_that_leaves_files_out_is_refused() -> None:
    round_ = intake(partial=False)
    round_.arrived(answer(0, (0,), (0, 1)), 1.0)
    assert kinds(round_) == [(0, EventKind.MALFORMED_REPLY)]


def test_a_budgeted_reply_must_cut_its_files_in_order() -> None:
    round_ = intake(partial=True)
    round_.arrived(answer(0, (1,), (0, 1)), 1.0)  # its second file without its first
    assert kinds(round_) == [(0, EventKind.MALFORMED_REPLY)]
    assert round_.files_cut == 0


def test_the_compute_times_of_accepted_replies_are_kept_as_claims_by_file() -> None:
    round_ = intake(partial=True)
    round_.arrived(answer(0, (0,), (0,), compute_s=(0.25,)), 1.0)
    round_.arrived(answer(0, (1,), (1,), compute_s=(0.5,)), 2.0)
    round_.arrived(answer(1, (0,), (1,), compute_s=(9.0,)), 2.0)  # refused: not its claim
    assert round_.checks.compute_s == {0: {0: 0.25, 1: 0.5}}


def test_a_reply_answering_as_a_worker_it_was_not_sent_as_is_refused() -> None:
    round_ = intake()
    # A message asked worker 2 for file 2; the reply says it is worker 0's.
    round_.arrived(answer(0, (2,), (2,)), 1.0)
    assert kinds(round_) == [(0, EventKind.UNASSIGNED_FILE)] and round_.pieces == []


def budgeted(budget_s: float) -> Intake:
    round_ = intake(partial=True)
    tasks = round_.checks.tasks
    round_.checks.tasks = {w: dataclasses.replace(t, budget_s=budget_s) for w, t in tasks.items()}
    return round_


def test_a_reply_cut_before_its_budget_could_be_spent_is_refused_not_counted_as_cut() -> None:
    # A worker that does no work answers at once with no file, as if its budget had
    # cut them all: its compute cannot exceed the time since the round's messages
    # went out, so a cut heard before the budget has passed is not a budget's cut.
    round_ = budgeted(10.0)
    round_.arrived(answer(0, (), (0,)), 0.5)
    round_.arrived(answer(1, (0,), (0, 2)), 2.0)  # one file, then "out of budget"
    assert kinds(round_) == [(0, EventKind.MALFORMED_REPLY), (1, EventKind.MALFORMED_REPLY)]
    assert round_.files_cut == 0 and round_.pieces == []
    # A whole reply before the budget is fine, and a cut after the budget is a cut.
    round_.arrived(answer(2, (1, 2), (1, 2)), 3.0)
    round_.arrived(answer(0, (), (1,)), 10.5)
    assert [w for w, _ in kinds(round_)] == [0, 1]
    assert round_.files_cut == 1 and {(p.worker, p.file) for p in round_.pieces} == {(2, 1), (2, 2)}
