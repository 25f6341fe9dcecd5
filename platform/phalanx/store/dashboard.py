"""Read-only queries behind the dashboard's pages, each one query for a whole page.

The dashboard shows, beside each run, its latest round; beside each client, how
many detection events it has; and for a run, which workers were flagged in which
round. Each function answers for many rows at once, so a page costs a fixed
number of queries whatever its length.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from sqlalchemy import case, func, select, tuple_
from sqlalchemy.orm import Session

from phalanx.store.models import Client, DetectionEvent, ReviewStatus, Round, Run


def latest_rounds(session: Session, run_ids: Collection[str]) -> dict[str, Round]:
    """Return the last finished round of each run that has one.

    Parameters
    ----------
    session : Session
        The caller's session.
    run_ids : Collection[str]
        The runs.

    Returns
    -------
    dict[str, Round]
        Run id to its highest-numbered round; runs without rounds are left out.
    """
    if not run_ids:
        return {}
    last = (
        select(Round.run_id, func.max(Round.number).label("number"))
        .where(Round.run_id.in_(list(run_ids)))
        .group_by(Round.run_id)
        .subquery()
    )
    query = select(Round).where(
        tuple_(Round.run_id, Round.number).in_(select(last.c.run_id, last.c.number))
    )
    return {row.run_id: row for row in session.scalars(query)}


@dataclass(frozen=True)
class EventCounts:
    """How many detection events name one client.

    Attributes
    ----------
    total : int
        Every event, reviewed or not.
    open : int
        Events nobody has reviewed yet.
    """

    total: int
    open: int


def event_counts_by_client(session: Session, client_ids: Collection[str]) -> dict[str, EventCounts]:
    """Count each client's detection events, in total and still open.

    Parameters
    ----------
    session : Session
        The caller's session.
    client_ids : Collection[str]
        The clients.

    Returns
    -------
    dict[str, EventCounts]
        Every client of ``client_ids``, with zero counts for those without events.
    """
    counts = {client_id: EventCounts(total=0, open=0) for client_id in client_ids}
    if not counts:
        return counts
    is_open = func.sum(case((DetectionEvent.review_status == ReviewStatus.OPEN, 1), else_=0))
    query = (
        select(DetectionEvent.client_id, func.count(), is_open)
        .where(DetectionEvent.client_id.in_(list(counts)))
        .group_by(DetectionEvent.client_id)
    )
    for client_id, total, open_ in session.execute(query):
        counts[client_id] = EventCounts(total=int(total), open=int(open_ or 0))
    return counts


@dataclass(frozen=True)
class FlaggedWorker:
    """A worker named by a detection event in one round of a run.

    Attributes
    ----------
    round : int
        The round.
    worker : int
        The worker's index within the run.
    kind : str
        The event's kind (``outside_max_clique``, ``bad_signature``, ...).
    client_id : str or None
        The client behind the worker, when known.
    """

    round: int
    worker: int
    kind: str
    client_id: str | None


def flagged_workers(session: Session, run_id: str) -> list[FlaggedWorker]:
    """Return every worker a detection event of the run names, by round then worker.

    Only the event's coordinates are read, not its evidence, so this stays cheap
    for long runs.

    Parameters
    ----------
    session : Session
        The caller's session.
    run_id : str
        The run.

    Returns
    -------
    list[FlaggedWorker]
        One entry per event that names a worker.
    """
    query = (
        select(
            DetectionEvent.round,
            DetectionEvent.worker,
            DetectionEvent.kind,
            DetectionEvent.client_id,
        )
        .where(DetectionEvent.run_id == run_id, DetectionEvent.worker.is_not(None))
        .order_by(DetectionEvent.round, DetectionEvent.worker, DetectionEvent.id)
    )
    return [
        FlaggedWorker(round=r, worker=w, kind=k, client_id=c)
        for r, w, k, c in session.execute(query)
        if w is not None
    ]


def clients_by_id(session: Session, client_ids: Collection[str]) -> dict[str, Client]:
    """Return the clients with these ids (unknown ids are left out).

    Parameters
    ----------
    session : Session
        The caller's session.
    client_ids : Collection[str]
        The clients.

    Returns
    -------
    dict[str, Client]
        Client id to client.
    """
    if not client_ids:
        return {}
    rows: Sequence[Client] = session.scalars(
        select(Client).where(Client.id.in_(list(client_ids)))
    ).all()
    return {row.id: row for row in rows}


def run_names(session: Session, run_ids: Collection[str]) -> dict[str, str]:
    """Return the names of these runs (unknown ids are left out).

    Parameters
    ----------
    session : Session
        The caller's session.
    run_ids : Collection[str]
        The runs.

    Returns
    -------
    dict[str, str]
        Run id to run name.
    """
    if not run_ids:
        return {}
    query = select(Run.id, Run.name).where(Run.id.in_(list(run_ids)))
    return {run_id: name for run_id, name in session.execute(query)}


def open_events_by_run(session: Session, run_ids: Collection[str]) -> dict[str, int]:
    """Count each run's detection events that nobody has reviewed yet.

    Parameters
    ----------
    session : Session
        The caller's session.
    run_ids : Collection[str]
        The runs.

    Returns
    -------
    dict[str, int]
        Every run of ``run_ids``, with 0 for runs without open events.
    """
    counts = dict.fromkeys(run_ids, 0)
    if not counts:
        return counts
    query = (
        select(DetectionEvent.run_id, func.count())
        .where(
            DetectionEvent.run_id.in_(list(counts)),
            DetectionEvent.review_status == ReviewStatus.OPEN,
        )
        .group_by(DetectionEvent.run_id)
    )
    for run_id, count in session.execute(query):
        counts[run_id] = int(count)
    return counts
