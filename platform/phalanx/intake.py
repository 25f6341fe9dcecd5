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
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Iterable, Mapping
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
    """

    def __init__(
        self,
        tasks: Mapping[int, Task],
        members: Mapping[int, Member],
        decode: Decoder,
        round_: int,
    ) -> None:
        self.tasks = tasks
        self.members = members
        self.round = round_
        self.replicas: list[Replica] = []
        self.events: list[EventReport] = []
        self.rejected: set[int] = set()
        self._seen: set[int] = set()
        # Honest replicas of a file send identical bytes: hash and decode each payload
        # once a round (a repeat costs a dictionary lookup and a comparison of the bytes).
        self._decode = functools.cache(decode)
        self._digest = functools.cache(payload_digest)

    def admit(self, reply: Reply) -> list[Replica]:
        """Check ``reply``; return its replicas, or none when it is refused (and recorded)."""
        member = self.members.get(reply.worker)
        task = self.tasks.get(reply.worker)
        try:
            if member is None or task is None:
                raise ReplyRejectedError(
                    "unassigned_file", f"worker {reply.worker} had no task this round"
                )
            if reply.worker in self._seen:
                raise ReplyRejectedError("malformed_reply", "a second reply for the same task")
            self._seen.add(reply.worker)
            replicas = check_reply(
                reply,
                task,
                client_id=member.client_id,
                public_key=member.public_key,
                decode=self._decode,
                digest=self._digest,
            )
        except ReplyRejectedError as exc:
            rejection = Rejection(reply.worker, exc.kind, exc.reason)
        except Exception as exc:  # nothing a worker sends may stop the run
            # Not shown to be the worker's doing: a fault, and if it strikes most
            # workers of the round, the run fails on it (common_failure).
            log.exception("checking worker %d's reply in round %d", reply.worker, reply.round)
            reason = f"the coordinator could not check this reply: {describe(exc)}"
            rejection = Rejection(reply.worker, EventKind.UNCHECKED_REPLY, reason)
        else:
            self.replicas.extend(replicas)
            return replicas
        self.rejected.add(reply.worker)
        client_id = member.client_id if member else None
        self.events.append(rejection_event(rejection, client_id, self.round))
        return []


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

    def arrived(
        self, reply: Reply, seconds: float, files_at: Mapping[int, float] | None = None
    ) -> None:
        """Take in ``reply``, arrived ``seconds`` after the round began (a transport's call).

        ``files_at`` (simulation) says when each of its files arrived, when they came
        one by one; a file it leaves out was never sent (a compute budget cut it).

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
        self.arrived_at.setdefault(reply.worker, seconds)
        replicas = self.checks.admit(reply)
        if not replicas and reply.worker in self.checks.rejected:
            self._withdraw(reply.worker)
        for replica in replicas:
            at = seconds if files_at is None else files_at.get(replica.file)
            if at is not None:
                self.pieces.append(Piece(replica.worker, replica.file, at, replica.digest))
        if files_at is not None:
            self._withdraw(reply.worker, set(self._files_of(reply.worker)) - set(files_at))

    def failed(self, worker: int, seconds: float) -> None:
        """Note that ``worker`` answered without a reply to check (a transport's call)."""
        self.arrived_at.setdefault(worker, seconds)
        self._withdraw(worker)

    def _files_of(self, worker: int) -> tuple[int, ...]:
        if not 0 <= worker < self.assignment.num_workers:
            return ()
        return self.assignment.files_of(worker)

    def _withdraw(self, worker: int, files: Iterable[int] | None = None) -> None:
        """Stop waiting for ``worker``'s ``files`` (all of them by default) unless some came."""
        delivered = {p.file for p in self.pieces if p.worker == worker}
        chosen = self._files_of(worker) if files is None else files
        self.withdrawn.update((worker, f) for f in chosen if f not in delivered)

    def _awaited(self) -> Assignment:
        """Return the assignment less the pieces that will not come, for the close rules."""
        if not self.withdrawn:
            return self.assignment
        return Assignment(
            self.assignment.num_workers,
            tuple(
                tuple(w for w in workers if (w, f) not in self.withdrawn)
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
        """
        for item in sorted(timed, key=lambda item: (item.seconds, item.reply.worker)):
            reply = item.reply
            if reply.files and not item.files_at:  # its compute budget cut every file
                self.cut.add(reply.worker)
                self._withdraw(reply.worker)
            elif self._closed_before(item.seconds):
                self.arrived_at.setdefault(reply.worker, item.seconds)
                self.after_close.extend(
                    Piece(reply.worker, f, item.files_at[f], payload_digest(p))
                    for f, p in zip(reply.files, reply.payloads, strict=False)
                    if f in item.files_at
                )
            else:
                self.arrived(reply, item.seconds, item.files_at)

    def _closed_before(self, seconds: float) -> bool:
        deadline = self.policy.deadline_s
        if deadline is not None and deadline < seconds:
            return True
        met = self.policy.close_time(
            self._awaited(), self.pieces, dispatched=self.dispatched, **self.options
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
