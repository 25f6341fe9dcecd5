"""The one executor: a run that lives in the database, recorded round by round to its end."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from phalanx.agreement_record import AgreementRecord
from phalanx.attacks import load_attack
from phalanx.config import RunConfig
from phalanx.data import ImageDataset, load_dataset
from phalanx.faults import RunFailedError
from phalanx.flower.server_app import GridFederation
from phalanx.identity import generate_private_key, public_key_fingerprint, public_key_to_pem
from phalanx.plan import adversaries
from phalanx.reports import RoundReport
from phalanx.roster import SimulatedRoster
from phalanx.runs.enrolled import EnrolledRoster
from phalanx.runs.executor import execute, simulated_partition
from phalanx.runs.recorder import (
    CheckpointError,
    StoreRecorder,
    claimer_name,
    create_simulated_run,
    load_checkpoint,
    stored_summary,
)
from phalanx.store import (
    ClientStatus,
    DetectionEvent,
    Run,
    RunStatus,
    clients,
    make_engine,
    migrate,
    rounds,
    runs,
    session_factory,
)
from phalanx.store.retry import DatabaseUnavailableError
from phalanx_clients.behaviour import Behaviour, RedTeam
from phalanx_clients.inprocess import InProcessTransport
from phalanx_clients.worker import Worker
from tests.support.clock import FakeClock
from tests.support.configs import local_config, small_config
from tests.support.inprocess import inprocess_transport, inprocess_workers
from tests.support.reports import round_report
from tests.support.write_lock import WriteLock

#: Short enough that a write blocked by the test's lock fails at once.
SHORT_LOCK_TIMEOUT_S = 0.05


class FakeGrid:
    """A test double of Flower's Grid whose nodes connect but never get a message."""

    def __init__(self, nodes: list[int]) -> None:
        self.nodes = nodes

    def get_node_ids(self) -> list[int]:
        return list(self.nodes)


def test_recorded_run_writes_rounds_events_and_checkpoint(
    database_url: str, tmp_path: Path
) -> None:
    migrate.upgrade(database_url)
    sessions = session_factory(make_engine(database_url))
    config = small_config(rounds=2)
    claimer = claimer_name()
    run_id = create_simulated_run(sessions, config, claimer)
    summary = execute(
        sessions,
        run_id,
        roster=SimulatedRoster(run_id),
        claimer=claimer,
        checkpoint_dir=tmp_path,
        transport=inprocess_transport(config, run_id),
    )
    assert summary.rounds == 2 and (summary.precision, summary.recall) == (1.0, 1.0)
    assert stored_summary(sessions, run_id) == summary
    done, checkpoint = load_checkpoint(sessions, run_id)
    assert done == 2 and checkpoint
    assert len(list(tmp_path.glob(f"{run_id}/round-*.pt"))) == 1  # older files are pruned
    with sessions() as session:
        run = session.get(Run, run_id)
        assert run is not None and run.status == "succeeded" and run.current_round == 2
        events = session.scalars(select(DetectionEvent)).all()
        assert len(events) == 4 and all(e.evidence.get("summary") for e in events)
        # Each round is stored with its agreement graph: the liars outside the clique.
        for number in (1, 2):
            graph = AgreementRecord.from_dict(rounds.get_agreement(session, run_id, number))
            assert graph.rule == "unique_clique"
            assert set(graph.flagged) == adversaries(config)
            assert graph.replied == tuple(range(config.assignment.num_workers))


def test_cancel_takes_effect_between_rounds(sqlite_url: str, tmp_path: Path) -> None:
    migrate.upgrade(sqlite_url)
    sessions = session_factory(make_engine(sqlite_url))
    config = small_config(rounds=5)
    claimer = claimer_name()
    run_id = create_simulated_run(sessions, config, claimer)

    def cancel_after_round_two(report: object) -> None:
        if report.round == 2:
            with sessions.begin() as session:
                runs.request_cancel(session, run_id)

    summary = execute(
        sessions,
        run_id,
        roster=SimulatedRoster(run_id),
        claimer=claimer,
        checkpoint_dir=tmp_path,
        transport=inprocess_transport(config, run_id),
        on_round=cancel_after_round_two,
    )
    assert summary.rounds == 2
    with sessions() as session:
        run = session.get(Run, run_id)
        assert run is not None and run.status == "cancelled"


def test_a_round_is_recorded_once_the_lock_that_blocked_it_is_released(
    migrated_url: str, write_lock: WriteLock, tmp_path: Path
) -> None:
    sessions = session_factory(make_engine(migrated_url, lock_timeout_s=SHORT_LOCK_TIMEOUT_S))
    config = small_config(rounds=2)
    claimer = claimer_name()
    run_id = create_simulated_run(sessions, config, claimer)

    def lock_after_round_one(report: RoundReport) -> None:
        if report.round == 1:
            write_lock.hold()  # the heartbeat before round 2 and round 2 itself wait

    def release_after_three_pauses(clock: FakeClock) -> None:
        if len(clock.pauses) == 3:
            write_lock.release()

    clock = FakeClock(on_pause=release_after_three_pauses)
    summary = execute(
        sessions,
        run_id,
        roster=SimulatedRoster(run_id),
        claimer=claimer,
        checkpoint_dir=tmp_path,
        transport=inprocess_transport(config, run_id),
        on_round=lock_after_round_one,
        retry=clock.policy(),
    )

    assert summary.rounds == 2 and len(clock.pauses) == 3
    with sessions() as session:
        run = session.get(Run, run_id)
        assert run is not None and (run.status, run.current_round) == ("succeeded", 2)


