"""Rounds: the row of a finished round together with its detection events and responses.

Each event joins its case (:mod:`phalanx.store.cases`) as it is written.

:func:`record_round` writes them all at once, inside a savepoint, so a failure
leaves neither behind, even when the caller's transaction carries on. A round
counts as done once the transaction holding :func:`record_round` and
:func:`phalanx.store.checkpoints.save_checkpoint` commits; write both in the
same transaction so a killed coordinator resumes at ``current_round + 1``.

:func:`list_rounds` returns ORM rows; :func:`list_round_records` reads the same
columns into plain records, for read-only listings (no ORM bookkeeping per row).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, and_, bindparam, insert, or_, select, update
from sqlalchemy.orm import Session

from phalanx.agreement_record import stored_agreeing, stored_digests
from phalanx.reports import ClientRound
from phalanx.response_times import LateResponse, WorkerResponse
from phalanx.store.cases import file_events
from phalanx.store.client_rounds import client_round_rows
from phalanx.store.errors import ConflictError, NotFoundError
from phalanx.store.models import (
    Client,
    ClientRoundRow,
    DetectionEvent,
    Round,
    Severity,
    WorkerResponseRow,
)
from phalanx.store.runs import get_run

#: Longest event kind the ``detection_events.kind`` column holds.
KIND_MAX_LENGTH = 64


@dataclass(frozen=True, kw_only=True)
class RoundData:
    """What the coordinator measured in one round.

    Attributes
    ----------
    number : int
        The round number, from 1.
    started_at, finished_at : datetime
        Aware wall-clock bounds of the round.
    duration_s : float, optional
        Measured duration (monotonic clock); defaults to ``finished_at - started_at``.
    timings : dict
        Seconds per phase (``assign``, ``collect``, ``detect``, ...).
    bytes_up, bytes_down : int
        Payload bytes received from and sent to the workers.
    metrics : dict
        Evaluation metrics (``accuracy``, ``loss``, ...).
    num_flagged, num_rejected : int
        Workers flagged by detection, replies rejected before it.
    assignment : dict
        Summary of the assignment (scheme, r, files, ...).
    model_digest : str, optional
        SHA-256 of the model after the round.
    agreement : dict, optional
        The round's agreement graph, as
        :meth:`phalanx.agreement_record.AgreementRecord.to_dict` writes it.
    """

    number: int
    started_at: datetime
    finished_at: datetime
    duration_s: float | None = None
    timings: dict[str, float] = field(default_factory=dict)
    bytes_up: int = 0
    bytes_down: int = 0
    metrics: dict[str, Any] = field(default_factory=dict)
    num_flagged: int = 0
    num_rejected: int = 0
    assignment: dict[str, Any] = field(default_factory=dict)
    model_digest: str | None = None
    agreement: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        """Reject values no real round can have."""
        if self.number < 1:
            raise ValueError(f"round numbers start at 1, got {self.number}")
        counts = {
            "bytes_up": self.bytes_up,
            "bytes_down": self.bytes_down,
            "num_flagged": self.num_flagged,
            "num_rejected": self.num_rejected,
        }
        for name, value in counts.items():
            if value < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")


@dataclass(frozen=True, slots=True)
class RoundRecord:
    """A stored round, read-only: the columns of :class:`phalanx.store.models.Round`.

    Attributes
    ----------
    run_id : str
        The run.
    number, started_at, finished_at, duration_s, timings, bytes_up, bytes_down : see ``Round``
    metrics, num_flagged, num_rejected, assignment, model_digest : see ``Round``
    """

    run_id: str
    number: int
    started_at: datetime
    finished_at: datetime
    duration_s: float
    timings: dict[str, Any]
    bytes_up: int
    bytes_down: int
    metrics: dict[str, Any]
    num_flagged: int
    num_rejected: int
    assignment: dict[str, Any]
    model_digest: str | None


#: The columns :func:`list_round_records` reads, in :class:`RoundRecord`'s order.
_RECORD_COLUMNS = (
    Round.run_id,
    Round.number,
    Round.started_at,
    Round.finished_at,
    Round.duration_s,
    Round.timings,
    Round.bytes_up,
    Round.bytes_down,
    Round.metrics,
    Round.num_flagged,
    Round.num_rejected,
    Round.assignment,
    Round.model_digest,
)


@dataclass(frozen=True, kw_only=True)
class EventData:
    """One detection event of a round.

    Attributes
    ----------
    kind : str
        What was detected; see :class:`phalanx.store.models.EventKind`.
    severity : Severity
        ``high`` for proof of misbehaviour, ``low`` for suspicion.
    worker : int, optional
        The worker's index in the run.
    client_id : str, optional
        The registered client, when known.
    evidence : dict
        JSON-compatible evidence a person can read.
    """

    kind: str
    severity: Severity
    worker: int | None = None
    client_id: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Reject a kind the ``kind`` column cannot hold."""
        if not 0 < len(self.kind) <= KIND_MAX_LENGTH:
            raise ValueError(f"event kind must have 1 to {KIND_MAX_LENGTH} characters")


