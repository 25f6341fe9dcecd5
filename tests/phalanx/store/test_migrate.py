"""Alembic migrations on SQLite and PostgreSQL, and their agreement with the ORM models."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, inspect, text
from sqlalchemy.exc import IntegrityError

from phalanx.store import make_engine
from phalanx.store.migrate import (
    MIGRATIONS_DIR,
    MigrationsNotFoundError,
    alembic_config,
    current_revision,
    downgrade,
    head_revision,
    is_at_head,
    upgrade,
)
from tests.support.schema import schema_diff
from tests.support.store_rows import table_names

REPO_ROOT = Path(__file__).resolve().parents[3]
T0 = datetime(2026, 1, 1, tzinfo=UTC)
T1 = datetime(2026, 1, 2, tzinfo=UTC)
TABLES = {
    "clients",
    "operator_keys",
    "runs",
    "rounds",
    "detection_events",
    "checkpoints",
    "audit_log",
    "operator_sessions",
    "worker_responses",
    "detection_cases",
    "detection_case_kinds",
    "run_partitions",
    "client_rounds",
}


def test_a_fresh_database_has_no_revision_and_is_not_at_head(database_url: str) -> None:
    assert current_revision(database_url) is None
    assert not is_at_head(database_url)


def test_upgrade_creates_every_table_and_reaches_head(database_url: str) -> None:
    upgrade(database_url)

    assert table_names(database_url) == TABLES | {"alembic_version"}
    assert current_revision(database_url) == head_revision()
    assert is_at_head(database_url)


def test_migrated_schema_matches_the_orm_models(database_url: str) -> None:
    upgrade(database_url)

    assert schema_diff(database_url) == []


def test_schema_comparison_notices_a_missing_index(database_url: str) -> None:
    upgrade(database_url)
    engine = make_engine(database_url)
    with engine.begin() as connection:
        connection.execute(text("DROP INDEX ix_detection_events_kind_id"))
    engine.dispose()

    diff = schema_diff(database_url)

    assert [entry[0] for entry in diff] == ["add_index"]  # type: ignore[index]


def test_downgrade_to_base_drops_every_table(database_url: str) -> None:
    upgrade(database_url)

    downgrade(database_url, "base")

    assert table_names(database_url) == {"alembic_version"}
    assert current_revision(database_url) is None


def test_upgrade_after_downgrade_restores_the_same_schema(database_url: str) -> None:
    upgrade(database_url)
    downgrade(database_url, "base")

    upgrade(database_url)

    assert is_at_head(database_url)
    assert schema_diff(database_url) == []


def test_upgrading_a_database_at_head_changes_nothing(database_url: str) -> None:
    upgrade(database_url)

    upgrade(database_url)

    assert is_at_head(database_url)
    assert table_names(database_url) == TABLES | {"alembic_version"}


def test_a_failing_migration_leaves_the_database_untouched(
    database_url: str, tmp_path: Path
) -> None:
    scripts = tmp_path / "migrations"
    shutil.copytree(MIGRATIONS_DIR, scripts, ignore=shutil.ignore_patterns("__pycache__"))
    (scripts / "versions" / "0002_broken.py").write_text(
        "from alembic import op\n"
        "import sqlalchemy as sa\n"
        "revision = '0002'\n"
        f"down_revision = {head_revision()!r}\n"
        "branch_labels = None\n"
        "depends_on = None\n"
        "def upgrade():\n"
        "    op.create_table('half_done', sa.Column('id', sa.Integer(), primary_key=True))\n"
        "    raise RuntimeError('migration bug')\n"
        "def downgrade():\n"
        "    pass\n"
    )

    with pytest.raises(RuntimeError, match="migration bug"):
        command.upgrade(alembic_config(database_url, script_location=scripts), "head")

    assert current_revision(database_url) is None
    assert table_names(database_url) == set()


def _insert_client(
    connection: Connection, client_id: str, fingerprint: str, at: datetime = T0
) -> None:
    connection.execute(
        text(
            "INSERT INTO clients (id, name, public_key, fingerprint, status, created_at) "
            "VALUES (:id, :id, 'pem', :fingerprint, 'pending', :at)"
        ),
        {"id": client_id, "fingerprint": fingerprint, "at": at},
    )


def _audit(connection: Connection, client_id: str, action: str) -> None:
    connection.execute(
        text(
            "INSERT INTO audit_log (at, actor, action, target_type, target_id) "
            "VALUES (:at, 'test', :action, 'client', :id)"
        ),
        {"at": T1, "action": action, "id": client_id},
    )


def test_registration_proofs_are_carried_over_and_undone(database_url: str) -> None:
    upgrade(database_url, "0002_event_indexes")
    engine = make_engine(database_url)
    try:
        with engine.begin() as connection:
            _insert_client(connection, "simulated", "f-sim")  # created trusted
            _insert_client(connection, "proven", "f-proven")
            _audit(connection, "proven", "client.register")
            _audit(connection, "proven", "client.proof")
            _insert_client(connection, "unproven", "f-unproven")
            _audit(connection, "unproven", "client.register")

        upgrade(database_url)
        with engine.begin() as connection:
            proven = dict(connection.execute(text("SELECT id, proven_at FROM clients")).all())
            assert {k: v is not None for k, v in proven.items()} == {
                "simulated": True,
                "proven": True,
                "unproven": False,
            }
            # Unproven registrations of a key may now coexist; proven ones may not.
            _insert_client(connection, "later", "f-unproven", T1)
        with pytest.raises(IntegrityError), engine.begin() as connection:
            connection.execute(text("UPDATE clients SET proven_at = created_at"))

        downgrade(database_url, "0002_event_indexes")
        with engine.begin() as connection:
            left = {row[0] for row in connection.execute(text("SELECT id FROM clients"))}
        assert left == {"simulated", "proven", "unproven"}  # the later duplicate goes
    finally:
        engine.dispose()


def column_names(url: str, table: str) -> set[str]:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            return {str(c["name"]) for c in inspect(connection).get_columns(table)}
    finally:
        engine.dispose()


def _insert_run_and_round(connection: Connection) -> None:
    connection.execute(
        text(
            "INSERT INTO runs (id, name, config, status, seed, created_at, attempts, "
            "cancel_requested) VALUES ('r', 'r', '{}', 'running', 1, :at, 0, false)"
        ),
        {"at": T0},
    )
    connection.execute(
        text(
            "INSERT INTO rounds (run_id, number, started_at, finished_at, duration_s, timings, "
            "bytes_up, bytes_down, metrics, num_flagged, num_rejected, assignment) "
            "VALUES ('r', 1, :at, :at, 1.0, '{}', 0, 0, '{}', 0, 0, '{}')"
        ),
        {"at": T0},
    )


def test_rounds_recorded_before_0004_keep_their_rows_without_an_agreement_graph(
    database_url: str,
) -> None:
    upgrade(database_url, "0003_registration_sessions")
    assert "agreement" not in column_names(database_url, "rounds")
    engine = make_engine(database_url)
    try:
        with engine.begin() as connection:
            _insert_run_and_round(connection)

        upgrade(database_url)
        assert "agreement" in column_names(database_url, "rounds")
        with engine.begin() as connection:
            rows = connection.execute(text("SELECT number, agreement FROM rounds")).all()
            assert [tuple(row) for row in rows] == [(1, None)]
            connection.execute(text("UPDATE rounds SET agreement = '{\"version\": 1}'"))

        downgrade(database_url, "0003_registration_sessions")
        assert "agreement" not in column_names(database_url, "rounds")
        with engine.begin() as connection:
            assert connection.execute(text("SELECT number FROM rounds")).scalars().all() == [1]
    finally:
        engine.dispose()


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """Undo the logging setup that ``alembic.ini`` applies through ``env.py``."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    loggers = {name: logging.getLogger(name).level for name in ("alembic", "sqlalchemy.engine")}
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, saved in loggers.items():
        logging.getLogger(name).setLevel(saved)


@pytest.mark.usefixtures("restore_logging")
def test_alembic_ini_reads_the_url_from_the_environment(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PHALANX_DATABASE_URL", sqlite_url)
    config = Config(str(REPO_ROOT / "alembic.ini"))

    command.upgrade(config, "head")

    assert is_at_head(sqlite_url)


def test_missing_migrations_folder_fails_with_a_message_naming_it(tmp_path: Path) -> None:
    with pytest.raises(MigrationsNotFoundError, match=str(tmp_path)):
        alembic_config("sqlite://", script_location=tmp_path)
