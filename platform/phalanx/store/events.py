"""Detection events: listing with filters and keyset pagination, and review.

Events are written by :func:`phalanx.store.rounds.record_round`. Listing is
newest first by id; a page's ``next_before`` is the cursor of the next page, so
paging through 100,000 events stays an index range scan.

Two listings: :func:`list_events` returns the ORM rows with their full evidence
(the dashboard explains each one); :func:`list_event_summaries` reads only the
columns a listing shows and, from the evidence, its one-paragraph ``summary``
(extracted by the database), which keeps a page of 50 events cheap to read and
to send. :func:`get_event` has the full evidence of one event.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from sqlalchemy import ColumnElement, Select, func, select
from sqlalchemy.orm import QueryableAttribute, Session

from phalanx.store.cases import lock_cases, recount
from phalanx.store.errors import NotFoundError
from phalanx.store.models import DetectionEvent, ReviewStatus, Severity
from phalanx.store.types import utcnow

#: Largest page :func:`list_events` returns.
MAX_PAGE_SIZE = 1000

ItemT = TypeVar("ItemT")


@dataclass(frozen=True, kw_only=True)
class EventFilter:
    """Which events to list or count; ``None`` means any."""

    run_id: str | None = None
    round: int | None = None
    client_id: str | None = None
    worker: int | None = None
    kind: str | None = None
    severity: Severity | None = None
    review_status: ReviewStatus | None = None
    case_id: int | None = None

    def conditions(self) -> list[ColumnElement[bool]]:
        """Return the SQL conditions this filter stands for."""
        conditions: list[ColumnElement[bool]] = []
        if self.run_id is not None:
            conditions.append(DetectionEvent.run_id == self.run_id)
        if self.round is not None:
            conditions.append(DetectionEvent.round == self.round)
        if self.client_id is not None:
            conditions.append(DetectionEvent.client_id == self.client_id)
        if self.worker is not None:
            conditions.append(DetectionEvent.worker == self.worker)
        if self.kind is not None:
            conditions.append(DetectionEvent.kind == self.kind)
        if self.severity is not None:
            conditions.append(DetectionEvent.severity == self.severity)
        if self.review_status is not None:
            conditions.append(DetectionEvent.review_status == self.review_status)
        if self.case_id is not None:
            conditions.append(DetectionEvent.case_id == self.case_id)
        return conditions


@dataclass(frozen=True)
class EventPage(Generic[ItemT]):
    """One page of events, newest first.

    Attributes
    ----------
    items : Sequence
        The events of this page (:class:`DetectionEvent` rows, or
        :class:`EventSummary` records from :func:`list_event_summaries`).
    next_before : int or None
        Pass as ``before`` for the next page; ``None`` on the last page.
    """

    items: Sequence[ItemT]
    next_before: int | None


@dataclass(frozen=True, slots=True)
class EventSummary:
    """A detection event as a listing shows it: its columns, and its evidence in words.

    Attributes
    ----------
    id, run_id, round, client_id, worker, kind, severity : see :class:`DetectionEvent`
    review_status, reviewed_by, reviewed_at, note, created_at : see :class:`DetectionEvent`
    case_id, muted : see :class:`DetectionEvent`
    summary : str or None
        The evidence's one-paragraph ``summary``; for a refused reply, whose
        evidence has none, its ``reason``; ``None`` when the evidence has neither.
    evidence : dict or None
        The full evidence, when asked for (``with_evidence=True``); else ``None``.
    """

    id: int
    run_id: str
    round: int
    client_id: str | None
    worker: int | None
    kind: str
    severity: Severity
    review_status: ReviewStatus
    reviewed_by: str | None
    reviewed_at: datetime | None
    note: str | None
    created_at: datetime
    case_id: int | None
    muted: bool
    summary: str | None
    evidence: dict[str, Any] | None = None


#: What :func:`list_event_summaries` reads, in :class:`EventSummary`'s order (without evidence).
_SUMMARY_COLUMNS: tuple[QueryableAttribute[Any] | ColumnElement[Any], ...] = (
    DetectionEvent.id,
    DetectionEvent.run_id,
    DetectionEvent.round,
    DetectionEvent.client_id,
    DetectionEvent.worker,
    DetectionEvent.kind,
    DetectionEvent.severity,
    DetectionEvent.review_status,
    DetectionEvent.reviewed_by,
    DetectionEvent.reviewed_at,
    DetectionEvent.note,
    DetectionEvent.created_at,
    DetectionEvent.case_id,
    DetectionEvent.muted,
    func.coalesce(
        DetectionEvent.evidence["summary"].as_string(),
        DetectionEvent.evidence["reason"].as_string(),
    ).label("summary"),
)


def list_events(
    session: Session,
    where: EventFilter | None = None,
    *,
    before: int | None = None,
    limit: int = 100,
) -> EventPage[DetectionEvent]:
    """List detection events with their full evidence, newest first, one page at a time.

    Parameters
    ----------
    session : Session
        The caller's session.
    where : EventFilter, optional
        Which events; all when omitted.
    before : int, optional
        Only events with an id below this cursor (from the previous page's
        ``next_before``).
    limit : int
        Page size, 1 to ``MAX_PAGE_SIZE``.

    Returns
    -------
    EventPage
        The events and the cursor of the next page.

    Raises
    ------
    ValueError
        When ``limit`` is out of range.
    """
    query = _page_query(select(DetectionEvent), where, before=before, limit=limit)
    rows = session.scalars(query).all()
    items = rows[:limit]
    next_before = items[-1].id if len(rows) > limit else None
    return EventPage(items=items, next_before=next_before)


def list_event_summaries(
    session: Session,
    where: EventFilter | None = None,
    *,
    before: int | None = None,
    limit: int = 100,
    with_evidence: bool = False,
) -> EventPage[EventSummary]:
    """List detection events as listings show them, newest first, one page at a time.

    Reads only the columns (no ORM rows) and, unless ``with_evidence``, only the
    evidence's summary, which the database extracts; the same events, filters
    and pages as :func:`list_events`.

    Parameters
    ----------
    session : Session
        The caller's session.
    where : EventFilter, optional
        Which events; all when omitted.
    before : int, optional
        Only events with an id below this cursor (from the previous page's
        ``next_before``).
    limit : int
        Page size, 1 to ``MAX_PAGE_SIZE``.
    with_evidence : bool
        Also read each event's full evidence.

    Returns
    -------
    EventPage[EventSummary]
        The events and the cursor of the next page.

    Raises
    ------
    ValueError
        When ``limit`` is out of range.
    """
    columns = (*_SUMMARY_COLUMNS, DetectionEvent.evidence) if with_evidence else _SUMMARY_COLUMNS
    query = _page_query(select(*columns), where, before=before, limit=limit)
    rows = session.execute(query).all()
    items = [EventSummary(*row) for row in rows[:limit]]
    next_before = items[-1].id if len(rows) > limit else None
    return EventPage(items=items, next_before=next_before)


def _page_query(
    query: Select[Any], where: EventFilter | None, *, before: int | None, limit: int
) -> Select[Any]:
    """Add the filter, the cursor, the order (newest first) and ``limit + 1`` to ``query``."""
    if not 1 <= limit <= MAX_PAGE_SIZE:
        raise ValueError(f"limit must be between 1 and {MAX_PAGE_SIZE}, got {limit}")
    query = query.where(*(where or EventFilter()).conditions())
    if before is not None:
        query = query.where(DetectionEvent.id < before)
    return query.order_by(DetectionEvent.id.desc()).limit(limit + 1)


def count_events(session: Session, where: EventFilter | None = None) -> int:
    """Count the detection events matching a filter.

    Parameters
    ----------
    session : Session
        The caller's session.
    where : EventFilter, optional
        Which events; all when omitted.

    Returns
    -------
    int
        How many events match.
    """
    query = select(func.count()).select_from(DetectionEvent)
    return session.execute(query.where(*(where or EventFilter()).conditions())).scalar_one()


def get_event(session: Session, event_id: int) -> DetectionEvent:
    """Return the detection event with this id.

    Raises
    ------
    NotFoundError
        When no event has this id.
    """
    event = session.get(DetectionEvent, event_id)
    if event is None:
        raise NotFoundError("detection event", event_id)
    return event


def review_event(
    session: Session,
    event_id: int,
    decision: ReviewStatus,
    *,
    reviewer: str,
    note: str | None = None,
    now: datetime | None = None,
) -> DetectionEvent:
    """Record an operator's decision on a detection event.

    A later review replaces an earlier one; ``open`` reopens the event. The
    event's case counts it again (:func:`phalanx.store.cases.recount`).

    Parameters
    ----------
    session : Session
        The caller's session.
    event_id : int
        The event.
    decision : ReviewStatus
        ``confirmed``, ``dismissed``, or ``open`` to reopen.
    reviewer : str
        Who decided (an operator key's name).
    note : str, optional
        Why.
    now : datetime, optional
        Review time; defaults to UTC now.

    Returns
    -------
    DetectionEvent
        The reviewed event.

    Raises
    ------
    NotFoundError
        When no event has this id.
    """
    event = get_event(session, event_id)
    event.review_status = decision
    event.reviewed_by = reviewer
    event.reviewed_at = now or utcnow()
    event.note = note
    session.flush()
    if event.case_id is not None:
        recount(session, lock_cases(session, [event.case_id]), now=event.reviewed_at)
    return event
