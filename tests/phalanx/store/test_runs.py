"""The store's repositories on a migrated SQLite and PostgreSQL database."""

from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, select, text
from sqlalchemy.exc import IntegrityError, StatementError
from sqlalchemy.orm import Session, sessionmaker

from phalanx.store import (
    ClientStatus,
    ConflictError,
    DetectionEvent,
    EventKind,
    LeaseLostError,
    NotFoundError,
    ReviewStatus,
    Role,
    Run,
    RunStatus,
    Severity,
    audit,
    checkpoints,
    clients,
    events,
    keys,
    make_engine,
    normalize_url,
    rounds,
    runs,
    session_factory,
)
from phalanx.store.events import EventFilter
from phalanx.store.migrate import upgrade
from phalanx.store.rounds import EventData, RoundData
from phalanx.store.types import UINT64_MAX

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def factory(db_engine: Engine) -> sessionmaker[Session]:
    return session_factory(db_engine)


def new_run(session: Session, *, name: str = "run", created_at: datetime = T0) -> Run:
    return runs.create_run(session, name=name, config={"rounds": 3}, seed=7, now=created_at)


def round_data(number: int, /, **overrides: object) -> RoundData:
    fields: dict[str, object] = {
        "number": number,
        "started_at": T0 + timedelta(minutes=number),
        "finished_at": T0 + timedelta(minutes=number, seconds=30),
        "timings": {"collect": 20.0, "detect": 0.5},
        "bytes_up": 10_000,
        "bytes_down": 40_000,
        "metrics": {"accuracy": 0.5 + number / 100, "loss": 1.0},
        "num_flagged": 1,
        "num_rejected": 0,
        "assignment": {"scheme": "subsets", "r": 3},
        "model_digest": f"digest-{number}",
    }
    fields.update(overrides)
    return RoundData(**fields)  # type: ignore[arg-type]


def new_client(session: Session, name: str, **kwargs: object) -> str:
    client = clients.create_client(
        session,
        name=name,
        public_key=f"-----BEGIN PUBLIC KEY-----\n{name}\n-----END PUBLIC KEY-----\n",
        fingerprint=hashlib.sha256(name.encode()).hexdigest(),
        **kwargs,  # type: ignore[arg-type]
    )
    return client.id


# --- engine -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "driver"),
    [
        ("postgresql://u@h/db", "postgresql+psycopg"),
        ("postgres://u@h/db", "postgresql+psycopg"),
        ("postgresql+psycopg://u@h/db", "postgresql+psycopg"),
        ("sqlite:///x.db", "sqlite"),
    ],
)
def test_urls_are_normalised_to_psycopg_for_postgresql(given: str, driver: str) -> None:
    assert normalize_url(given).drivername == driver


def test_an_unsupported_database_is_refused_with_the_supported_forms() -> None:
    with pytest.raises(ValueError, match="postgresql://"):
        normalize_url("mysql://u@h/db")


def test_sqlite_engine_uses_wal_and_enforces_foreign_keys(sqlite_url: str) -> None:
    engine = make_engine(sqlite_url)
    with engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    engine.dispose()


def test_in_memory_sqlite_is_one_database_shared_across_threads() -> None:
    engine = make_engine("sqlite://")
    with engine.begin() as connection:
        connection.exec_driver_sql("CREATE TABLE t (x INTEGER)")
        connection.exec_driver_sql("INSERT INTO t VALUES (42)")
    seen: list[object] = []

    def read() -> None:
        with engine.connect() as connection:
            seen.append(connection.exec_driver_sql("SELECT x FROM t").scalar())

    reader = threading.Thread(target=read)
    reader.start()
    reader.join()
    engine.dispose()

    assert seen == [42]


