"""Detection events: the review queue, filtered and paginated, and reviews."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Path, Query
from pydantic import AfterValidator

from phalanx.store import EventFilter, ReviewStatus, Severity, events
from phalanx_api import actions
from phalanx_api.deps import OperatorDep, SessionDep, SettingsDep, ViewerDep
from phalanx_api.paths import API_PREFIX
from phalanx_api.responses import CONFLICT, NOT_FOUND, UNAUTHORIZED, documented
from phalanx_api.routes.params import MAX_ID, MAX_INT32, Before, Limit
from phalanx_api.schemas import (
    DEFAULT_PAGE_SIZE,
    EventOut,
    EventPage,
    ReviewIn,
    ReviewOut,
    storable_text,
)

router = APIRouter(prefix=f"{API_PREFIX}/events", tags=["events"])

EventId = Annotated[int, Path(ge=1, le=MAX_ID)]


def _kind(value: str | None) -> str | None:
    return None if value is None else storable_text(value)


@router.get("", responses=UNAUTHORIZED)
def list_events(
    db: SessionDep,
    _: ViewerDep,
    run_id: UUID | None = None,
    client_id: UUID | None = None,
    kind: Annotated[
        str | None,
        Query(max_length=64, description="e.g. outside_max_clique"),
        AfterValidator(_kind),
    ] = None,
    review_status: ReviewStatus | None = None,
    severity: Severity | None = None,
    round: Annotated[int | None, Query(ge=0, le=MAX_INT32)] = None,
    worker: Annotated[int | None, Query(ge=0, le=MAX_INT32)] = None,
    before: Before = None,
    limit: Limit = DEFAULT_PAGE_SIZE,
) -> EventPage:
    """List detection events, newest first; page with ``before``."""
    where = EventFilter(
        run_id=None if run_id is None else str(run_id),
        client_id=None if client_id is None else str(client_id),
        kind=kind,
        review_status=review_status,
        severity=severity,
        round=round,
        worker=worker,
    )
    page = events.list_events(db, where, before=before, limit=limit)
    return EventPage(
        items=[EventOut.model_validate(event) for event in page.items],
        next_before=page.next_before,
    )


@router.get("/{event_id}", responses=documented(UNAUTHORIZED, NOT_FOUND))
def get_event(event_id: EventId, db: SessionDep, _: ViewerDep) -> EventOut:
    """One detection event with its evidence."""
    return EventOut.model_validate(events.get_event(db, event_id))


@router.post("/{event_id}/review", responses=documented(UNAUTHORIZED, NOT_FOUND, CONFLICT))
def review_event(
    event_id: EventId, body: ReviewIn, db: SessionDep, user: OperatorDep, settings: SettingsDep
) -> ReviewOut:
    """Confirm or dismiss an open detection event; confirming bans the client if configured."""
    review = actions.review_event(
        db,
        event_id,
        body.decision,
        note=body.note,
        actor=user,
        ban_on_confirm=settings.ban_on_confirm,
    )
    return ReviewOut(
        **EventOut.model_validate(review.event).model_dump(),
        client_status=None if review.client is None else review.client.status,
        client_banned=review.client_banned,
    )
