"""Counts over the whole store, grouped, for monitoring (the API's ``/metrics``).

Each is one ``GROUP BY`` (or ``COUNT``) query; the detection events' ``(kind, id)``
index keeps counting them by kind an index-only scan on PostgreSQL.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from phalanx.store.models import Client, ClientStatus, DetectionEvent, Round, Run, RunStatus


def runs_by_status(session: Session) -> dict[RunStatus, int]:
    """Count runs per status.

    Parameters
    ----------
    session : Session
        The caller's session.

    Returns
    -------
    dict[RunStatus, int]
        Every status, with 0 for a status no run is in.
    """
    counts = dict.fromkeys(RunStatus, 0)
    query = select(Run.status, func.count()).group_by(Run.status)
    for status, count in session.execute(query):
        counts[status] = count
    return counts


def clients_by_status(session: Session, *, run_id: str | None = None) -> dict[ClientStatus, int]:
    """Count the registry's clients per status (simulated workers belong to their runs).

    Parameters
    ----------
    session : Session
        The caller's session.
    run_id : str, optional
        Count this simulated run's workers instead of the registry.

    Returns
    -------
    dict[ClientStatus, int]
        Every status, with 0 for a status no client is in.
    """
    counts = dict.fromkeys(ClientStatus, 0)
    of = Client.run_id.is_(None) if run_id is None else Client.run_id == run_id
    query = select(Client.status, func.count()).where(of).group_by(Client.status)
    for status, count in session.execute(query):
        counts[status] = count
    return counts


def events_by_kind(session: Session) -> dict[str, int]:
    """Count detection events per kind.

    Parameters
    ----------
    session : Session
        The caller's session.

    Returns
    -------
    dict[str, int]
        The kinds that have events, with their counts.
    """
    query = select(DetectionEvent.kind, func.count()).group_by(DetectionEvent.kind)
    return {kind: count for kind, count in session.execute(query)}


def rounds_total(session: Session) -> int:
    """Count the rounds recorded across all runs.

    Parameters
    ----------
    session : Session
        The caller's session.

    Returns
    -------
    int
        How many rounds are stored.
    """
    return session.execute(select(func.count()).select_from(Round)).scalar_one()
