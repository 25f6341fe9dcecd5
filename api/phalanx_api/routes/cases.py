"""Cases: the review queue's unit, the detection events of one client in one run.

A case is a resource of its own rather than a grouping of ``/api/v1/events``:
it has an id, a status, mutes and a review that closes many events, and it sorts
by severity, count or recency, where the event listing pages by event id. The
events stay under it, unchanged (``GET /api/v1/events?case_id=``), for audit.

Filters and sorts are checked: an unknown parameter or value is a 422 naming it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal
from uuid import UUID

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import AfterValidator
from sqlalchemy.orm import Session

from phalanx.store import (
    CaseFilter,
    CaseSort,
    DetectionCase,
    DetectionEvent,
    ReviewStatus,
    Severity,
    cases,
)
from phalanx_api import actions
from phalanx_api.auth import Principal
from phalanx_api.deps import OperatorDep, SessionDep, SettingsDep, ViewerDep
from phalanx_api.errors import InvalidInputError
from phalanx_api.paths import API_PREFIX
from phalanx_api.responses import CONFLICT, NOT_FOUND, UNAUTHORIZED, documented
from phalanx_api.routes.params import MAX_ID, Limit, Offset
from phalanx_api.schemas import (
    DEFAULT_PAGE_SIZE,
    CaseKindOut,
    CaseOut,
    CasePage,
    CaseReviewIn,
    CaseReviewOut,
    CasesReviewIn,
    CasesReviewOut,
    CaseUnmuteIn,
    CaseUnmuteOut,
    EventSummaryOut,
    LiftedMuteOut,
    storable_text,
)
from phalanx_api.transactions import writing

router = APIRouter(prefix=f"{API_PREFIX}/cases", tags=["cases"])

CaseId = Annotated[int, Path(ge=1, le=MAX_ID)]

#: The query parameters the listing knows; any other is refused, not ignored.
LIST_PARAMS = frozenset(
    {"run_id", "client_id", "kind", "status", "severity", "sort", "order", "limit", "offset"}
)


def _known_params(request: Request) -> None:
    unknown = sorted(set(request.query_params) - LIST_PARAMS)
    if unknown:
        known = ", ".join(sorted(LIST_PARAMS))
        raise InvalidInputError(
            f"query.{unknown[0]}: unknown parameter (known: {known})", loc=("query", unknown[0])
        )


def _kind(value: str | None) -> str | None:
    return None if value is None else storable_text(value)


@router.get("", responses=UNAUTHORIZED, dependencies=[Depends(_known_params)])
async def list_cases(
    db: SessionDep,
    _: ViewerDep,
    run_id: UUID | None = None,
    client_id: UUID | None = None,
    kind: Annotated[
        str | None,
        Query(max_length=64, description="Cases holding an event of this kind."),
        AfterValidator(_kind),
    ] = None,
    status: Annotated[
        ReviewStatus | Literal["all"], Query(description="'open' (the default) or any status.")
    ] = ReviewStatus.OPEN,
    severity: Severity | None = None,
    sort: Annotated[
        CaseSort,
        Query(
            description=(
                "'severity' (then events, then recency; the default), 'count' (events) "
                "or 'recency' (the latest event)."
            )
        ),
    ] = CaseSort.SEVERITY,
    order: Annotated[
        Literal["desc", "asc"], Query(description="'desc': strongest, largest, newest first.")
    ] = "desc",
    limit: Limit = DEFAULT_PAGE_SIZE,
    offset: Offset = 0,
) -> CasePage:
    """List cases with their counts, kinds, latest and strongest evidence in words."""
    where = CaseFilter(
        run_id=None if run_id is None else str(run_id),
        client_id=None if client_id is None else str(client_id),
        kind=kind,
        review_status=None if status == "all" else ReviewStatus(status),
        severity=severity,
    )
    return await run_in_threadpool(
        _case_page, db, where, sort=sort, descending=order == "desc", limit=limit, offset=offset
    )


def _case_page(
    db: Session, where: CaseFilter, *, sort: CaseSort, descending: bool, limit: int, offset: int
) -> CasePage:
    page = cases.list_cases(db, where, sort=sort, descending=descending, limit=limit, offset=offset)
    return CasePage(
        items=case_outs(db, page.items),
        total=page.total,
        limit=limit,
        offset=offset,
        next_offset=page.next_offset,
    )


@router.get("/{case_id}", responses=documented(UNAUTHORIZED, NOT_FOUND))
async def get_case(case_id: CaseId, db: SessionDep, _: ViewerDep) -> CaseOut:
    """One case; its latest and strongest events with their full evidence."""
    return await run_in_threadpool(_case, db, case_id)


def _case(db: Session, case_id: int) -> CaseOut:
    (found,) = case_outs(db, [cases.get_case(db, case_id)], full=True)
    return found


@router.post("/review", responses=documented(UNAUTHORIZED, NOT_FOUND, CONFLICT))
def review_cases(
    body: CasesReviewIn, db: SessionDep, user: OperatorDep, settings: SettingsDep
) -> CasesReviewOut:
    """Confirm or dismiss several cases at once: all of them, or none (404 or 409 naming them).

    Each case's open events are closed with the decision and the note; confirming
    bans each case's client under the server's policy (``PHALANX_BAN_ON_CONFIRM``),
    never for faults alone; ``mute`` (with ``dismiss``) mutes the dismissed kinds.
    """
    return CasesReviewOut(items=_review(db, body.case_ids, body, user, settings.ban_on_confirm))


@router.post("/{case_id}/review", responses=documented(UNAUTHORIZED, NOT_FOUND, CONFLICT))
def review_case(
    case_id: CaseId, body: CaseReviewIn, db: SessionDep, user: OperatorDep, settings: SettingsDep
) -> CaseReviewOut:
    """Confirm or dismiss one case: every open event of it is closed."""
    (reviewed,) = _review(db, [case_id], body, user, settings.ban_on_confirm)
    return reviewed


@router.post("/{case_id}/unmute", responses=documented(UNAUTHORIZED, NOT_FOUND, CONFLICT))
def unmute_case(
    case_id: CaseId, body: CaseUnmuteIn, db: SessionDep, user: OperatorDep
) -> CaseUnmuteOut:
    """Lift mutes of a case (409 when a kind named is not muted, or none is).

    Later events of the unmuted kinds arrive open again; events the mutes already
    dismissed stay dismissed, marked muted, for the record. Audited as ``case.unmute``.
    """
    with writing(db):
        found, lifted = actions.unmute_case(db, case_id, body.kinds, note=body.note, actor=user)
        (out,) = case_outs(db, [found])
        return CaseUnmuteOut(
            case=out,
            unmuted=[
                LiftedMuteOut(
                    kind=m.kind, muted_by=m.muted_by, muted_at=m.muted_at, mute_note=m.mute_note
                )
                for m in lifted
            ],
        )


def _review(
    db: Session,
    case_ids: Sequence[int],
    body: CaseReviewIn,
    user: Principal,
    ban_on_confirm: bool,
) -> list[CaseReviewOut]:
    with writing(db):
        reviews = actions.review_cases(
            db,
            case_ids,
            body.decision,
            note=body.note,
            mute=body.mute,
            actor=user,
            ban_on_confirm=ban_on_confirm,
        )
        outs = case_outs(db, [r.case for r in reviews])
        return [
            CaseReviewOut(
                case=out,
                closed_events=review.closed_events,
                client_status=None if review.client is None else review.client.status,
                client_banned=review.client_banned,
                muted_kinds=list(review.muted_kinds),
            )
            for review, out in zip(reviews, outs, strict=True)
        ]


def case_outs(db: Session, rows: Sequence[DetectionCase], *, full: bool = False) -> list[CaseOut]:
    """Return the cases as the API shows them: two queries for any number of cases."""
    kinds = cases.kinds_of(db, [row.id for row in rows])
    shown = cases.events_by_id(
        db, {i for row in rows for i in (row.latest_event_id, row.strongest_event_id)}
    )
    return [
        CaseOut(
            id=row.id,
            run_id=row.run_id,
            subject=row.subject,
            client_id=row.client_id,
            worker=row.worker,
            review_status=row.review_status,
            severity=row.severity,
            event_count=row.event_count,
            open_count=row.open_count,
            confirmed_count=row.confirmed_count,
            dismissed_count=row.event_count - row.open_count - row.confirmed_count,
            muted_count=row.muted_count,
            first_round=row.first_round,
            last_round=row.last_round,
            opened_at=row.opened_at,
            updated_at=row.updated_at,
            reviewed_by=row.reviewed_by,
            reviewed_at=row.reviewed_at,
            note=row.note,
            kinds=[CaseKindOut.model_validate(k) for k in kinds[row.id]],
            latest=_event(shown[row.latest_event_id], full=full),
            strongest=_event(shown[row.strongest_event_id], full=full),
        )
        for row in rows
    ]


def _event(event: DetectionEvent, *, full: bool) -> EventSummaryOut:
    evidence = event.evidence
    summary = evidence.get("summary") if isinstance(evidence, dict) else None
    if not isinstance(summary, str):
        reason = evidence.get("reason") if isinstance(evidence, dict) else None
        summary = reason if isinstance(reason, str) else None
    return EventSummaryOut(
        id=event.id,
        run_id=event.run_id,
        round=event.round,
        client_id=event.client_id,
        worker=event.worker,
        kind=event.kind,
        severity=event.severity,
        review_status=event.review_status,
        reviewed_by=event.reviewed_by,
        reviewed_at=event.reviewed_at,
        note=event.note,
        created_at=event.created_at,
        case_id=event.case_id,
        muted=event.muted,
        summary=summary,
        evidence=evidence if full else None,
    )