def record_round(
    session: Session,
    run_id: str,
    round_data: RoundData,
    events: Iterable[EventData] = (),
    responses: Iterable[WorkerResponse] = (),
    late_responses: Iterable[LateResponse] = (),
    seen_clients: Iterable[str] = (),
    clients: Iterable[ClientRound] = (),
) -> Round:
    """Write a finished round, its detection events and its workers' responses atomically.

    Also sets the run's ``current_round`` to this round.

    Parameters
    ----------
    session : Session
        The caller's session; the writes happen in a savepoint of its transaction.
    run_id : str
        The run.
    round_data : RoundData
        The round's measurements.
    events : Iterable[EventData]
        The round's detection events.
    responses : Iterable[WorkerResponse]
        Each dispatched worker's response time (:mod:`phalanx.response_times`), one
        per worker; none when the round was not timed.
    late_responses : Iterable[LateResponse]
        Replies to earlier rounds (or to this one, heard while it sent the model
        again after its close) that came during this one: that round's ``missing``
        response of that worker becomes ``late``, with its time. One that matches no
        missing response (its round was not timed), or names a later round, changes
        nothing.
    seen_clients : Iterable[str]
        The clients a reply came from this round: their ``last_seen_at`` becomes the
        round's end (never earlier than it was).
    clients : Iterable[ClientRound]
        Local data: each worker's row of the per-client view (its distance to the
        aggregate, its federated evaluation), one per worker given work.

    Returns
    -------
    Round
        The stored round.

    Raises
    ------
    NotFoundError
        When no run has this id.
    ConflictError
        When the round number is not after the run's ``current_round``.
    """
    run = get_run(session, run_id)
    if run.current_round is not None and round_data.number <= run.current_round:
        raise ConflictError(
            f"run {run_id!r} already recorded round {run.current_round}; "
            f"got round {round_data.number}"
        )
    duration_s = round_data.duration_s
    if duration_s is None:
        duration_s = (round_data.finished_at - round_data.started_at).total_seconds()
    row = Round(
        run_id=run_id,
        number=round_data.number,
        started_at=round_data.started_at,
        finished_at=round_data.finished_at,
        duration_s=duration_s,
        timings=dict(round_data.timings),
        bytes_up=round_data.bytes_up,
        bytes_down=round_data.bytes_down,
        metrics=dict(round_data.metrics),
        num_flagged=round_data.num_flagged,
        num_rejected=round_data.num_rejected,
        assignment=dict(round_data.assignment),
        model_digest=round_data.model_digest,
        agreement=round_data.agreement,
    )
    rows = [
        DetectionEvent(
            run_id=run_id,
            round=round_data.number,
            client_id=event.client_id,
            worker=event.worker,
            kind=str(event.kind),
            severity=event.severity,
            evidence=dict(event.evidence),
        )
        for event in events
    ]
    timed = [
        {
            "run_id": run_id,
            "round": round_data.number,
            "worker": response.worker,
            "client_id": response.client_id,
            "seconds": response.seconds,
            "status": response.status,
        }
        for response in responses
    ]
    with session.begin_nested():
        session.add(row)
        run.current_round = round_data.number
        session.flush()
        file_events(session, run_id, rows)
        if timed:
            # One executemany, not an ORM object per worker: a round may time 10,000.
            session.execute(insert(WorkerResponseRow), timed)
        late = [
            {"r_run": run_id, "r_round": r.round, "r_worker": r.worker, "r_seconds": r.seconds}
            for r in late_responses
            if r.round <= round_data.number  # its own: after its responses went in
        ]
        if late:
            session.execute(_LATE_UPDATE, late)
        _mark_seen(session, sorted(set(seen_clients)), round_data.finished_at)
        per_client = client_round_rows(run_id, round_data.number, clients)
        if per_client:
            session.execute(insert(ClientRoundRow), per_client)
    return row


#: Clients marked seen per statement (SQLite bounds a statement's parameters).
_SEEN_BATCH = 1000


def _mark_seen(session: Session, client_ids: Sequence[str], at: datetime) -> None:
    for start in range(0, len(client_ids), _SEEN_BATCH):
        session.execute(
            update(Client)
            .where(Client.id.in_(client_ids[start : start + _SEEN_BATCH]))
            .where(or_(Client.last_seen_at.is_(None), Client.last_seen_at < at))
            .values(last_seen_at=at)
            .execution_options(synchronize_session=False)
        )


