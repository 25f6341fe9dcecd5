"""Initial schema: clients, operator keys, runs, rounds, detection events, checkpoints, audit log.

Revision ID: 0001
Revises:
Create Date: 2026-11-29

Column types are spelled out here rather than imported from the models, so this
revision keeps describing the schema it created whatever the models become.
Timestamps are ``timestamptz`` on PostgreSQL; JSON is ``JSONB`` on PostgreSQL;
enumerations are VARCHAR with a named CHECK constraint; Flower node ids are
TEXT (unsigned 64-bit overflows BIGINT).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def json_type() -> sa.types.TypeEngine[Any]:
    return sa.JSON(none_as_null=True).with_variant(
        postgresql.JSONB(none_as_null=True), "postgresql"
    )


def big_key() -> sa.types.TypeEngine[int]:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def timestamp() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def one_of(table: str, column: str, name: str, values: Sequence[str]) -> sa.CheckConstraint:
    allowed = ", ".join(f"'{value}'" for value in values)
    return sa.CheckConstraint(f"{column} IN ({allowed})", name=op.f(f"ck_{table}_{name}"))


def upgrade() -> None:
    op.create_table(
        "clients",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("public_key", sa.Text(), nullable=False),
        sa.Column("fingerprint", sa.String(128), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("flower_node_id", sa.Text(), nullable=True),
        sa.Column("challenge", sa.String(256), nullable=True),
        sa.Column("challenge_expires_at", timestamp(), nullable=True),
        sa.Column("created_at", timestamp(), nullable=False),
        sa.Column("approved_at", timestamp(), nullable=True),
        sa.Column("last_seen_at", timestamp(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_clients")),
        sa.UniqueConstraint("fingerprint", name=op.f("uq_clients_fingerprint")),
        one_of(
            "clients", "status", "client_status", ["pending", "approved", "suspended", "banned"]
        ),
    )
    op.create_index(op.f("ix_clients_status"), "clients", ["status"])
    op.create_index(op.f("ix_clients_flower_node_id"), "clients", ["flower_node_id"])

    op.create_table(
        "operator_keys",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=False),
        sa.Column("prefix", sa.String(16), nullable=False),
        sa.Column("created_at", timestamp(), nullable=False),
        sa.Column("last_used_at", timestamp(), nullable=True),
        sa.Column("revoked_at", timestamp(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_operator_keys")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_operator_keys_key_hash")),
        one_of("operator_keys", "role", "role", ["viewer", "operator", "admin"]),
    )

    op.create_table(
        "runs",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("config", json_type(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=False),
        sa.Column("created_at", timestamp(), nullable=False),
        sa.Column("started_at", timestamp(), nullable=True),
        sa.Column("finished_at", timestamp(), nullable=True),
        sa.Column("heartbeat_at", timestamp(), nullable=True),
        sa.Column("claimed_by", sa.String(200), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("summary", json_type(), nullable=True),
        sa.Column("current_round", sa.Integer(), nullable=True),
        sa.Column("final_model_digest", sa.String(128), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
        one_of(
            "runs",
            "status",
            "run_status",
            ["queued", "running", "succeeded", "failed", "cancelled"],
        ),
    )
    op.create_index(op.f("ix_runs_created_at"), "runs", ["created_at"])
    op.create_index(op.f("ix_runs_status_created_at"), "runs", ["status", "created_at"])

    op.create_table(
        "rounds",
        sa.Column("run_id", sa.String(36), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("started_at", timestamp(), nullable=False),
        sa.Column("finished_at", timestamp(), nullable=False),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.Column("timings", json_type(), nullable=False),
        sa.Column("bytes_up", sa.BigInteger(), nullable=False),
        sa.Column("bytes_down", sa.BigInteger(), nullable=False),
        sa.Column("metrics", json_type(), nullable=False),
        sa.Column("num_flagged", sa.Integer(), nullable=False),
        sa.Column("num_rejected", sa.Integer(), nullable=False),
        sa.Column("assignment", json_type(), nullable=False),
        sa.Column("model_digest", sa.String(128), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_rounds_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "number", name=op.f("pk_rounds")),
    )

    op.create_table(
        "detection_events",
        sa.Column("id", big_key(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(36), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("client_id", sa.String(36), nullable=True),
        sa.Column("worker", sa.Integer(), nullable=True),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("severity", sa.String(16), nullable=False),
        sa.Column("evidence", json_type(), nullable=False),
        sa.Column("review_status", sa.String(16), nullable=False),
        sa.Column("reviewed_by", sa.String(200), nullable=True),
        sa.Column("reviewed_at", timestamp(), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("created_at", timestamp(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["runs.id"],
            name=op.f("fk_detection_events_run_id_runs"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["client_id"],
            ["clients.id"],
            name=op.f("fk_detection_events_client_id_clients"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_detection_events")),
        one_of("detection_events", "severity", "severity", ["high", "low"]),
        one_of(
            "detection_events", "review_status", "review_status", ["open", "confirmed", "dismissed"]
        ),
    )
    for columns in (
        ["run_id", "id"],
        ["run_id", "round"],
        ["client_id", "id"],
        ["kind", "id"],
        ["review_status", "id"],
        ["created_at"],
    ):
        name = "ix_detection_events_" + "_".join(columns)
        op.create_index(op.f(name), "detection_events", columns)

    op.create_table(
        "checkpoints",
        sa.Column("run_id", sa.String(36), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("digest", sa.String(128), nullable=False),
        sa.Column("created_at", timestamp(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_checkpoints_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "round", name=op.f("pk_checkpoints")),
    )

    op.create_table(
        "audit_log",
        sa.Column("id", big_key(), autoincrement=True, nullable=False),
        sa.Column("at", timestamp(), nullable=False),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("action", sa.String(100), nullable=False),
        sa.Column("target_type", sa.String(50), nullable=True),
        sa.Column("target_id", sa.String(100), nullable=True),
        sa.Column("details", json_type(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
    )
    op.create_index(op.f("ix_audit_log_at"), "audit_log", ["at"])
    op.create_index(op.f("ix_audit_log_actor"), "audit_log", ["actor"])
    op.create_index(
        op.f("ix_audit_log_target_type_target_id"), "audit_log", ["target_type", "target_id"]
    )


def downgrade() -> None:
    # Children before parents; dropping a table drops its indexes.
    for table in (
        "audit_log",
        "checkpoints",
        "detection_events",
        "rounds",
        "runs",
        "operator_keys",
        "clients",
    ):
        op.drop_table(table)
