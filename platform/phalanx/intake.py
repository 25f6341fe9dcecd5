"""A round's replies taken in as they arrive: each checked first, then counted by the policy.

:class:`RoundChecks` checks one reply at a time against its task (signature,
nonce, files, payloads: :func:`~phalanx.replies.check_reply`) and keeps the
round's replicas, refusals and their events. :class:`Intake` puts a collection
policy behind it: a reply counts toward closing a file or the round only once it
has passed the checks (a forged or malformed reply must not close a quorum), at
the time it arrived. The same intake serves a deployed round, fed by the
transport as replies come in (it is the transport's
:class:`~phalanx.exchange.Listener`), and a simulated one, fed in the order of
the systems model's arrival times (:meth:`Intake.feed`); either way, what came
after the close is late and left out, and what never came is missing. A worker
that answered without a usable reply (refused by the checks, failed on its side)
or whose compute budget cut some files is not waited for on those files: nothing
more of them will come.

In a deployment a worker's task may go out as one message per file
(``collect.messages = "per_file"``): each reply is checked against the part of the
task its message asked (``Reply.asked``, the transport's record), a repeat is a
second reply to the same message, and a refused or failed message withdraws its
own files alone. With a compute budget (``collect.drop_compute``) a deployed reply
may cover the first files of what it was asked (:func:`~phalanx.replies.check_reply`
with ``partial``); the files it leaves out are withdrawn and counted as cut, never
judged, unless the reply came before its budget could have been spent (on the
round's clock from before its first push): then it is refused, since a worker that
cut at once would otherwise skip every file unchecked and look quick.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any

from phalanx.arrivals import TimedReply
from phalanx.assignment import Assignment
from phalanx.collect.pieces import Collection, Piece, split
from phalanx.collect.registry import CollectionPolicy
from phalanx.detection import Replica, payload_digest
from phalanx.event_kinds import EventKind
from phalanx.faults import describe
from phalanx.replies import Decoder, Rejection, Reply, ReplyRejectedError, Task, check_reply
from phalanx.reports import EventReport, rejection_event
from phalanx.roster import Member

log = logging.getLogger(__name__)

#: A simulated round asks its close rule after every 1/16-th more replies (see
#: :meth:`Intake.feed`): at most a sixteenth more replies checked than a rule asked
#: after every reply would check, and O(log K) questions instead of K.
PROBE_SPACING = 16

Outcome = list[Replica] | Rejection
"""What the checks say of a reply: its replicas, or why it is refused."""

MessageKey = tuple[int, tuple[int, ...] | None]
"""A reply's worker and the files its message asked (``None``: its whole task)."""


