"""Each round stores its agreement graph.

Revision ID: 0004_round_agreement
Revises: 0003_registration_sessions
Create Date: 2026-12-20

``rounds`` gains ``agreement``: the record of the round's agreement graph
(:mod:`phalanx.agreement_record`: the workers that replied, the conflict edges
with their files, degrees, the maximum cliques, the rule), so that the dashboard
draws a round without rebuilding it from detection events. JSON like the other
JSON columns, and nullable: rounds recorded before this revision have none, and
nothing can rebuild it for them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004_round_agreement"
down_revision: str | Sequence[str] | None = "0003_registration_sessions"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def json_type() -> sa.types.TypeEngine[Any]:
    return sa.JSON(none_as_null=True).with_variant(
        postgresql.JSONB(none_as_null=True), "postgresql"
    )


def upgrade() -> None:
    with op.batch_alter_table("rounds") as batch:
        batch.add_column(sa.Column("agreement", json_type(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("rounds") as batch:
        batch.drop_column("agreement")
