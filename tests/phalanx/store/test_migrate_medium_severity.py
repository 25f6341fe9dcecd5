"""Migration 0005_medium_severity: the CHECK on an event's severity admits ``medium``."""

from __future__ import annotations

import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from phalanx.store import DetectionEvent, Severity, make_engine, runs, session_factory
from phalanx.store.migrate import current_revision, downgrade, upgrade
from tests.support.store_rows import add_event_before_cases

REVISION = "0005_medium_severity"


def add_event(url: str, severity: str) -> None:
    engine = make_engine(url)
    try:
        with session_factory(engine).begin() as session:
            run_id = runs.create_run(session, name="m", config={}, seed=1).id
            add_event_before_cases(
                session,
                run_id=run_id,
                round=1,
                worker=None,
                kind="tied_groups",
                severity=severity,
                evidence={},
            )
    finally:
        engine.dispose()


def severities(url: str) -> list[str]:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(select(DetectionEvent.__table__.c.severity))
            return sorted(str(s) for (s,) in rows)
    finally:
        engine.dispose()


def test_the_database_refuses_medium_before_0005_and_takes_it_after(database_url: str) -> None:
    upgrade(database_url, "0004_round_agreement")
    with pytest.raises(IntegrityError):
        add_event(database_url, "medium")

    upgrade(database_url, REVISION)

    assert current_revision(database_url) == REVISION
    add_event(database_url, Severity.MEDIUM)
    add_event(database_url, Severity.HIGH)
    assert severities(database_url) == ["high", "medium"]


def test_downgrading_0005_keeps_medium_events_as_low_ones(database_url: str) -> None:
    upgrade(database_url, REVISION)
    add_event(database_url, Severity.MEDIUM)

    downgrade(database_url, "0004_round_agreement")

    assert severities(database_url) == ["low"]
    with pytest.raises(IntegrityError):
        add_event(database_url, "medium")
