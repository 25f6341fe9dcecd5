"""Detection events: listing with filters and keyset pagination, and review.

Events are written by :func:`phalanx.store.rounds.record_round`. Listing is
newest first by id; a page's ``next_before`` is the cursor of the next page, so
paging through 100,000 events stays an index range scan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session

from phalanx.store.errors import NotFoundError
from phalanx.store.models import DetectionEvent, ReviewStatus, Severity
from phalanx.store.types import utcnow

#: Largest page :func:`list_events` returns.
MAX_PAGE_SIZE = 1000


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
        return conditions


@dataclass(frozen=True)
class EventPage:
    """One page of events, newest first.

    Attributes
    ----------
    items : Sequence[DetectionEvent]
        The events of this page.
    next_before : int or None
        Pass as ``before`` for the next page; ``None`` on the last page.
    """

    items: Sequence[DetectionEvent]
    next_before: int | None


def list_events(
    session: Session,
    where: EventFilter | None = None,
    *,
    before: int | None = None,
    limit: int = 100,
) -> EventPage:
    """List detection events, newest first, one page at a time.

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
    if not 1 <= limit <= MAX_PAGE_SIZE:
        raise ValueError(f"limit must be between 1 and {MAX_PAGE_SIZE}, got {limit}")
    query = select(DetectionEvent).where(*(where or EventFilter()).conditions())
    if before is not None:
        query = query.where(DetectionEvent.id < before)
    query = query.order_by(DetectionEvent.id.desc()).limit(limit + 1)
    rows = session.scalars(query).all()
    items = rows[:limit]
    next_before = items[-1].id if len(rows) > limit else None
    return EventPage(items=items, next_before=next_before)


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

    A later review replaces an earlier one; ``open`` reopens the event.

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
    return event
