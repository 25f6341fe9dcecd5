"""Migration 0007_detection_cases: events gathered into cases, the stored ones included."""

from __future__ import annotations

from sqlalchemy import inspect, select, text

from phalanx.store import DetectionCase, make_engine, runs, session_factory
from phalanx.store.migrate import current_revision, downgrade, upgrade
from tests.support.schema import schema_diff
from tests.support.store_rows import add_client_before_run_ids, add_event_before_cases

REVISION = "0007_detection_cases"
BEFORE = "0006_worker_responses"


def test_0007_gathers_the_stored_events_into_cases(database_url: str) -> None:
    upgrade(database_url, BEFORE)
    engine = make_engine(database_url)
    try:
        with session_factory(engine).begin() as session:
            run_id = runs.create_run(session, name="m", config={}, seed=1).id
            alice = add_client_before_run_ids(session, "alice")
            rows = [
                # alice: a low event, a high one reviewed, a high one open
                {"round": 1, "client_id": alice, "worker": 0, "severity": "low"},
                {
                    "round": 2,
                    "client_id": alice,
                    "worker": 0,
                    "severity": "high",
                    "review_status": "confirmed",
                },
                {"round": 3, "client_id": alice, "worker": 0, "severity": "high"},
                {
                    "round": 4,
                    "client_id": alice,
                    "worker": 0,
                    "severity": "low",
                    "kind": "bad_signature",
                },
                # worker 5 without a client, every event dismissed
                {"round": 2, "worker": 5, "severity": "low", "review_status": "dismissed"},
                # a round notice
                {"round": 3, "severity": "medium", "kind": "tied_groups"},
            ]
            for row in rows:
                add_event_before_cases(session, run_id=run_id, **{"kind": "outlier", **row})

        upgrade(database_url, REVISION)

        assert current_revision(database_url) == REVISION
        with session_factory(engine)() as session:
            found = {c.subject: c for c in session.scalars(select(DetectionCase))}
            ids = session.execute(
                text("SELECT id, case_id FROM detection_events ORDER BY id")
            ).all()
            kinds = session.execute(
                text(
                    "SELECT kind, event_count FROM detection_case_kinds ORDER BY kind, event_count"
                )
            ).all()
        assert set(found) == {f"client:{alice}", "worker:5", "round"}
        theirs = found[f"client:{alice}"]
        assert (theirs.event_count, theirs.open_count, theirs.confirmed_count) == (4, 3, 1)
        assert (theirs.first_round, theirs.last_round, theirs.severity) == (1, 4, "high")
        assert (theirs.latest_event_id, theirs.strongest_event_id) == (ids[3][0], ids[2][0])
        assert (theirs.worker, theirs.review_status) == (0, "open")
        assert found["worker:5"].review_status == "dismissed"
        assert (found["round"].severity, found["round"].worker) == ("medium", None)
        assert [case_id for _, case_id in ids] == [theirs.id] * 4 + [
            found["worker:5"].id,
            found["round"].id,
        ]
        assert [tuple(k) for k in kinds] == [
            ("bad_signature", 1),
            ("outlier", 1),
            ("outlier", 3),
            ("tied_groups", 1),
        ]
    finally:
        engine.dispose()
    upgrade(database_url, "head")
    assert schema_diff(database_url) == []


def test_downgrading_0007_drops_the_cases_and_keeps_the_events(database_url: str) -> None:
    upgrade(database_url, REVISION)
    engine = make_engine(database_url)
    try:
        with session_factory(engine).begin() as session:
            run_id = runs.create_run(session, name="m", config={}, seed=1).id
        with session_factory(engine).begin() as session:
            add_event_before_cases(session, run_id=run_id, round=1, kind="outlier", severity="low")

        downgrade(database_url, BEFORE)

        with engine.connect() as connection:
            found = inspect(connection)
            assert "detection_cases" not in found.get_table_names()
            columns = {c["name"] for c in found.get_columns("detection_events")}
            assert not {"case_id", "muted"} & columns
            assert connection.execute(text("SELECT count(*) FROM detection_events")).scalar() == 1
    finally:
        engine.dispose()
