"""The review queue: cases (a client's events in one run), with their evidence in words.

A page reads a fixed number of queries whatever the number of events behind its
cases: the page of cases, their kinds, the latest and the strongest event of each,
their clients and run names, and the agreeing groups of those events' rounds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from phalanx.event_kinds import bans_on_confirm
from phalanx.store import (
    CaseFilter,
    CaseKind,
    CaseSort,
    Client,
    DetectionCase,
    DetectionEvent,
    ReviewStatus,
    cases,
    rounds,
)
from phalanx.store import dashboard as queries
from phalanx_api.pages.evidence import Explanation, explain

#: Cases per page: each shows at most two events' evidence.
PAGE_SIZE = 20


@dataclass(frozen=True)
class ShownEvent:
    """One event a case card explains: its latest, or its strongest."""

    event: DetectionEvent
    explanation: Explanation


@dataclass(frozen=True)
class CaseCard:
    """A case as the review queue shows it.

    Attributes
    ----------
    case : DetectionCase
        The case.
    client : Client or None
        Its client, in its current status.
    run_name : str
        The name of its run.
    kinds : tuple[CaseKind, ...]
        Its kinds with their counts and mutes, most frequent first.
    latest : ShownEvent
        Its latest event.
    strongest : ShownEvent or None
        The latest of its strongest events, when that is not the latest.
    may_ban : bool
        Whether confirming it may ban the client (not for faults alone).
    """

    case: DetectionCase
    client: Client | None
    run_name: str
    kinds: tuple[CaseKind, ...]
    latest: ShownEvent
    strongest: ShownEvent | None
    may_ban: bool

    @property
    def muted(self) -> tuple[CaseKind, ...]:
        """Its muted kinds."""
        return tuple(k for k in self.kinds if k.muted_at is not None)


@dataclass(frozen=True)
class CaseQueue:
    """A page of the review queue."""

    cards: tuple[CaseCard, ...]
    total: int
    offset: int
    next_offset: int | None
    reviewed: tuple[CaseCard, ...]


def case_queue(
    session: Session,
    where: CaseFilter,
    *,
    sort: CaseSort = CaseSort.SEVERITY,
    descending: bool = True,
    offset: int = 0,
    limit: int = PAGE_SIZE,
    reviewed_ids: Sequence[int] = (),
) -> CaseQueue:
    """Read a page of the review queue.

    Parameters
    ----------
    session : Session
        A read session.
    where : CaseFilter
        Which cases (the page asks for open ones by default).
    sort, descending : CaseSort, bool
        The order.
    offset, limit : int
        The page.
    reviewed_ids : Sequence[int]
        Cases just reviewed, shown at the top with their clients' new status.

    Returns
    -------
    CaseQueue
        The cards, the filter's total, the next page's offset.
    """
    page = cases.list_cases(
        session, where, sort=sort, descending=descending, limit=limit, offset=offset
    )
    reviewed = [c for c in (session.get(DetectionCase, i) for i in reviewed_ids) if c is not None]
    cards = case_cards(session, [*page.items, *reviewed])
    return CaseQueue(
        cards=cards[: len(page.items)],
        total=page.total,
        offset=offset,
        next_offset=page.next_offset,
        reviewed=cards[len(page.items) :],
    )


def case_cards(session: Session, rows: Sequence[DetectionCase]) -> tuple[CaseCard, ...]:
    """Return the cards of these cases, in a fixed number of queries."""
    kinds = cases.kinds_of(session, {row.id for row in rows})
    shown = cases.events_by_id(
        session, {i for row in rows for i in (row.latest_event_id, row.strongest_event_id)}
    )
    owners = queries.clients_by_id(session, {row.client_id for row in rows if row.client_id})
    names = queries.run_names(session, {row.run_id for row in rows})
    groups = rounds.agreeing_groups(
        session,
        {
            (e.run_id, e.round)
            for e in shown.values()
            if isinstance(e.evidence, dict) and "agreeing" in e.evidence
        },
    )

    digests = rounds.flag_digests(
        session,
        {
            (e.run_id, e.round)
            for e in shown.values()
            if isinstance(e.evidence, dict) and "files" in e.evidence
        },
    )

    def show(event_id: int) -> ShownEvent:
        event = shown[event_id]
        key = (event.run_id, event.round)
        return ShownEvent(
            event,
            explain(
                event.kind, event.worker, event.evidence, groups.get(key), digests.get(key, ())
            ),
        )

    return tuple(
        CaseCard(
            case=row,
            client=owners.get(row.client_id) if row.client_id else None,
            run_name=names.get(row.run_id, row.run_id),
            kinds=tuple(kinds[row.id]),
            latest=show(row.latest_event_id),
            strongest=(
                None
                if row.strongest_event_id == row.latest_event_id
                else show(row.strongest_event_id)
            ),
            may_ban=any(bans_on_confirm(k.kind) for k in kinds[row.id]),
        )
        for row in rows
    )


def open_case_count(session: Session) -> int:
    """Return how many cases wait for review (the navigation's badge)."""
    return cases.count_cases(session, CaseFilter(review_status=ReviewStatus.OPEN))
