"""Dashboard sessions: log in with an API key (signed, http-only cookie), log out.

``GET /login`` shows the form; ``POST /login`` checks the key and sets the
cookie; ``POST /logout`` (with the session's CSRF token) clears it. These are
pages, not part of the REST API, so they are left out of the OpenAPI schema.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from phalanx.store import audit, keys
from phalanx_api.auth import CSRF_FIELD, DashboardSession, authenticate_session
from phalanx_api.deps import ContextDep, SessionDep
from phalanx_api.errors import AuthenticationError
from phalanx_api.transactions import writing

router = APIRouter(include_in_schema=False)

#: Where the dashboard sends an operator after logging in when no ``next`` is given.
HOME = "/"


def safe_next(target: str | None) -> str:
    """Return ``target`` if it is a path on this site, else :data:`HOME` (no open redirect)."""
    if target and target.startswith("/") and not target.startswith(("//", "/\\")):
        return target
    return HOME


@router.get("/login", response_class=HTMLResponse)
def login_page(request: Request, context: ContextDep, next: str | None = None) -> Response:
    """Show the login form."""
    return context.templates.TemplateResponse(
        request, "login.html", {"next": safe_next(next), "error": None}
    )


@router.post("/login", response_class=HTMLResponse)
def login(
    request: Request,
    db: SessionDep,
    context: ContextDep,
    api_key: Annotated[str, Form(max_length=200)],
    next: Annotated[str | None, Form(max_length=2000)] = None,
) -> Response:
    """Check the key; set the session cookie and go to ``next``, or show the form again."""
    with writing(db):
        key = keys.verify_key(db, api_key.strip())
        if key is not None:
            audit.append_audit(
                db, actor=key.name, action="session.login", target_type="key", target_id=key.id
            )
    if key is None:
        return context.templates.TemplateResponse(
            request,
            "login.html",
            {"next": safe_next(next), "error": "That API key is not valid or was revoked."},
            status_code=401,
        )
    settings = context.settings
    response = RedirectResponse(safe_next(next), status_code=303)
    response.set_cookie(
        settings.session_cookie,
        context.signer.dumps(DashboardSession.start(key.id)),
        max_age=settings.session_max_age_s,
        httponly=True,
        secure=settings.cookie_secure,
        samesite="lax",
        path="/",
    )
    return response


@router.post("/logout")
def logout(
    request: Request,
    db: SessionDep,
    context: ContextDep,
    csrf_token: Annotated[str | None, Form(alias=CSRF_FIELD, max_length=200)] = None,
) -> Response:
    """End the session (needs its CSRF token) and go to the login page."""
    settings = context.settings
    cookie = request.cookies.get(settings.session_cookie)
    dashboard = context.signer.loads(cookie) if cookie else None
    if dashboard is None:
        raise AuthenticationError("not logged in")
    authenticate_session(db, dashboard, method="POST", csrf_token=csrf_token)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(
        settings.session_cookie, path="/", secure=settings.cookie_secure, httponly=True
    )
    return response
