"""Who is calling: operator API keys, dashboard sessions, roles and CSRF tokens.

Operators authenticate with ``Authorization: Bearer <secret>``, the secret of an
operator key (:mod:`phalanx.store.keys`). The dashboard logs in once with a key
and then carries a signed, http-only session cookie holding the session's secret
and a per-session CSRF token; a request authenticated by that cookie that
changes anything must repeat the token (``X-CSRF-Token`` header, or the
``csrf_token`` form field of a dashboard form). The session itself is stored
server-side and checked on every request: logging out, its expiry, or revoking
the key ends it, whatever cookie a browser still holds.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from fastapi import Request
from itsdangerous import BadSignature, URLSafeTimedSerializer
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from phalanx.store import OperatorKey, Role, keys
from phalanx.store.retry import is_lock_error
from phalanx.store.transactions import write_transaction
from phalanx.store.types import utcnow
from phalanx_api.errors import AuthenticationError, PermissionDeniedError

#: Header a cookie-authenticated request repeats its CSRF token in.
CSRF_HEADER = "X-CSRF-Token"
#: Form field a dashboard form carries its CSRF token in.
CSRF_FIELD = "csrf_token"
#: Methods that change nothing and so need no CSRF token.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

_RANK = {Role.VIEWER: 0, Role.OPERATOR: 1, Role.ADMIN: 2}


def role_allows(held: Role, needed: Role) -> bool:
    """Whether a key with role ``held`` may do what needs ``needed`` (viewer < operator < admin)."""
    return _RANK[held] >= _RANK[needed]


@dataclass(frozen=True)
class Principal:
    """An authenticated operator.

    Attributes
    ----------
    key_id : str
        The operator key used.
    name : str
        The key's name; the actor in the audit log.
    role : Role
        What the key may do.
    via : {"bearer", "session"}
        An ``Authorization`` header, or the dashboard's session cookie.
    csrf_token : str or None
        The session's CSRF token (sessions only).
    """

    key_id: str
    name: str
    role: Role
    via: Literal["bearer", "session"]
    csrf_token: str | None = None

    @classmethod
    def of(
        cls,
        key: OperatorKey,
        via: Literal["bearer", "session"],
        csrf_token: str | None = None,
    ) -> Principal:
        """Build from a live operator key."""
        return cls(key_id=key.id, name=key.name, role=key.role, via=via, csrf_token=csrf_token)


@dataclass(frozen=True)
class DashboardSession:
    """What the session cookie carries.

    Attributes
    ----------
    secret : str
        The session's secret; the server keeps its hash (:func:`phalanx.store.keys.start_session`).
    csrf_token : str
        Random token the session's forms must repeat.
    """

    secret: str
    csrf_token: str

    @classmethod
    def of(cls, secret: str) -> DashboardSession:
        """Return the cookie of a session just started, with a fresh CSRF token."""
        return cls(secret=secret, csrf_token=secrets.token_urlsafe(32))


class SessionSigner:
    """Signs and checks session cookies (itsdangerous, with a timestamp).

    Parameters
    ----------
    secret_key : str
        ``PHALANX_SECRET_KEY`` or the generated one.
    max_age_s : int
        Seconds a session is accepted after login.
    """

    def __init__(self, secret_key: str, *, max_age_s: int) -> None:
        self._serializer = URLSafeTimedSerializer(secret_key, salt="phalanx.dashboard-session")
        self.max_age_s = max_age_s

    def dumps(self, session: DashboardSession) -> str:
        """Return the signed cookie value of ``session``."""
        return self._serializer.dumps({"s": session.secret, "c": session.csrf_token})

    def loads(self, value: str) -> DashboardSession | None:
        """Return the session in a cookie, or ``None`` if it is forged, malformed or expired."""
        try:
            data = self._serializer.loads(value, max_age=self.max_age_s)
        except BadSignature:  # includes SignatureExpired
            return None
        if not isinstance(data, dict):
            return None
        secret, csrf_token = data.get("s"), data.get("c")
        if not isinstance(secret, str) or not isinstance(csrf_token, str):
            return None
        return DashboardSession(secret=secret, csrf_token=csrf_token)


def bearer_secret(header: str) -> str:
    """Return the secret of an ``Authorization: Bearer <secret>`` header.

    Raises
    ------
    AuthenticationError
        When the header has another scheme or no secret.
    """
    scheme, _, secret = header.strip().partition(" ")
    secret = secret.strip()
    if scheme.lower() != "bearer" or not secret:
        raise AuthenticationError("the Authorization header must be 'Bearer <API key>'")
    return secret


def authenticate_key(session: Session, secret: str) -> Principal:
    """Return the operator holding an API key secret, noting the key's use once a minute.

    Raises
    ------
    AuthenticationError
        When the secret is unknown or its key was revoked.
    """
    key = keys.find_key(session, secret)
    if key is None:
        raise AuthenticationError("invalid or revoked API key")
    now = utcnow()
    if keys.use_due(key, now):
        _note_use(session, key, now)
    return Principal.of(key, "bearer")


def _note_use(session: Session, key: OperatorKey, now: datetime) -> None:
    """Note a key's use (at most once a minute), unless another connection is writing now.

    A request that reads never waits for the write lock: when it is taken, the
    note is left to one of the key's next requests.
    """
    try:
        with write_transaction(session, wait=False):
            keys.note_use(session, key, now)
    except OperationalError as exc:
        if not is_lock_error(exc):
            raise


def authenticate_session(
    session: Session, dashboard: DashboardSession, *, method: str, csrf_token: str | None
) -> Principal:
    """Return the operator of a dashboard session, checking CSRF for unsafe methods.

    Parameters
    ----------
    session : Session
        The database session.
    dashboard : DashboardSession
        The session from the cookie.
    method : str
        The request's HTTP method.
    csrf_token : str or None
        The token the request repeats (header or form field).

    Raises
    ------
    AuthenticationError
        When the session is over: logged out, expired, or its key revoked.
    PermissionDeniedError
        When an unsafe request does not repeat the session's CSRF token.
    """
    key = keys.session_key(session, dashboard.secret)
    if key is None:
        raise AuthenticationError(
            "the session is over (logged out, expired, or its API key revoked); log in again"
        )
    if method.upper() not in SAFE_METHODS:
        check_csrf(dashboard.csrf_token, csrf_token)
    return Principal.of(key, "session", dashboard.csrf_token)


def authenticate(
    request: Request, session: Session, signer: SessionSigner, cookie_name: str
) -> Principal:
    """Return who sent ``request``: its bearer key, else its dashboard session.

    Raises
    ------
    AuthenticationError
        When the request carries no valid credentials.
    PermissionDeniedError
        When a session request that changes something lacks its CSRF token.
    """
    header = request.headers.get("authorization")
    if header is not None:
        return authenticate_key(session, bearer_secret(header))
    cookie = request.cookies.get(cookie_name)
    if cookie:
        dashboard = signer.loads(cookie)
        if dashboard is None:
            raise AuthenticationError("the session expired or is invalid; log in again")
        return authenticate_session(
            session,
            dashboard,
            method=request.method,
            csrf_token=request.headers.get(CSRF_HEADER),
        )
    raise AuthenticationError("authentication required: send 'Authorization: Bearer <API key>'")


def require_role(principal: Principal, role: Role) -> Principal:
    """Return ``principal`` if its role allows what needs ``role``.

    Raises
    ------
    PermissionDeniedError
        When the role is insufficient.
    """
    if not role_allows(principal.role, role):
        raise PermissionDeniedError(
            f"this needs the {role.value} role; key {principal.name!r} has {principal.role.value}"
        )
    return principal


def check_csrf(expected: str, submitted: str | None) -> None:
    """Check a submitted CSRF token against the session's, in constant time.

    Raises
    ------
    PermissionDeniedError
        When the token is missing or wrong.
    """
    if not submitted or not hmac.compare_digest(expected.encode(), submitted.encode()):
        raise PermissionDeniedError(
            f"missing or wrong CSRF token: send the session's token as {CSRF_HEADER} "
            f"or the {CSRF_FIELD!r} form field"
        )
