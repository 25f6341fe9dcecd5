"""Proven registrations (fingerprint unique among proven clients) and server-side sessions.

Revision ID: 0003_registration_sessions
Revises: 0002_event_indexes
Create Date: 2026-12-14

``clients`` gains ``proven_at`` (when the client proved it holds its key; null
while a registration through the API is unproven) and
``registration_token_hash`` (the registrant's token for a new challenge). The
unique constraint on ``fingerprint`` becomes a unique index over proven clients
only, so a stranger who registers someone else's public key never blocks its
holder. ``name`` gets an index, for the check that names are unique among
active clients. Existing clients are proven as of their recorded proof, or as
of their creation when they were not registered through the API (simulated
workers, created trusted).

``operator_sessions`` holds one row per dashboard login; logging out or
revoking the key deletes it, and a cookie whose row is gone is refused.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003_registration_sessions"
down_revision: str | Sequence[str] | None = "0002_event_indexes"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PROVEN = sa.text("proven_at IS NOT NULL")

#: Clients never registered through the API were created trusted: proven on creation.
BACKFILL_TRUSTED = """
UPDATE clients SET proven_at = created_at
WHERE NOT EXISTS (
    SELECT 1 FROM audit_log
    WHERE audit_log.target_type = 'client' AND audit_log.target_id = clients.id
      AND audit_log.action = 'client.register'
)
"""
#: Clients registered through the API are proven as of their first recorded proof.
BACKFILL_PROVEN = """
UPDATE clients SET proven_at = (
    SELECT MIN(audit_log.at) FROM audit_log
    WHERE audit_log.target_type = 'client' AND audit_log.target_id = clients.id
      AND audit_log.action = 'client.proof'
)
WHERE proven_at IS NULL
"""
#: Before the fingerprint is unique again: unproven rows sharing a key with another row go.
DROP_UNPROVEN_DUPLICATES = """
DELETE FROM clients
WHERE proven_at IS NULL AND EXISTS (
    SELECT 1 FROM clients AS other
    WHERE other.fingerprint = clients.fingerprint AND other.id <> clients.id
      AND (other.proven_at IS NOT NULL OR other.created_at < clients.created_at
           OR (other.created_at = clients.created_at AND other.id < clients.id))
)
"""


def timestamp() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    with op.batch_alter_table("clients") as batch:
        batch.add_column(sa.Column("registration_token_hash", sa.String(64), nullable=True))
        batch.add_column(sa.Column("proven_at", timestamp(), nullable=True))
        batch.drop_constraint(op.f("uq_clients_fingerprint"), type_="unique")
    op.execute(BACKFILL_TRUSTED)
    op.execute(BACKFILL_PROVEN)
    op.create_index(
        "ix_clients_fingerprint_proven",
        "clients",
        ["fingerprint"],
        unique=True,
        sqlite_where=PROVEN,
        postgresql_where=PROVEN,
    )
    op.create_index(op.f("ix_clients_name"), "clients", ["name"])

    op.create_table(
        "operator_sessions",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("key_id", sa.String(36), nullable=False),
        sa.Column("created_at", timestamp(), nullable=False),
        sa.Column("expires_at", timestamp(), nullable=False),
        sa.ForeignKeyConstraint(
            ["key_id"],
            ["operator_keys.id"],
            name=op.f("fk_operator_sessions_key_id_operator_keys"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_operator_sessions")),
    )
    op.create_index(op.f("ix_operator_sessions_key_id"), "operator_sessions", ["key_id"])
    op.create_index(op.f("ix_operator_sessions_expires_at"), "operator_sessions", ["expires_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_operator_sessions_expires_at"), table_name="operator_sessions")
    op.drop_index(op.f("ix_operator_sessions_key_id"), table_name="operator_sessions")
    op.drop_table("operator_sessions")

    op.drop_index(op.f("ix_clients_name"), table_name="clients")
    op.drop_index("ix_clients_fingerprint_proven", table_name="clients")
    op.execute(DROP_UNPROVEN_DUPLICATES)
    with op.batch_alter_table("clients") as batch:
        batch.create_unique_constraint(op.f("uq_clients_fingerprint"), ["fingerprint"])
        batch.drop_column("proven_at")
        batch.drop_column("registration_token_hash")
