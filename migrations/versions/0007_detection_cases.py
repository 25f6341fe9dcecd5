"""Detection events are gathered into cases, one per client (or worker) and run.

Revision ID: 0007_detection_cases
Revises: 0006_worker_responses
Create Date: 2026-12-02

An operator reviews a *case*, the events of one client in one run, rather than
each event (:mod:`phalanx.store.cases`). ``detection_cases`` holds a case's
counts, rounds, highest severity and its latest and strongest events, kept as
events arrive and reviews close them, so the review queue reads a page of cases
without grouping every event. ``detection_case_kinds`` counts a case's events per
kind and records the kinds an operator muted. Each event gains ``case_id`` and
``muted`` (arrived dismissed because its kind was muted).

The upgrade builds the cases of the events already stored in SQL, by grouping;
their ``reviewed_by`` stays empty (each event keeps its own review).
Downgrading drops the cases; the events and their reviews stay.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007_detection_cases"
down_revision: str | Sequence[str] | None = "0006_worker_responses"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CASES = "detection_cases"
KINDS = "detection_case_kinds"
EVENTS = "detection_events"


def _subject(table: str) -> str:
    """The SQL of an event's case subject (see ``phalanx.store.cases.case_subject``)."""
    return (
        f"CASE WHEN {table}.client_id IS NOT NULL THEN 'client:' || {table}.client_id "
        f"WHEN {table}.worker IS NOT NULL THEN 'worker:' || CAST({table}.worker AS VARCHAR(12)) "
        "ELSE 'round' END"
    )


RANK = "CASE e.severity WHEN 'high' THEN 3 WHEN 'medium' THEN 2 ELSE 1 END"


