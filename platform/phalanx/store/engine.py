"""The engine and session factory for SQLite and PostgreSQL.

Callers resolve the database URL (settings, CLI flag, test fixture) and pass it
in; nothing here reads the environment.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path
from typing import Any

from pydantic_core import from_json
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import StaticPool

from phalanx.store.transactions import (
    READ_ONLY,
    READ_WRITE,
    PostgresTransactions,
    SQLiteTransactions,
)

logger = logging.getLogger(__name__)

#: Drivers written by hand that mean PostgreSQL through psycopg 3.
_POSTGRES_ALIASES = {"postgres", "postgresql", "postgresql+psycopg"}

#: Seconds a statement waits for a lock another connection holds before it fails
#: (SQLite's busy timeout, PostgreSQL's ``lock_timeout``).
LOCK_TIMEOUT_S = 30.0
#: Connections a pool keeps open, and how many more it opens under a burst.
#: Their sum (40) is the size of FastAPI's thread pool: a server that lets fewer
#: requests than that hold a session at once never waits for a connection.
POOL_SIZE = 20
MAX_OVERFLOW = 20
#: Seconds a caller waits for a pooled connection before ``sqlalchemy.exc.TimeoutError``.
POOL_TIMEOUT_S = 10.0

#: Permissions of a SQLite database file this module creates (SQLite gives its
#: ``-wal`` and ``-shm`` files the same).
SQLITE_FILE_MODE = 0o600
#: The first bytes of every SQLite database file.
SQLITE_HEADER = b"SQLite format 3\x00"


class NotADatabaseError(ValueError):
    """``PHALANX_DATABASE_URL`` names a file that is not an SQLite database."""


#: Database files already warned about, so that a probe making engines does not repeat it.
_WARNED_MODES: set[Path] = set()


def parse_json(document: str | bytes) -> Any:
    """Parse a JSON column's value, as the engine reads it.

    Uses pydantic's JSON parser (Rust), several times faster than :func:`json.loads`
    on the small documents the rounds hold, with the same values: Python ints of
    any size, floats, ``NaN`` and ``Infinity`` as :func:`json.dumps` writes them.

    Parameters
    ----------
    document : str or bytes
        The stored JSON text.

    Returns
    -------
    Any
        The parsed value.
    """
    return from_json(document, allow_inf_nan=True, cache_strings="keys")


def compact_json(value: Any) -> str:
    """Write a JSON column's value, as the engine stores it: no spaces after separators.

    :func:`json.dumps`'s default ``", "`` and ``": "`` took one byte in twelve of a
    detection event's evidence. NaN and Infinity are written as :func:`json.dumps`
    writes them, and :func:`parse_json` reads them back.

    Parameters
    ----------
    value : Any
        A JSON-safe value.

    Returns
    -------
    str
        Its JSON text.
    """
    return json.dumps(value, separators=(",", ":"))


def normalize_url(url: str | URL) -> URL:
    """Parse a database URL and pick psycopg 3 for PostgreSQL.

    Parameters
    ----------
    url : str or URL
        ``sqlite:///path``, ``sqlite://`` (in memory), ``postgresql://...``,
        ``postgres://...`` or ``postgresql+psycopg://...``.

    Returns
    -------
    URL
        The URL with driver ``postgresql+psycopg`` for any PostgreSQL alias.

    Raises
    ------
    ValueError
        For a database other than SQLite or PostgreSQL.
    """
    parsed = make_url(url)
    if parsed.drivername in _POSTGRES_ALIASES:
        return parsed.set(drivername="postgresql+psycopg")
    if parsed.get_backend_name() in ("sqlite", "postgresql"):
        return parsed
    raise ValueError(
        f"unsupported database {parsed.drivername!r}: use sqlite:///PATH or postgresql://..."
    )


def make_engine(
    url: str | URL,
    *,
    echo: bool = False,
    lock_timeout_s: float = LOCK_TIMEOUT_S,
    pool_size: int = POOL_SIZE,
    max_overflow: int = MAX_OVERFLOW,
    pool_timeout_s: float = POOL_TIMEOUT_S,
) -> Engine:
    """Create the engine for a SQLite or PostgreSQL URL.

    JSON columns are written with :func:`compact_json` and parsed with
    :func:`parse_json`. Each transaction says what it is for
    (:mod:`phalanx.store.transactions`): a write (the default) begins with
    ``BEGIN IMMEDIATE`` on SQLite, so that it holds the write lock from its first
    read and never fails with a stale snapshot when it writes; a read begins a
    deferred, read-only transaction that never waits for the write lock. SQLite
    connections enforce foreign keys, use write-ahead logging (synced at
    checkpoints: ``synchronous=NORMAL``) and may be shared across
    threads; the database file is created with mode 0600 (with its folder).
    PostgreSQL connections wait at most ``lock_timeout_s`` for a lock. An
    in-memory SQLite database lives in one shared connection.

    Parameters
    ----------
    url : str or URL
        See :func:`normalize_url`.
    echo : bool
        Log every statement.
    lock_timeout_s : float
        Seconds a statement waits for a lock held by another connection before
        it fails ("database is locked", ``LockNotAvailable``).
    pool_size, max_overflow : int
        Connections the pool keeps, and the extra ones it opens under a burst.
    pool_timeout_s : float
        Seconds a caller waits for a connection when all are in use, before
        ``sqlalchemy.exc.TimeoutError``.

    Returns
    -------
    Engine
        A new engine; dispose of it when done.
    """
    parsed = normalize_url(url)
    pooling = {
        "pool_size": pool_size,
        "max_overflow": max_overflow,
        "pool_timeout": pool_timeout_s,
    }
    if parsed.get_backend_name() == "postgresql":
        engine = create_engine(
            parsed,
            echo=echo,
            pool_pre_ping=True,
            json_serializer=compact_json,
            json_deserializer=parse_json,
            **pooling,
        )
        postgres = PostgresTransactions(lock_timeout_s)
        event.listen(engine, "connect", postgres.connect)
        event.listen(engine, "begin", postgres.begin)
        return engine

    kwargs: dict[str, Any] = {
        "connect_args": {"check_same_thread": False},
        "json_serializer": compact_json,
        "json_deserializer": parse_json,
    }
    if parsed.database in (None, "", ":memory:"):
        kwargs["poolclass"] = StaticPool
    else:
        create_private_file(Path(parsed.database))
        kwargs.update(pooling)
    engine = create_engine(parsed, echo=echo, **kwargs)
    sqlite = SQLiteTransactions(lock_timeout_s)
    event.listen(engine, "connect", sqlite.connect)
    event.listen(engine, "begin", sqlite.begin)
    return engine


def create_private_file(path: Path) -> None:
    """Create an empty database file only its owner may read (0600), unless it exists.

    SQLite gives the ``-wal`` and ``-shm`` files it creates beside it the same
    mode. An existing file keeps its mode (the operator's choice), with a warning
    (once per process) when others may read it.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        created = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, SQLITE_FILE_MODE)
        try:
            facts = os.fstat(created)
            _CHECKED_FILES.add((facts.st_dev, facts.st_ino))  # ours, empty: no header to read
        finally:
            os.close(created)
    except FileExistsError:
        check_sqlite_file(path)
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077 and path not in _WARNED_MODES:
            _WARNED_MODES.add(path)
            logger.warning(
                "database file %s has mode %s: other users may read it (chmod 600 %s)",
                path,
                oct(mode),
                path,
            )