class RoundChecks:
    """The checks of one round's replies, one reply at a time.

    Parameters
    ----------
    tasks : Mapping[int, Task]
        Worker -> its task this round.
    members : Mapping[int, Member]
        Worker -> its registered identity.
    decode : Decoder
        Turns a payload into an update.
    round_ : int
        The round, for the events.
    partial : bool
        Whether a reply may cover the first files of what it was asked (a deployed
        compute budget, DropCompute).
    """

    def __init__(
        self,
        tasks: Mapping[int, Task],
        members: Mapping[int, Member],
        decode: Decoder,
        round_: int,
        *,
        partial: bool = False,
    ) -> None:
        self.tasks = tasks
        self.members = members
        self.round = round_
        self.partial = partial
        # Worker -> file -> the compute seconds its accepted reply claims (a claim).
        self.compute_s: dict[int, dict[int, float]] = {}
        self.replicas: list[Replica] = []
        # Local data: worker -> the sample count its accepted (signed) reply reports.
        self.samples: dict[int, int] = {}
        self.events: list[EventReport] = []
        self.rejected: set[int] = set()
        self._seen: set[MessageKey] = set()
        # Honest replicas of a file send identical bytes: hash and decode each payload
        # once a round (a repeat costs a dictionary lookup and a comparison of the bytes).
        self._decode = functools.cache(decode)
        self._digest = functools.cache(payload_digest)

    def check(self, reply: Reply, *, also_seen: Set[MessageKey] = frozenset()) -> Outcome:
        """Check ``reply`` without recording anything: its replicas, or why it is refused.

        ``also_seen`` names the messages (:func:`message_key`) whose replies were
        checked but not yet recorded (a second reply to one of them is refused as a
        repeat).
        """
        member = self.members.get(reply.worker)
        task = self.tasks.get(reply.worker)
        try:
            if member is None or task is None:
                raise ReplyRejectedError(
                    "unassigned_file", f"worker {reply.worker} had no task this round"
                )
            key = message_key(reply)
            if key in self._seen or key in also_seen:
                raise ReplyRejectedError("malformed_reply", "a second reply for the same task")
            asked = task if reply.asked in (None, task.files) else _part(task, reply.asked)
            return check_reply(
                reply,
                asked,
                client_id=member.client_id,
                public_key=member.public_key,
                decode=self._decode,
                digest=self._digest,
                partial=self.partial,
            )
        except ReplyRejectedError as exc:
            return Rejection(reply.worker, exc.kind, exc.reason)
        except Exception as exc:  # nothing a worker sends may stop the run
            # Not shown to be the worker's doing: a fault, and if it strikes most
            # workers of the round, the run fails on it (common_failure).
            log.exception("checking worker %d's reply in round %d", reply.worker, reply.round)
            reason = f"the coordinator could not check this reply: {describe(exc)}"
            return Rejection(reply.worker, EventKind.UNCHECKED_REPLY, reason)

    def record(self, reply: Reply, outcome: Outcome) -> list[Replica]:
        """Record what :meth:`check` said of ``reply``; return its replicas (none if refused)."""
        if reply.worker in self.tasks and reply.worker in self.members:
            self._seen.add(message_key(reply))
        if not isinstance(outcome, Rejection):
            self.replicas.extend(outcome)
            if reply.num_samples is not None:
                self.samples[reply.worker] = reply.num_samples
            if reply.compute_s:
                claims = self.compute_s.setdefault(reply.worker, {})
                claims.update(zip(reply.files, reply.compute_s, strict=True))
            return outcome
        self.rejected.add(reply.worker)
        member = self.members.get(reply.worker)
        client_id = member.client_id if member else None
        self.events.append(rejection_event(outcome, client_id, self.round))
        return []

    def forget_payloads(self) -> None:
        """Let go of the payloads the round's hash and decode caches hold.

        The replicas keep their decoded updates; a reply checked after this is hashed
        and decoded afresh.
        """
        self._decode.cache_clear()
        self._digest.cache_clear()

    def admit(self, reply: Reply) -> list[Replica]:
        """Check ``reply`` and record it; return its replicas, or none when it is refused."""
        return self.record(reply, self.check(reply))

    def admit_all(self, replies: Iterable[Reply]) -> None:
        """:meth:`admit` each of ``replies``, in order."""
        for reply in replies:
            self.admit(reply)


def _part(task: Task, files: Sequence[int]) -> Task:
    """Return the part of ``task`` a message asked: ``files``, or the reply is refused.

    The transport names what it sent to the reply's worker; other files mean the
    reply answers as a worker it was not sent as.
    """
    if not set(files) <= set(task.files):
        raise ReplyRejectedError(
            "unassigned_file",
            f"reply answers a message of files {list(files)[:8]} not given to worker {task.worker}",
        )
    return task.narrowed(files)


CLOCK_SLACK = 0.01
"""Share of a compute budget by which a worker's clock may run ahead of the coordinator's."""


def _cut_in_time(reply: Reply, task: Task | None, seconds: float, outcome: Outcome) -> Outcome:
    """Return ``outcome``, or a refusal when ``reply`` was cut before its budget could be spent.

    A worker computes only after the round's first message began to go out, so its
    compute on the round cannot exceed the ``seconds`` since then: a deployed reply that
    leaves asked files out (its budget spent) yet came before the budget had passed did
    not spend it. It would otherwise do no work at all, never be checked and look quick
    on the record.
    """
    if isinstance(outcome, Rejection) or task is None or task.budget_s is None:
        return outcome
    if reply.asked is None or len(outcome) == len(reply.asked):
        return outcome
    if seconds >= task.budget_s * (1 - CLOCK_SLACK):
        return outcome
    return Rejection(
        reply.worker,
        EventKind.MALFORMED_REPLY,
        f"reply leaves out {len(reply.asked) - len(outcome)} asked files as cut by its "
        f"compute budget of {task.budget_s:g} s, yet came {seconds:.3g} s after the round's "
        "first message went out: a budget cannot be spent before it has passed",
    )


