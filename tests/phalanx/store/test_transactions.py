"""The engine's transactions: reads never wait for a writer; writes lock only in their block."""

from __future__ import annotations

import logging
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select, text
from sqlalchemy.exc import DBAPIError

from phalanx.store import Run, make_engine, migrate, runs, session_factory
from phalanx.store.retry import is_lock_error
from phalanx.store.transactions import read_session, write_transaction
from tests.support.write_lock import WriteLock

#: Short enough that a write blocked by the test's lock fails at once.
SHORT_LOCK_TIMEOUT_S = 0.2


@pytest.fixture
def engine(migrated_url: str) -> Iterator[Engine]:
    engine = make_engine(migrated_url, lock_timeout_s=SHORT_LOCK_TIMEOUT_S)
    yield engine
    engine.dispose()


def _count_runs(engine: Engine, *, read_only: bool) -> int:
    with session_factory(engine, read_only=read_only)() as session:
        return session.scalar(select(func.count()).select_from(Run)) or 0


def test_a_read_answers_while_another_connection_holds_the_write_lock(
    engine: Engine, write_lock: WriteLock
) -> None:
    with session_factory(engine).begin() as session:
        runs.create_run(session, name="before", config={}, seed=1)
    write_lock.hold()

    assert _count_runs(engine, read_only=True) == 1
    with read_session(session_factory(engine)) as session:
        assert session.scalar(select(func.count()).select_from(Run)) == 1
    with pytest.raises(DBAPIError) as caught, session_factory(engine).begin() as session:
        runs.create_run(session, name="blocked", config={}, seed=1)
    assert is_lock_error(caught.value)

    write_lock.release()
    with session_factory(engine).begin() as session:
        runs.create_run(session, name="after", config={}, seed=1)
    assert _count_runs(engine, read_only=True) == 2


def test_a_write_in_a_read_only_session_fails_instead_of_taking_the_lock(engine: Engine) -> None:
    with (
        pytest.raises(DBAPIError, match=r"read-?only"),
        session_factory(engine, read_only=True)() as session,
    ):
        runs.create_run(session, name="sneaky", config={}, seed=1)
        session.commit()

    assert _count_runs(engine, read_only=True) == 0


def test_a_write_transaction_commits_its_block_and_rolls_back_a_failed_one(
    engine: Engine,
) -> None:
    reads = session_factory(engine, read_only=True)
    with reads() as session:
        assert session.scalar(select(func.count()).select_from(Run)) == 0  # a read is open
        with write_transaction(session):
            runs.create_run(session, name="kept", config={}, seed=1)
        with pytest.raises(RuntimeError), write_transaction(session):
            runs.create_run(session, name="rolled back", config={}, seed=1)
            raise RuntimeError("after writing")
        with (
            pytest.raises(ValueError),
            write_transaction(session, keep=lambda exc: isinstance(exc, ValueError)),
        ):
            runs.create_run(session, name="kept despite the error", config={}, seed=1)
            raise ValueError("the write stands")
        # Back to reading: the session's next transaction is read-only again.
        with pytest.raises(DBAPIError, match=r"read-?only"):
            runs.create_run(session, name="sneaky", config={}, seed=1)
            session.flush()

    with reads() as session:
        names = sorted(session.scalars(select(Run.name)))
    assert names == ["kept", "kept despite the error"]


def test_write_transactions_do_not_nest(engine: Engine) -> None:
    with session_factory(engine, read_only=True)() as session, write_transaction(session):
        runs.create_run(session, name="outer", config={}, seed=1)
        with pytest.raises(RuntimeError, match="does not nest"), write_transaction(session):
            pass

    assert _count_runs(engine, read_only=True) == 1


def test_a_write_transaction_holds_the_lock_only_inside_its_block(
    engine: Engine, write_lock: WriteLock
) -> None:
    with session_factory(engine, read_only=True)() as session:
        with write_transaction(session):
            runs.create_run(session, name="first", config={}, seed=1)
        write_lock.hold()  # another writer gets the lock: ours was given back
        assert session.scalar(select(func.count()).select_from(Run)) == 1
    write_lock.release()


def test_a_new_sqlite_database_and_its_wal_are_readable_by_their_owner_only(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/data/phalanx.db"
    migrate.upgrade(url)
    engine = make_engine(url)
    try:
        with engine.connect() as connection:  # the WAL and its index exist while connected
            connection.execute(text("CREATE TABLE probe (x INTEGER)"))
            connection.commit()
            files = sorted((tmp_path / "data").glob("phalanx.db*"))
            modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in files}
    finally:
        engine.dispose()

    assert set(modes) == {"phalanx.db", "phalanx.db-wal", "phalanx.db-shm"}
    assert modes == dict.fromkeys(modes, 0o600)


def test_an_existing_sqlite_database_keeps_its_mode_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "phalanx.db"
    path.touch(mode=0o640)
    path.chmod(0o640)
    with caplog.at_level(logging.WARNING, logger="phalanx.store.engine"):
        make_engine(f"sqlite:///{path}").dispose()
        make_engine(f"sqlite:///{path}").dispose()  # e.g. a readiness probe, again

    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert [r.getMessage() for r in caplog.records] == [
        f"database file {path} has mode 0o640: other users may read it (chmod 600 {path})"
    ]


def test_a_write_that_may_not_wait_fails_while_another_connection_holds_the_lock(
    migrated_url: str, write_lock: WriteLock
) -> None:
    patient = make_engine(migrated_url, lock_timeout_s=30)
    write_lock.hold()
    release = threading.Timer(1.0, write_lock.release)  # a waiting write would then go through
    release.start()
    try:
        with (
            session_factory(patient)() as session,
            pytest.raises(DBAPIError) as caught,
            write_transaction(session, wait=False),
        ):
            runs.create_run(session, name="impatient", config={}, seed=1)
        release.join()
        with session_factory(patient)() as session, write_transaction(session):
            runs.create_run(session, name="patient", config={}, seed=1)
    finally:
        release.cancel()
        patient.dispose()

    assert is_lock_error(caught.value)
    assert _count_runs(patient, read_only=True) == 1
