"""Detection events: the review queue, filtered and paginated, and reviews.

The listing carries each event's evidence as its one-paragraph summary (a page
of 50 stays a few kilobytes); ``GET /api/v1/events/{event_id}`` has the full
evidence, and so has the listing with ``evidence=full``.

The two reads are ``async``: they read and build their answer in one worker
thread, and FastAPI checks and serializes it on the event loop, one thread hop
fewer than a plain ``def`` route (whose answer FastAPI validates in a thread).
"""

from __future__ import annotations

from typing import Annotated, Literal
from uuid import UUID

from fastapi import APIRouter, Path, Query
from fastapi.concurrency import run_in_threadpool
from pydantic import AfterValidator
from sqlalchemy.orm import Session

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
from phalanx_api.transactions import writing

router = APIRouter(prefix=f"{API_PREFIX}/events", tags=["events"])

EventId = Annotated[int, Path(ge=1, le=MAX_ID)]


def _kind(value: str | None) -> str | None:
    return None if value is None else storable_text(value)


@router.get("", responses=UNAUTHORIZED)
async def list_events(
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
    case_id: Annotated[
        int | None, Query(ge=1, le=MAX_ID, description="Events of one case.")
    ] = None,
    before: Before = None,
    limit: Limit = DEFAULT_PAGE_SIZE,
    evidence: Annotated[
        Literal["summary", "full"],
        Query(
            description=(
                "'summary': each event's evidence as one paragraph (the default); "
                "'full': also the whole evidence, as GET /api/v1/events/{event_id} has it."
            )
        ),
    ] = "summary",
) -> EventPage:
    """List detection events, newest first, with their evidence in words; page with ``before``."""
    where = EventFilter(
        run_id=None if run_id is None else str(run_id),
        client_id=None if client_id is None else str(client_id),
        kind=kind,
        review_status=review_status,
        severity=severity,
        round=round,
        worker=worker,
        case_id=case_id,
    )
    return await run_in_threadpool(
        _event_page, db, where, before=before, limit=limit, with_evidence=evidence == "full"
    )


def _event_page(
    db: Session, where: EventFilter, *, before: int | None, limit: int, with_evidence: bool
) -> EventPage:
    page = events.list_event_summaries(
        db, where, before=before, limit=limit, with_evidence=with_evidence
    )
    return EventPage.model_validate(page, from_attributes=True)


@router.get("/{event_id}", responses=documented(UNAUTHORIZED, NOT_FOUND))
async def get_event(event_id: EventId, db: SessionDep, _: ViewerDep) -> EventOut:
    """One detection event with its evidence."""
    return await run_in_threadpool(_event, db, event_id)


def _event(db: Session, event_id: int) -> EventOut:
    return EventOut.model_validate(events.get_event(db, event_id))


@router.post("/{event_id}/review", responses=documented(UNAUTHORIZED, NOT_FOUND, CONFLICT))
def review_event(
    event_id: EventId, body: ReviewIn, db: SessionDep, user: OperatorDep, settings: SettingsDep
) -> ReviewOut:
    """Confirm or dismiss an open detection event; confirming bans the client if configured."""
    with writing(db):
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
