"""The dashboard's pages: overview, run, clients, review queue; and their forms.

Pages need a dashboard session (``/login``); without one a browser is sent to
the login form. Every role sees every page; operators and admins also get the
buttons, which post forms carrying the session's CSRF token. The pages are not
part of the REST API and are left out of its OpenAPI schema. What a page shows
is read by one module per page in :mod:`phalanx_api.pages`; changes go through
:mod:`phalanx_api.actions`, like the API's, so they land in the audit log.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit
from uuid import UUID

from fastapi import APIRouter, Depends, FastAPI, Form, Path, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from pydantic import Field
from sqlalchemy.orm import Session

from phalanx.event_kinds import EventKind
from phalanx.store import CaseFilter, CaseSort, ClientStatus, EventFilter, ReviewStatus, Role
from phalanx.store.cases import MAX_REVIEW_CASES
from phalanx_api import actions
from phalanx_api.actions import ClientAction
from phalanx_api.auth import Principal, authenticate_session, role_allows
from phalanx_api.context import AppContext, app_context
from phalanx_api.deps import ContextDep, FormOperatorDep, SessionDep, SettingsDep
from phalanx_api.errors import AuthenticationError
from phalanx_api.pages import case_queue, clients_page, docs, overview, review_queue, run_page
from phalanx_api.pages.errors import install_error_pages
from phalanx_api.pages.evidence import DISTANCE_NOTE
from phalanx_api.pages.formatting import install_filters
from phalanx_api.routes.params import MAX_ID, MAX_INT32
from phalanx_api.routes.session import safe_next
from phalanx_api.schemas import Note
from phalanx_api.transactions import writing

router = APIRouter(include_in_schema=False)

#: Seconds between two polls of a live run page.
POLL_SECONDS = 3
#: Seconds between two redraws of the overview (a heavier page, read less often).
OVERVIEW_POLL_SECONDS = 5


def page_user(request: Request, db: SessionDep, context: ContextDep) -> Principal:
    """Return the operator of the browser's dashboard session.

    Raises
    ------
    AuthenticationError
        When there is no valid session (a browser is sent to ``/login``).
    """
    cookie = request.cookies.get(context.settings.session_cookie)
    dashboard = context.signer.loads(cookie) if cookie else None
    if dashboard is None:
        raise AuthenticationError("log in to see the dashboard")
    return authenticate_session(db, dashboard, method="GET", csrf_token=None)


PageUserDep = Annotated[Principal, Depends(page_user)]
Offset = Annotated[int, Query(ge=0, le=MAX_INT32)]


def _render(
    request: Request,
    context: AppContext,
    db: Session,
    user: Principal,
    template: str,
    active: str,
    **values: Any,
) -> Response:
    """Render a full page: the template, the navigation, who is logged in."""
    page = {
        "user": user,
        "can_act": role_allows(user.role, Role.OPERATOR),
        "active": active,
        "open_cases": case_queue.open_case_count(db),
        **values,
    }
    return context.templates.TemplateResponse(request, template, page)


def _back(target: str | None, **params: object) -> str:
    """Return ``target`` (a path on this site) with ``params`` added to its query."""
    parts = urlsplit(safe_next(target))
    query = [(k, v) for k, v in parse_qsl(parts.query) if k not in params]
    query += [(k, str(v)) for k, v in params.items() if v is not None]
    return parts.path + (f"?{urlencode(query)}" if query else "")


# ----------------------------------------------------------------- overview


@router.get("/", response_class=HTMLResponse)
def overview_page(
    request: Request, db: SessionDep, context: ContextDep, user: PageUserDep, offset: Offset = 0
) -> Response:
    """Show runs, clients by status and the size of the review queue; it updates itself."""
    page = overview.overview(db, offset=offset)
    return _render(
        request,
        context,
        db,
        user,
        "overview.html",
        "overview",
        page=page,
        poll_seconds=OVERVIEW_POLL_SECONDS,
    )


@router.get("/overview/panels", response_class=HTMLResponse)
def overview_panels(
    request: Request, db: SessionDep, context: ContextDep, _: PageUserDep, offset: Offset = 0
) -> Response:
    """Render the overview's tiles and runs, for the page to swap in as runs progress."""
    page = overview.overview(db, offset=offset)
    response = context.templates.TemplateResponse(request, "_overview_panels.html", {"page": page})
    response.headers["Cache-Control"] = "no-store"
    return response


# ---------------------------------------------------------------------- runs


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def run_detail_page(
    request: Request, run_id: UUID, db: SessionDep, context: ContextDep, user: PageUserDep
) -> Response:
    """Show a run: curves per round, flagged workers, the latest agreement graph."""
    page = run_page.run_page(db, str(run_id))
    return _render(
        request,
        context,
        db,
        user,
        "run.html",
        "overview",
        page=page,
        poll_seconds=POLL_SECONDS,
        distance_note=DISTANCE_NOTE,
    )