_RESPONSES = cast(Table, WorkerResponseRow.__table__)
#: A missing (or earlier-timed) response of an earlier round turned late, for one
#: executemany.
_LATE_UPDATE = (
    update(_RESPONSES)
    .where(
        and_(
            _RESPONSES.c.run_id == bindparam("r_run"),
            _RESPONSES.c.round == bindparam("r_round"),
            _RESPONSES.c.worker == bindparam("r_worker"),
            # Missing, or timed earlier (one message per file: its first files came by
            # the close, this one after it): the latest of a worker's replies counts.
            or_(
                _RESPONSES.c.status == "missing",
                _RESPONSES.c.seconds < bindparam("r_seconds"),
            ),
        )
    )
    .values(status="late", seconds=bindparam("r_seconds"))
)


def get_round(session: Session, run_id: str, number: int) -> Round:
    """Return one round of a run.

    Raises
    ------
    NotFoundError
        When the run has no such round.
    """
    row = session.get(Round, (run_id, number))
    if row is None:
        raise NotFoundError(f"round {number} of run", run_id)
    return row


def get_agreement(session: Session, run_id: str, number: int) -> dict[str, Any] | None:
    """Return the stored agreement graph of one round (``None`` when it has none).

    Rounds recorded before the graph was stored with each round have none. Read
    it with :meth:`phalanx.agreement_record.AgreementRecord.from_dict`.

    Raises
    ------
    NotFoundError
        When the run has no such round.
    """
    query = select(Round.agreement).where(Round.run_id == run_id, Round.number == number)
    found = session.execute(query).one_or_none()
    if found is None:
        raise NotFoundError(f"round {number} of run", run_id)
    stored: dict[str, Any] | None = found[0]
    return stored


def agreeing_groups(
    session: Session, keys: Iterable[tuple[str, int]]
) -> dict[tuple[str, int], tuple[int, ...]]:
    """Return the agreeing group stored with each of these rounds, by ``(run_id, number)``.

    Reads only the two fields of each round's agreement record it needs, not the
    record. Rounds without a group (recorded before it was kept, or malformed) are
    left out; their events list the group themselves.
    """
    groups: dict[tuple[str, int], tuple[int, ...]] = {}
    for key, version, agreeing in _record_fields(session, keys, "agreeing"):
        members = stored_agreeing(version, agreeing)
        if members is not None:
            groups[key] = members
    return groups


def flag_digests(
    session: Session, keys: Iterable[tuple[str, int]]
) -> dict[tuple[str, int], tuple[str, ...]]:
    """Return the full digests of the flags' replicas stored with these rounds.

    By ``(run_id, number)``; a round's events name each replica by a prefix of its
    digest (:func:`phalanx.agreement_record.full_digest` finds it in these). Reads
    only the two fields of each record it needs. Rounds without them (recorded before
    they were kept, or malformed) are left out; their events hold full digests.
    """
    found: dict[tuple[str, int], tuple[str, ...]] = {}
    for key, version, digests in _record_fields(session, keys, "digests"):
        listed = stored_digests(version, digests)
        if listed:
            found[key] = listed
    return found


def _record_fields(
    session: Session, keys: Iterable[tuple[str, int]], field: str
) -> list[tuple[tuple[str, int], object, object]]:
    """Each wanted round's key, its agreement record's version and its ``field``."""
    wanted = set(keys)
    if not wanted:
        return []
    query = select(
        Round.run_id, Round.number, Round.agreement["version"], Round.agreement[field]
    ).where(
        Round.run_id.in_({run for run, _ in wanted}),
        Round.number.in_({number for _, number in wanted}),
    )
    return [
        ((run_id, number), version, value)
        for run_id, number, version, value in session.execute(query)
        if (run_id, number) in wanted
    ]


def list_rounds(session: Session, run_id: str) -> Sequence[Round]:
    """Return the rounds of a run in order.

    Parameters
    ----------
    session : Session
        The caller's session.
    run_id : str
        The run.

    Returns
    -------
    Sequence[Round]
        Every recorded round, by number.
    """
    return session.scalars(select(Round).where(Round.run_id == run_id).order_by(Round.number)).all()


def list_round_records(session: Session, run_id: str) -> list[RoundRecord]:
    """Return the rounds of a run in order, as plain records (columns only, no ORM rows).

    Parameters
    ----------
    session : Session
        The caller's session.
    run_id : str
        The run.

    Returns
    -------
    list[RoundRecord]
        Every recorded round, by number; empty for a run without rounds and
        for an unknown run alike.
    """
    query = select(*_RECORD_COLUMNS).where(Round.run_id == run_id).order_by(Round.number)
    return [RoundRecord(*row) for row in session.execute(query)]
