"""Migration 0002_event_indexes (indexes of two event filters), up and down, on both databases."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import inspect

from phalanx.store import Severity, make_engine, runs, session_factory
from phalanx.store.events import EventFilter, count_events
from phalanx.store.migrate import current_revision, downgrade, upgrade
from tests.support.schema import schema_diff
from tests.support.store_rows import add_event_before_cases

REVISION = "0002_event_indexes"
NEW_INDEXES = {
    "ix_detection_events_run_id_review_status_id": ["run_id", "review_status", "id"],
    "ix_detection_events_severity_id": ["severity", "id"],
}
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def event_indexes(url: str) -> dict[str, list[str]]:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            found = inspect(connection).get_indexes("detection_events")
    finally:
        engine.dispose()
    return {str(index["name"]): [str(c) for c in index["column_names"]] for index in found}


def seed_event(url: str) -> str:
    engine = make_engine(url)
    try:
        with session_factory(engine).begin() as session:
            run_id = runs.create_run(session, name="m", config={}, seed=1, now=T0).id
            # The event alone: today's round rows have columns an older schema lacks.
            add_event_before_cases(
                session,
                run_id=run_id,
                round=1,
                worker=0,
                kind="outlier",
                severity=Severity.LOW,
                evidence={},
            )
    finally:
        engine.dispose()
    return run_id


def events_of(url: str, run_id: str) -> int:
    engine = make_engine(url)
    try:
        with session_factory(engine)() as session:
            return count_events(session, EventFilter(run_id=run_id, severity=Severity.LOW))
    finally:
        engine.dispose()


def test_0002_adds_the_indexes_to_a_database_at_0001(database_url: str) -> None:
    upgrade(database_url, "0001")
    assert not NEW_INDEXES.keys() & event_indexes(database_url).keys()
    run_id = seed_event(database_url)

    upgrade(database_url, REVISION)

    assert current_revision(database_url) == REVISION
    assert NEW_INDEXES.items() <= event_indexes(database_url).items()
    assert events_of(database_url, run_id) == 1
    upgrade(database_url, "head")  # the later revisions then bring it to the models' schema
    assert schema_diff(database_url) == []


def test_downgrading_0002_drops_only_its_indexes_and_keeps_the_events(database_url: str) -> None:
    upgrade(database_url, REVISION)
    before = event_indexes(database_url)
    run_id = seed_event(database_url)

    downgrade(database_url, "0001")

    assert current_revision(database_url) == "0001"
    after = event_indexes(database_url)
    assert after == {name: cols for name, cols in before.items() if name not in NEW_INDEXES}
    assert events_of(database_url, run_id) == 1


def test_0002_down_and_up_again_restores_the_schema(database_url: str) -> None:
    upgrade(database_url)
    downgrade(database_url, "0001")

    upgrade(database_url)

    assert NEW_INDEXES.items() <= event_indexes(database_url).items()
    assert schema_diff(database_url) == []
