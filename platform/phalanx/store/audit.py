"""The audit log: who did what to whom, and when. Append-only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from phalanx.store.models import AuditEntry
from phalanx.store.types import utcnow


def append_audit(
    session: Session,
    *,
    actor: str,
    action: str,
    target_type: str | None = None,
    target_id: str | None = None,
    details: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> AuditEntry:
    """Append an entry to the audit log, in the caller's transaction.

    Parameters
    ----------
    session : Session
        The caller's session; write the entry in the same transaction as the
        change it describes.
    actor : str
        Who acted (an operator key's name, ``"coordinator"``, ``"cli"``).
    action : str
        What they did, e.g. ``"client.approve"``, ``"event.review"``.
    target_type, target_id : str, optional
        What they did it to, e.g. ``"client"`` and its id.
    details : dict, optional
        JSON-compatible details.
    now : datetime, optional
        When; defaults to UTC now.

    Returns
    -------
    AuditEntry
        The stored entry.
    """
    entry = AuditEntry(
        at=now or utcnow(),
        actor=actor,
        action=action,
        target_type=target_type,
        target_id=target_id,
        details=details,
    )
    session.add(entry)
    session.flush()
    return entry


def append_audit_many(
    session: Session, entries: Sequence[Mapping[str, Any]], *, now: datetime | None = None
) -> None:
    """Append many entries at once (one statement), in the caller's transaction.

    Parameters
    ----------
    session : Session
        The caller's session.
    entries : Sequence[Mapping]
        Each with ``actor`` and ``action``, optionally ``target_type``,
        ``target_id`` and ``details``, as :func:`append_audit` takes them.
    now : datetime, optional
        When, for all of them; defaults to UTC now.
    """
    if not entries:
        return
    at = now or utcnow()
    rows = [
        {
            "at": at,
            "actor": entry["actor"],
            "action": entry["action"],
            "target_type": entry.get("target_type"),
            "target_id": entry.get("target_id"),
            "details": entry.get("details"),
        }
        for entry in entries
    ]
    session.execute(insert(AuditEntry), rows)


def append_audit_for_each(
    session: Session,
    *,
    actor: str,
    action: str,
    target_type: str,
    target_ids: Sequence[str],
    details: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> None:
    """Append one entry per target, all alike, in one flush (see :func:`append_audit`)."""
    at = now or utcnow()
    session.add_all(
        AuditEntry(
            at=at,
            actor=actor,
            action=action,
            target_type=target_type,
            target_id=target_id,
            details=details,
        )
        for target_id in target_ids
    )
    session.flush()


def list_audit(
    session: Session,
    *,
    actor: str | None = None,
    action: str | None = None,
    target_type: str | None = None,
    target_id: str | None = None,
    before: int | None = None,
    limit: int = 100,
) -> Sequence[AuditEntry]:
    """List audit entries, newest first.

    Parameters
    ----------
    session : Session
        The caller's session.
    actor, action, target_type, target_id : str, optional
        Only entries with these values.
    before : int, optional
        Only entries with an id below this cursor (the last id of the previous page).
    limit : int
        Page size.

    Returns
    -------
    Sequence[AuditEntry]
        At most ``limit`` entries.
    """
    query = select(AuditEntry).order_by(AuditEntry.id.desc()).limit(limit)
    if actor is not None:
        query = query.where(AuditEntry.actor == actor)
    if action is not None:
        query = query.where(AuditEntry.action == action)
    if target_type is not None:
        query = query.where(AuditEntry.target_type == target_type)
    if target_id is not None:
        query = query.where(AuditEntry.target_id == target_id)
    if before is not None:
        query = query.where(AuditEntry.id < before)
    return session.scalars(query).all()
