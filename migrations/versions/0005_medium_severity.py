"""Detection events may be of medium severity.

Revision ID: 0005_medium_severity
Revises: 0004_round_agreement
Create Date: 2026-12-28

A round whose largest agreeing groups tie records a ``tied_groups`` notice that
names its suspects (:mod:`phalanx.event_kinds`): stronger than a distance-only
hint, weaker than a flag. The CHECK on ``detection_events.severity`` admits
``medium`` beside ``high`` and ``low``. Downgrading first turns medium events
into low ones, the nearest value the older schema allows.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005_medium_severity"
down_revision: str | Sequence[str] | None = "0004_round_agreement"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = "ck_detection_events_severity"


def _allow(values: Sequence[str]) -> None:
    allowed = ", ".join(f"'{value}'" for value in values)
    with op.batch_alter_table("detection_events") as batch:
        batch.drop_constraint(op.f(NAME), type_="check")
        batch.create_check_constraint(op.f(NAME), sa.text(f"severity IN ({allowed})"))


def upgrade() -> None:
    _allow(["high", "medium", "low"])


def downgrade() -> None:
    op.execute("UPDATE detection_events SET severity = 'low' WHERE severity = 'medium'")
    _allow(["high", "low"])
