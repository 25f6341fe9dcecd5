"""The clients page: clients, their events and response times, what an operator may do."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy.orm import Session

from phalanx.store import Client, ClientStatus, clients, response_times
from phalanx.store import dashboard as queries
from phalanx.store.counts import clients_by_status
from phalanx.store.response_times import ClientResponseTimes
from phalanx_api.actions import CLIENT_TRANSITIONS, ClientAction
from phalanx_api.pages.listings import PAGE_SIZE


@dataclass(frozen=True)
class ClientRow:
    """A client, its events, its latest run's response times, what an operator can do now.

    ``responses`` is ``None`` for a client no timed run has times of; being slow
    there is shown beside its events, never as one.
    """

    client: Client
    events: queries.EventCounts
    actions: tuple[ClientAction, ...]
    responses: ClientResponseTimes | None = None


@dataclass(frozen=True)
class ClientsPage:
    """The clients page: one page of the registry (or of a simulated run's workers)."""

    rows: tuple[ClientRow, ...]
    status: ClientStatus | None
    by_status: Mapping[ClientStatus, int]
    offset: int
    next_offset: int | None
    run_id: str | None = None
    run_name: str | None = None


def actions_for(status: ClientStatus, *, proven: bool = True) -> tuple[ClientAction, ...]:
    """Return the actions that apply to a client in ``status``, in menu order.

    A client that has not proven it holds its key cannot be approved (nor
    reinstated, which approves it), so it is offered neither.
    """
    return tuple(
        action
        for action, (sources, target) in CLIENT_TRANSITIONS.items()
        if status in sources and (proven or target != ClientStatus.APPROVED)
    )


def clients_page(
    session: Session,
    *,
    status: ClientStatus | None,
    run_id: str | None = None,
    offset: int = 0,
    limit: int = PAGE_SIZE,
) -> ClientsPage:
    """Read the clients page.

    Parameters
    ----------
    session : Session
        A read session.
    status : ClientStatus or None
        Only clients in this status.
    run_id : str, optional
        The simulated workers of this run instead of the registry.
    offset, limit : int
        The page, oldest registration first.

    Returns
    -------
    ClientsPage
        Clients with their event counts, their latest timed run's response times and
        applicable actions.
    """
    found = clients.list_clients(
        session, status=status, run_id=run_id, limit=limit + 1, offset=offset
    )
    shown = found[:limit]
    ids = [c.id for c in shown]
    counts = queries.event_counts_by_client(session, ids)
    timed = response_times.latest_by_client(session, ids)
    return ClientsPage(
        rows=tuple(
            ClientRow(
                c,
                counts[c.id],
                actions_for(c.status, proven=c.proven_at is not None),
                timed.get(c.id),
            )
            for c in shown
        ),
        status=status,
        by_status=clients_by_status(session, run_id=run_id),
        offset=offset,
        next_offset=offset + limit if len(found) > limit else None,
        run_id=run_id,
        run_name=None if run_id is None else queries.run_names(session, {run_id}).get(run_id),
    )
