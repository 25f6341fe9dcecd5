"""Another connection that holds a database's write lock (the ``write_lock`` fixture's object)."""

from __future__ import annotations

import sqlite3

from sqlalchemy import Connection, Engine, create_engine, text

from phalanx.store import normalize_url


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
