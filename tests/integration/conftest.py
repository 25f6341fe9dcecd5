"""Database fixtures for integration tests: SQLite files and real PostgreSQL databases.

- ``sqlite_url``: a fresh SQLite file under ``tmp_path``.
- ``postgres_url``: a fresh, uniquely named schema in the database given by
  ``PHALANX_TEST_POSTGRES_URL`` (``.ci/run`` starts one with ``.ci/postgres.sh``),
  selected through the URL's ``search_path`` and dropped after the test. Without
  that variable the test is skipped locally, and fails when ``CI`` is set, so CI
  never silently skips PostgreSQL.
- ``database_url``: each of the two, the PostgreSQL case marked ``postgres``.
- ``migrated_url``, ``db_engine``, ``db_session``: the same, migrated to head.
- ``write_lock``: another connection that holds the write lock when told to.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Connection, Engine, create_engine, text
from sqlalchemy.orm import Session

from phalanx.store import make_engine, normalize_url, session_factory
from phalanx.store.migrate import upgrade

POSTGRES_ENV = "PHALANX_TEST_POSTGRES_URL"


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A SQLite database file of its own for each test."""
    return f"sqlite:///{tmp_path}/phalanx.db"


@pytest.fixture(scope="session")
def postgres_admin_engine() -> Iterator[Engine]:
    """An autocommit engine on the test server's maintenance database."""
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        message = f"{POSTGRES_ENV} is not set; start one with `bash .ci/postgres.sh start`"
        if _in_ci():
            pytest.fail(f"CI must test PostgreSQL: {message}")
        pytest.skip(message)
    engine = create_engine(normalize_url(url), isolation_level="AUTOCOMMIT")
    yield engine
    engine.dispose()


@pytest.fixture
def postgres_url(postgres_admin_engine: Engine) -> Iterator[str]:
    """An empty PostgreSQL schema of its own for each test, dropped afterwards.

    The URL sets ``search_path`` to that schema, so everything (tables, the
    ``alembic_version`` table) lands there. A schema costs a millisecond; a
    database costs a few hundred.
    """
    schema = f"test_{uuid.uuid4().hex[:16]}"
    with postgres_admin_engine.connect() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = postgres_admin_engine.url.update_query_dict({"options": f"-csearch_path={schema}"})
    yield url.render_as_string(hide_password=False)
    with postgres_admin_engine.connect() as connection:
        connection.execute(text("SET lock_timeout = '30s'"))  # fail, not hang, on a leaked session
        connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
def database_url(request: pytest.FixtureRequest) -> str:
    """An empty database, once on SQLite and once on PostgreSQL."""
    url: str = request.getfixturevalue(f"{request.param}_url")
    return url


@pytest.fixture
def migrated_url(database_url: str) -> str:
    """``database_url`` migrated to the head revision."""
    upgrade(database_url)
    return database_url


@pytest.fixture
def db_engine(migrated_url: str) -> Iterator[Engine]:
    """An engine on the migrated database, disposed after the test."""
    engine = make_engine(migrated_url)
    yield engine
    engine.dispose()


@pytest.fixture
def db_session(db_engine: Engine) -> Iterator[Session]:
    """A session on the migrated database; the test commits what it wants kept."""
    with session_factory(db_engine)() as session:
        yield session


class WriteLock:
    """Another connection that holds the write lock: SQLite's, or PostgreSQL's on every table.

    On SQLite a ``BEGIN IMMEDIATE`` transaction; on PostgreSQL an ``EXCLUSIVE``
    lock on the tables, which lets reads through and makes writers wait. An
    engine made with a short ``lock_timeout_s`` then fails its writes with a
    lock error, as under a burst of writes.
    """

    TABLES = "runs, rounds, checkpoints, detection_events, clients, operator_keys, audit_log"
    #: Seconds to wait for the lock before failing the test (instead of hanging it).
    WAIT_S = 5

    def __init__(self, url: str) -> None:
        self._url = normalize_url(url)
        self._sqlite: sqlite3.Connection | None = None
        self._postgres: Connection | None = None
        self._engine: Engine | None = None

    @property
    def held(self) -> bool:
        """Whether the lock is held now."""
        return self._sqlite is not None or self._postgres is not None

    def hold(self) -> None:
        """Take the lock (and keep it until :meth:`release`)."""
        if self.held:
            return
        if self._url.get_backend_name() == "sqlite":
            connection = sqlite3.connect(
                str(self._url.database),
                isolation_level=None,
                timeout=self.WAIT_S,
                check_same_thread=False,
            )
            connection.execute("BEGIN IMMEDIATE")
            self._sqlite = connection
            return
        if self._engine is None:
            self._engine = create_engine(self._url)
        connection = self._engine.connect()
        connection.execute(text(f"SET LOCAL lock_timeout = '{self.WAIT_S}s'"))
        connection.execute(text(f"LOCK TABLE {self.TABLES} IN EXCLUSIVE MODE"))
        self._postgres = connection

    def release(self) -> None:
        """Let the lock go."""
        if self._sqlite is not None:
            self._sqlite.execute("ROLLBACK")
            self._sqlite.close()
            self._sqlite = None
        if self._postgres is not None:
            self._postgres.rollback()
            self._postgres.close()
            self._postgres = None

    def close(self) -> None:
        """Release the lock and the connections."""
        self.release()
        if self._engine is not None:
            self._engine.dispose()


@pytest.fixture
def write_lock(migrated_url: str) -> Iterator[WriteLock]:
    """A :class:`WriteLock` on the migrated database, released after the test."""
    lock = WriteLock(migrated_url)
    yield lock
    lock.close()
