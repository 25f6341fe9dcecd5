"""FastAPI dependencies, as ``Annotated`` aliases for route signatures.

``SessionDep`` is the request's database session. It reads: each of its
transactions is read-only (a deferred ``BEGIN`` on SQLite, which never waits
for the write lock; ``READ ONLY`` on PostgreSQL). A route that changes
something does it in ``with writing(db):`` (:mod:`phalanx_api.transactions`),
one write transaction committed before the route returns, so a client that got
its answer sees the change in its next request, and the write lock is held
only while the route writes. Before its session opens, a request waits for a
slot (:mod:`phalanx_api.session_slots`), so a burst queues on the event loop
instead of exhausting the connection pool. ``ViewerDep``, ``OperatorDep`` and
``AdminDep`` are the authenticated operator, with at least that role.
``FormOperatorDep`` is the same for a dashboard form post (session cookie plus
the form's ``csrf_token`` field).

FastAPI runs a plain ``def`` dependency in a worker thread, and each such hop
costs a request about as much CPU as reading a page of events. So the
dependencies that do no I/O are ``async def`` (they run on the event loop), and
``get_session`` opens its session there too (it connects lazily, in the route's
thread) and ends it in one worker thread. Those that query the database stay
plain functions.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

import anyio
import anyio.to_thread
from fastapi import Depends, Form, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from phalanx.store import Role
from phalanx_api.auth import (
    CSRF_FIELD,
    Principal,
    authenticate,
    authenticate_session,
    require_role,
)
from phalanx_api.context import AppContext, app_context
from phalanx_api.errors import AuthenticationError
from phalanx_api.settings import ApiSettings

#: Documents the bearer scheme in OpenAPI; :func:`get_principal` reads the header itself.
bearer_scheme = HTTPBearer(
    auto_error=False,
    scheme_name="APIKey",
    description="An operator API key: 'Authorization: Bearer phx_...'.",
)


async def get_context(request: Request) -> AppContext:
    """Return the app's context."""
    return app_context(request.app)


ContextDep = Annotated[AppContext, Depends(get_context)]


async def get_settings(context: ContextDep) -> ApiSettings:
    """Return the app's settings."""
    return context.settings


SettingsDep = Annotated[ApiSettings, Depends(get_settings)]


async def get_session(request: Request, context: ContextDep) -> AsyncIterator[Session]:
    """Yield the request's read-only session, once the request has a slot.

    The session is made on the event loop (it connects on first use, in the
    route's worker thread); its end runs in one worker thread, even when the
    request is cancelled. Writes commit inside the route (:func:`writing`).
    """
    async with context.session_slots.slots_for(request.method):
        session = context.reads()
        try:
            yield session
        finally:
            await _end(session)


async def _end(session: Session) -> None:
    """End ``session``'s read and close it, in a worker thread, shielded from cancellation.

    A session that holds no transaction (it never read, or it only wrote, and
    committed) closes on the event loop: there is nothing to send. Otherwise the
    thread comes from a limiter of its own, as FastAPI does for the exit of a
    plain generator dependency: a request waiting for a thread must never keep
    another from giving its connection back.
    """
    if not session.in_transaction():
        session.close()
        return
    with anyio.CancelScope(shield=True):
        await anyio.to_thread.run_sync(session.close, limiter=anyio.CapacityLimiter(1))


SessionDep = Annotated[Session, Depends(get_session, scope="function")]


def get_principal(
    request: Request,
    db: SessionDep,
    context: ContextDep,
    _: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)],
) -> Principal:
    """Return the authenticated operator (bearer key or dashboard session)."""
    return authenticate(request, db, context.signer, context.settings.session_cookie)


PrincipalDep = Annotated[Principal, Depends(get_principal)]


async def require_viewer(principal: PrincipalDep) -> Principal:
    """Return the operator if any role (viewer, operator, admin)."""
    return require_role(principal, Role.VIEWER)


async def require_operator(principal: PrincipalDep) -> Principal:
    """Return the operator if operator or admin."""
    return require_role(principal, Role.OPERATOR)


async def require_admin(principal: PrincipalDep) -> Principal:
    """Return the operator if admin."""
    return require_role(principal, Role.ADMIN)


ViewerDep = Annotated[Principal, Depends(require_viewer)]
OperatorDep = Annotated[Principal, Depends(require_operator)]
AdminDep = Annotated[Principal, Depends(require_admin)]


# ------------------------------------------------------- dashboard forms


def get_form_principal(
    request: Request,
    db: SessionDep,
    context: ContextDep,
    csrf_token: Annotated[str | None, Form(alias=CSRF_FIELD, max_length=200)] = None,
) -> Principal:
    """Return the operator posting a dashboard form: its session, checked against the form's token.

    For page routes only (it reads a form body); a form carries
    ``<input type="hidden" name="csrf_token" value="{{ csrf_token(request) }}">``.
    """
    cookie = request.cookies.get(context.settings.session_cookie)
    dashboard = context.signer.loads(cookie) if cookie else None
    if dashboard is None:
        raise AuthenticationError("log in first: the dashboard session is missing or expired")
    return authenticate_session(db, dashboard, method=request.method, csrf_token=csrf_token)


FormPrincipalDep = Annotated[Principal, Depends(get_form_principal)]


async def require_form_operator(principal: FormPrincipalDep) -> Principal:
    """Return the form's operator if operator or admin."""
    return require_role(principal, Role.OPERATOR)


#: The operator behind a dashboard form post (review buttons, client decisions).
FormOperatorDep = Annotated[Principal, Depends(require_form_operator)]
