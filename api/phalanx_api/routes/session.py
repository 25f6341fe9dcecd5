"""Dashboard sessions: log in with an API key (signed, http-only cookie), log out.

``GET /login`` shows the form; ``POST /login`` checks the key, opens a session
stored server-side and sets the cookie; ``POST /logout`` (with the session's
CSRF token) ends the session on the server and clears the cookie. These are
pages, not part of the REST API, so they are left out of the OpenAPI schema.

The login form carries a CSRF token of its own (double submit: a random token
in an http-only, ``SameSite=Strict`` cookie scoped to ``/login``, repeated in a
hidden field), so another site cannot log a browser in under its own key.
Failed logins are limited per address and per key prefix (``login_per_minute``);
beyond, the form answers 429 with ``Retry-After``. Cookies are ``Secure`` when
``PHALANX_COOKIE_SECURE`` is on, and whenever the request arrived over HTTPS
(the scheme uvicorn reports: ``X-Forwarded-Proto`` counts only from the proxies
it trusts, ``--forwarded-allow-ips``).
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from phalanx.store import audit, keys
from phalanx.store.keys import PREFIX_LENGTH
from phalanx_api.auth import CSRF_FIELD, DashboardSession, authenticate_session
from phalanx_api.context import AppContext
from phalanx_api.deps import ContextDep, SessionDep
from phalanx_api.errors import AuthenticationError
from phalanx_api.ratelimit import address_key, retry_after
from phalanx_api.settings import ApiSettings
from phalanx_api.transactions import writing

router = APIRouter(include_in_schema=False)

#: Where the dashboard sends an operator after logging in when no ``next`` is given.
HOME = "/"
#: Seconds a login form stays usable.
LOGIN_FORM_MAX_AGE_S = 3600
#: Hosts a browser treats as secure over plain HTTP (it keeps their Secure cookies).
LOOPBACK_NAMES = frozenset({"localhost"})


def safe_next(target: str | None) -> str:
    """Return ``target`` if it is a path on this site, else :data:`HOME` (no open redirect)."""
    if target and target.startswith("/") and not target.startswith(("//", "/\\")):
        return target
    return HOME


def login_cookie(settings: ApiSettings) -> str:
    """Return the name of the cookie holding the login form's CSRF token."""
    return f"{settings.session_cookie}_login"


def secure_cookies(request: Request, settings: ApiSettings) -> bool:
    """Whether cookies set in answer to ``request`` are marked ``Secure``."""
    return settings.cookie_secure or request.url.scheme == "https"


def cookie_would_be_dropped(request: Request, settings: ApiSettings) -> bool:
    """Whether the browser will refuse a Secure cookie: plain HTTP to a host other than loopback."""
    if request.url.scheme == "https" or not secure_cookies(request, settings):
        return False
    host = (request.url.hostname or "").strip("[]")
    if host in LOOPBACK_NAMES or host.endswith(".localhost"):
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True


def _login_form(
    request: Request,
    context: AppContext,
    *,
    next_: str | None,
    error: str | None = None,
    status_code: int = 200,
    headers: dict[str, str] | None = None,
) -> Response:
    """Render the login form with a fresh form token, and set its cookie."""
    settings = context.settings
    token = secrets.token_urlsafe(32)
    response = context.templates.TemplateResponse(
        request,
        "login.html",
        {
            "next": safe_next(next_),
            "error": error,
            "login_csrf": token,
            "insecure_transport": cookie_would_be_dropped(request, settings),
        },
        status_code=status_code,
        headers=headers,
    )
    response.set_cookie(
        login_cookie(settings),
        token,
        max_age=LOGIN_FORM_MAX_AGE_S,
        httponly=True,
        secure=secure_cookies(request, settings),
        samesite="strict",
        path="/login",
    )
    return response


@router.get("/login", response_class=HTMLResponse)
def login_page(request: Request, context: ContextDep, next: str | None = None) -> Response:
    """Show the login form."""
    return _login_form(request, context, next_=next)


@router.post("/login", response_class=HTMLResponse)
def login(
    request: Request,
    db: SessionDep,
    context: ContextDep,
    api_key: Annotated[str, Form(max_length=200)],
    next: Annotated[str | None, Form(max_length=2000)] = None,
    csrf_token: Annotated[str | None, Form(alias=CSRF_FIELD, max_length=200)] = None,
) -> Response:
    """Check the form's token and the key; open a session and go to ``next``, or show the form."""
    settings, limits = context.settings, context.limits
    secret = api_key.strip()
    address = address_key(request.client.host if request.client is not None else None)
    prefix = secret[:PREFIX_LENGTH]
    waits = [
        wait
        for wait in (
            limits.login_by_address.blocked(address),
            limits.login_by_prefix.blocked(prefix),
        )
        if wait is not None
    ]
    if waits:
        seconds = retry_after(max(waits))
        return _login_form(
            request,
            context,
            next_=next,
            error=f"Too many failed logins from here or with this key; try again in {seconds} s.",
            status_code=429,
            headers={"Retry-After": seconds},
        )
    expected = request.cookies.get(login_cookie(settings))
    if not expected or not csrf_token or not hmac.compare_digest(expected, csrf_token):
        return _login_form(
            request,
            context,
            next_=next,
            error="This login form expired or did not come from this site; log in again.",
            status_code=403,
        )
    with writing(db):
        key = keys.verify_key(db, secret)
        if key is not None:
            lifetime = timedelta(seconds=settings.session_max_age_s)
            session_secret = keys.start_session(db, key.id, lifetime=lifetime)
            audit.append_audit(
                db, actor=key.name, action="session.login", target_type="key", target_id=key.id
            )
    if key is None:
        limits.login_by_address.charge(address)
        limits.login_by_prefix.charge(prefix)
        return _login_form(
            request,
            context,
            next_=next,
            error="That API key is not valid or was revoked.",
            status_code=401,
        )
    secure = secure_cookies(request, settings)
    response = RedirectResponse(safe_next(next), status_code=303)
    response.set_cookie(
        settings.session_cookie,
        context.signer.dumps(DashboardSession.of(session_secret)),
        max_age=settings.session_max_age_s,
        httponly=True,
        secure=secure,
        samesite="lax",
        path="/",
    )
    response.delete_cookie(
        login_cookie(settings), path="/login", secure=secure, httponly=True, samesite="strict"
    )
    return response


@router.post("/logout")
def logout(
    request: Request,
    db: SessionDep,
    context: ContextDep,
    csrf_token: Annotated[str | None, Form(alias=CSRF_FIELD, max_length=200)] = None,
) -> Response:
    """End the session on the server (needs its CSRF token) and go to the login page."""
    settings = context.settings
    cookie = request.cookies.get(settings.session_cookie)
    dashboard = context.signer.loads(cookie) if cookie else None
    if dashboard is None:
        raise AuthenticationError("not logged in")
    principal = authenticate_session(db, dashboard, method="POST", csrf_token=csrf_token)
    with writing(db):
        keys.end_session(db, dashboard.secret)
        audit.append_audit(
            db,
            actor=principal.name,
            action="session.logout",
            target_type="key",
            target_id=principal.key_id,
        )
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(
        settings.session_cookie,
        path="/",
        secure=secure_cookies(request, settings),
        httponly=True,
        samesite="lax",
    )
    return response
