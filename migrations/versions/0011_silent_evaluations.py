"""A client asked to evaluate that never answered is recorded as silent.

Revision ID: 0011_silent_evaluations
Revises: 0010_client_rounds
Create Date: 2026-12-03

A client of a local-data run that was asked for a federated evaluation and sent
neither a report nor a failure before the exchange closed had no status: the
run page showed it as never asked. The CHECK on ``client_rounds.eval_status``
admits ``silent`` beside ``counted``, ``clipped``, ``refused`` and ``failed``.
Downgrading first turns silent rows into rows without a status, the nearest
value the older schema allows.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011_silent_evaluations"
down_revision: str | Sequence[str] | None = "0010_client_rounds"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = "ck_client_rounds_eval_status"


def _allow(values: Sequence[str]) -> None:
    allowed = ", ".join(f"'{value}'" for value in values)
    with op.batch_alter_table("client_rounds") as batch:
        batch.drop_constraint(op.f(NAME), type_="check")
        batch.create_check_constraint(
            op.f(NAME), sa.text(f"eval_status IS NULL OR eval_status IN ({allowed})")
        )


def upgrade() -> None:
    _allow(["counted", "clipped", "refused", "failed", "silent"])


def downgrade() -> None:
    op.execute("UPDATE client_rounds SET eval_status = NULL WHERE eval_status = 'silent'")
    _allow(["counted", "clipped", "refused", "failed"])
