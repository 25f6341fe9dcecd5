"""A run on local data stores its partition's report.

Revision ID: 0008_run_partition
Revises: 0007_detection_cases
Create Date: 2026-12-02

``run_partitions`` holds one row per simulated local-data run
(``data.mode = "local"``): the report of how it divided its training split among
its clients (:class:`phalanx.partitions.PartitionReport`: the kind and its
parameters, each client's sample count and label histogram, the label totals,
the samples no client holds), written before the run's first round and never
changed. A table of its own rather than a column of ``runs``: listings of runs
never read it, only a run's detail does, and the rows of ``runs`` keep their
shape. JSON like the other JSON columns, bounded by the report itself
(histograms only up to 100,000 cells). Runs on assigned data, and runs
recorded before this revision, have no row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0008_run_partition"
down_revision: str | Sequence[str] | None = "0007_detection_cases"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "run_partitions"


def json_type() -> sa.types.TypeEngine[Any]:
    return sa.JSON(none_as_null=True).with_variant(
        postgresql.JSONB(none_as_null=True), "postgresql"
    )


def upgrade() -> None:
    op.create_table(
        TABLE,
        sa.Column("run_id", sa.String(36), nullable=False),
        sa.Column("report", json_type(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f(f"fk_{TABLE}_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", name=op.f(f"pk_{TABLE}")),
    )


def downgrade() -> None:
    op.drop_table(TABLE)
