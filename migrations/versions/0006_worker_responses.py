"""Each timed round stores every dispatched worker's response time.

Revision ID: 0006_worker_responses
Revises: 0005_medium_severity
Create Date: 2026-12-02

``worker_responses`` holds one row per worker given work in a round the systems
model timed (:mod:`phalanx.response_times`): when its last piece arrived and
whether that was by the round's close (``kept``), after it (``late``) or never
(``missing``, no time). A table rather than a JSON column of ``rounds``: the
clients page reads a client's responses across runs, which the index on
``(client_id, run_id, round)`` serves, and a run's summary reads narrow rows
rather than every round's document. The CHECKs keep every time finite and
non-negative and pair a null time with ``missing``. Rounds recorded before this
revision have no rows; nothing can rebuild them.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_worker_responses"
down_revision: str | Sequence[str] | None = "0005_medium_severity"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "worker_responses"
MAX_FINITE = "1.7976931348623157e308"


def upgrade() -> None:
    op.create_table(
        TABLE,
        sa.Column("run_id", sa.String(36), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("worker", sa.Integer(), nullable=False),
        sa.Column("client_id", sa.String(36), nullable=True),
        sa.Column("seconds", sa.Float(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f(f"fk_{TABLE}_run_id_runs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["client_id"],
            ["clients.id"],
            name=op.f(f"fk_{TABLE}_client_id_clients"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("run_id", "round", "worker", name=op.f(f"pk_{TABLE}")),
        sa.CheckConstraint(
            "status IN ('kept', 'late', 'missing')", name=op.f(f"ck_{TABLE}_response_status")
        ),
        sa.CheckConstraint(
            f"seconds IS NULL OR (seconds >= 0 AND seconds <= {MAX_FINITE})",
            name=op.f(f"ck_{TABLE}_finite_seconds"),
        ),
        sa.CheckConstraint(
            "(seconds IS NULL AND status = 'missing') OR "
            "(seconds IS NOT NULL AND status <> 'missing')",
            name=op.f(f"ck_{TABLE}_missing_has_no_time"),
        ),
    )
    op.create_index(
        op.f(f"ix_{TABLE}_client_id_run_id_round"), TABLE, ["client_id", "run_id", "round"]
    )


def downgrade() -> None:
    op.drop_index(op.f(f"ix_{TABLE}_client_id_run_id_round"), table_name=TABLE)
    op.drop_table(TABLE)
