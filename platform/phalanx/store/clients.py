"""Clients: registration, approval status, Flower node ids and login challenges.

Simulated workers are clients too (named like ``quick-digits/worker-3``), each
the identity of one run (``run_id``): the *registry* is the clients with no run,
and every listing and count here reads the registry unless asked for a run. The
fingerprint of the public key is computed by :mod:`phalanx.identity`; the store
keeps it unique among *proven* clients (those that showed they hold the key, or
that the platform created itself). A registration through the API is unproven
until its challenge is signed, and expires with that challenge; unproven
registrations of one key may coexist, and the first one proven wins.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, and_, delete, func, insert, or_, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from phalanx.store.errors import ConflictError, NotFoundError
from phalanx.store.models import Client, ClientStatus
from phalanx.store.types import utcnow

#: Key of the PostgreSQL advisory lock that serialises registrations ("PHX-REG" in ASCII).
REGISTRATION_LOCK = 0x5048_582D_5245_47


@dataclass(frozen=True)
class PendingRegistrations:
    """The unproven registrations alive now.

    Attributes
    ----------
    count : int
        How many.
    next_expiry : datetime or None
        When the first of them expires (``None`` when there are none).
    """

    count: int
    next_expiry: datetime | None


def create_client(
    session: Session,
    *,
    name: str,
    public_key: str,
    fingerprint: str,
    status: ClientStatus = ClientStatus.PENDING,
    flower_node_id: int | None = None,
    now: datetime | None = None,
) -> Client:
    """Register a client by its public key.

    Parameters
    ----------
    session : Session
        The caller's session.
    name : str
        A human-readable name.
    public_key : str
        The PEM-encoded public key.
    fingerprint : str
        The key's fingerprint; unique across clients.
    status : ClientStatus
        ``pending`` until an operator approves; simulations may pass ``approved``.
    flower_node_id : int, optional
        The Flower node id, an unsigned 64-bit integer.
    now : datetime, optional
        Registration time; defaults to UTC now.

    Returns
    -------
    Client
        The registered client.

    The client is trusted with its key (proven on creation): this is how the
    platform creates clients itself. A client registering over the API is made
    by :func:`create_registration` instead.

    Raises
    ------
    ConflictError
        When a proven client with this fingerprint exists.
    """
    if find_client_by_fingerprint(session, fingerprint) is not None:
        raise ConflictError(f"a client with fingerprint {fingerprint!r} is registered already")
    now = now or utcnow()
    client = Client(
        name=name,
        public_key=public_key,
        fingerprint=fingerprint,
        status=status,
        flower_node_id=flower_node_id,
        created_at=now,
        proven_at=now,
        approved_at=now if status == ClientStatus.APPROVED else None,
    )
    _add_unique(session, client)
    return client


def create_registration(
    session: Session,
    *,
    name: str,
    public_key: str,
    fingerprint: str,
    challenge: str,
    expires_at: datetime,
    token_hash: str,
    now: datetime | None = None,
) -> Client:
    """Record an unproven registration: a pending client that must sign its challenge.

    It does not conflict with other unproven registrations of the same key;
    call :func:`find_client_by_fingerprint` first to refuse a key that a proven
    client holds.

    Parameters
    ----------
    session : Session
        The caller's session.
    name : str
        The name the registrant gave.
    public_key : str
        The PEM-encoded public key.
    fingerprint : str
        The key's fingerprint.
    challenge : str
        Base64 of the random challenge bytes.
    expires_at : datetime
        When the challenge, and with it this registration, expires.
    token_hash : str
        SHA-256 hex of the token the registrant shows to get a new challenge.
    now : datetime, optional
        Registration time; defaults to UTC now.

    Returns
    -------
    Client
        The pending, unproven client.
    """
    client_id = str(uuid.uuid4())
    # A Core insert: the ORM would replace a None by the column's default (proven on creation).
    session.execute(
        insert(Client).values(
            id=client_id,
            name=name,
            public_key=public_key,
            fingerprint=fingerprint,
            status=ClientStatus.PENDING,
            challenge=challenge,
            challenge_expires_at=expires_at,
            registration_token_hash=token_hash,
            proven_at=None,
            created_at=now or utcnow(),
        )
    )
    return get_client(session, client_id)


def lock_registrations(session: Session) -> None:
    """Serialise registrations until the caller's transaction ends.

    The checks of a registration (key, name, pending cap) and its insert then
    see every earlier registration. PostgreSQL takes a transaction-scoped
    advisory lock; SQLite serialises writing transactions already (the engine
    begins each one ``IMMEDIATE``).
    """
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": REGISTRATION_LOCK})


def _unproven_pending() -> ColumnElement[bool]:
    return and_(Client.status == ClientStatus.PENDING, Client.proven_at.is_(None))


def purge_expired_registrations(session: Session, *, now: datetime | None = None) -> list[str]:
    """Delete the pending, unproven registrations whose challenge expired; return their ids.

    An operator's decision is kept: a registration an operator suspended or
    banned is no longer pending and stays.
    """
    now = now or utcnow()
    expired = and_(
        _unproven_pending(),
        or_(Client.challenge_expires_at.is_(None), Client.challenge_expires_at <= now),
    )
    return _delete_returning_ids(session, expired)


def pending_registrations(session: Session, *, now: datetime | None = None) -> PendingRegistrations:
    """Count the pending, unproven registrations that have not expired."""
    alive = and_(_unproven_pending(), Client.challenge_expires_at > (now or utcnow()))
    count, first = session.execute(
        select(func.count(), func.min(Client.challenge_expires_at)).where(alive)
    ).one()
    return PendingRegistrations(count=int(count), next_expiry=first)


def name_in_use(
    session: Session, name: str, *, other_than: str, now: datetime | None = None
) -> bool:
    """Whether an active client with another key has this name.

    Active: not banned, and proven or holding a live challenge.

    Parameters
    ----------
    session : Session
        The caller's session.
    name : str
        The name, exactly as stored.
    other_than : str
        A fingerprint whose own registrations do not count (a client may
        register its key again under the same name).
    now : datetime, optional
        The current time; defaults to UTC now.
    """
    live = or_(Client.proven_at.is_not(None), Client.challenge_expires_at > (now or utcnow()))
    query = (
        select(Client.id)
        .where(
            Client.name == name,
            Client.status != ClientStatus.BANNED,
            Client.fingerprint != other_than,
            Client.run_id.is_(None),
            live,
        )
        .limit(1)
    )
    return session.scalars(query).first() is not None


def mark_proven(session: Session, client_id: str, *, now: datetime | None = None) -> Client:
    """Record that the client proved it holds its key; drop its challenge and token.

    Raises
    ------
    NotFoundError
        When no client has this id.
    ConflictError
        When another client holding the same key was proven first.
    """
    client = get_client(session, client_id)
    try:
        with session.begin_nested():
            client.proven_at = now or utcnow()
            client.challenge = None
            client.challenge_expires_at = None
            client.registration_token_hash = None
    except IntegrityError as exc:  # a concurrent proof of the same key won the race
        raise ConflictError(
            f"a client with fingerprint {client.fingerprint!r} is registered already"
        ) from exc
    return client


def discard_rival_registrations(session: Session, fingerprint: str, *, keep: str) -> list[str]:
    """Delete the pending, unproven registrations of a key other than ``keep``; return their ids.

    Once one registration of a key is proven, the others can never be.
    """
    rivals = and_(_unproven_pending(), Client.fingerprint == fingerprint, Client.id != keep)
    return _delete_returning_ids(session, rivals)


def _delete_returning_ids(session: Session, where: ColumnElement[bool]) -> list[str]:
    """Delete the clients matching ``where`` in one statement; return their ids.

    One statement, so a row an operator changed meanwhile is judged by its new values.
    """
    statement = delete(Client).where(where).returning(Client.id)
    ids = list(session.scalars(statement, execution_options={"synchronize_session": False}))
    for client in list(session.identity_map.values()):
        if isinstance(client, Client) and client.id in ids:
            session.expunge(client)
    return ids


def _add_unique(session: Session, client: Client) -> None:
    try:
        with session.begin_nested():
            session.add(client)
    except IntegrityError as exc:  # a concurrent registration won the race
        raise ConflictError(
            f"a client with fingerprint {client.fingerprint!r} is registered already"
        ) from exc


def get_client(session: Session, client_id: str) -> Client:
    """Return the client with this id.

    Raises
    ------
    NotFoundError
        When no client has this id.
    """
    client = session.get(Client, client_id)
    if client is None:
        raise NotFoundError("client", client_id)
    return client


def find_client_by_fingerprint(session: Session, fingerprint: str) -> Client | None:
    """Return the proven client whose key has this fingerprint, or ``None``."""
    query = select(Client).where(Client.fingerprint == fingerprint, Client.proven_at.is_not(None))
    return session.scalars(query).first()


def find_client_by_node_id(session: Session, flower_node_id: int) -> Client | None:
    """Return the client last seen with this Flower node id, or ``None``."""
    query = (
        select(Client)
        .where(Client.flower_node_id == flower_node_id)
        .order_by(Client.last_seen_at.desc().nulls_last())
        .limit(1)
    )
    return session.scalars(query).first()


def list_clients(
    session: Session,
    *,
    status: ClientStatus | None = None,
    run_id: str | None = None,
    limit: int = 100,
    offset: int = 0,
) -> Sequence[Client]:
    """List clients, oldest registration first.

    Parameters
    ----------
    session : Session
        The caller's session.
    status : ClientStatus, optional
        Only clients in this status.
    run_id : str, optional
        The simulated workers of this run instead of the registry.
    limit, offset : int
        The page.

    Returns
    -------
    Sequence[Client]
        At most ``limit`` clients.
    """
    query = (
        select(Client)
        .where(Client.run_id.is_(None) if run_id is None else Client.run_id == run_id)
        .order_by(Client.created_at, Client.id)
        .limit(limit)
        .offset(offset)
    )
    if status is not None:
        query = query.where(Client.status == status)
    return session.scalars(query).all()


def count_run_clients(session: Session, run_id: str) -> int:
    """Count the simulated workers stored with a run (none for a deployed run)."""
    query = select(func.count()).select_from(Client).where(Client.run_id == run_id)
    return session.execute(query).scalar_one()


def set_client_status(
    session: Session, client_id: str, status: ClientStatus, *, now: datetime | None = None
) -> Client:
    """Approve, suspend, ban or reset a client.

    ``approved_at`` is set on approval and cleared when the client leaves the
    approved status.

    Returns
    -------
    Client
        The client in its new status.

    Raises
    ------
    NotFoundError
        When no client has this id.
    """
    client = get_client(session, client_id)
    if status == ClientStatus.APPROVED and client.status != ClientStatus.APPROVED:
        client.approved_at = now or utcnow()
    elif status != ClientStatus.APPROVED:
        client.approved_at = None
    client.status = status
    session.flush()
    return client


def touch_client(
    session: Session,
    client_id: str,
    *,
    flower_node_id: int | None = None,
    now: datetime | None = None,
) -> Client:
    """Record that the client was seen, and under which Flower node id.

    Raises
    ------
    NotFoundError
        When no client has this id.
    """
    client = get_client(session, client_id)
    client.last_seen_at = now or utcnow()
    if flower_node_id is not None:
        client.flower_node_id = flower_node_id
    session.flush()
    return client


def set_challenge(
    session: Session, client_id: str, challenge: str, *, expires_at: datetime
) -> Client:
    """Store the challenge the client must sign to prove it holds its key.

    Parameters
    ----------
    session : Session
        The caller's session.
    client_id : str
        The client.
    challenge : str
        Base64 of the random challenge bytes (at most 256 characters).
    expires_at : datetime
        When the challenge stops being accepted.

    Returns
    -------
    Client
        The client holding the new challenge; an earlier one is replaced.

    Raises
    ------
    NotFoundError
        When no client has this id.
    """
    client = get_client(session, client_id)
    client.challenge = challenge
    client.challenge_expires_at = expires_at
    session.flush()
    return client


def lock_client(session: Session, client_id: str) -> Client:
    """Return the client with this id as stored now, its row locked until the transaction ends.

    Raises
    ------
    NotFoundError
        When no client has this id (any more).
    """
    client = session.get(Client, client_id, with_for_update=True, populate_existing=True)
    if client is None:
        raise NotFoundError("client", client_id)
    return client


def live_challenge(session: Session, client_id: str, *, now: datetime | None = None) -> str | None:
    """Return the client's challenge, read afresh, if it has not expired.

    Reading it spends nothing: only a valid proof does (:func:`mark_proven`),
    so a stranger's wrong proof leaves the challenge to the key's holder.

    Returns
    -------
    str or None
        The challenge, or ``None`` when there is none or it expired.

    Raises
    ------
    NotFoundError
        When no client has this id.
    """
    client = session.get(Client, client_id, populate_existing=True)
    if client is None:
        raise NotFoundError("client", client_id)
    challenge, expires_at = client.challenge, client.challenge_expires_at
    if challenge is None or expires_at is None or expires_at <= (now or utcnow()):
        return None
    return challenge
