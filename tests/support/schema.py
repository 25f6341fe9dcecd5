"""How a migrated database's schema differs from the ORM models (Alembic's comparison)."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from phalanx.store import Base, make_engine


def schema_diff(url: str) -> list[object]:
    """Return Alembic's differences between the database at ``url`` and the ORM models."""
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            return list(compare_metadata(context, Base.metadata))
    finally:
        engine.dispose()
