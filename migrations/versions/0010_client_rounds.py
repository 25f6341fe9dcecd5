"""Each local-data round stores a row per client: its distance and its federated evaluation.

Revision ID: 0010_client_rounds
Revises: 0009_simulated_clients_of_runs
Create Date: 2026-12-02

``client_rounds`` holds one row per worker given work in a round of a local-data
run (``data.mode = "local"``; :mod:`phalanx.client_rounds`): the sample count
its reply claimed, the L2 distance of its update to the round's aggregate and
that over the round's median distance, and its federated evaluation report as
it counted (status ``counted``, ``clipped``, ``refused`` or ``failed``; loss,
accuracy and count after bounding). The run page's per-client view reads each
client's latest values. A table rather than a JSON column of ``rounds``: the
view reads narrow rows of the latest rounds, not every round's document. The
CHECKs keep every number finite and in range (an accuracy in [0, 1]); a hostile
report's claimed values live in its event, never here. Rounds recorded before
this revision, and rounds on assigned data, have no rows.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010_client_rounds"
down_revision: str | Sequence[str] | None = "0009_simulated_clients_of_runs"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "client_rounds"
MAX_FINITE = "1.7976931348623157e308"


def upgrade() -> None:
    op.create_table(
        TABLE,
        sa.Column("run_id", sa.String(36), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("worker", sa.Integer(), nullable=False),
        sa.Column("client_id", sa.String(36), nullable=True),
        sa.Column("samples", sa.BigInteger(), nullable=True),
        sa.Column("distance", sa.Float(), nullable=True),
        sa.Column("distance_ratio", sa.Float(), nullable=True),
        sa.Column("eval_status", sa.String(16), nullable=True),
        sa.Column("eval_loss", sa.Float(), nullable=True),
        sa.Column("eval_accuracy", sa.Float(), nullable=True),
        sa.Column("eval_samples", sa.BigInteger(), nullable=True),
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
            f"distance IS NULL OR (distance >= 0 AND distance <= {MAX_FINITE})",
            name=op.f(f"ck_{TABLE}_finite_distance"),
        ),
        sa.CheckConstraint(
            f"distance_ratio IS NULL OR (distance_ratio >= 0 AND distance_ratio <= {MAX_FINITE})",
            name=op.f(f"ck_{TABLE}_finite_distance_ratio"),
        ),
        sa.CheckConstraint(
            "eval_status IS NULL OR eval_status IN ('counted', 'clipped', 'refused', 'failed')",
            name=op.f(f"ck_{TABLE}_eval_status"),
        ),
        sa.CheckConstraint(
            "eval_accuracy IS NULL OR (eval_accuracy >= 0 AND eval_accuracy <= 1)",
            name=op.f(f"ck_{TABLE}_eval_accuracy_in_unit"),
        ),
        sa.CheckConstraint(
            f"eval_loss IS NULL OR (eval_loss >= 0 AND eval_loss <= {MAX_FINITE})",
            name=op.f(f"ck_{TABLE}_finite_eval_loss"),
        ),
    )


def downgrade() -> None:
    op.drop_table(TABLE)
