"""Alembic environment: runs the migrations against PHALANX_DATABASE_URL.

The URL comes from the Alembic config's ``sqlalchemy.url`` when set
programmatically (``phalanx.store.migrate``), else from ``PHALANX_DATABASE_URL``.
On SQLite every migration runs in one transaction (the engine emits ``BEGIN``),
in batch mode, with foreign keys off while tables are rebuilt and checked after.
"""

from __future__ import annotations

import os
from logging.config import fileConfig

from alembic import context
from sqlalchemy import Connection

from phalanx.store.engine import make_engine, normalize_url
from phalanx.store.models import Base

config = context.config
if config.config_file_name is not None:
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def database_url() -> str:
    url = config.get_main_option("sqlalchemy.url") or os.environ.get("PHALANX_DATABASE_URL")
    if not url:
        raise RuntimeError("no database URL: set PHALANX_DATABASE_URL or run `phalanx db upgrade`")
    return normalize_url(url).render_as_string(hide_password=False)


def run_migrations_offline() -> None:
    url = database_url()
    context.configure(
        url=url,
        target_metadata=target_metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
        render_as_batch=url.startswith("sqlite"),
    )
    with context.begin_transaction():
        context.run_migrations()


def run_on(connection: Connection) -> None:
    sqlite = connection.dialect.name == "sqlite"
    if sqlite:
        # Outside any transaction: a batch table rebuild must not cascade deletes.
        connection.connection.driver_connection.execute("PRAGMA foreign_keys=OFF")  # type: ignore[union-attr]
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=sqlite,
        transactional_ddl=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()
        if sqlite:
            broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
            if broken:
                raise RuntimeError(f"migration left dangling foreign keys: {broken[:10]}")


def run_migrations_online() -> None:
    engine = make_engine(database_url())
    try:
        with engine.connect() as connection:
            run_on(connection)
    finally:
        engine.dispose()  # never hand a connection with foreign keys off to anyone


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