@router.get("/runs/{run_id}/panels", response_class=HTMLResponse)
def run_panels(
    request: Request, run_id: UUID, db: SessionDep, context: ContextDep, user: PageUserDep
) -> Response:
    """Render the changing part of the run page, for the page to swap in while the run runs."""
    page = run_page.run_page(db, str(run_id))
    values = {
        "page": page,
        "user": user,
        "can_act": role_allows(user.role, Role.OPERATOR),
        "distance_note": DISTANCE_NOTE,
    }
    return context.templates.TemplateResponse(request, "_run_panels.html", values)


@router.get("/runs/{run_id}/progress")
def run_progress(run_id: UUID, db: SessionDep, _: PageUserDep) -> JSONResponse:
    """Answer the run's status and last finished round; the run page polls it."""
    progress = run_page.run_progress(db, str(run_id))
    return JSONResponse(progress, headers={"Cache-Control": "no-store"})


@router.post("/runs/{run_id}/cancel")
def cancel_run_form(run_id: UUID, db: SessionDep, user: FormOperatorDep) -> RedirectResponse:
    """Cancel the run (between rounds if it is running) and show it again."""
    with writing(db):
        actions.cancel_run(db, str(run_id), actor=user)
    return RedirectResponse(f"/runs/{run_id}", status_code=303)


# ------------------------------------------------------------------- clients


@router.get("/clients", response_class=HTMLResponse)
def clients_list_page(
    request: Request,
    db: SessionDep,
    context: ContextDep,
    user: PageUserDep,
    status: ClientStatus | None = None,
    run_id: UUID | None = None,
    offset: Offset = 0,
    changed: UUID | None = None,
) -> Response:
    """Show the registry's clients (or a simulated run's workers); buttons for operators."""
    page = clients_page.clients_page(
        db, status=status, run_id=None if run_id is None else str(run_id), offset=offset
    )
    changed_row = next((r for r in page.rows if changed and r.client.id == str(changed)), None)
    return _render(
        request,
        context,
        db,
        user,
        "clients.html",
        "clients",
        page=page,
        changed=changed_row,
        statuses=list(ClientStatus),
    )


@router.post("/clients/{client_id}/{action}")
def client_action_form(
    client_id: UUID,
    action: ClientAction,
    db: SessionDep,
    user: FormOperatorDep,
    reason: Annotated[Note, Form()] = "",
    back: Annotated[str | None, Form(max_length=2000)] = None,
) -> RedirectResponse:
    """Approve, suspend, ban or reinstate a client, then show the list again."""
    with writing(db):
        actions.change_client_status(db, str(client_id), action, actor=user, reason=reason)
    return RedirectResponse(_back(back or "/clients", changed=client_id), status_code=303)


# -------------------------------------------------------------- review queue

ReviewFilter = Literal["open", "confirmed", "dismissed", "all"]


@router.get("/events", response_class=HTMLResponse)
def review_queue_page(
    request: Request,
    db: SessionDep,
    context: ContextDep,
    settings: SettingsDep,
    user: PageUserDep,
    status: ReviewFilter = "open",
    run_id: UUID | None = None,
    client_id: UUID | None = None,
    kind: Annotated[str | None, Query(max_length=64, pattern=r"^[a-z0-9_]+$")] = None,
    case_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    before: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    reviewed: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
) -> Response:
    """Show detection events one by one with their evidence in words; review buttons."""
    where = EventFilter(
        run_id=str(run_id) if run_id else None,
        client_id=str(client_id) if client_id else None,
        kind=kind,
        case_id=case_id,
        review_status=None if status == "all" else ReviewStatus(status),
    )
    queue = review_queue.review_queue(db, where, before=before, reviewed_id=reviewed)
    return _render(
        request,
        context,
        db,
        user,
        "events.html",
        "events",
        queue=queue,
        status=status,
        statuses=["open", "confirmed", "dismissed", "all"],
        ban_on_confirm=settings.ban_on_confirm,
        distance_note=DISTANCE_NOTE,
        back=_back(f"{request.url.path}?{request.url.query}", reviewed=None),
        filters={
            "run_id": str(run_id) if run_id else None,
            "client_id": str(client_id) if client_id else None,
            "kind": kind,
            "case_id": str(case_id) if case_id else None,
        },
    )


@router.post("/events/{event_id}/review")
def review_event_form(
    event_id: Annotated[int, Path(ge=1, le=MAX_ID)],
    decision: Annotated[Literal["confirm", "dismiss"], Form()],
    db: SessionDep,
    settings: SettingsDep,
    user: FormOperatorDep,
    note: Annotated[Note, Form()] = "",
    back: Annotated[str | None, Form(max_length=2000)] = None,
) -> RedirectResponse:
    """Confirm or dismiss an event (confirming may ban its client), then show the queue."""
    with writing(db):
        actions.review_event(
            db, event_id, decision, note=note, actor=user, ban_on_confirm=settings.ban_on_confirm
        )
    return RedirectResponse(_back(back or "/events", reviewed=event_id), status_code=303)


