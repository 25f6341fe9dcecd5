"""What a transaction is for, and how each database begins one.

Every transaction is a read or a write, said by the :data:`INTENT` execution
option (a session factory sets it for its sessions, a block can set it for its
transaction). On SQLite in WAL mode, a reader and the one writer never block
each other, so a read begins with a deferred ``BEGIN`` and never waits for the
write lock; a write begins with ``BEGIN IMMEDIATE`` and holds the lock from its
first statement to its commit, so it never fails with a stale snapshot after
reading. On PostgreSQL a read is ``READ ONLY``. In both, a write attempted in a
read fails at once, loudly, instead of upgrading a lock under load.
:func:`write_transaction` runs a block as one write; keep it short, in one thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

#: The execution option that says what a transaction is for: ``"read"`` or ``"write"``.
INTENT = "phalanx_intent"
#: Execution options of a read-only transaction. On SQLite: a deferred ``BEGIN``
#: that never takes the write lock (in WAL mode readers and the writer do not
#: block each other), with ``PRAGMA query_only``; on PostgreSQL ``BEGIN READ ONLY``.
#: A write in such a transaction fails at once instead of upgrading its lock.
READ_ONLY: Mapping[str, Any] = {INTENT: "read"}
#: Execution options of a write transaction (the default): ``BEGIN IMMEDIATE`` on SQLite.
READ_WRITE: Mapping[str, Any] = {INTENT: "write"}
#: The execution option that, set to ``False``, makes a write fail at once with a
#: lock error when another connection holds the lock, instead of waiting for it.
LOCK_WAIT = "phalanx_lock_wait"
#: Key of ``Session.info`` set while a :func:`write_transaction` block runs.
_WRITING = "phalanx_writing"


def _intent(connection: Any) -> str:
    intent = connection.get_execution_options().get(INTENT, "write")
    if intent not in ("read", "write"):
        raise ValueError(f"{INTENT} must be 'read' or 'write', got {intent!r}")
    return str(intent)


def _waits(connection: Any) -> bool:
    return bool(connection.get_execution_options().get(LOCK_WAIT, True))


def _autocommit(connection: Any) -> bool:
    return bool(connection.get_execution_options().get("isolation_level") == "AUTOCOMMIT")


def _milliseconds(seconds: float) -> int:
    return max(1, round(seconds * 1000))


class SQLiteTransactions:
    """The ``connect`` and ``begin`` listeners of a SQLite engine.

    A write emits ``BEGIN IMMEDIATE``: it takes the write lock up front (waiting
    up to the busy timeout, or not at all when :data:`LOCK_WAIT` is ``False``), so it
    never reads, then fails at once with "database is locked" when it writes
    after another connection committed. A read emits a deferred ``BEGIN``, sees
    one snapshot, and never waits for a writer (WAL); ``query_only`` makes a
    write in it an error rather than a lock upgrade that could fail under load.
    The pragmas each transaction needs are set when it begins, if the
    connection's last transaction left them otherwise.
    """

    def __init__(self, lock_timeout_s: float) -> None:
        self.busy_timeout_ms = _milliseconds(lock_timeout_s)

    def connect(self, dbapi_connection: Any, connection_record: Any) -> None:
        """Set the connection's pragmas and hand transaction control to SQLAlchemy."""
        dbapi_connection.isolation_level = None  # the driver emits no BEGIN of its own
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA journal_mode=WAL")
            # In WAL mode NORMAL syncs at checkpoints, not at every commit: the file
            # never corrupts, a crash of this process loses nothing, and a power cut
            # may lose the last commits. Full syncs would hold the write lock through
            # an fsync per transaction, which serialises a burst of writes on the disk.
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute(f"PRAGMA busy_timeout = {self.busy_timeout_ms}")
        finally:
            cursor.close()
        connection_record.info["pragmas"] = {"query_only": 0, "busy_timeout": self.busy_timeout_ms}

    def begin(self, connection: Any) -> None:
        """Begin a transaction as its intent says, unless autocommitting."""
        read = _intent(connection) == "read"
        wanted = {
            "query_only": int(read),
            "busy_timeout": self.busy_timeout_ms if _waits(connection) else 0,
        }
        pragmas = connection.connection.info.setdefault("pragmas", {})
        for name, value in wanted.items():
            if pragmas.get(name) != value:
                connection.exec_driver_sql(f"PRAGMA {name} = {value}")
                pragmas[name] = value
        if _autocommit(connection):
            return
        connection.exec_driver_sql("BEGIN" if read else "BEGIN IMMEDIATE")


class PostgresTransactions:
    """The ``connect`` and ``begin`` listeners of a PostgreSQL engine."""

    def __init__(self, lock_timeout_s: float) -> None:
        self.lock_timeout_ms = _milliseconds(lock_timeout_s)

    def connect(self, dbapi_connection: Any, connection_record: Any) -> None:
        """Set the session's ``lock_timeout``."""
        autocommit = dbapi_connection.autocommit
        dbapi_connection.autocommit = True
        try:
            dbapi_connection.execute(f"SET lock_timeout = {self.lock_timeout_ms}")
        finally:
            dbapi_connection.autocommit = autocommit

    def begin(self, connection: Any) -> None:
        """Make a read ``READ ONLY`` (psycopg sends it with its ``BEGIN``); a write may not wait."""
        if _autocommit(connection):
            return
        read = _intent(connection) == "read"
        connection.connection.dbapi_connection.read_only = read
        if not read and not _waits(connection):
            connection.exec_driver_sql("SET LOCAL lock_timeout = 1")


def read_session(sessions: sessionmaker[Session]) -> Session:
    """Return a new session of ``sessions`` whose transactions are reads.

    Parameters
    ----------
    sessions : sessionmaker[Session]
        From :func:`phalanx.store.engine.session_factory`.

    Returns
    -------
    Session
        Use as ``with read_session(sessions) as session: ...``.
    """
    return sessions(execution_options=dict(READ_ONLY))


@contextmanager
def write_transaction(
    session: Session, *, keep: Callable[[BaseException], bool] | None = None, wait: bool = True
) -> Iterator[Session]:
    """Run a block in one write transaction of ``session``, committed when the block ends.

    A read transaction the session has open is ended first (a read has nothing
    to commit). The write begins as the block starts (``BEGIN IMMEDIATE`` on
    SQLite, which waits there for the lock) and ends with the block, in the same
    thread, so the write lock is held only while the block runs.

    Parameters
    ----------
    session : Session
        Any session; a read-only one writes here too.
    keep : callable, optional
        Whether to commit, rather than roll back, when the block raises this
        error (a registration challenge is spent whatever the outcome of its proof).
    wait : bool
        Wait for the lock while another connection holds it (up to the
        engine's lock timeout); with ``False``, fail at once with a lock error
        (:func:`phalanx.store.retry.is_lock_error`) for work that can be skipped.

    Yields
    ------
    Session
        ``session``.

    Raises
    ------
    RuntimeError
        When the session is inside a write transaction already (blocks do not nest).
    """
    if session.info.get(_WRITING):
        raise RuntimeError("write_transaction does not nest: it would commit the outer block")
    if session.in_transaction():
        session.commit()
    session.info[_WRITING] = True
    try:
        session.connection(execution_options={**READ_WRITE, LOCK_WAIT: wait})
        yield session
    except BaseException as exc:
        if keep is not None and keep(exc):
            session.commit()
        else:
            session.rollback()
        raise
    else:
        session.commit()
    finally:
        session.info.pop(_WRITING, None)