def test_a_run_whose_database_stays_locked_ends_failed_with_the_cause_in_one_line(
    migrated_url: str, write_lock: WriteLock, tmp_path: Path
) -> None:
    sessions = session_factory(make_engine(migrated_url, lock_timeout_s=SHORT_LOCK_TIMEOUT_S))
    config = small_config(rounds=3)
    claimer = claimer_name()
    run_id = create_simulated_run(sessions, config, claimer)

    def lock_after_round_one(report: RoundReport) -> None:
        if report.round == 1:
            write_lock.hold()

    def release_once_the_heartbeat_gave_up(clock: FakeClock) -> None:
        if clock.now > 60:  # past the heartbeat's budget: the run's end is being recorded
            write_lock.release()

    clock = FakeClock(on_pause=release_once_the_heartbeat_gave_up)
    with pytest.raises(DatabaseUnavailableError):
        execute(
            sessions,
            run_id,
            roster=SimulatedRoster(run_id),
            claimer=claimer,
            checkpoint_dir=tmp_path,
            transport=inprocess_transport(config, run_id),
            on_round=lock_after_round_one,
            retry=clock.policy(),
        )

    with sessions() as session:
        run = session.get(Run, run_id)
        assert run is not None and (run.status, run.current_round) == ("failed", 1)
        assert run.error == (
            "the database stayed locked for 56 s while sending the heartbeat after round 1 "
            "(17 attempts)"
        )


def test_a_round_that_cannot_be_recorded_says_which_and_leaves_no_trace(
    migrated_url: str, write_lock: WriteLock, tmp_path: Path
) -> None:
    sessions = session_factory(make_engine(migrated_url, lock_timeout_s=SHORT_LOCK_TIMEOUT_S))
    claimer = claimer_name()
    run_id = create_simulated_run(sessions, small_config(rounds=3), claimer)
    clock = FakeClock()
    recorder = StoreRecorder(sessions, run_id, tmp_path, claimer, clock.policy(budget_s=10))
    write_lock.hold()

    with pytest.raises(DatabaseUnavailableError, match=r"while recording round 1 \("):
        recorder.round_finished(round_report(1), b"checkpoint")

    write_lock.release()
    assert load_checkpoint(sessions, run_id) == (0, None)
    recorder.round_finished(round_report(1), b"checkpoint")  # the same round, once free
    assert load_checkpoint(sessions, run_id) == (1, b"checkpoint")


def _claimed(sessions: sessionmaker[Session], config: RunConfig, claimer: str) -> str:
    with sessions.begin() as session:
        run_id = runs.create_run(
            session, name=config.name, config=config.model_dump(mode="json"), seed=config.seed
        ).id
        runs.start_run(session, run_id, claimer)
    return run_id


def _run_row(sessions: sessionmaker[Session], run_id: str) -> Run:
    with sessions() as session:
        run = session.get(Run, run_id)
        assert run is not None
        session.expunge(run)
        return run


def test_a_deployed_run_is_executed_on_its_enrolled_clients_and_summarised_without_truth(
    sqlite_url: str, tmp_path: Path
) -> None:
    migrate.upgrade(sqlite_url)
    sessions = session_factory(make_engine(sqlite_url))
    config = small_config(
        rounds=2,
        assignment={"scheme": "subsets", "num_workers": 3, "r": 2},
        attack={"name": None, "q": 0},
        deployment={"backend": "deployment"},
    )
    keys = [generate_private_key() for _ in range(3)]
    with sessions.begin() as session:
        ids = [
            clients.create_client(
                session,
                name=f"client-{node}",
                public_key=public_key_to_pem(key.public_key()),
                fingerprint=public_key_fingerprint(key.public_key()),
                status=ClientStatus.APPROVED,
                flower_node_id=node,
            ).id
            for node, key in enumerate(keys)
        ]
    liar = Behaviour(RedTeam(frozenset({2}), load_attack("reversed_gradient"), "all"))
    train = load_dataset(config.data.dataset, "train")
    workers = {
        node: Worker(config, train, ids[node], key, liar if node == 2 else None, node_id=node)
        for node, key in enumerate(keys)
    }
    run_id = _claimed(sessions, config, "me")

    summary = execute(
        sessions,
        run_id,
        transport=InProcessTransport(workers),
        roster=EnrolledRoster(sessions),
        claimer="me",
        checkpoint_dir=tmp_path,
    )

    assert (summary.backend, summary.rounds, summary.flagged) == ("deployment", 2, [ids[2]])
    assert (summary.precision, summary.recall, summary.adversaries) == (None, None, [])
    run = _run_row(sessions, run_id)
    assert run.status == RunStatus.SUCCEEDED and run.summary == summary.to_dict()
    with sessions() as session:
        assert all(clients.get_client(session, c).last_seen_at is not None for c in ids)


