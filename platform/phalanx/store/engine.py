"""The engine and session factory for SQLite and PostgreSQL.

Callers resolve the database URL (settings, CLI flag, test fixture) and pass it
in; nothing here reads the environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic_core import from_json
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import StaticPool

#: Drivers written by hand that mean PostgreSQL through psycopg 3.
_POSTGRES_ALIASES = {"postgres", "postgresql", "postgresql+psycopg"}

#: Seconds a SQLite connection waits for another writer before "database is locked".
SQLITE_BUSY_TIMEOUT_S = 30.0


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


def make_engine(url: str | URL, *, echo: bool = False) -> Engine:
    """Create the engine for a SQLite or PostgreSQL URL.

    JSON columns are parsed with :func:`parse_json`. SQLite connections enforce
    foreign keys, use write-ahead logging, may be shared across threads, and let
    SQLAlchemy emit ``BEGIN IMMEDIATE`` itself, so that transactions, savepoints
    and DDL are truly transactional and concurrent writers queue instead of
    failing. The parent folder of a SQLite file is created. An in-memory SQLite
    database lives in one shared connection.

    Parameters
    ----------
    url : str or URL
        See :func:`normalize_url`.
    echo : bool
        Log every statement.

    Returns
    -------
    Engine
        A new engine; dispose of it when done.
    """
    parsed = normalize_url(url)
    if parsed.get_backend_name() == "postgresql":
        return create_engine(parsed, echo=echo, pool_pre_ping=True, json_deserializer=parse_json)

    kwargs: dict[str, Any] = {
        "connect_args": {"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_S},
        "json_deserializer": parse_json,
    }
    if parsed.database in (None, "", ":memory:"):
        kwargs["poolclass"] = StaticPool
    else:
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(parsed, echo=echo, **kwargs)
    event.listen(engine, "connect", _configure_sqlite_connection)
    event.listen(engine, "begin", _begin_sqlite_transaction)
    return engine


def _configure_sqlite_connection(dbapi_connection: Any, connection_record: Any) -> None:
    """Set per-connection SQLite pragmas and hand transaction control to SQLAlchemy."""
    dbapi_connection.isolation_level = None  # the driver emits no BEGIN of its own
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA journal_mode=WAL")
    finally:
        cursor.close()


def _begin_sqlite_transaction(connection: Any) -> None:
    """Emit ``BEGIN IMMEDIATE`` for every SQLAlchemy transaction on SQLite, unless autocommitting.

    ``IMMEDIATE`` takes the write lock up front (waiting up to the busy timeout).
    A plain ``BEGIN`` would let a transaction read, then fail at once with
    "database is locked" when it writes after another connection committed;
    serialising the (short) transactions of the API and coordinator is the
    price of never seeing that.
    """
    if connection.get_execution_options().get("isolation_level") == "AUTOCOMMIT":
        return
    connection.exec_driver_sql("BEGIN IMMEDIATE")


def session_factory(engine: Engine) -> sessionmaker[Session]:
    """Return the session factory bound to ``engine``.

    Sessions keep loaded attributes after commit (``expire_on_commit=False``),
    so objects returned by the repositories stay readable once the transaction
    is over.

    Parameters
    ----------
    engine : Engine
        From :func:`make_engine`.

    Returns
    -------
    sessionmaker[Session]
        Use as ``with factory.begin() as session: ...`` (commits on success,
        rolls back on error).
    """
    return sessionmaker(bind=engine, expire_on_commit=False)