def upgrade() -> None:
    timestamp = sa.DateTime(timezone=True)
    op.create_table(
        CASES,
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("run_id", sa.String(36), nullable=False),
        sa.Column("subject", sa.String(64), nullable=False),
        sa.Column("client_id", sa.String(36), nullable=True),
        sa.Column("worker", sa.Integer(), nullable=True),
        sa.Column("review_status", sa.String(16), nullable=False),
        sa.Column("severity", sa.String(16), nullable=False),
        sa.Column("event_count", sa.Integer(), nullable=False),
        sa.Column("open_count", sa.Integer(), nullable=False),
        sa.Column("confirmed_count", sa.Integer(), nullable=False),
        sa.Column("muted_count", sa.Integer(), nullable=False),
        sa.Column("first_round", sa.Integer(), nullable=False),
        sa.Column("last_round", sa.Integer(), nullable=False),
        sa.Column("latest_event_id", sa.BigInteger(), nullable=False),
        sa.Column("strongest_event_id", sa.BigInteger(), nullable=False),
        sa.Column("opened_at", timestamp, nullable=False),
        sa.Column("updated_at", timestamp, nullable=False),
        sa.Column("reviewed_by", sa.String(200), nullable=True),
        sa.Column("reviewed_at", timestamp, nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f(f"fk_{CASES}_run_id_runs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["client_id"],
            ["clients.id"],
            name=op.f(f"fk_{CASES}_client_id_clients"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f(f"pk_{CASES}")),
        sa.UniqueConstraint("run_id", "subject", name=op.f(f"uq_{CASES}_run_id_subject")),
        sa.CheckConstraint(
            "review_status IN ('open', 'confirmed', 'dismissed')",
            name=op.f(f"ck_{CASES}_review_status"),
        ),
        sa.CheckConstraint(
            "severity IN ('high', 'medium', 'low')", name=op.f(f"ck_{CASES}_severity")
        ),
        sa.CheckConstraint(
            "open_count >= 0 AND confirmed_count >= 0 AND muted_count >= 0 "
            "AND open_count + confirmed_count <= event_count",
            name=op.f(f"ck_{CASES}_counts"),
        ),
    )
    op.create_index(
        op.f(f"ix_{CASES}_review_status_latest_event_id"),
        CASES,
        ["review_status", "latest_event_id"],
    )
    op.create_index(op.f(f"ix_{CASES}_client_id_id"), CASES, ["client_id", "id"])
    op.create_table(
        KINDS,
        sa.Column("case_id", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("event_count", sa.Integer(), nullable=False),
        sa.Column("muted_by", sa.String(200), nullable=True),
        sa.Column("muted_at", timestamp, nullable=True),
        sa.Column("mute_note", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["case_id"],
            [f"{CASES}.id"],
            name=op.f(f"fk_{KINDS}_case_id_{CASES}"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("case_id", "kind", name=op.f(f"pk_{KINDS}")),
    )
    with op.batch_alter_table(EVENTS) as batch:
        batch.add_column(sa.Column("case_id", sa.BigInteger(), nullable=True))
        batch.add_column(
            sa.Column("muted", sa.Boolean(), server_default=sa.false(), nullable=False)
        )
        batch.create_foreign_key(
            op.f(f"fk_{EVENTS}_case_id_{CASES}"), CASES, ["case_id"], ["id"], ondelete="SET NULL"
        )
    _backfill()


def _backfill() -> None:
    """Gather the stored events into cases, by SQL grouping on both databases; index them."""
    op.execute(
        f"""
        INSERT INTO {CASES} (
            run_id, subject, client_id, worker, review_status, severity, event_count,
            open_count, confirmed_count, muted_count, first_round, last_round,
            latest_event_id, strongest_event_id, opened_at, updated_at
        )
        SELECT run_id, subject, max(client_id), max(worker), 'open',
               CASE max(rank) WHEN 3 THEN 'high' WHEN 2 THEN 'medium' ELSE 'low' END,
               count(*),
               sum(CASE WHEN review_status = 'open' THEN 1 ELSE 0 END),
               sum(CASE WHEN review_status = 'confirmed' THEN 1 ELSE 0 END),
               0, min(round), max(round), max(id), max(id), min(created_at), max(created_at)
        FROM (SELECT e.*, {_subject("e")} AS subject, {RANK} AS rank FROM {EVENTS} e) grouped
        GROUP BY run_id, subject
        """
    )
    op.execute(
        f"""
        UPDATE {CASES} SET review_status = CASE
            WHEN open_count > 0 THEN 'open'
            WHEN confirmed_count > 0 THEN 'confirmed'
            ELSE 'dismissed' END
        """
    )
    op.execute(
        f"""
        UPDATE {EVENTS} SET case_id = (
            SELECT c.id FROM {CASES} c
            WHERE c.run_id = {EVENTS}.run_id AND c.subject = {_subject(EVENTS)}
        )
        """
    )
    # Before the per-case reads below: without it each case would scan every event.
    op.create_index(op.f(f"ix_{EVENTS}_case_id_id"), EVENTS, ["case_id", "id"])
    op.execute(
        f"""
        UPDATE {CASES} SET strongest_event_id = (
            SELECT max(e.id) FROM {EVENTS} e
            WHERE e.case_id = {CASES}.id AND e.severity = {CASES}.severity
        )
        """
    )
    op.execute(
        f"""
        INSERT INTO {KINDS} (case_id, kind, event_count)
        SELECT case_id, kind, count(*) FROM {EVENTS} GROUP BY case_id, kind
        """
    )


def downgrade() -> None:
    op.drop_index(op.f(f"ix_{EVENTS}_case_id_id"), table_name=EVENTS)
    with op.batch_alter_table(EVENTS) as batch:
        batch.drop_constraint(op.f(f"fk_{EVENTS}_case_id_{CASES}"), type_="foreignkey")
        batch.drop_column("muted")
        batch.drop_column("case_id")
    op.drop_table(KINDS)
    op.drop_index(op.f(f"ix_{CASES}_client_id_id"), table_name=CASES)
    op.drop_index(op.f(f"ix_{CASES}_review_status_latest_event_id"), table_name=CASES)
    op.drop_table(CASES)
