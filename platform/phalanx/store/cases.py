"""Cases: the detection events of one client in one run, reviewed together.

A run that flags a worker every round writes an event every round; an operator
decides about the worker once. So every event belongs to a *case*, keyed by its
run and its subject (:func:`case_subject`): the client it names, else its worker,
else the run's round notices. The case opens with its first event and gathers the
later ones; its row (:class:`~phalanx.store.models.DetectionCase`) keeps the
counts, the first and last round, the highest severity, its latest event and its
strongest one (the latest of the highest severity), updated in the transaction
that records each round (:func:`file_events`) and each review
(:func:`review_cases`, :func:`recount`). The review queue therefore reads a page of
cases by an index, whatever the number of events behind them.

Reviewing a case closes all its open events at once. Dismissing may also mute the
dismissed kinds for the case (:func:`mute_kinds`): a later event of a muted kind is
stored like any other, already dismissed, with ``muted`` set and the muting
operator as its reviewer. An operator may lift a mute (:func:`unmute_kinds`):
the events it dismissed stay dismissed, and later events of the kind arrive open.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import ColumnElement, and_, case, exists, func, select, update
from sqlalchemy.orm import Session

from phalanx.store.errors import ConflictError, NotFoundError
from phalanx.store.models import (
    CaseKind,
    DetectionCase,
    DetectionEvent,
    ReviewStatus,
    Severity,
)
from phalanx.store.types import utcnow

#: Largest page :func:`list_cases` returns.
MAX_PAGE_SIZE = 500
#: Most cases one review may decide at once.
MAX_REVIEW_CASES = 100

#: Severity as an order: higher is stronger evidence.
SEVERITY_RANK = {Severity.LOW: 1, Severity.MEDIUM: 2, Severity.HIGH: 3}


def case_subject(client_id: str | None, worker: int | None) -> str:
    """Return the subject of an event's case: its client, else its worker, else ``round``."""
    if client_id is not None:
        return f"client:{client_id}"
    if worker is not None:
        return f"worker:{worker}"
    return "round"


def status_of(open_count: int, confirmed_count: int) -> ReviewStatus:
    """Return the status of a case: open while an event is, confirmed if one was, else dismissed."""
    if open_count > 0:
        return ReviewStatus.OPEN
    return ReviewStatus.CONFIRMED if confirmed_count > 0 else ReviewStatus.DISMISSED


# ------------------------------------------------------------- recording


def file_events(
    session: Session, run_id: str, rows: Sequence[DetectionEvent], *, now: datetime | None = None
) -> None:
    """Add a round's new events to the session, each in its case; flush.

    Opens the cases that do not exist yet, stores events of a kind muted for their
    case already dismissed (``muted``, reviewed by whoever muted it), and updates
    each case's counts, rounds, severity, latest and strongest event. The cases are
    locked first (``FOR UPDATE`` on PostgreSQL), as reviews lock them, and read afresh:
    a coordinator's session may hold a case that a review has changed since.

    Parameters
    ----------
    session : Session
        The caller's session, inside its transaction.
    run_id : str
        The run every event belongs to.
    rows : Sequence[DetectionEvent]
        The new events, not yet added to the session.
    now : datetime, optional
        Time of a muted event's dismissal; defaults to UTC now.
    """
    if not rows:
        return
    now = now or utcnow()
    by_subject: dict[str, list[DetectionEvent]] = defaultdict(list)
    for row in rows:
        by_subject[case_subject(row.client_id, row.worker)].append(row)
    cases = _cases_for(session, run_id, by_subject, now=now)
    muted = _mutes(session, [c.id for c in cases.values()])
    for subject, members in by_subject.items():
        found = cases[subject]
        for row in members:
            row.case_id = found.id
            mute = muted.get((found.id, row.kind))
            if mute is not None:
                row.review_status = ReviewStatus.DISMISSED
                row.reviewed_by = mute.muted_by
                row.reviewed_at = now
                row.note = mute.mute_note
                row.muted = True
    session.add_all(rows)
    session.flush()
    for subject, members in by_subject.items():
        _count_in(cases[subject], members, now=now)
    _count_kinds(session, rows)
    session.flush()