def message_key(reply: Reply) -> MessageKey:
    """Return the message ``reply`` answers: its worker and the files the message asked."""
    return (reply.worker, reply.asked)


@dataclass
class _Taken:
    """What one arrival adds to a round: checked pieces, and pairs that will not come."""

    worker: int
    seconds: float
    reply: Reply | None = None
    outcome: Outcome | None = None
    pieces: list[Piece] = field(default_factory=list)
    withdrawn: set[tuple[int, int]] = field(default_factory=set)
    cut: bool = False
    uncovered: int = 0
    """Files a deployed reply was asked and does not cover (its compute budget cut them)."""


@dataclass
class Intake:
    """A round's arrivals, checked as they come, until its collection policy closes it.

    Parameters
    ----------
    policy : CollectionPolicy
        When the round stops waiting.
    assignment : Assignment
        The round's assignment.
    dispatched : frozenset of int
        Workers given work.
    checks : RoundChecks
        The round's reply checks; only replicas that pass them become pieces.
    options : Mapping
        The close rule's options for this round (adaptive_k's current ``k``).
    """

    policy: CollectionPolicy
    assignment: Assignment
    dispatched: frozenset[int]
    checks: RoundChecks
    options: Mapping[str, Any] = field(default_factory=dict)
    pieces: list[Piece] = field(default_factory=list)
    arrived_at: dict[int, float] = field(default_factory=dict)
    after_close: list[Piece] = field(default_factory=list)
    cut: set[int] = field(default_factory=set)
    withdrawn: set[tuple[int, int]] = field(default_factory=set)
    waited_s: float = 0.0
    files_cut: int = 0
    _delivered: dict[int, set[int]] = field(default_factory=dict, repr=False)

    def arrived(
        self,
        reply: Reply,
        seconds: float,
        files_at: Mapping[int, float] | None = None,
        *,
        since_sent: float | None = None,
    ) -> None:
        """Take in ``reply``, arrived ``seconds`` after the round began (a transport's call).

        ``files_at`` (simulation) says when each of its files arrived, when they came
        one by one; a file it leaves out was never sent (a compute budget cut it).
        ``since_sent`` (deployed) is how long before the reply was handed over the
        round's first message began to go out, on the coordinator's clock: more than
        any worker can have computed on the round (``seconds`` when not given).

        Raises
        ------
        ValueError
            When ``seconds`` is not a finite time ``>= 0``: the transport's clock, never
            the worker's, so the host's bug, refused before the reply counts for anything.
        """
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"a reply's arrival time must be finite and >= 0, got {seconds!r}")
        if reply.need_sync:  # not an answer yet: the worker asks for the full model
            return
        outcome = self.checks.check(reply)
        if files_at is None:
            task = self.checks.tasks.get(reply.worker)
            outcome = _cut_in_time(
                reply, task, seconds if since_sent is None else since_sent, outcome
            )
        self._apply(self._take(reply, seconds, files_at, outcome))

    def failed(self, worker: int, seconds: float, files: Sequence[int] | None = None) -> None:
        """Note that ``worker`` answered without a reply to check (a transport's call).

        ``files``: those of the message it answered; ``None``: all of its task's.
        """
        self.arrived_at.setdefault(worker, seconds)
        self._apply(_Taken(worker, seconds, withdrawn=self._unsent(worker, files)))

    def _take(
        self,
        reply: Reply,
        seconds: float,
        files_at: Mapping[int, float] | None,
        outcome: Outcome,
        staged: Mapping[int, Set[int]] | None = None,
    ) -> _Taken:
        """Compute what ``reply`` adds to the round, without changing the round.

        ``staged`` names the files of taken (not yet applied) replies, by worker.
        """
        taken = _Taken(reply.worker, seconds, reply, outcome)
        if isinstance(outcome, Rejection):
            taken.withdrawn = self._unsent(reply.worker, reply.asked, staged=staged)
            return taken
        for replica in outcome:
            at = seconds if files_at is None else files_at.get(replica.file)
            if at is not None:
                taken.pieces.append(Piece(replica.worker, replica.file, at, replica.digest))
        if files_at is None and reply.asked is not None:
            # A deployed reply cut short by its compute budget: the rest will not come.
            uncovered = set(reply.asked) - {replica.file for replica in outcome}
            taken.uncovered = len(uncovered)
            taken.withdrawn = self._unsent(reply.worker, uncovered, staged=staged)
        if files_at is not None:
            cut = set(self._files_of(reply.worker)) - set(files_at)
            sent = {p.file for p in taken.pieces}
            taken.withdrawn = self._unsent(reply.worker, cut - sent, staged=staged)
        return taken

    def _apply(self, taken: _Taken) -> None:
        """Make what :meth:`_take` computed part of the round."""
        if taken.reply is not None and taken.outcome is not None:
            self.arrived_at.setdefault(taken.worker, taken.seconds)
            self.checks.record(taken.reply, taken.outcome)
        for piece in taken.pieces:
            self.pieces.append(piece)
            self._delivered.setdefault(piece.worker, set()).add(piece.file)
        self.withdrawn.update(taken.withdrawn)
        self.files_cut += taken.uncovered

    def _files_of(self, worker: int) -> tuple[int, ...]:
        if not 0 <= worker < self.assignment.num_workers:
            return ()
        return self.assignment.files_of(worker)

    def _unsent(
        self,
        worker: int,
        files: Iterable[int] | None = None,
        staged: Mapping[int, Set[int]] | None = None,
    ) -> set[tuple[int, int]]:
        """Return the pairs of ``worker``'s ``files`` (all by default) of which no piece came."""
        delivered = self._delivered.get(worker, set())
        pending = (staged or {}).get(worker, frozenset())
        chosen = self._files_of(worker) if files is None else files
        return {(worker, f) for f in chosen if f not in delivered and f not in pending}

    def _awaited(self, withdrawn: Set[tuple[int, int]] | None = None) -> Assignment:
        """Return the assignment less the pieces that will not come, for the close rules."""
        withdrawn = self.withdrawn if withdrawn is None else withdrawn
        if not withdrawn:
            return self.assignment
        return Assignment(
            self.assignment.num_workers,
            tuple(
                tuple(w for w in workers if (w, f) not in withdrawn)
                for f, workers in enumerate(self.assignment.files)
            ),
            self.assignment.scheme,
        )

    def closed(self, seconds: float) -> bool:
        """Whether the round, ``seconds`` after it began, waits no longer.

        The latest time a transport asks is how long a live round waited: a round its
        policy never closed ends then (:meth:`collection`), not at its last arrival.
        """
        self.waited_s = max(self.waited_s, seconds)
        return self.policy.closes_by(
            seconds, self._awaited(), self.pieces, dispatched=self.dispatched, **self.options
        )

    def feed(self, timed: Iterable[TimedReply]) -> None:
        """Take in a simulated round's replies in the order of their (first) arrival times.

        A reply that arrives after the round closed is never checked (nobody would
        have seen it); its pieces are late, digests of the payloads as sent.

        Asking the close rule after every reply costs O(K) a question, O(K^2) a
        round. The rules are monotone (more pieces, or fewer awaited, never close a
        round later), so once the round is closed before some reply it is closed
        before every later one: replies are checked in order without being recorded,
        the rule is asked only after every ``1 / PROBE_SPACING``-th share of them,
        and when it first says closed, a bisection over the replies since its last
        answer finds the first reply that came too late. Those after it that were
        checked are dropped unrecorded, as if never checked.
        """
        order = sorted(timed, key=lambda item: (item.seconds, item.reply.worker))
        steps: list[_Taken] = []
        staged: dict[int, set[int]] = {}
        staged_messages: set[MessageKey] = set()
        first_late = len(order)
        answered = 0  # steps[:answered] were seen by the rule, and it said open
        for i, item in enumerate(order):
            reply = item.reply
            if reply.files and not item.files_at:  # its compute budget cut every file
                steps.append(_Taken(reply.worker, item.seconds, cut=True))
            elif reply.need_sync:  # asks for the model: neither an answer nor a piece
                steps.append(_Taken(reply.worker, item.seconds))
            else:
                outcome = self.checks.check(reply, also_seen=staged_messages)
                step = self._take(reply, item.seconds, item.files_at, outcome, staged)
                staged_messages.add(message_key(reply))
                for piece in step.pieces:
                    staged.setdefault(piece.worker, set()).add(piece.file)
                steps.append(step)
            if steps[-1].cut:
                steps[-1].withdrawn = self._unsent(reply.worker, staged=staged)
            at_end = i + 1 == len(order)
            if at_end or i + 1 - answered >= max(1, (i + 1) // PROBE_SPACING):
                if not at_end and not self._closed_after(steps, i + 1, order[i + 1].seconds):
                    answered = i + 1
                    continue
                first_late = self._first_late(steps, order, answered, i + 1)
                break
        for step in steps[:first_late]:
            self._commit(step)
        for item in order[first_late:]:
            reply = item.reply
            if reply.files and not item.files_at:
                self._commit(_Taken(reply.worker, item.seconds, cut=True))
            else:
                self.arrived_at.setdefault(reply.worker, item.seconds)
                self.after_close.extend(
                    Piece(reply.worker, f, item.files_at[f], payload_digest(p))
                    for f, p in zip(reply.files, reply.payloads, strict=False)
                    if f in item.files_at
                )

    def _commit(self, step: _Taken) -> None:
        if step.cut:
            self.cut.add(step.worker)
            step.withdrawn = self._unsent(step.worker)
        self._apply(step)

    def _first_late(
        self, steps: Sequence[_Taken], order: Sequence[TimedReply], low: int, high: int
    ) -> int:
        """Return the index of the first reply of ``order`` after the close, in ``[low, high]``.

        The round is closed before reply ``high`` (or ``high`` is past the last), and
        the close rule is monotone: a bisection.
        """
        while low < high:
            middle = (low + high) // 2
            if self._closed_after(steps, middle, order[middle].seconds):
                high = middle
            else:
                low = middle + 1
        return high

    def _closed_after(self, steps: Sequence[_Taken], n: int, seconds: float) -> bool:
        """Whether the round, given the first ``n`` steps, closed before ``seconds``."""
        deadline = self.policy.deadline_s
        if deadline is not None and deadline < seconds:
            return True
        pieces = [*self.pieces, *(p for step in steps[:n] for p in step.pieces)]
        withdrawn = self.withdrawn.union(*(step.withdrawn for step in steps[:n]))
        met = self.policy.close_time(
            self._awaited(withdrawn), pieces, dispatched=self.dispatched, **self.options
        )
        return met is not None and met < seconds

    def collection(self) -> Collection:
        """Close the round over the checked pieces; list the unchecked late ones too.

        Pieces that were withdrawn (never to come) are listed as missing. A live round
        whose policy never held and that had no deadline closes when its transport
        stopped waiting (its timeout, or every reply in), not at the last arrival: the
        time it took, and a silent worker's lower bound for the bandit.
        """
        closing = self.policy(
            self._awaited(), self.pieces, dispatched=self.dispatched, **self.options
        )
        if closing.closed_by == "last_arrival" and self.waited_s > closing.closed_at:
            closing = split(
                self.assignment,
                self.pieces,
                closed_at=self.waited_s,
                closed_by="last_arrival",
                dispatched=self.dispatched,
            )
        if not self.after_close and not self.withdrawn:
            return closing
        return split(
            self.assignment,
            [*self.pieces, *self.after_close],
            closed_at=closing.closed_at,
            closed_by=closing.closed_by,
            dispatched=self.dispatched,
        )

    def kept_replicas(self, collection: Collection) -> list[Replica]:
        """Return the checked replicas whose pieces the round kept, by worker.

        By worker, not by arrival, so that a round's detection and aggregate do not
        depend on which of two replies the network delivered first.
        """
        kept = {(p.worker, p.file) for p in collection.kept}
        chosen = [r for r in self.checks.replicas if (r.worker, r.file) in kept]
        return sorted(chosen, key=lambda r: r.worker)