def test_a_run_whose_workers_never_connect_fails_after_the_configs_nodes_timeout(
    sqlite_url: str, tmp_path: Path
) -> None:
    migrate.upgrade(sqlite_url)
    sessions = session_factory(make_engine(sqlite_url))
    config = small_config(deployment={"nodes_timeout_s": 0.05})
    run_id = _claimed(sessions, config, "me")

    with pytest.raises(TimeoutError):
        execute(
            sessions,
            run_id,
            transport=GridFederation(FakeGrid(nodes=[11, 12]), poll_interval=0.01),  # type: ignore[arg-type]
            roster=SimulatedRoster(run_id),
            claimer="me",
            checkpoint_dir=tmp_path,
        )

    run = _run_row(sessions, run_id)
    assert run.status == RunStatus.FAILED
    assert run.error == (
        "TimeoutError: the run needs 7 workers; after 0 s only 2 SuperNodes were connected; "
        "with `flwr run`, pass `--federation-config num-supernodes=7`"
    )


def test_a_run_whose_checkpoint_is_gone_fails_saying_which(sqlite_url: str, tmp_path: Path) -> None:
    migrate.upgrade(sqlite_url)
    sessions = session_factory(make_engine(sqlite_url))
    config = small_config(rounds=3)
    run_id = create_simulated_run(sessions, config, "me")
    StoreRecorder(sessions, run_id, tmp_path, "me").round_finished(round_report(1), b"model")
    (tmp_path / run_id / "round-000001.pt").unlink()

    with pytest.raises(CheckpointError):
        execute(
            sessions,
            run_id,
            transport=inprocess_transport(config, run_id),
            roster=SimulatedRoster(run_id),
            claimer="me",
            checkpoint_dir=tmp_path,
        )

    run = _run_row(sessions, run_id)
    assert run.status == RunStatus.FAILED
    assert run.error == "CheckpointError: checkpoint of round 1 is missing: .../round-000001.pt"


def test_workers_of_another_backend_than_the_runs_are_refused(
    sqlite_url: str, tmp_path: Path
) -> None:
    migrate.upgrade(sqlite_url)
    sessions = session_factory(make_engine(sqlite_url))
    config = small_config()
    run_id = create_simulated_run(sessions, config, "me")

    with pytest.raises(ValueError, match=r"deployment\.backend is 'simulation'"):
        execute(
            sessions,
            run_id,
            transport=inprocess_transport(config, run_id),
            roster=EnrolledRoster(sessions),
            claimer="me",
            checkpoint_dir=tmp_path,
        )

    assert _run_row(sessions, run_id).status == RunStatus.FAILED


def test_a_local_data_run_stores_its_partition_and_trains(sqlite_url: str, tmp_path: Path) -> None:
    migrate.upgrade(sqlite_url)
    sessions = session_factory(make_engine(sqlite_url))
    config = local_config(rounds=2, data={"partition": {"kind": "dirichlet", "alpha": 0.5}})
    claimer = claimer_name()
    run_id = create_simulated_run(sessions, config, claimer)

    summary = execute(
        sessions,
        run_id,
        roster=SimulatedRoster(run_id),
        claimer=claimer,
        checkpoint_dir=tmp_path,
        transport=inprocess_transport(config, run_id),
    )

    assert summary.rounds == 2
    with sessions() as session:
        stored = runs.get_partition(session, run_id)
    assert _run_row(sessions, run_id).status == "succeeded"
    assert stored == simulated_partition(config).to_dict()  # type: ignore[union-attr]
    assert stored is not None and stored["kind"] == "dirichlet" and len(stored["samples"]) == 6


def test_a_local_data_run_whose_clients_all_mismatch_fails_with_the_cause_in_one_line(
    sqlite_url: str, tmp_path: Path
) -> None:
    migrate.upgrade(sqlite_url)
    sessions = session_factory(make_engine(sqlite_url))
    config = local_config(rounds=2)
    claimer = claimer_name()
    run_id = create_simulated_run(sessions, config, claimer)
    workers = inprocess_workers(config, run_id)
    for worker in workers.values():  # every client's data has 12 classes, the model 10 outputs
        worker.train_set = ImageDataset(
            x=worker.train_set.x, y=worker.train_set.y, num_classes=12, name="clinic/train"
        )

    with pytest.raises(RunFailedError):
        execute(
            sessions,
            run_id,
            roster=SimulatedRoster(run_id),
            claimer=claimer,
            checkpoint_dir=tmp_path,
            transport=InProcessTransport(workers),
        )

    run = _run_row(sessions, run_id)
    assert (run.status, run.error) == (
        "failed",
        "round 1: 6 of 6 workers failed with the same error: ModelDataMismatchError: "
        "clinic/train: the data has 12 classes but the model only 10 outputs",
    )
    with sessions() as session:
        assert runs.get_partition(session, run_id) is not None  # stored before round 1
