"""A simulated round's intake asks its close rule O(log K) times, deciding as one asked each time.

The reference, :class:`OneByOneIntake`, is the intake as it was: it asked the close
rule before every reply (O(K) questions of O(K) each, minutes at K = 4,000).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterable, Mapping, Set
from typing import Any

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from phalanx.arrivals import TimedReply
from phalanx.assignment import Assignment
from phalanx.collect import CollectionPolicy
from phalanx.collect.pieces import Piece
from phalanx.detection import payload_digest
from phalanx.intake import Intake, MessageKey, Outcome, RoundChecks, _Taken
from phalanx.replies import Reply, Task, float32_payload, make_float32_decoder
from phalanx.roster import Member, simulated_identity
from tests.support.signed_replies import signed_reply

RUN_ID = "intake"
NONCE = "cd" * 16
DIM = 3


class OneByOneIntake(Intake):
    """Reference double: the intake that asked the close rule before every reply."""

    def feed(self, timed: Iterable[TimedReply]) -> None:
        for item in sorted(timed, key=lambda item: (item.seconds, item.reply.worker)):
            reply = item.reply
            if reply.files and not item.files_at:
                self._commit(_Taken(reply.worker, item.seconds, cut=True))
            elif self._closed_after((), 0, item.seconds):
                self.arrived_at.setdefault(reply.worker, item.seconds)
                self.after_close.extend(
                    Piece(reply.worker, f, item.files_at[f], payload_digest(p))
                    for f, p in zip(reply.files, reply.payloads, strict=False)
                    if f in item.files_at
                )
            else:
                self.arrived(reply, item.seconds, item.files_at)


@dataclasses.dataclass(frozen=True)
class CountingPolicy(CollectionPolicy):
    """A policy that counts how often its close rule is asked."""

    asked: list[int] = dataclasses.field(default_factory=list)

    def close_time(
        self,
        assignment: Assignment,
        pieces: Iterable[Piece],
        *,
        dispatched: Set[int] | None = None,
        **round_options: Any,
    ) -> float | None:
        self.asked.append(1)
        return super().close_time(assignment, pieces, dispatched=dispatched, **round_options)


class CountingChecks(RoundChecks):
    """Round checks that count the replies they check."""

    checked = 0

    def check(self, reply: Reply, *, also_seen: Set[MessageKey] = frozenset()) -> Outcome:
        self.checked += 1
        return super().check(reply, also_seen=also_seen)


def signed(
    worker: int, files: tuple[int, ...], *, lie: bool = False, forged: bool = False
) -> Reply:
    payloads = tuple(
        float32_payload(torch.full((DIM,), float(-(f + 1) if lie else f + 1))) for f in files
    )
    reply = signed_reply(RUN_ID, NONCE, worker, files, payloads)
    if forged:
        return dataclasses.replace(reply, signature=bytes(reversed(reply.signature)))
    return reply


def build(assignment: Assignment, policy: CollectionPolicy, kind: type[Intake] = Intake) -> Intake:
    workers = range(assignment.num_workers)
    members = {
        w: Member(
            w, simulated_identity(RUN_ID, w).client_id, simulated_identity(RUN_ID, w).public_key
        )
        for w in workers
    }
    tasks = {w: Task(RUN_ID, 1, NONCE, w, assignment.files_of(w)) for w in workers}
    checks = CountingChecks(tasks, members, make_float32_decoder(DIM), 1)
    return kind(policy, assignment, frozenset(workers), checks)


BEHAVIOURS = ("honest", "lie", "forged", "cut_all", "cut_some", "leaves_out", "need_sync")


@st.composite
def rounds(draw: st.DrawFn) -> tuple[Assignment, CollectionPolicy, list[TimedReply]]:
    """A small round: random holders, a policy, and each worker's reply and arrival."""
    num_workers = draw(st.integers(3, 9))
    num_files = draw(st.integers(1, 5))
    files = tuple(
        tuple(sorted(draw(st.sets(st.integers(0, num_workers - 1), min_size=1, max_size=3))))
        for _ in range(num_files)
    )
    assignment = Assignment(num_workers, files)
    name = draw(st.sampled_from(["all", "deadline", "fastest_k", "quorum", "group_fastest"]))
    deadline = draw(st.floats(0.5, 9.0)) if name == "deadline" else None
    options: dict[str, Any] = {}
    if name == "fastest_k":
        options["k"] = draw(st.integers(1, num_workers))
    if name == "quorum":
        options["m"] = draw(st.integers(1, 3))
    policy = CollectionPolicy(name, deadline, options)
    timed = []
    for w in range(num_workers):
        own = assignment.files_of(w)
        behaviour = draw(st.sampled_from(BEHAVIOURS))
        # Ties on purpose: a coarse clock puts replies and the close at one time.
        seconds = draw(st.integers(0, 10)) / 2
        sent = own[:-1] if behaviour == "leaves_out" and own else own
        reply = signed(w, sent, lie=behaviour == "lie", forged=behaviour == "forged")
        if behaviour == "need_sync":
            reply = dataclasses.replace(reply, need_sync=True)
        files_at: Mapping[int, float] = {f: seconds + 0.25 * i for i, f in enumerate(sent)}
        if behaviour == "cut_all":
            files_at = {}
        elif behaviour == "cut_some":
            files_at = dict(list(files_at.items())[: len(files_at) // 2])
        timed.append(TimedReply(reply, seconds, files_at))
    return assignment, policy, timed


def plain(items: Iterable[object]) -> list[tuple[object, ...]]:
    """Sort pieces (or pairs) as tuples."""
    return sorted(
        dataclasses.astuple(i) if dataclasses.is_dataclass(i) else tuple(i)  # type: ignore[arg-type]
        for i in items
    )


def summary(intake: Intake) -> dict[str, object]:
    collection = intake.collection()
    return {
        "pieces": plain(intake.pieces),
        "after_close": plain(intake.after_close),
        "withdrawn": sorted(intake.withdrawn),
        "cut": sorted(intake.cut),
        "arrived_at": sorted(intake.arrived_at.items()),
        "events": [(e.worker, e.kind) for e in intake.checks.events],
        "rejected": sorted(intake.checks.rejected),
        "replicas": [(r.worker, r.file, r.digest) for r in intake.checks.replicas],
        "closed": (collection.closed_at, collection.closed_by),
        "kept": plain(collection.kept),
        "late": plain(collection.late),
        "missing": plain(collection.missing),
    }


@settings(max_examples=150, deadline=None)
@given(rounds())
def test_a_simulated_round_decides_as_asking_the_rule_before_every_reply(
    case: tuple[Assignment, CollectionPolicy, list[TimedReply]],
) -> None:
    assignment, policy, timed = case
    fast, reference = build(assignment, policy), build(assignment, policy, OneByOneIntake)
    fast.feed(timed)
    reference.feed(timed)

    assert summary(fast) == summary(reference)


def large_round(
    num_workers: int, policy: CollectionPolicy
) -> tuple[Intake, list[TimedReply], list[int]]:
    """``num_workers`` workers holding one file each, arriving in a shuffled order."""
    assignment = Assignment(num_workers, tuple((w,) for w in range(num_workers)))
    counting = CountingPolicy(policy.name, policy.deadline_s, policy.options)
    times = list(range(num_workers))
    random.Random(7).shuffle(times)
    timed = [
        TimedReply(signed(w, (w,)), float(times[w]), {w: float(times[w])})
        for w in range(num_workers)
    ]
    return build(assignment, counting), timed, counting.asked


def test_a_round_of_k_workers_asks_its_close_rule_a_logarithmic_number_of_times() -> None:
    intake, timed, asked = large_round(800, CollectionPolicy("fastest_k", None, {"k": 600}))
    intake.feed(timed)

    collection = intake.collection()
    assert len(collection.kept) == 600 and len(collection.late) == 200
    # 16 probes per doubling of the replies seen, and a bisection: about 16 ln(600) + 6.
    assert len(asked) < 130  # one question per reply was 800
    # Replies checked beyond those kept: at most a sixteenth more.
    assert isinstance(intake.checks, CountingChecks)
    assert 600 <= intake.checks.checked <= 600 + 600 // 16 + 1


def test_a_round_closed_by_its_deadline_checks_no_reply_after_it() -> None:
    intake, timed, _ = large_round(200, CollectionPolicy("deadline", 49.5))
    intake.feed(timed)

    assert len(intake.collection().kept) == 50
    assert isinstance(intake.checks, CountingChecks)
    assert intake.checks.checked <= 50 + 50 // 16 + 1


@st.composite
def hostile_rounds(
    draw: st.DrawFn,
) -> tuple[Assignment, CollectionPolicy, frozenset[int], dict[str, Any], list[TimedReply]]:
    """A round given to some workers only, under any policy, with hostile extra replies.

    Extras: a second reply of a worker (the same or a lie, earlier or later), a reply of
    a worker given no work (undispatched, or holding no file, or off the roster), and a
    reply claiming another worker's files.
    """
    assignment, _, timed = draw(rounds())
    n = assignment.num_workers
    name = draw(
        st.sampled_from(
            ["all", "deadline", "fastest_k", "adaptive_k", "quorum", "group_fastest", "bandit"]
        )
    )
    deadline = draw(st.integers(1, 18)) / 4 if name == "deadline" or draw(st.booleans()) else None
    options: dict[str, Any] = {}
    if name in ("fastest_k", "adaptive_k"):
        options["k"] = draw(st.integers(1, n + 1))
    if name == "quorum":
        options["m"] = draw(st.integers(1, 3))
    if name == "group_fastest" and draw(st.booleans()):  # lazy G-CADA's chosen groups
        options["groups"] = tuple(
            sorted(draw(st.sets(st.integers(0, assignment.num_files - 1), max_size=3)))
        )
    dispatched = frozenset(
        draw(st.sets(st.integers(0, n - 1), min_size=1, max_size=n))
        if name == "bandit" or "groups" in options or draw(st.booleans())
        else range(n)
    )
    extras = []
    for _ in range(draw(st.integers(0, 4))):
        worker = draw(st.integers(0, n))  # n: off the roster
        files = assignment.files_of(worker) if worker < n else (0,)
        if draw(st.booleans()):  # another worker's files
            files = assignment.files_of(draw(st.integers(0, n - 1)))
        reply = signed(worker, files, lie=draw(st.booleans()))
        seconds = draw(st.integers(0, 10)) / 2
        extras.append(TimedReply(reply, seconds, {f: seconds for f in files}))
    policy = CollectionPolicy(name, deadline, {})
    return assignment, policy, dispatched, options, [*timed, *extras]


def build_dispatched(
    assignment: Assignment,
    policy: CollectionPolicy,
    dispatched: frozenset[int],
    options: dict[str, Any],
    kind: type[Intake],
) -> Intake:
    """An intake whose tasks went to ``dispatched`` only, as the coordinator builds it."""
    members = {
        w: Member(
            w, simulated_identity(RUN_ID, w).client_id, simulated_identity(RUN_ID, w).public_key
        )
        for w in range(assignment.num_workers)
    }
    tasks = {w: Task(RUN_ID, 1, NONCE, w, assignment.files_of(w)) for w in dispatched}
    checks = CountingChecks(tasks, members, make_float32_decoder(DIM), 1)
    return kind(policy, assignment, dispatched, checks, options)


@settings(max_examples=200, deadline=None)
@given(hostile_rounds())
def test_a_round_with_hostile_replies_under_any_policy_decides_as_asking_before_each_reply(
    case: tuple[Assignment, CollectionPolicy, frozenset[int], dict[str, Any], list[TimedReply]],
) -> None:
    # Attack on the monotone shortcut: every close rule (groups chosen, k beyond the
    # workers, a deadline tied with arrivals), work given to some workers only, repeats,
    # lies, replies nobody asked for. Held: the decisions are the same.
    assignment, policy, dispatched, options, timed = case
    fast = build_dispatched(assignment, policy, dispatched, options, Intake)
    reference = build_dispatched(assignment, policy, dispatched, options, OneByOneIntake)
    fast.feed(timed)
    reference.feed(timed)

    assert summary(fast) == summary(reference)
