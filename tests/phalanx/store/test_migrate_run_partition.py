"""Migration 0008_run_partition: a local-data run stores its partition's report."""

from __future__ import annotations

from sqlalchemy import text

from phalanx.store import make_engine, runs, session_factory
from phalanx.store.migrate import current_revision, downgrade, upgrade
from tests.support.store_rows import table_names

REVISION = "0008_run_partition"
BEFORE = "0007_detection_cases"
REPORT = {"kind": "iid", "samples": [5, 5], "histograms": None}


def test_0008_adds_the_table_and_a_partition_is_stored_and_read(database_url: str) -> None:
    upgrade(database_url, BEFORE)
    assert "run_partitions" not in table_names(database_url)

    upgrade(database_url, REVISION)

    assert current_revision(database_url) == REVISION
    assert "run_partitions" in table_names(database_url)
    engine = make_engine(database_url)
    try:
        with session_factory(engine).begin() as session:
            run_id = runs.create_run(session, name="m", config={}, seed=1).id
            runs.record_partition(session, run_id, REPORT)
        with session_factory(engine)() as session:
            assert runs.get_partition(session, run_id) == REPORT
    finally:
        engine.dispose()


def test_downgrading_0007_drops_the_table_and_the_runs_stay(database_url: str) -> None:
    upgrade(database_url, REVISION)
    engine = make_engine(database_url)
    try:
        with session_factory(engine).begin() as session:
            run_id = runs.create_run(session, name="kept", config={}, seed=1).id
            runs.record_partition(session, run_id, REPORT)

        downgrade(database_url, BEFORE)

        assert current_revision(database_url) == BEFORE
        assert "run_partitions" not in table_names(database_url)
        with engine.connect() as connection:
            assert connection.execute(text("SELECT count(*) FROM runs")).scalar() == 1
    finally:
        engine.dispose()