def check_sqlite_file(path: Path) -> None:
    """Refuse a database path that is not an SQLite database (or an empty file to become one).

    The header of each file is read once per process, before the process connects to
    it: SQLite locks the file with POSIX locks, and a process loses all of those when
    it closes any descriptor of the file. Read again beside open connections, it let
    another process's last connection take the database for unused and delete its
    WAL, and this process's connections read a stale snapshot from then on.

    Raises
    ------
    NotADatabaseError
        Naming the path, before anything is read from it or written to it.
    """
    try:
        facts = path.stat()
    except OSError:
        facts = None
    if facts is None or not stat.S_ISREG(facts.st_mode):
        raise NotADatabaseError(f"the database path {path} is not a regular file")
    key = (facts.st_dev, facts.st_ino)
    if key in _CHECKED_FILES:
        return
    with path.open("rb") as handle:
        head = handle.read(len(SQLITE_HEADER))
    if head and head != SQLITE_HEADER:
        raise NotADatabaseError(f"the database file {path} is not an SQLite database")
    _CHECKED_FILES.add(key)


_CHECKED_FILES: set[tuple[int, int]] = set()
"""The (device, inode) of each database file this process checked: never opened again."""


def session_factory(engine: Engine, *, read_only: bool = False) -> sessionmaker[Session]:
    """Return the session factory bound to ``engine``.

    Sessions keep loaded attributes after commit (``expire_on_commit=False``),
    so objects returned by the repositories stay readable once the transaction
    is over.

    Parameters
    ----------
    engine : Engine
        From :func:`make_engine`.
    read_only : bool
        Sessions whose transactions are reads; a block that writes goes through
        :func:`phalanx.store.transactions.write_transaction`. By default every
        transaction is a write.

    Returns
    -------
    sessionmaker[Session]
        Use as ``with factory.begin() as session: ...`` (commits on success,
        rolls back on error).
    """
    options = READ_ONLY if read_only else READ_WRITE
    return sessionmaker(bind=engine, expire_on_commit=False, execution_options=dict(options))
