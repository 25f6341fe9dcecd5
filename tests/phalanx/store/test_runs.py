"""The run repository (phalanx.store.runs): queue, claim, heartbeat, cancel, finish.

On a migrated SQLite and PostgreSQL database.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from phalanx.store import (
    ConflictError,
    LeaseLostError,
    NotFoundError,
    RunStatus,
    make_engine,
    runs,
    session_factory,
)
from phalanx.store.migrate import upgrade
from tests.support.store_rows import T0, new_run


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


def test_concurrent_claimers_never_claim_the_same_run(
    db_session_factory: sessionmaker[Session],
) -> None:
    with db_session_factory.begin() as session:
        created = {new_run(session, created_at=T0 + timedelta(seconds=i)).id for i in range(12)}
    claimed: list[str] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def claimer(name: str) -> None:
        try:
            while True:
                with db_session_factory.begin() as session:
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


PARTITION = {
    "kind": "dirichlet",
    "parameters": {"alpha": 0.3, "min_partition_size": 10, "seed": 7, "self_balancing": False},
    "num_classes": 2,
    "samples": [3, 1],
    "label_totals": [2, 2],
    "unassigned": 0,
    "histograms": [[2, 1], [0, 1]],
}


def test_a_runs_partition_is_stored_once_and_read_back_whole(db_session: Session) -> None:
    run = new_run(db_session)
    runs.record_partition(db_session, run.id, PARTITION)
    runs.record_partition(db_session, run.id, PARTITION)  # a resumed run stores it again
    db_session.commit()
    db_session.expire_all()

    assert runs.get_partition(db_session, run.id) == PARTITION
    changed = {**PARTITION, "samples": [2, 2]}
    with pytest.raises(ConflictError, match="holds a different partition already"):
        runs.record_partition(db_session, run.id, changed)
    with pytest.raises(NotFoundError):
        runs.record_partition(db_session, "no-such-run", PARTITION)


def test_a_run_without_local_data_has_no_partition(db_session: Session) -> None:
    run = new_run(db_session)
    db_session.commit()

    assert runs.get_partition(db_session, run.id) is None
