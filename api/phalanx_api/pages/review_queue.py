"""The events page: detection events one by one, with their evidence in words.

The review queue lists cases (:mod:`phalanx_api.pages.case_queue`); this page shows
the events under them, each reviewable alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from phalanx.event_kinds import bans_on_confirm
from phalanx.store import Client, DetectionEvent, EventFilter, events
from phalanx.store import dashboard as queries
from phalanx.store import rounds as round_records
from phalanx_api.pages.evidence import Explanation, explain
from phalanx_api.pages.listings import PAGE_SIZE


@dataclass(frozen=True)
class EventCard:
    """A detection event as the review queue shows it.

    Attributes
    ----------
    event : DetectionEvent
        The event.
    explanation : Explanation
        Its evidence in words.
    client : Client or None
        The client it names, in its current status.
    run_name : str
        The name of its run.
    client_open : int
        Open events of the same client, this one included.
    may_ban : bool
        Whether confirming it may ban the client (never for a fault).
    """

    event: DetectionEvent
    explanation: Explanation
    client: Client | None
    run_name: str
    client_open: int
    may_ban: bool = True


@dataclass(frozen=True)
class ReviewQueue:
    """The review queue: a page of events matching a filter."""

    cards: tuple[EventCard, ...]
    where: EventFilter
    total: int
    next_before: int | None
    reviewed: EventCard | None


def review_queue(
    session: Session,
    where: EventFilter,
    *,
    before: int | None = None,
    limit: int = PAGE_SIZE,
    reviewed_id: int | None = None,
) -> ReviewQueue:
    """Read the review queue.

    Parameters
    ----------
    session : Session
        A read session.
    where : EventFilter
        Which events (by default the page asks for open ones).
    before : int, optional
        Keyset cursor from the previous page.
    limit : int
        Page size.
    reviewed_id : int, optional
        An event just reviewed, shown at the top with its client's new status.

    Returns
    -------
    ReviewQueue
        The cards, the filter's total, the next cursor.
    """
    page = events.list_events(session, where, before=before, limit=limit)
    items = list(page.items)
    reviewed_event: DetectionEvent | None = None
    if reviewed_id is not None:
        reviewed_event = session.get(DetectionEvent, reviewed_id)
    everything = [*items, *([reviewed_event] if reviewed_event is not None else [])]
    client_ids = {e.client_id for e in everything if e.client_id}
    owners = queries.clients_by_id(session, client_ids)
    names = queries.run_names(session, {e.run_id for e in everything})
    counts = queries.event_counts_by_client(session, client_ids)
    groups = round_records.agreeing_groups(
        session,
        {
            (e.run_id, e.round)
            for e in everything
            if isinstance(e.evidence, dict) and "agreeing" in e.evidence
        },
    )

    digests = round_records.flag_digests(
        session,
        {
            (e.run_id, e.round)
            for e in everything
            if isinstance(e.evidence, dict) and "files" in e.evidence
        },
    )

    def card(event: DetectionEvent) -> EventCard:
        counted = counts.get(event.client_id) if event.client_id else None
        key = (event.run_id, event.round)
        return EventCard(
            event=event,
            explanation=explain(
                event.kind, event.worker, event.evidence, groups.get(key), digests.get(key, ())
            ),
            client=owners.get(event.client_id) if event.client_id else None,
            run_name=names.get(event.run_id, event.run_id),
            client_open=counted.open if counted else 0,
            may_ban=bans_on_confirm(event.kind),
        )

    return ReviewQueue(
        cards=tuple(card(e) for e in items),
        where=where,
        total=events.count_events(session, where),
        next_before=page.next_before,
        reviewed=card(reviewed_event) if reviewed_event is not None else None,
    )
