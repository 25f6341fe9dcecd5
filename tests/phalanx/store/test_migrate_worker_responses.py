"""Migration 0006_worker_responses: a table of every dispatched worker's response time."""

from __future__ import annotations

from sqlalchemy import inspect, text

from phalanx.response_times import WorkerResponse
from phalanx.store import make_engine, rounds, runs, session_factory
from phalanx.store.migrate import current_revision, downgrade, upgrade
from tests.support.store_rows import round_data

REVISION = "0006_worker_responses"
BEFORE = "0005_medium_severity"


def tables_and_indexes(url: str) -> tuple[set[str], set[str]]:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            found = inspect(connection)
            names = set(found.get_table_names())
            indexes = (
                {str(i["name"]) for i in found.get_indexes("worker_responses")}
                if "worker_responses" in names
                else set()
            )
            return names, indexes
    finally:
        engine.dispose()


def test_0006_adds_the_table_with_its_client_index_and_rounds_keep_working(
    database_url: str,
) -> None:
    upgrade(database_url, BEFORE)
    assert "worker_responses" not in tables_and_indexes(database_url)[0]

    upgrade(database_url, REVISION)

    assert current_revision(database_url) == REVISION
    names, indexes = tables_and_indexes(database_url)
    assert "worker_responses" in names
    assert "ix_worker_responses_client_id_run_id_round" in indexes
    engine = make_engine(database_url)
    try:
        with session_factory(engine).begin() as session:
            run_id = runs.create_run(session, name="m", config={}, seed=1).id
            responses = [WorkerResponse(0, 1.5, "kept"), WorkerResponse(1, None, "missing")]
            rounds.record_round(session, run_id, round_data(1), responses=responses)
        with engine.connect() as connection:
            stored = connection.execute(
                text("SELECT worker, seconds, status FROM worker_responses ORDER BY worker")
            ).all()
        assert [tuple(row) for row in stored] == [(0, 1.5, "kept"), (1, None, "missing")]
    finally:
        engine.dispose()


def test_downgrading_0006_drops_the_table_and_the_rounds_stay(database_url: str) -> None:
    upgrade(database_url, REVISION)
    engine = make_engine(database_url)
    try:
        with session_factory(engine).begin() as session:
            run_id = runs.create_run(session, name="m", config={}, seed=1).id
            rounds.record_round(
                session, run_id, round_data(1), responses=[WorkerResponse(0, 1.0, "late")]
            )

        downgrade(database_url, BEFORE)

        assert "worker_responses" not in tables_and_indexes(database_url)[0]
        with engine.connect() as connection:
            assert connection.execute(text("SELECT count(*) FROM rounds")).scalar() == 1
    finally:
        engine.dispose()
