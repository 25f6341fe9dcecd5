"""FastAPI dependencies, as ``Annotated`` aliases for route signatures.

``SessionDep`` is one database transaction per request: committed when the
route returns, rolled back when it raises (unless the error says to keep the
changes, see :attr:`phalanx_api.errors.ApiError.keep_changes`), and committed
before the response is sent, so a client that got its answer sees the change
in its next request. ``ViewerDep``, ``OperatorDep`` and ``AdminDep`` are the
authenticated operator, with at least that role. ``FormOperatorDep`` is the same for
a dashboard form post (session cookie plus the form's ``csrf_token`` field).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

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
from phalanx_api.errors import ApiError, AuthenticationError
from phalanx_api.settings import ApiSettings

#: Documents the bearer scheme in OpenAPI; :func:`get_principal` reads the header itself.
bearer_scheme = HTTPBearer(
    auto_error=False,
    scheme_name="APIKey",
    description="An operator API key: 'Authorization: Bearer phx_...'.",
)


def get_context(request: Request) -> AppContext:
    """Return the app's context."""
    return app_context(request.app)


ContextDep = Annotated[AppContext, Depends(get_context)]


def get_settings(context: ContextDep) -> ApiSettings:
    """Return the app's settings."""
    return context.settings


SettingsDep = Annotated[ApiSettings, Depends(get_settings)]


def get_session(context: ContextDep) -> Iterator[Session]:
    """Yield a session whose transaction commits if the route succeeds."""
    session = context.sessions()
    try:
        yield session
    except ApiError as exc:
        if exc.keep_changes:
            session.commit()
        else:
            session.rollback()
        raise
    except BaseException:
        session.rollback()
        raise
    else:
        session.commit()
    finally:
        session.close()


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


def require_viewer(principal: PrincipalDep) -> Principal:
    """Return the operator if any role (viewer, operator, admin)."""
    return require_role(principal, Role.VIEWER)


def require_operator(principal: PrincipalDep) -> Principal:
    """Return the operator if operator or admin."""
    return require_role(principal, Role.OPERATOR)


def require_admin(principal: PrincipalDep) -> Principal:
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


def require_form_operator(principal: FormPrincipalDep) -> Principal:
    """Return the form's operator if operator or admin."""
    return require_role(principal, Role.OPERATOR)


#: The operator behind a dashboard form post (review buttons, client decisions).
FormOperatorDep = Annotated[Principal, Depends(require_form_operator)]
