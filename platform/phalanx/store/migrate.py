"""Schema migrations through Alembic's Python API.

The migration scripts live in the repository's ``migrations/`` folder, found
relative to this package (``platform/phalanx/store`` -> repository root). The
schema is only ever created or changed by them.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from phalanx.store.engine import make_engine, normalize_url
from phalanx.store.transactions import READ_ONLY

#: The repository's migrations folder, three levels above this package.
MIGRATIONS_DIR = Path(__file__).resolve().parents[3] / "migrations"


class MigrationsNotFoundError(RuntimeError):
    """The Alembic migrations folder is not where Phalanx looks for it."""


def alembic_config(url: str | None = None, *, script_location: Path | None = None) -> Config:
    """Build the Alembic configuration for a database.

    Parameters
    ----------
    url : str, optional
        The database URL; when omitted, ``migrations/env.py`` reads
        ``PHALANX_DATABASE_URL``.
    script_location : Path, optional
        The migrations folder; defaults to the repository's ``migrations/``.

    Returns
    -------
    Config
        A configuration for :mod:`alembic.command`.

    Raises
    ------
    MigrationsNotFoundError
        When the folder has no ``env.py`` (e.g. Phalanx was installed from a
        wheel rather than a checkout).
    """
    location = script_location or MIGRATIONS_DIR
    if not (location / "env.py").is_file():
        raise MigrationsNotFoundError(
            f"no Alembic migrations at {location}: run Phalanx from a checkout of its "
            "repository (the migrations/ folder is next to alembic.ini)"
        )
    config = Config()
    config.set_main_option("script_location", str(location))
    if url is not None:
        rendered = normalize_url(url).render_as_string(hide_password=False)
        config.set_main_option("sqlalchemy.url", rendered.replace("%", "%%"))
    return config


def revision_ids() -> list[str]:
    """Return the migrations' revision ids, oldest first."""
    script = ScriptDirectory.from_config(alembic_config())
    return [rev.revision for rev in reversed(list(script.walk_revisions()))]


def check_revision(revision: str) -> str:
    """Return ``revision`` if it is ``head`` or a migration's id.

    Raises
    ------
    ValueError
        Naming the revisions there are (Alembic fails on a blank or relative one
        with a bare ``AssertionError``).
    """
    known = revision_ids()
    if revision != "head" and revision not in known:
        raise ValueError(f"no revision {revision!r}: give head or one of {', '.join(known)}")
    return revision


def upgrade(url: str, revision: str = "head") -> None:
    """Migrate the database up to ``revision``.

    Parameters
    ----------
    url : str
        The database URL.
    revision : str
        Target revision; ``"head"`` for the latest.

    Raises
    ------
    ValueError
        When ``url`` names an in-memory SQLite database: the migration's connection
        would hold the only copy of the tables, gone when it closes.
    """
    parsed = normalize_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:"):
        raise ValueError(
            f"{url!r} is an in-memory SQLite database, gone with each connection; "
            "name a file, e.g. sqlite:////var/lib/phalanx/phalanx.db"
        )
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    """Migrate the database down to ``revision`` (``"base"`` drops everything).

    Parameters
    ----------
    url : str
        The database URL.
    revision : str
        Target revision.
    """
    command.downgrade(alembic_config(url), revision)


def head_revision() -> str:
    """Return the revision the migration scripts end at.

    Returns
    -------
    str
        The single head revision.

    Raises
    ------
    RuntimeError
        When the scripts have several heads (merge them).
    """
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError("the migration scripts have no revision")
    return head


def current_revision(url: str) -> str | None:
    """Return the database's revision, or ``None`` for a database never migrated.

    Parameters
    ----------
    url : str
        The database URL.

    Returns
    -------
    str or None
        The revision in the ``alembic_version`` table.
    """
    engine = make_engine(url)
    try:
        with engine.connect().execution_options(**READ_ONLY) as connection:
            return MigrationContext.configure(connection).get_current_revision()
    finally:
        engine.dispose()


def is_at_head(url: str) -> bool:
    """Return whether the database is migrated to the latest revision.

    Parameters
    ----------
    url : str
        The database URL.

    Returns
    -------
    bool
        ``True`` when :func:`current_revision` equals :func:`head_revision`.
    """
    return current_revision(url) == head_revision()
