"""Migration 0009_simulated_clients_of_runs: simulated workers leave the registry for their run."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Engine, inspect, text

from phalanx.roster import simulated_identity
from phalanx.store import clients, make_engine, runs, session_factory
from phalanx.store.counts import clients_by_status
from phalanx.store.migrate import current_revision, downgrade, upgrade
from tests.support.schema import schema_diff
from tests.support.store_rows import add_client_before_run_ids

REVISION = "0009_simulated_clients_of_runs"
BEFORE = "0008_run_partition"


def run_with_a_worker(engine: Engine) -> str:
    """A run and one simulated worker of it, at revision 0009; the run's id."""
    with session_factory(engine).begin() as session:
        run_id = runs.create_run(session, name="m", config={}, seed=1).id
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO clients (id, name, public_key, fingerprint, status, created_at, "
                "run_id) VALUES ('c1', 'm/worker-0', 'pem', 'fp', 'approved', :at, :run)"
            ),
            {"at": datetime.now(UTC), "run": run_id},
        )
    return run_id


def test_0009_moves_the_stored_simulated_workers_to_their_runs(database_url: str) -> None:
    upgrade(database_url, BEFORE)
    engine = make_engine(database_url)
    try:
        with session_factory(engine).begin() as session:
            config = {"name": "quick", "assignment": {"num_workers": 3}}
            first = runs.create_run(session, name="quick", config=config, seed=1).id
            second = runs.create_run(session, name="quick", config=config, seed=1).id
            odd = runs.create_run(session, name="odd", config={"assignment": "x"}, seed=1).id
            for run_id in (first, second):
                for worker in range(3):
                    ident = simulated_identity(run_id, worker)
                    add_client_before_run_ids(session, f"quick/worker-{worker}", ident.client_id)
            add_client_before_run_ids(session, "a-real-machine")
            add_client_before_run_ids(session, "odd/worker-0", simulated_identity(odd, 0).client_id)

        upgrade(database_url, REVISION)

        assert current_revision(database_url) == REVISION
        with session_factory(engine)() as session:
            registry = clients.list_clients(session)
            assert sorted(c.name for c in registry) == ["a-real-machine", "odd/worker-0"]
            assert sum(clients_by_status(session).values()) == 2
            for run_id in (first, second):
                workers = clients.list_clients(session, run_id=run_id)
                assert sorted(c.name for c in workers) == [f"quick/worker-{w}" for w in range(3)]
                assert clients.count_run_clients(session, run_id) == 3
        upgrade(database_url, "head")  # later revisions add tables the models name
        assert schema_diff(database_url) == []
    finally:
        engine.dispose()


def test_a_run_deleted_takes_its_simulated_workers_with_it(database_url: str) -> None:
    upgrade(database_url, REVISION)
    engine = make_engine(database_url)
    try:
        run_id = run_with_a_worker(engine)
        with engine.begin() as connection:
            connection.execute(text("DELETE FROM runs WHERE id = :run"), {"run": run_id})
            assert connection.execute(text("SELECT count(*) FROM clients")).scalar() == 0
    finally:
        engine.dispose()


def test_downgrading_0009_drops_the_column_and_keeps_every_client(database_url: str) -> None:
    upgrade(database_url, REVISION)
    engine = make_engine(database_url)
    try:
        run_with_a_worker(engine)

        downgrade(database_url, BEFORE)

        assert current_revision(database_url) == BEFORE
        with engine.connect() as connection:
            columns = {c["name"] for c in inspect(connection).get_columns("clients")}
            assert "run_id" not in columns
            assert connection.execute(text("SELECT count(*) FROM clients")).scalar() == 1
    finally:
        engine.dispose()
