"""Operator API keys: created once, stored only as a SHA-256 hash, revocable; their sessions.

A secret looks like ``phx_`` followed by 43 URL-safe characters (256 random
bits), so a plain SHA-256 is enough to store it: there is nothing to brute
force, and looking the hash up leaks nothing useful about the secret through
timing. Its first characters (the ``prefix``) are kept to tell keys apart.

A dashboard login with a key is a session: a random secret (carried by the
browser's cookie) whose SHA-256 is stored with the key and an expiry. Logging
out deletes it; revoking the key deletes all of its sessions.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from phalanx.store.errors import NotFoundError
from phalanx.store.models import OperatorKey, OperatorSession, Role
from phalanx.store.types import utcnow

SECRET_PREFIX = "phx_"
#: Characters of the secret kept for display.
PREFIX_LENGTH = 12
#: ``last_used_at`` is rewritten at most this often, so reading the API is not a write per request.
TOUCH_INTERVAL = timedelta(minutes=1)


@dataclass(frozen=True)
class CreatedKey:
    """A new key and its secret, which is shown this once and never stored.

    Attributes
    ----------
    key : OperatorKey
        The stored key.
    secret : str
        The secret to hand to the operator.
    """

    key: OperatorKey
    secret: str


def hash_secret(secret: str) -> str:
    """Return the SHA-256 hex digest under which a secret is stored.

    Parameters
    ----------
    secret : str
        The operator's secret.

    Returns
    -------
    str
        64 lowercase hex characters.
    """
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def create_key(
    session: Session, *, name: str, role: Role, now: datetime | None = None
) -> CreatedKey:
    """Create an operator key.

    Parameters
    ----------
    session : Session
        The caller's session.
    name : str
        Whose key it is (shown in the audit log).
    role : Role
        What the key may do.
    now : datetime, optional
        Creation time; defaults to UTC now.

    Returns
    -------
    CreatedKey
        The stored key and its secret.
    """
    secret = SECRET_PREFIX + secrets.token_urlsafe(32)
    key = OperatorKey(
        name=name,
        role=role,
        key_hash=hash_secret(secret),
        prefix=secret[:PREFIX_LENGTH],
        created_at=now or utcnow(),
    )
    session.add(key)
    session.flush()
    return CreatedKey(key=key, secret=secret)


def verify_key(session: Session, secret: str, *, now: datetime | None = None) -> OperatorKey | None:
    """Return the live key a secret belongs to, and note that it was used.

    Parameters
    ----------
    session : Session
        The caller's session, in a write transaction when the key's use is due
        to be noted (:func:`use_due`).
    secret : str
        The secret presented by the operator.
    now : datetime, optional
        The current time; defaults to UTC now.

    Returns
    -------
    OperatorKey or None
        The key, or ``None`` when the secret is unknown or its key revoked.
    """
    key = find_key(session, secret)
    if key is None:
        return None
    now = now or utcnow()
    if use_due(key, now):
        note_use(session, key, now)
    return key


def find_key(session: Session, secret: str) -> OperatorKey | None:
    """Return the live key a secret belongs to, reading only.

    Returns
    -------
    OperatorKey or None
        The key, or ``None`` when the secret is unknown or its key revoked.
    """
    digest = hash_secret(secret)
    key = session.scalars(select(OperatorKey).where(OperatorKey.key_hash == digest)).first()
    if key is None or key.revoked_at is not None:
        return None
    return key


def use_due(key: OperatorKey, now: datetime) -> bool:
    """Whether the key's ``last_used_at`` is older than :data:`TOUCH_INTERVAL` (or unset)."""
    return key.last_used_at is None or now - key.last_used_at >= TOUCH_INTERVAL


def note_use(session: Session, key: OperatorKey, now: datetime) -> None:
    """Set the key's ``last_used_at`` to ``now`` (a write)."""
    key.last_used_at = now
    session.flush()


def get_key(session: Session, key_id: str) -> OperatorKey:
    """Return the operator key with this id.

    Raises
    ------
    NotFoundError
        When no key has this id.
    """
    key = session.get(OperatorKey, key_id)
    if key is None:
        raise NotFoundError("operator key", key_id)
    return key


def list_keys(session: Session, *, include_revoked: bool = False) -> Sequence[OperatorKey]:
    """List operator keys, oldest first.

    Parameters
    ----------
    session : Session
        The caller's session.
    include_revoked : bool
        Also list revoked keys.

    Returns
    -------
    Sequence[OperatorKey]
        The keys.
    """
    query = select(OperatorKey).order_by(OperatorKey.created_at, OperatorKey.id)
    if not include_revoked:
        query = query.where(OperatorKey.revoked_at.is_(None))
    return session.scalars(query).all()


def revoke_key(session: Session, key_id: str, *, now: datetime | None = None) -> OperatorKey:
    """Revoke an operator key; revoking twice keeps the first revocation time.

    Returns
    -------
    OperatorKey
        The revoked key.

    Raises
    ------
    NotFoundError
        When no key has this id.
    """
    key = get_key(session, key_id)
    if key.revoked_at is None:
        key.revoked_at = now or utcnow()
        session.flush()
    session.execute(delete(OperatorSession).where(OperatorSession.key_id == key_id))
    return key


def start_session(
    session: Session, key_id: str, *, lifetime: timedelta, now: datetime | None = None
) -> str:
    """Open a dashboard session for a key; return its secret, for the cookie only.

    Sessions of any key that have expired are deleted on the way (an indexed
    range delete), so the table holds only live sessions and the few since
    the last login.

    Parameters
    ----------
    session : Session
        The caller's session.
    key_id : str
        The key that logged in.
    lifetime : timedelta
        How long the session lasts.
    now : datetime, optional
        The current time; defaults to UTC now.

    Returns
    -------
    str
        The session secret (256 random bits); only its SHA-256 is stored.
    """
    now = now or utcnow()
    session.execute(delete(OperatorSession).where(OperatorSession.expires_at <= now))
    secret = secrets.token_urlsafe(32)
    session.add(
        OperatorSession(
            id=hash_secret(secret), key_id=key_id, created_at=now, expires_at=now + lifetime
        )
    )
    session.flush()
    return secret


def session_key(
    session: Session, secret: str, *, now: datetime | None = None
) -> OperatorKey | None:
    """Return the live key of a live session, or ``None``.

    ``None`` when no session has this secret (never opened, logged out, or the
    key revoked), when it expired, or when its key was revoked.
    """
    query = (
        select(OperatorKey)
        .join(OperatorSession, OperatorSession.key_id == OperatorKey.id)
        .where(
            OperatorSession.id == hash_secret(secret),
            OperatorSession.expires_at > (now or utcnow()),
            OperatorKey.revoked_at.is_(None),
        )
    )
    return session.scalars(query).first()


def end_session(session: Session, secret: str) -> None:
    """End the session with this secret (nothing happens if it is over already)."""
    session.execute(delete(OperatorSession).where(OperatorSession.id == hash_secret(secret)))
