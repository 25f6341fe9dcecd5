"""Indexes for two filters of the event listing: a run's events by review status, and severity.

Revision ID: 0002_event_indexes
Revises: 0001
Create Date: 2026-12-06

``(run_id, review_status, id)`` serves a run's review queue (its open events,
newest first, and their count) once most of the run's events are reviewed;
``(run_id, id)`` alone would read every event of the run to find the few open
ones. ``(severity, id)`` serves the severity filter, which otherwise scans the
whole table when low-severity events are rare.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0002_event_indexes"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEXES = (
    ["run_id", "review_status", "id"],
    ["severity", "id"],
)


def _name(columns: list[str]) -> str:
    return "ix_detection_events_" + "_".join(columns)


def upgrade() -> None:
    for columns in INDEXES:
        op.create_index(op.f(_name(columns)), "detection_events", columns)


def downgrade() -> None:
    for columns in reversed(INDEXES):
        op.drop_index(op.f(_name(columns)), table_name="detection_events")