# ---------------------------------------------------------------- cases

#: Cases whose ids a page or form takes at once.
CaseIds = Annotated[
    list[Annotated[int, Field(ge=1, le=MAX_ID)]], Query(max_length=MAX_REVIEW_CASES)
]


@router.get("/cases", response_class=HTMLResponse)
def case_queue_page(
    request: Request,
    db: SessionDep,
    context: ContextDep,
    settings: SettingsDep,
    user: PageUserDep,
    status: ReviewFilter = "open",
    run_id: UUID | None = None,
    client_id: UUID | None = None,
    kind: Annotated[str | None, Query(max_length=64, pattern=r"^[a-z0-9_]+$")] = None,
    sort: CaseSort = CaseSort.SEVERITY,
    order: Literal["desc", "asc"] = "desc",
    offset: Offset = 0,
    reviewed: CaseIds = [],  # noqa: B006 (FastAPI copies defaults)
    unmuted: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
) -> Response:
    """Show the review queue: one case per client and run, with bulk confirm and dismiss."""
    where = CaseFilter(
        run_id=str(run_id) if run_id else None,
        client_id=str(client_id) if client_id else None,
        kind=kind,
        review_status=None if status == "all" else ReviewStatus(status),
    )
    queue = case_queue.case_queue(
        db,
        where,
        sort=sort,
        descending=order == "desc",
        offset=offset,
        reviewed_ids=[*reviewed, *([unmuted] if unmuted else [])],
    )
    filters = {
        "run_id": str(run_id) if run_id else None,
        "client_id": str(client_id) if client_id else None,
        "kind": kind,
    }
    return _render(
        request,
        context,
        db,
        user,
        "cases.html",
        "cases",
        queue=queue,
        page_size=case_queue.PAGE_SIZE,
        status=status,
        statuses=["open", "confirmed", "dismissed", "all"],
        sort=sort.value,
        order=order,
        sorts=[s.value for s in CaseSort],
        kinds=sorted(k.value for k in EventKind),
        ban_on_confirm=settings.ban_on_confirm,
        distance_note=DISTANCE_NOTE,
        back=_back(f"{request.url.path}?{request.url.query}", reviewed=None, unmuted=None),
        unmuted=unmuted,
        filters=filters,
        query={**filters, "status": status, "sort": sort.value, "order": order},
    )


@router.post("/cases/review")
def review_cases_form(
    decision: Annotated[Literal["confirm", "dismiss"], Form()],
    db: SessionDep,
    settings: SettingsDep,
    user: FormOperatorDep,
    case_ids: Annotated[
        list[Annotated[int, Field(ge=1, le=MAX_ID)]], Form(max_length=MAX_REVIEW_CASES)
    ] = [],  # noqa: B006 (FastAPI copies defaults)
    note: Annotated[Note, Form()] = "",
    mute: Annotated[bool, Form()] = False,
    back: Annotated[str | None, Form(max_length=2000)] = None,
) -> RedirectResponse:
    """Confirm or dismiss the selected cases, closing all their open events; show the queue."""
    with writing(db):
        actions.review_cases(
            db,
            case_ids,
            decision,
            note=note,
            mute=mute,
            actor=user,
            ban_on_confirm=settings.ban_on_confirm,
        )
    target = _back(back or "/cases", reviewed=None)
    joiner = "&" if "?" in target else "?"
    shown = urlencode([("reviewed", case_id) for case_id in case_ids])
    return RedirectResponse(f"{target}{joiner}{shown}", status_code=303)


@router.post("/cases/{case_id}/unmute")
def unmute_case_form(
    case_id: Annotated[int, Path(ge=1, le=MAX_ID)],
    db: SessionDep,
    user: FormOperatorDep,
    kind: Annotated[str | None, Form(max_length=64, pattern=r"^[a-z0-9_]+$")] = None,
    note: Annotated[Note, Form()] = "",
    back: Annotated[str | None, Form(max_length=2000)] = None,
) -> RedirectResponse:
    """Lift a mute of a case (one kind, or all); show the queue with the case on top."""
    with writing(db):
        actions.unmute_case(db, case_id, None if kind is None else [kind], note=note, actor=user)
    return RedirectResponse(
        _back(back or "/cases", reviewed=None, unmuted=case_id), status_code=303
    )


# ------------------------------------------------------------------ install


def install(app: FastAPI) -> None:
    """Add the dashboard to ``app``: its pages, ``/docs`` without a CDN, error pages.

    Call after the API's routes and error handlers are in place.

    Parameters
    ----------
    app : FastAPI
        The app built by :func:`phalanx_api.main.create_app` (with ``docs_url=None``).
    """
    templates = app_context(app).templates
    install_filters(templates.env)
    app.include_router(router)
    app.include_router(docs.router)
    install_error_pages(app, templates)