def test_sqlite_file_engine_creates_the_parent_folder(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/nested/dir/phalanx.db"
    upgrade(url)
    engine = make_engine(url)
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM runs")).scalar() == 0
    engine.dispose()


def test_sqlite_writer_that_read_first_waits_instead_of_failing(sqlite_url: str) -> None:
    upgrade(sqlite_url)
    engine = make_engine(sqlite_url)
    factory = session_factory(engine)
    with factory.begin() as session:
        run_id = new_run(session).id
    other_writer_errors: list[BaseException] = []

    def other_writer() -> None:
        try:
            with factory.begin() as session:
                new_run(session, name="other")
        except BaseException as exc:
            other_writer_errors.append(exc)

    with factory.begin() as session:
        runs.get_run(session, run_id)  # read first ...
        thread = threading.Thread(target=other_writer)
        thread.start()
        thread.join(timeout=0.5)  # ... let the other writer go as far as it can ...
        runs.request_cancel(session, run_id)  # ... then write
    thread.join()
    engine.dispose()

    assert other_writer_errors == []


# --- timestamps ---------------------------------------------------------------------------


def test_timestamps_come_back_aware_in_utc(db_session: Session) -> None:
    plus_two = timezone(timedelta(hours=2))
    run = runs.create_run(
        db_session, name="r", config={}, seed=1, now=datetime(2026, 1, 1, 14, 0, tzinfo=plus_two)
    )
    db_session.commit()
    db_session.expire_all()

    created = runs.get_run(db_session, run.id).created_at

    assert created == datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    assert created.utcoffset() == timedelta(0)


def test_a_naive_timestamp_is_refused(db_session: Session) -> None:
    with pytest.raises(StatementError, match="naive datetime"):
        runs.create_run(db_session, name="r", config={}, seed=1, now=datetime(2026, 1, 1))


# --- runs ---------------------------------------------------------------------------------


def test_a_created_run_is_queued_with_its_config(db_session: Session) -> None:
    run = new_run(db_session)
    db_session.commit()
    db_session.expire_all()

    stored = runs.get_run(db_session, run.id)

    assert stored.status == RunStatus.QUEUED
    assert stored.config == {"rounds": 3}
    assert stored.current_round is None
    assert not stored.cancel_requested


def test_getting_an_unknown_run_raises_not_found(db_session: Session) -> None:
    with pytest.raises(NotFoundError, match="run 'nope' not found"):
        runs.get_run(db_session, "nope")


def test_runs_are_listed_newest_first_and_filtered_by_status(db_session: Session) -> None:
    old = new_run(db_session, name="old", created_at=T0)
    new = new_run(db_session, name="new", created_at=T0 + timedelta(hours=1))
    runs.request_cancel(db_session, old.id)
    db_session.commit()

    assert [r.name for r in runs.list_runs(db_session)] == ["new", "old"]
    assert [r.id for r in runs.list_runs(db_session, status=RunStatus.QUEUED)] == [new.id]
    assert [r.id for r in runs.list_runs(db_session, limit=1, offset=1)] == [old.id]


def test_claim_takes_the_oldest_queued_run_and_marks_it_running(db_session: Session) -> None:
    new_run(db_session, name="newer", created_at=T0 + timedelta(seconds=1))
    older = new_run(db_session, name="older", created_at=T0)
    db_session.commit()

    claimed = runs.claim_next_run(db_session, "coord-a", now=T0 + timedelta(minutes=1))
    db_session.commit()

    assert claimed is not None and claimed.id == older.id
    assert claimed.status == RunStatus.RUNNING
    assert claimed.claimed_by == "coord-a"
    assert claimed.started_at == claimed.heartbeat_at == T0 + timedelta(minutes=1)
    assert claimed.attempts == 1


def test_claim_returns_none_when_nothing_is_claimable(db_session: Session) -> None:
    run = new_run(db_session)
    runs.finish_run(db_session, run.id, RunStatus.CANCELLED)
    db_session.commit()

    assert runs.claim_next_run(db_session, "coord-a") is None


def test_a_run_with_a_stale_heartbeat_is_reclaimed(db_session: Session) -> None:
    run = new_run(db_session)
    runs.claim_next_run(db_session, "coord-a", now=T0)
    db_session.commit()

    reclaimed = runs.claim_next_run(
        db_session, "coord-b", stale_after=timedelta(minutes=5), now=T0 + timedelta(minutes=6)
    )
    db_session.commit()

    assert reclaimed is not None and reclaimed.id == run.id
    assert reclaimed.claimed_by == "coord-b"
    assert reclaimed.attempts == 2
    assert reclaimed.started_at == T0
    with pytest.raises(LeaseLostError):
        runs.heartbeat(db_session, run.id, "coord-a")


def test_a_run_with_a_fresh_heartbeat_is_not_reclaimed(db_session: Session) -> None:
    run = new_run(db_session)
    runs.claim_next_run(db_session, "coord-a", now=T0)
    runs.heartbeat(db_session, run.id, "coord-a", now=T0 + timedelta(minutes=4))
    db_session.commit()

    claimed = runs.claim_next_run(
        db_session, "coord-b", stale_after=timedelta(minutes=5), now=T0 + timedelta(minutes=6)
    )

    assert claimed is None


def test_concurrent_claimers_never_claim_the_same_run(factory: sessionmaker[Session]) -> None:
    with factory.begin() as session:
        created = {new_run(session, created_at=T0 + timedelta(seconds=i)).id for i in range(12)}
    claimed: list[str] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def claimer(name: str) -> None:
        try:
            while True:
                with factory.begin() as session:
                    run = runs.claim_next_run(session, name)
                if run is None:
                    return
                with lock:
                    claimed.append(run.id)
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=claimer, args=(f"coord-{i}",)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert sorted(claimed) == sorted(created)


@pytest.mark.postgres
def test_postgres_claimers_skip_a_run_locked_by_an_open_transaction(postgres_url: str) -> None:
    upgrade(postgres_url)
    engine = make_engine(postgres_url)
    factory = session_factory(engine)
    with factory.begin() as session:
        first = new_run(session, name="first", created_at=T0)
        second = new_run(session, name="second", created_at=T0 + timedelta(seconds=1))

    with factory() as a, factory() as b:
        claimed_by_a = runs.claim_next_run(a, "coord-a")  # a's transaction stays open
        b.execute(text("SET LOCAL lock_timeout = '5s'"))  # waiting on a's lock would fail
        claimed_by_b = runs.claim_next_run(b, "coord-b")
        claimed_by_nobody = runs.claim_next_run(b, "coord-b")
        a.commit()
        b.commit()
    engine.dispose()

    assert claimed_by_a is not None and claimed_by_a.id == first.id
    assert claimed_by_b is not None and claimed_by_b.id == second.id
    assert claimed_by_nobody is None


def test_start_run_claims_the_given_run_even_if_not_the_oldest(db_session: Session) -> None:
    new_run(db_session, name="older", created_at=T0)
    mine = new_run(db_session, name="mine", created_at=T0 + timedelta(seconds=1))

    started = runs.start_run(db_session, mine.id, "cli@host", now=T0 + timedelta(minutes=1))

    assert (started.id, started.status, started.claimed_by) == (
        mine.id,
        RunStatus.RUNNING,
        "cli@host",
    )
    assert started.heartbeat_at == T0 + timedelta(minutes=1)


def test_start_run_refuses_a_run_with_a_live_coordinator(db_session: Session) -> None:
    run = new_run(db_session)
    runs.start_run(db_session, run.id, "coord-a", now=T0)

    with pytest.raises(ConflictError, match="running under 'coord-a'"):
        runs.start_run(db_session, run.id, "coord-b", now=T0 + timedelta(minutes=1))
    resumed = runs.start_run(db_session, run.id, "coord-b", now=T0 + timedelta(minutes=10))

    assert (resumed.claimed_by, resumed.attempts) == ("coord-b", 2)


def test_start_run_refuses_a_finished_or_unknown_run(db_session: Session) -> None:
    run = new_run(db_session)
    runs.request_cancel(db_session, run.id)

    with pytest.raises(ConflictError, match="cancelled"):
        runs.start_run(db_session, run.id, "coord-a")
    with pytest.raises(NotFoundError):
        runs.start_run(db_session, "nope", "coord-a")


def test_heartbeat_reports_a_requested_cancel(db_session: Session) -> None:
    run = new_run(db_session)
    runs.claim_next_run(db_session, "coord-a")
    runs.request_cancel(db_session, run.id)
    db_session.commit()

    beat = runs.heartbeat(db_session, run.id, "coord-a", now=T0 + timedelta(hours=1))

    assert beat.cancel_requested
    assert beat.heartbeat_at == T0 + timedelta(hours=1)


def test_cancelling_a_queued_run_cancels_it_at_once(db_session: Session) -> None:
    run = new_run(db_session)

    cancelled = runs.request_cancel(db_session, run.id, now=T0)

    assert cancelled.status == RunStatus.CANCELLED
    assert cancelled.finished_at == T0
    assert runs.claim_next_run(db_session, "coord-a") is None


def test_cancelling_a_finished_run_is_a_conflict(db_session: Session) -> None:
    run = new_run(db_session)
    runs.claim_next_run(db_session, "coord-a")
    runs.finish_run(db_session, run.id, RunStatus.SUCCEEDED)

    with pytest.raises(ConflictError, match="already succeeded"):
        runs.request_cancel(db_session, run.id)


def test_finishing_a_run_stores_outcome_and_summary(db_session: Session) -> None:
    run = new_run(db_session)
    runs.claim_next_run(db_session, "coord-a")
    runs.finish_run(
        db_session,
        run.id,
        RunStatus.FAILED,
        error="worker pool empty",
        summary={"rounds": 2},
        final_model_digest="abc",
        now=T0,
    )
    db_session.commit()
    db_session.expire_all()

    stored = runs.get_run(db_session, run.id)

    assert (stored.status, stored.error, stored.summary) == (
        RunStatus.FAILED,
        "worker pool empty",
        {"rounds": 2},
    )
    assert (stored.final_model_digest, stored.finished_at) == ("abc", T0)
    with pytest.raises(ConflictError):
        runs.finish_run(db_session, run.id, RunStatus.SUCCEEDED)


def test_a_stored_run_error_carries_no_host_path(db_session: Session) -> None:
    run = new_run(db_session)
    runs.claim_next_run(db_session, "coord-a")
    error = "DataError: /srv/phalanx/datasets/mine.npz[x_train]: images contain NaN or Inf"
    runs.finish_run(db_session, run.id, RunStatus.FAILED, error=error)
    db_session.commit()
    db_session.expire_all()
    assert runs.get_run(db_session, run.id).error == (
        "DataError: .../mine.npz[x_train]: images contain NaN or Inf"
    )


def test_a_coordinator_that_lost_its_run_cannot_finish_it(db_session: Session) -> None:
    run = new_run(db_session)
    runs.claim_next_run(db_session, "coord-a", now=T0)
    runs.claim_next_run(db_session, "coord-b", now=T0 + timedelta(hours=1))

    with pytest.raises(LeaseLostError):
        runs.finish_run(db_session, run.id, RunStatus.FAILED, claimer="coord-a")
    finished = runs.finish_run(db_session, run.id, RunStatus.SUCCEEDED, claimer="coord-b")

    assert finished.status == RunStatus.SUCCEEDED


def test_finishing_with_a_non_terminal_status_is_refused(db_session: Session) -> None:
    run = new_run(db_session)

    with pytest.raises(ValueError, match="terminal"):
        runs.finish_run(db_session, run.id, RunStatus.RUNNING)


# --- rounds and checkpoints ---------------------------------------------------------------


def test_record_round_writes_the_round_its_events_and_the_current_round(
    db_session: Session,
) -> None:
    run = new_run(db_session)
    client_id = new_client(db_session, "sim-worker-3")
    found = [
        EventData(
            kind=EventKind.OUTSIDE_MAX_CLIQUE,
            severity=Severity.HIGH,
            worker=3,
            client_id=client_id,
            evidence={"clique": [0, 1, 2], "files": [4, 7]},
        ),
        EventData(kind="custom_detector", severity=Severity.LOW, worker=5),
    ]

    rounds.record_round(db_session, run.id, round_data(1), found)
    db_session.commit()
    db_session.expire_all()

    stored = rounds.get_round(db_session, run.id, 1)
    assert stored.metrics == {"accuracy": 0.51, "loss": 1.0}
    assert (stored.bytes_up, stored.bytes_down, stored.duration_s) == (10_000, 40_000, 30.0)
    assert stored.assignment == {"scheme": "subsets", "r": 3}
    assert runs.get_run(db_session, run.id).current_round == 1
    page = events.list_events(db_session, EventFilter(run_id=run.id))
    assert [(e.kind, e.worker, e.client_id, e.round) for e in page.items] == [
        ("custom_detector", 5, None, 1),
        ("outside_max_clique", 3, client_id, 1),
    ]
    assert page.items[1].evidence == {"clique": [0, 1, 2], "files": [4, 7]}
    assert all(e.review_status == ReviewStatus.OPEN for e in page.items)


def test_byte_counts_beyond_32_bits_are_kept(db_session: Session) -> None:
    run = new_run(db_session)

    rounds.record_round(db_session, run.id, round_data(1, bytes_up=2**40, bytes_down=2**41))
    db_session.commit()
    db_session.expire_all()

    stored = rounds.get_round(db_session, run.id, 1)
    assert (stored.bytes_up, stored.bytes_down) == (2**40, 2**41)


def test_a_round_keeps_its_agreement_graph_and_older_rounds_have_none(
    db_session: Session,
) -> None:
    run = new_run(db_session)
    graph = {"version": 1, "rule": "unique_clique", "replied": [[0, 6]], "conflicts": []}
    rounds.record_round(db_session, run.id, round_data(1))
    rounds.record_round(db_session, run.id, round_data(2, agreement=graph))
    db_session.commit()
    db_session.expire_all()

    assert rounds.get_agreement(db_session, run.id, 2) == graph
    assert rounds.get_agreement(db_session, run.id, 1) is None
    with pytest.raises(NotFoundError):
        rounds.get_agreement(db_session, run.id, 3)
    # Listing rounds leaves the graph unloaded until a round's is asked for.
    listed = rounds.list_rounds(db_session, run.id)
    assert all("agreement" not in row.__dict__ for row in listed)
    assert listed[1].agreement == graph


def test_a_failing_event_insert_rolls_back_the_round(db_session: Session) -> None:
    run = new_run(db_session)
    rounds.record_round(db_session, run.id, round_data(1))
    db_session.commit()
    broken = [
        EventData(kind=EventKind.OUTLIER, severity=Severity.LOW, worker=1),
        EventData(kind=EventKind.BAD_SIGNATURE, severity=Severity.HIGH, client_id="no-such-client"),
    ]

    with pytest.raises(IntegrityError):
        rounds.record_round(db_session, run.id, round_data(2), broken)
    db_session.commit()  # the caller's transaction survives the failed round
    db_session.expire_all()

    assert [r.number for r in rounds.list_rounds(db_session, run.id)] == [1]
    assert runs.get_run(db_session, run.id).current_round == 1
    assert events.count_events(db_session, EventFilter(run_id=run.id)) == 0


def test_recording_a_round_again_is_a_conflict(db_session: Session) -> None:
    run = new_run(db_session)
    rounds.record_round(db_session, run.id, round_data(1))
    rounds.record_round(db_session, run.id, round_data(2))

    with pytest.raises(ConflictError, match="already recorded round 2"):
        rounds.record_round(db_session, run.id, round_data(2))


def test_recording_a_round_of_an_unknown_run_raises_not_found(db_session: Session) -> None:
    with pytest.raises(NotFoundError):
        rounds.record_round(db_session, "nope", round_data(1))


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [("number", 0, "start at 1"), ("bytes_up", -1, "bytes_up"), ("num_flagged", -2, "flagged")],
)
def test_round_data_refuses_impossible_values(field: str, value: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        round_data(1, **{field: value})


def test_event_data_refuses_a_kind_longer_than_the_column() -> None:
    with pytest.raises(ValueError, match="1 to 64"):
        EventData(kind="k" * 65, severity=Severity.LOW)


def test_round_and_checkpoint_in_one_transaction_give_the_resume_point(
    factory: sessionmaker[Session],
) -> None:
    with factory.begin() as session:
        run_id = new_run(session).id
    for number in (1, 2):
        with factory.begin() as session:
            rounds.record_round(session, run_id, round_data(number))
            checkpoints.save_checkpoint(
                session, run_id, number, path=f"/ckpt/{number}.pt", digest=f"digest-{number}"
            )

    with factory() as session:
        latest = checkpoints.latest_checkpoint(session, run_id)
        run = runs.get_run(session, run_id)

    assert latest is not None
    assert (latest.round, latest.path, latest.digest) == (2, "/ckpt/2.pt", "digest-2")
    assert run.current_round == latest.round


def test_a_run_without_checkpoints_has_no_latest(db_session: Session) -> None:
    run = new_run(db_session)

    assert checkpoints.latest_checkpoint(db_session, run.id) is None


def test_saving_a_checkpoint_twice_is_a_conflict(db_session: Session) -> None:
    run = new_run(db_session)
    checkpoints.save_checkpoint(db_session, run.id, 0, path="/ckpt/0.pt", digest="d0")

    with pytest.raises(ConflictError, match="round 0"):
        checkpoints.save_checkpoint(db_session, run.id, 0, path="/other.pt", digest="d1")


def test_a_checkpoint_of_an_unknown_run_is_a_conflict(db_session: Session) -> None:
    with pytest.raises(ConflictError, match="the run does not"):
        checkpoints.save_checkpoint(db_session, "nope", 1, path="/ckpt/1.pt", digest="d1")


# --- clients ------------------------------------------------------------------------------


def test_the_largest_flower_node_id_survives_a_round_trip(db_session: Session) -> None:
    client_id = new_client(db_session, "edge-1", flower_node_id=UINT64_MAX)
    db_session.commit()
    db_session.expire_all()

    stored = clients.get_client(db_session, client_id)
    raw = db_session.execute(
        text("SELECT flower_node_id FROM clients WHERE id = :id"), {"id": client_id}
    ).scalar_one()
    found = clients.find_client_by_node_id(db_session, 2**64 - 1)

    assert stored.flower_node_id == 2**64 - 1
    assert raw == "18446744073709551615"
    assert found is not None and found.id == client_id


def test_a_node_id_outside_64_bits_is_refused(db_session: Session) -> None:
    with pytest.raises(StatementError, match="unsigned 64-bit"):
        new_client(db_session, "edge-1", flower_node_id=2**64)


def test_registering_a_fingerprint_twice_is_a_conflict(db_session: Session) -> None:
    new_client(db_session, "edge-1")
    db_session.commit()

    with pytest.raises(ConflictError, match="registered already"):
        new_client(db_session, "edge-1")


def test_a_client_is_found_by_its_fingerprint(db_session: Session) -> None:
    client_id = new_client(db_session, "edge-1")
    fingerprint = hashlib.sha256(b"edge-1").hexdigest()

    found = clients.find_client_by_fingerprint(db_session, fingerprint)

    assert found is not None and found.id == client_id
    assert clients.find_client_by_fingerprint(db_session, "0" * 64) is None


def test_approval_sets_approved_at_and_suspension_clears_it(db_session: Session) -> None:
    client_id = new_client(db_session, "edge-1")

    approved = clients.set_client_status(db_session, client_id, ClientStatus.APPROVED, now=T0)
    assert (approved.status, approved.approved_at) == (ClientStatus.APPROVED, T0)

    suspended = clients.set_client_status(db_session, client_id, ClientStatus.SUSPENDED)
    assert (suspended.status, suspended.approved_at) == (ClientStatus.SUSPENDED, None)


def test_clients_are_listed_by_status(db_session: Session) -> None:
    pending = new_client(db_session, "edge-1")
    approved = new_client(db_session, "sim-worker-0", status=ClientStatus.APPROVED)

    assert [c.id for c in clients.list_clients(db_session)] == [pending, approved]
    assert [c.id for c in clients.list_clients(db_session, status=ClientStatus.APPROVED)] == [
        approved
    ]


def test_touching_a_client_records_when_and_under_which_node_it_was_seen(
    db_session: Session,
) -> None:
    client_id = new_client(db_session, "edge-1")

    seen = clients.touch_client(db_session, client_id, flower_node_id=12345, now=T0)

    assert (seen.last_seen_at, seen.flower_node_id) == (T0, 12345)


def test_a_challenge_lives_until_the_client_is_proven(db_session: Session) -> None:
    client_id = new_client(db_session, "edge-1")
    clients.set_challenge(
        db_session, client_id, "Y2hhbGxlbmdl", expires_at=T0 + timedelta(minutes=5)
    )

    first = clients.live_challenge(db_session, client_id, now=T0)
    second = clients.live_challenge(db_session, client_id, now=T0)
    clients.mark_proven(db_session, client_id, now=T0)

    assert (first, second) == ("Y2hhbGxlbmdl", "Y2hhbGxlbmdl")
    assert clients.live_challenge(db_session, client_id, now=T0) is None


def test_an_expired_challenge_is_not_handed_out(db_session: Session) -> None:
    client_id = new_client(db_session, "edge-1")
    clients.set_challenge(db_session, client_id, "Y2hhbGxlbmdl", expires_at=T0)

    assert clients.live_challenge(db_session, client_id, now=T0 + timedelta(seconds=1)) is None


# --- detection events ---------------------------------------------------------------------


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


# --- operator keys ------------------------------------------------------------------------


def test_a_new_key_stores_only_the_hash_of_its_secret(db_session: Session) -> None:
    created = keys.create_key(db_session, name="ops-alice", role=Role.ADMIN)
    db_session.commit()

    row = db_session.execute(text("SELECT * FROM operator_keys")).mappings().one()

    assert created.secret.startswith("phx_") and len(created.secret) > 40
    assert row["key_hash"] == hashlib.sha256(created.secret.encode()).hexdigest()
    assert row["prefix"] == created.secret[:12]
    assert created.secret not in {str(value) for value in row.values()}


def test_a_key_verifies_with_its_secret_only(db_session: Session) -> None:
    created = keys.create_key(db_session, name="ops-alice", role=Role.OPERATOR)
    other = keys.create_key(db_session, name="ops-bob", role=Role.VIEWER)

    found = keys.verify_key(db_session, created.secret)

    assert found is not None and found.id == created.key.id
    assert found.role == Role.OPERATOR
    assert keys.verify_key(db_session, created.secret + "x") is None
    assert keys.verify_key(db_session, other.secret).id == other.key.id  # type: ignore[union-attr]


def test_a_revoked_key_no_longer_verifies(db_session: Session) -> None:
    created = keys.create_key(db_session, name="ops-alice", role=Role.ADMIN)

    keys.revoke_key(db_session, created.key.id, now=T0)
    keys.revoke_key(db_session, created.key.id, now=T0 + timedelta(days=1))

    assert keys.verify_key(db_session, created.secret) is None
    assert keys.get_key(db_session, created.key.id).revoked_at == T0
    assert keys.list_keys(db_session) == []
    assert [k.id for k in keys.list_keys(db_session, include_revoked=True)] == [created.key.id]


def test_revoking_an_unknown_key_raises_not_found(db_session: Session) -> None:
    with pytest.raises(NotFoundError):
        keys.revoke_key(db_session, "nope")


def test_verification_notes_last_use_at_most_once_a_minute(db_session: Session) -> None:
    created = keys.create_key(db_session, name="ops-alice", role=Role.ADMIN)

    keys.verify_key(db_session, created.secret, now=T0)
    keys.verify_key(db_session, created.secret, now=T0 + timedelta(seconds=30))
    assert created.key.last_used_at == T0

    keys.verify_key(db_session, created.secret, now=T0 + timedelta(minutes=2))
    assert created.key.last_used_at == T0 + timedelta(minutes=2)


# --- audit log ----------------------------------------------------------------------------


def test_audit_entries_are_listed_newest_first_with_filters(db_session: Session) -> None:
    audit.append_audit(
        db_session,
        actor="ops-alice",
        action="client.approve",
        target_type="client",
        target_id="c1",
        details={"from": "pending"},
        now=T0,
    )
    audit.append_audit(
        db_session,
        actor="ops-bob",
        action="run.cancel",
        target_type="run",
        target_id="r1",
        now=T0 + timedelta(seconds=1),
    )
    audit.append_audit(
        db_session,
        actor="ops-alice",
        action="event.review",
        target_type="event",
        target_id="7",
        now=T0 + timedelta(seconds=2),
    )
    db_session.commit()

    everything = audit.list_audit(db_session)
    by_alice = audit.list_audit(db_session, actor="ops-alice")
    older = audit.list_audit(db_session, before=everything[0].id, limit=1)

    assert [e.action for e in everything] == ["event.review", "run.cancel", "client.approve"]
    assert [e.action for e in by_alice] == ["event.review", "client.approve"]
    assert [e.action for e in older] == ["run.cancel"]
    assert audit.list_audit(db_session, target_type="client", target_id="c1")[0].details == {
        "from": "pending"
    }


def test_json_null_details_are_stored_as_sql_null(db_session: Session) -> None:
    audit.append_audit(db_session, actor="cli", action="db.upgrade")
    db_session.commit()

    raw = db_session.execute(text("SELECT count(*) FROM audit_log WHERE details IS NULL"))

    assert raw.scalar_one() == 1


def test_other_engines_see_committed_rows(migrated_url: str) -> None:
    writer = make_engine(migrated_url)
    with session_factory(writer).begin() as session:
        run_id = new_run(session).id
    writer.dispose()
    reader = create_engine(normalize_url(migrated_url))
    with reader.connect() as connection:
        status = connection.execute(
            text("SELECT status FROM runs WHERE id = :id"), {"id": run_id}
        ).scalar_one()
    reader.dispose()

    assert status == "queued"
