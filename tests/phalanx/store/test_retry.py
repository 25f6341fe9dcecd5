"""Retrying work while the database is locked: bounded, growing pauses, one line on giving up."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from phalanx.store.retry import (
    DatabaseUnavailableError,
    RetryPolicy,
    is_lock_error,
    is_transient,
    retry_transient,
)
from tests.support.clock import FakeClock


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "retry.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE t (x INTEGER)")
    return path


@pytest.fixture
def engine(database: Path) -> Iterator[Engine]:
    engine = create_engine(f"sqlite:///{database}", connect_args={"timeout": 0.01})
    yield engine
    engine.dispose()


@pytest.fixture
def holder(database: Path) -> Iterator[sqlite3.Connection]:
    """Another connection, holding the write lock."""
    connection = sqlite3.connect(database, isolation_level=None)
    connection.execute("BEGIN IMMEDIATE")
    yield connection
    connection.close()


def _insert(engine: Engine) -> str:
    with engine.begin() as connection:
        connection.execute(text("INSERT INTO t VALUES (1)"))
    return "done"


def test_work_is_tried_again_until_the_lock_is_released(
    engine: Engine, holder: sqlite3.Connection
) -> None:
    def release_after_three_pauses(clock: FakeClock) -> None:
        if len(clock.pauses) == 3:
            holder.execute("ROLLBACK")

    clock = FakeClock(on_pause=release_after_three_pauses)

    result = retry_transient(lambda: _insert(engine), what="inserting", policy=clock.policy())

    assert result == "done"
    assert clock.pauses == [0.1, 0.2, 0.4]


def test_a_lock_that_outlasts_the_budget_fails_with_one_line_naming_the_work(
    engine: Engine, holder: sqlite3.Connection
) -> None:
    clock = FakeClock()

    with pytest.raises(DatabaseUnavailableError) as caught:
        retry_transient(lambda: _insert(engine), what="recording round 3", policy=clock.policy())

    # Pauses double up to 5 s; one more would end after the 60 s budget.
    assert clock.pauses == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2] + [5.0] * 10
    assert str(caught.value) == (
        "the database stayed locked for 56 s while recording round 3 (17 attempts)"
    )
    assert is_lock_error(caught.value.__cause__)  # type: ignore[arg-type]


def test_an_error_that_waiting_cannot_cure_is_not_tried_again(engine: Engine) -> None:
    clock = FakeClock()

    def missing_table() -> None:
        with engine.begin() as connection:
            connection.execute(text("INSERT INTO nowhere VALUES (1)"))

    with pytest.raises(OperationalError, match="no such table"):
        retry_transient(missing_table, what="inserting", policy=clock.policy())
    assert clock.pauses == []


def test_locks_lost_connections_and_a_full_pool_are_transient(
    engine: Engine, holder: sqlite3.Connection
) -> None:
    with pytest.raises(OperationalError) as locked:
        _insert(engine)
    with pytest.raises(OperationalError) as missing, engine.begin() as connection:
        connection.execute(text("SELECT * FROM nowhere"))

    assert is_lock_error(locked.value) and is_transient(locked.value)
    assert not is_lock_error(missing.value) and not is_transient(missing.value)
    assert is_transient(PoolTimeoutError("QueuePool limit of size 5 overflow 10 reached"))
    assert not is_transient(ValueError("not a database error"))


def test_a_policy_refuses_pauses_that_make_no_sense() -> None:
    with pytest.raises(ValueError, match="first_pause_s"):
        RetryPolicy(first_pause_s=0)
    with pytest.raises(ValueError, match="max_pause_s"):
        RetryPolicy(first_pause_s=2, max_pause_s=1)
