"""The store's engine (phalanx.store.engine): URLs, SQLite's settings, rows seen across engines.

On a migrated SQLite and PostgreSQL database.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from phalanx.store import make_engine, normalize_url, runs, session_factory
from phalanx.store.migrate import upgrade
from tests.support.store_rows import new_run


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
