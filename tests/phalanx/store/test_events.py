"""The detection event repository (phalanx.store.events): filters, keyset pages, reviews.

On a migrated SQLite and PostgreSQL database.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from phalanx.store import (
    DetectionEvent,
    EventKind,
    NotFoundError,
    ReviewStatus,
    Severity,
    clients,
    events,
    rounds,
)
from phalanx.store.events import EventFilter
from phalanx.store.rounds import EventData
from tests.support.store_rows import T0, new_client, new_run, round_data


@pytest.fixture
def event_runs(db_session: Session) -> Iterator[dict[str, str]]:
    """Two runs with 25 events over 5 rounds, two clients, three kinds."""
    run_a, run_b = new_run(db_session, name="a").id, new_run(db_session, name="b").id
    alice, bob = new_client(db_session, "alice"), new_client(db_session, "bob")
    kinds = [EventKind.OUTSIDE_MAX_CLIQUE, EventKind.BAD_SIGNATURE, EventKind.OUTLIER]
    for number in range(1, 6):
        for run_id in (run_a, run_b):
            found = [
                EventData(
                    kind=kinds[(number + worker) % 3],
                    severity=Severity.HIGH if worker % 2 else Severity.LOW,
                    worker=worker,
                    client_id=alice if worker == 0 else bob if worker == 1 else None,
                )
                for worker in range(3 if run_id == run_a else 2)
            ]
            rounds.record_round(db_session, run_id, round_data(number), found)
    db_session.commit()
    yield {"a": run_a, "b": run_b, "alice": alice, "bob": bob}


def all_events(session: Session) -> list[DetectionEvent]:
    return list(session.scalars(select(DetectionEvent).order_by(DetectionEvent.id.desc())))


@pytest.mark.parametrize(
    "where",
    [
        {"run": "a"},
        {"client": "alice"},
        {"kind": EventKind.BAD_SIGNATURE},
        {"run": "b", "kind": EventKind.OUTLIER},
        {"run": "a", "round": 3},
        {"severity": Severity.HIGH},
    ],
    ids=lambda where: "-".join(f"{k}={v}" for k, v in where.items()),
)
def test_event_filters_select_exactly_the_matching_events(
    db_session: Session, event_runs: dict[str, str], where: dict[str, object]
) -> None:
    flt = EventFilter(
        run_id=event_runs[str(where["run"])] if "run" in where else None,
        client_id=event_runs[str(where["client"])] if "client" in where else None,
        kind=where.get("kind"),  # type: ignore[arg-type]
        round=where.get("round"),  # type: ignore[arg-type]
        severity=where.get("severity"),  # type: ignore[arg-type]
    )

    def matches(event: DetectionEvent) -> bool:
        return all(
            [
                flt.run_id in (None, event.run_id),
                flt.client_id in (None, event.client_id),
                flt.kind in (None, event.kind),
                flt.round in (None, event.round),
                flt.severity in (None, event.severity),
            ]
        )

    expected = [e.id for e in all_events(db_session) if matches(e)]
    page = events.list_events(db_session, flt, limit=1000)

    assert expected, "the filter should match some events"
    assert [e.id for e in page.items] == expected
    assert events.count_events(db_session, flt) == len(expected)


@pytest.mark.parametrize("page_size", [1, 4, 25, 100])
def test_keyset_pages_cover_every_event_once_newest_first(
    db_session: Session, event_runs: dict[str, str], page_size: int
) -> None:
    seen: list[int] = []
    before: int | None = None
    pages = 0
    while True:
        page = events.list_events(db_session, before=before, limit=page_size)
        seen.extend(e.id for e in page.items)
        pages += 1
        if page.next_before is None:
            break
        assert len(page.items) == page_size
        before = page.next_before

    assert seen == [e.id for e in all_events(db_session)]
    assert len(seen) == 25
    assert pages == math.ceil(25 / page_size)  # no empty page at the end


def test_a_page_size_outside_the_limits_is_refused(db_session: Session) -> None:
    with pytest.raises(ValueError, match="between 1 and 1000"):
        events.list_events(db_session, limit=0)


def test_reviewing_an_event_records_decision_reviewer_and_note(
    db_session: Session, event_runs: dict[str, str]
) -> None:
    target = events.list_events(db_session, EventFilter(client_id=event_runs["bob"])).items[0]

    events.review_event(
        db_session, target.id, ReviewStatus.CONFIRMED, reviewer="ops-alice", note="replayed", now=T0
    )
    db_session.commit()
    db_session.expire_all()

    stored = events.get_event(db_session, target.id)
    assert (stored.review_status, stored.reviewed_by, stored.reviewed_at, stored.note) == (
        ReviewStatus.CONFIRMED,
        "ops-alice",
        T0,
        "replayed",
    )
    confirmed = events.list_events(db_session, EventFilter(review_status=ReviewStatus.CONFIRMED))
    assert [e.id for e in confirmed.items] == [target.id]
    assert events.count_events(db_session, EventFilter(review_status=ReviewStatus.OPEN)) == 24


def test_reviewing_an_unknown_event_raises_not_found(db_session: Session) -> None:
    with pytest.raises(NotFoundError):
        events.review_event(db_session, 10**9, ReviewStatus.DISMISSED, reviewer="ops")


def test_events_of_a_deleted_client_keep_their_evidence(
    db_session: Session, event_runs: dict[str, str]
) -> None:
    alice_events = events.count_events(db_session, EventFilter(client_id=event_runs["alice"]))
    db_session.delete(clients.get_client(db_session, event_runs["alice"]))
    db_session.commit()
    db_session.expire_all()

    assert alice_events > 0
    assert events.count_events(db_session, EventFilter(client_id=event_runs["alice"])) == 0
    assert events.count_events(db_session) == 25
