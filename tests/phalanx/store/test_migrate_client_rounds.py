"""Migration 0010_client_rounds: a local-data round stores a row per client."""

from __future__ import annotations

from sqlalchemy import text

from phalanx.reports import ClientRound
from phalanx.store import client_rounds, make_engine, rounds, runs, session_factory
from phalanx.store.migrate import current_revision, downgrade, upgrade
from tests.support.store_rows import round_data, table_names

REVISION = "0010_client_rounds"
BEFORE = "0009_simulated_clients_of_runs"


def test_0010_adds_the_table_and_rows_are_stored_and_read(database_url: str) -> None:
    upgrade(database_url, BEFORE)
    assert "client_rounds" not in table_names(database_url)

    upgrade(database_url, REVISION)

    assert current_revision(database_url) == REVISION
    engine = make_engine(database_url)
    try:
        with session_factory(engine).begin() as session:
            run_id = runs.create_run(session, name="m", config={}, seed=1).id
            row = ClientRound(0, None, 10, 0.5, 1.0, "counted", 0.4, 0.9, 3)
            rounds.record_round(session, run_id, round_data(1), clients=[row])
        with session_factory(engine)() as session:
            (view,) = client_rounds.client_view(session, run_id)
        assert (view.samples, view.distance_ratio, view.eval_accuracy) == (10, 1.0, 0.9)
    finally:
        engine.dispose()


def test_downgrading_0010_drops_the_table_and_the_rounds_stay(database_url: str) -> None:
    upgrade(database_url, REVISION)
    engine = make_engine(database_url)
    try:
        with session_factory(engine).begin() as session:
            run_id = runs.create_run(session, name="kept", config={}, seed=1).id
            rounds.record_round(
                session, run_id, round_data(1), clients=[ClientRound(0, None, samples=4)]
            )

        downgrade(database_url, BEFORE)

        assert current_revision(database_url) == BEFORE
        assert "client_rounds" not in table_names(database_url)
        with engine.connect() as connection:
            assert connection.execute(text("SELECT count(*) FROM rounds")).scalar() == 1
    finally:
        engine.dispose()
