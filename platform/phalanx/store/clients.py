"""Clients: registration, approval status, Flower node ids and login challenges.

Simulated workers are clients too (named like ``sim-worker-3``). The
fingerprint of the public key is computed by :mod:`phalanx.identity`; the store
only keeps it unique.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from phalanx.store.errors import ConflictError, NotFoundError
from phalanx.store.models import Client, ClientStatus
from phalanx.store.types import utcnow


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

    Raises
    ------
    ConflictError
        When a client with this fingerprint exists.
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
        approved_at=now if status == ClientStatus.APPROVED else None,
    )
    try:
        with session.begin_nested():
            session.add(client)
    except IntegrityError as exc:  # a concurrent registration won the race
        raise ConflictError(
            f"a client with fingerprint {fingerprint!r} is registered already"
        ) from exc
    return client


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
    """Return the client whose key has this fingerprint, or ``None``."""
    return session.scalars(select(Client).where(Client.fingerprint == fingerprint)).first()


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
    limit, offset : int
        The page.

    Returns
    -------
    Sequence[Client]
        At most ``limit`` clients.
    """
    query = select(Client).order_by(Client.created_at, Client.id).limit(limit).offset(offset)
    if status is not None:
        query = query.where(Client.status == status)
    return session.scalars(query).all()


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


def take_challenge(session: Session, client_id: str, *, now: datetime | None = None) -> str | None:
    """Remove and return the client's pending challenge, if it has not expired.

    A challenge is used once: whatever the outcome of the verification, it is
    gone afterwards. The row is locked, so two concurrent attempts cannot both
    get the same challenge.

    Returns
    -------
    str or None
        The challenge, or ``None`` when there is none or it expired.

    Raises
    ------
    NotFoundError
        When no client has this id.
    """
    client = session.get(Client, client_id, with_for_update=True, populate_existing=True)
    if client is None:
        raise NotFoundError("client", client_id)
    challenge, expires_at = client.challenge, client.challenge_expires_at
    client.challenge = None
    client.challenge_expires_at = None
    session.flush()
    if challenge is None or expires_at is None or expires_at <= (now or utcnow()):
        return None
    return challenge
