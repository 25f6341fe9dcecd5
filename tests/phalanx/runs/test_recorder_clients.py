"""A simulated run's workers are stored as its own identities, never in the client registry."""

from __future__ import annotations

from pathlib import Path

from phalanx.roster import simulated_roster
from phalanx.runs.recorder import claimer_name, create_simulated_run, register_simulated_clients
from phalanx.store import ClientStatus, clients, make_engine, migrate, rounds, session_factory
from phalanx.store.counts import clients_by_status
from tests.support.configs import small_config
from tests.support.inprocess import execute_inprocess
from tests.support.store_rows import new_client


def test_running_a_config_twice_leaves_the_registry_as_it_was(migrated_url: str) -> None:
    engine = make_engine(migrated_url)
    try:
        sessions = session_factory(engine)
        with sessions.begin() as session:
            real = new_client(session, "lab-machine", status=ClientStatus.APPROVED)
        config = small_config(attack={"name": None, "q": 0})

        first = create_simulated_run(sessions, config, "me")
        second = create_simulated_run(sessions, config, "me")
        register_simulated_clients(sessions, first, config)  # a resumed run: nothing new

        with sessions() as session:
            assert [c.id for c in clients.list_clients(session)] == [real]
            assert clients_by_status(session)[ClientStatus.APPROVED] == 1
            workers = config.assignment.num_workers
            for run_id in (first, second):
                mine = clients.list_clients(session, run_id=run_id)
                assert {c.id for c in mine} == {
                    i.client_id for i in simulated_roster(run_id, workers)
                }
                assert {c.run_id for c in mine} == {run_id}
                assert clients.count_run_clients(session, run_id) == workers
            assert not clients.name_in_use(session, "test/worker-0", other_than="another-key")
    finally:
        engine.dispose()


def test_every_worker_that_replied_is_seen_with_its_rounds_end(
    sqlite_url: str, tmp_path: Path
) -> None:
    migrate.upgrade(sqlite_url)
    engine = make_engine(sqlite_url)
    try:
        sessions = session_factory(engine)
        config = small_config(rounds=1, attack={"name": None, "q": 0})
        claimer = claimer_name()
        run_id = create_simulated_run(sessions, config, claimer)
        with sessions() as session:
            assert {c.last_seen_at for c in clients.list_clients(session, run_id=run_id)} == {None}

        execute_inprocess(sessions, config, run_id, claimer, tmp_path)

        with sessions() as session:
            (only,) = rounds.list_rounds(session, run_id)
            seen = {c.last_seen_at for c in clients.list_clients(session, run_id=run_id)}
            assert seen == {only.finished_at}
    finally:
        engine.dispose()