def _cases_for(
    session: Session, run_id: str, subjects: Collection[str], *, now: datetime
) -> dict[str, DetectionCase]:
    """Return the run's case of each subject, locked; open (and flush) the missing ones."""
    query = (
        select(DetectionCase)
        .where(DetectionCase.run_id == run_id, DetectionCase.subject.in_(list(subjects)))
        .order_by(DetectionCase.id)  # the order reviews lock in
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    cases = {c.subject: c for c in session.scalars(query)}
    for subject in subjects:
        if subject not in cases:
            cases[subject] = DetectionCase(
                run_id=run_id,
                subject=subject,
                review_status=ReviewStatus.OPEN,
                severity=Severity.LOW,
                event_count=0,
                open_count=0,
                confirmed_count=0,
                muted_count=0,
                first_round=0,
                last_round=0,
                latest_event_id=0,
                strongest_event_id=0,
                opened_at=now,
                updated_at=now,
            )
            session.add(cases[subject])
    session.flush()
    return cases


def _mutes(session: Session, case_ids: Collection[int]) -> dict[tuple[int, str], CaseKind]:
    if not case_ids:
        return {}
    query = (
        select(CaseKind)
        .where(CaseKind.case_id.in_(list(case_ids)), CaseKind.muted_at.is_not(None))
        .execution_options(populate_existing=True)
    )
    return {(k.case_id, k.kind): k for k in session.scalars(query)}


def _count_in(found: DetectionCase, members: Sequence[DetectionEvent], *, now: datetime) -> None:
    """Fold new events (flushed, with ids) into their case's row."""
    fresh = found.event_count == 0
    if fresh:
        found.client_id = members[0].client_id
        found.worker = members[0].worker
        found.first_round = min(m.round for m in members)
    strongest_rank = 0 if fresh else SEVERITY_RANK[found.severity]
    for member in sorted(members, key=lambda m: m.id):
        rank = SEVERITY_RANK[member.severity]
        if rank >= strongest_rank:
            strongest_rank = rank
            found.severity = member.severity
            found.strongest_event_id = member.id
    found.event_count += len(members)
    found.open_count += sum(m.review_status == ReviewStatus.OPEN for m in members)
    found.muted_count += sum(bool(m.muted) for m in members)
    found.last_round = max(found.last_round, *(m.round for m in members))
    found.latest_event_id = max(found.latest_event_id, *(m.id for m in members))
    found.review_status = status_of(found.open_count, found.confirmed_count)
    found.updated_at = now


def _count_kinds(session: Session, rows: Sequence[DetectionEvent]) -> None:
    counted = Counter((row.case_id, row.kind) for row in rows if row.case_id is not None)
    case_ids = {case_id for case_id, _ in counted}
    query = (
        select(CaseKind)
        .where(CaseKind.case_id.in_(list(case_ids)))
        .execution_options(populate_existing=True)
    )
    stored = {(k.case_id, k.kind): k for k in session.scalars(query)}
    for (case_id, kind), count in counted.items():
        if (case_id, kind) in stored:
            stored[case_id, kind].event_count += count
        else:
            session.add(CaseKind(case_id=case_id, kind=kind, event_count=count))


# --------------------------------------------------------------- reading


class CaseSort(StrEnum):
    """How the review queue orders cases."""

    SEVERITY = "severity"
    COUNT = "count"
    RECENCY = "recency"


@dataclass(frozen=True, kw_only=True)
class CaseFilter:
    """Which cases to list or count; ``None`` means any.

    ``kind`` keeps the cases holding at least one event of that kind.
    """

    run_id: str | None = None
    client_id: str | None = None
    kind: str | None = None
    review_status: ReviewStatus | None = None
    severity: Severity | None = None

    def conditions(self) -> list[ColumnElement[bool]]:
        """Return the SQL conditions this filter stands for."""
        conditions: list[ColumnElement[bool]] = []
        if self.run_id is not None:
            conditions.append(DetectionCase.run_id == self.run_id)
        if self.client_id is not None:
            conditions.append(DetectionCase.client_id == self.client_id)
        if self.review_status is not None:
            conditions.append(DetectionCase.review_status == self.review_status)
        if self.severity is not None:
            conditions.append(DetectionCase.severity == self.severity)
        if self.kind is not None:
            conditions.append(
                exists().where(CaseKind.case_id == DetectionCase.id, CaseKind.kind == self.kind)
            )
        return conditions


@dataclass(frozen=True)
class CasePage:
    """One page of cases.

    Attributes
    ----------
    items : Sequence[DetectionCase]
        The cases of this page.
    total : int
        Cases matching the filter, over every page.
    next_offset : int or None
        Offset of the next page; ``None`` on the last.
    """

    items: Sequence[DetectionCase]
    total: int
    next_offset: int | None


_RANK = case(
    (DetectionCase.severity == Severity.HIGH, 3),
    (DetectionCase.severity == Severity.MEDIUM, 2),
    else_=1,
)


def _order(sort: CaseSort, descending: bool) -> list[Any]:
    orders: dict[CaseSort, list[Any]] = {
        CaseSort.SEVERITY: [_RANK, DetectionCase.event_count, DetectionCase.latest_event_id],
        CaseSort.COUNT: [DetectionCase.event_count, DetectionCase.latest_event_id],
        CaseSort.RECENCY: [DetectionCase.latest_event_id],
    }
    keys = [*orders[sort], DetectionCase.id]
    return [k.desc() if descending else k.asc() for k in keys]


def list_cases(
    session: Session,
    where: CaseFilter | None = None,
    *,
    sort: CaseSort = CaseSort.SEVERITY,
    descending: bool = True,
    limit: int = 50,
    offset: int = 0,
) -> CasePage:
    """List cases, one page at a time.

    Parameters
    ----------
    session : Session
        The caller's session.
    where : CaseFilter, optional
        Which cases; all when omitted.
    sort : CaseSort
        ``severity`` (then count, then recency), ``count`` (events, then recency) or
        ``recency`` (the latest event).
    descending : bool
        Strongest, largest or newest first (the default).
    limit, offset : int
        The page: ``limit`` from 1 to ``MAX_PAGE_SIZE`` cases after ``offset``.

    Returns
    -------
    CasePage
        The cases, the filter's total, the next page's offset.

    Raises
    ------
    ValueError
        When ``limit`` or ``offset`` is out of range.
    """
    if not 1 <= limit <= MAX_PAGE_SIZE:
        raise ValueError(f"limit must be between 1 and {MAX_PAGE_SIZE}, got {limit}")
    if offset < 0:
        raise ValueError(f"offset must be >= 0, got {offset}")
    conditions = (where or CaseFilter()).conditions()
    query = (
        select(DetectionCase)
        .where(*conditions)
        .order_by(*_order(sort, descending))
        .offset(offset)
        .limit(limit + 1)
    )
    rows = session.scalars(query).all()
    return CasePage(
        items=rows[:limit],
        total=count_cases(session, where),
        next_offset=offset + limit if len(rows) > limit else None,
    )


def count_cases(session: Session, where: CaseFilter | None = None) -> int:
    """Count the cases matching a filter (``review_status=open``: the review queue's size)."""
    query = select(func.count()).select_from(DetectionCase)
    return session.execute(query.where(*(where or CaseFilter()).conditions())).scalar_one()


def get_case(session: Session, case_id: int) -> DetectionCase:
    """Return the case with this id.

    Raises
    ------
    NotFoundError
        When no case has this id.
    """
    found = session.get(DetectionCase, case_id)
    if found is None:
        raise NotFoundError("case", case_id)
    return found


def kinds_of(session: Session, case_ids: Collection[int]) -> dict[int, list[CaseKind]]:
    """Return each case's kinds (counts and mutes), most frequent first.

    Parameters
    ----------
    session : Session
        The caller's session.
    case_ids : Collection[int]
        The cases.

    Returns
    -------
    dict[int, list[CaseKind]]
        Every case of ``case_ids``; an empty list for one without events.
    """
    found: dict[int, list[CaseKind]] = {case_id: [] for case_id in case_ids}
    if not found:
        return found
    query = (
        select(CaseKind)
        .where(CaseKind.case_id.in_(list(found)))
        .order_by(CaseKind.case_id, CaseKind.event_count.desc(), CaseKind.kind)
    )
    for row in session.scalars(query):
        found[row.case_id].append(row)
    return found


def events_by_id(session: Session, event_ids: Collection[int]) -> dict[int, DetectionEvent]:
    """Return the events with these ids (the latest and strongest of a page of cases)."""
    if not event_ids:
        return {}
    query = (
        select(DetectionEvent)
        .where(DetectionEvent.id.in_(list(event_ids)))
        .execution_options(populate_existing=True)  # a review may have just changed them
    )
    return {row.id: row for row in session.scalars(query)}


def open_cases_by_run(session: Session, run_ids: Collection[str]) -> dict[str, int]:
    """Count each run's open cases; every run of ``run_ids`` is in the answer."""
    counts = dict.fromkeys(run_ids, 0)
    if not counts:
        return counts
    query = (
        select(DetectionCase.run_id, func.count())
        .where(
            DetectionCase.run_id.in_(list(counts)),
            DetectionCase.review_status == ReviewStatus.OPEN,
        )
        .group_by(DetectionCase.run_id)
    )
    for run_id, count in session.execute(query):
        counts[run_id] = int(count)
    return counts


# ------------------------------------------------------------- reviewing


@dataclass(frozen=True)
class ClosedCase:
    """What a review did to one case.

    Attributes
    ----------
    case : DetectionCase
        The case, after the review.
    event_ids : tuple[int, ...]
        The events the review closed, in order.
    kinds : frozenset[str]
        Their kinds.
    """

    case: DetectionCase
    event_ids: tuple[int, ...]
    kinds: frozenset[str]


def lock_cases(session: Session, case_ids: Sequence[int]) -> list[DetectionCase]:
    """Return these cases in the given order, locked (``FOR UPDATE`` on PostgreSQL).

    Raises
    ------
    NotFoundError
        Naming every id no case has.
    """
    query = (
        select(DetectionCase)
        .where(DetectionCase.id.in_(list(case_ids)))
        .order_by(DetectionCase.id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    found = {c.id: c for c in session.scalars(query)}
    missing = [case_id for case_id in case_ids if case_id not in found]
    if missing:
        raise (
            NotFoundError("case", missing[0])
            if len(missing) == 1
            else NotFoundError("cases", missing)
        )
    return [found[case_id] for case_id in case_ids]


def review_cases(
    session: Session,
    case_ids: Sequence[int],
    decision: ReviewStatus,
    *,
    reviewer: str,
    note: str | None = None,
    now: datetime | None = None,
) -> list[ClosedCase]:
    """Close every open event of these cases with one decision, all or none.

    Parameters
    ----------
    session : Session
        The caller's session, inside its transaction.
    case_ids : Sequence[int]
        The cases, without duplicates.
    decision : ReviewStatus
        ``confirmed`` or ``dismissed``.
    reviewer : str
        Who decided (an operator key's name).
    note : str, optional
        Why; stored on the case and on each event it closes.
    now : datetime, optional
        Review time; defaults to UTC now.

    Returns
    -------
    list[ClosedCase]
        Each case, in the order given, with the events it closed.

    Raises
    ------
    ValueError
        When ``decision`` is ``open`` or an id is repeated.
    NotFoundError
        Naming the ids no case has.
    ConflictError
        Naming the cases with no open event left (already reviewed, and by whom).
    """
    if decision == ReviewStatus.OPEN:
        raise ValueError("a review confirms or dismisses; it does not reopen")
    if len(set(case_ids)) != len(case_ids):
        raise ValueError("each case may be named once")
    now = now or utcnow()
    cases = lock_cases(session, case_ids)
    closed = [c for c in cases if c.open_count == 0]
    if closed:
        said = "; ".join(
            f"case {c.id} was already {c.review_status.value}"
            + (f" by {c.reviewed_by!r}" if c.reviewed_by else "")
            for c in closed
        )
        raise ConflictError(f"{said}: nothing in it is open")
    ids = [c.id for c in cases]
    opened = session.execute(
        select(DetectionEvent.id, DetectionEvent.case_id, DetectionEvent.kind)
        .where(DetectionEvent.case_id.in_(ids), DetectionEvent.review_status == ReviewStatus.OPEN)
        .order_by(DetectionEvent.id)
        .with_for_update()
    ).all()
    session.execute(
        update(DetectionEvent)
        .where(
            and_(
                DetectionEvent.case_id.in_(ids),
                DetectionEvent.review_status == ReviewStatus.OPEN,
            )
        )
        .values(review_status=decision, reviewed_by=reviewer, reviewed_at=now, note=note)
        .execution_options(synchronize_session=False)
    )
    for found in cases:
        found.reviewed_by = reviewer
        found.reviewed_at = now
        found.note = note
    recount(session, cases, now=now)
    by_case: dict[int | None, list[tuple[int, str]]] = defaultdict(list)
    for event_id, case_id, kind in opened:
        by_case[case_id].append((event_id, kind))
    return [
        ClosedCase(
            case=found,
            event_ids=tuple(event_id for event_id, _ in by_case[found.id]),
            kinds=frozenset(kind for _, kind in by_case[found.id]),
        )
        for found in cases
    ]


def recount(
    session: Session, cases: Sequence[DetectionCase], *, now: datetime | None = None
) -> None:
    """Count the open and confirmed events of these cases again, and set their status.

    Reviews call it after changing events; it reads only these cases' events.
    """
    if not cases:
        return
    is_open = func.sum(case((DetectionEvent.review_status == ReviewStatus.OPEN, 1), else_=0))
    is_confirmed = func.sum(
        case((DetectionEvent.review_status == ReviewStatus.CONFIRMED, 1), else_=0)
    )
    query = (
        select(DetectionEvent.case_id, is_open, is_confirmed)
        .where(DetectionEvent.case_id.in_([c.id for c in cases]))
        .group_by(DetectionEvent.case_id)
    )
    counted = {case_id: (int(o or 0), int(c or 0)) for case_id, o, c in session.execute(query)}
    for found in cases:
        found.open_count, found.confirmed_count = counted.get(found.id, (0, 0))
        found.review_status = status_of(found.open_count, found.confirmed_count)
        found.updated_at = now or utcnow()
    session.flush()


def mute_kinds(
    session: Session,
    case_id: int,
    kinds: Collection[str],
    *,
    muted_by: str,
    note: str | None = None,
    now: datetime | None = None,
) -> list[str]:
    """Mute kinds for a case: its later events of these kinds arrive dismissed.

    Parameters
    ----------
    session : Session
        The caller's session.
    case_id : int
        The case (its client, or worker, in its run).
    kinds : Collection[str]
        The kinds to mute.
    muted_by : str
        Who muted them; the muted events name them as their reviewer.
    note : str, optional
        Why; each muted event carries it as its note.
    now : datetime, optional
        When; defaults to UTC now.

    Returns
    -------
    list[str]
        The kinds muted now, sorted (a kind muted already keeps its first mute).
    """
    query = (
        select(CaseKind)
        .where(CaseKind.case_id == case_id, CaseKind.kind.in_(list(kinds)))
        .execution_options(populate_existing=True)
    )
    stored = {k.kind: k for k in session.scalars(query)}
    muted = []
    for kind in sorted(set(kinds)):
        row = stored.get(kind)
        if row is None:
            row = CaseKind(case_id=case_id, kind=kind, event_count=0)
            session.add(row)
        if row.muted_at is None:
            row.muted_by = muted_by
            row.muted_at = now or utcnow()
            row.mute_note = note
            muted.append(kind)
    session.flush()
    return muted


@dataclass(frozen=True)
class LiftedMute:
    """A mute an unmute lifted: the kind, and who had muted it, when and why."""

    kind: str
    muted_by: str | None
    muted_at: datetime | None
    mute_note: str | None


def unmute_kinds(
    session: Session, case_id: int, kinds: Collection[str] | None = None
) -> list[LiftedMute]:
    """Lift mutes of a case: its later events of these kinds arrive open again.

    The events already stored dismissed by the mute stay as they are (dismissed,
    ``muted`` set, the muting operator as their reviewer): an unmute changes what
    happens next, never the record.

    Parameters
    ----------
    session : Session
        The caller's session, inside its transaction.
    case_id : int
        The case.
    kinds : Collection[str], optional
        The kinds to unmute, each muted for the case; every muted kind when omitted.

    Returns
    -------
    list[LiftedMute]
        The mutes lifted, sorted by kind.

    Raises
    ------
    NotFoundError
        When no case has this id.
    ConflictError
        When a kind named is not muted for the case, or nothing is muted at all.
    """
    (found,) = lock_cases(session, [case_id])
    query = (
        select(CaseKind)
        .where(CaseKind.case_id == case_id, CaseKind.muted_at.is_not(None))
        .order_by(CaseKind.kind)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    muted = {k.kind: k for k in session.scalars(query)}
    wanted = sorted(muted) if kinds is None else sorted(set(kinds))
    if not wanted:
        raise ConflictError(f"case {found.id} has no muted kind")
    not_muted = [kind for kind in wanted if kind not in muted]
    if not_muted:
        said = ", ".join(repr(str(kind)) for kind in not_muted)
        now_muted = ", ".join(repr(str(kind)) for kind in muted) or "none"
        raise ConflictError(
            f"case {found.id}: {said} {'is' if len(not_muted) == 1 else 'are'} not muted "
            f"(muted kinds: {now_muted})"
        )
    lifted = []
    for kind in wanted:
        row = muted[kind]
        lifted.append(LiftedMute(kind, row.muted_by, row.muted_at, row.mute_note))
        row.muted_by = None
        row.muted_at = None
        row.mute_note = None
    session.flush()
    return lifted
