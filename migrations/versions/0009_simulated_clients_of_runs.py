"""Simulated workers belong to their run, not to the client registry.

Revision ID: 0009_simulated_clients_of_runs
Revises: 0008_run_partition
Create Date: 2026-12-02

Every simulated run derives its workers' identities from its run id
(:func:`phalanx.roster.simulated_identity`) and stores one ``clients`` row per
worker, so that events, cases and response times can name a client. Those rows
piled up in the registry of real clients: two runs of one config left twice the
workers on the clients page. ``clients.run_id`` now names the run a simulated
worker belongs to (null for a registered client: the registry is the rows with no
run); the rows go with their run (``ON DELETE CASCADE``).

The upgrade finds the simulated workers already stored by their ids: worker ``w``
of run ``r`` has id ``uuid5(NAMESPACE_URL, "phalanx-sim:r:w")`` (the same
derivation as the roster's, restated here so that the migration never depends on
code that may change), for ``w`` below the run config's
``assignment.num_workers``. A registered client's id is a random UUID (version 4)
and never matches. The downgrade drops the column: the rows stay.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009_simulated_clients_of_runs"
down_revision: str | Sequence[str] | None = "0008_run_partition"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: Client ids updated per statement.
BATCH = 500
#: Workers a stored config may claim; a larger number is not a config this code wrote.
MAX_WORKERS = 1_000_000


def upgrade() -> None:
    with op.batch_alter_table("clients") as batch:
        batch.add_column(sa.Column("run_id", sa.String(36), nullable=True))
        batch.create_foreign_key(
            op.f("fk_clients_run_id_runs"), "runs", ["run_id"], ["id"], ondelete="CASCADE"
        )
    op.create_index(op.f("ix_clients_run_id"), "clients", ["run_id"])
    _mark_simulated_workers()


def downgrade() -> None:
    op.drop_index(op.f("ix_clients_run_id"), "clients")
    with op.batch_alter_table("clients") as batch:
        batch.drop_constraint(op.f("fk_clients_run_id_runs"), type_="foreignkey")
        batch.drop_column("run_id")


def _mark_simulated_workers() -> None:
    connection = op.get_bind()
    runs = sa.table("runs", sa.column("id", sa.String), sa.column("config", sa.JSON))
    clients = sa.table("clients", sa.column("id", sa.String), sa.column("run_id", sa.String))
    for run_id, config in connection.execute(sa.select(runs.c.id, runs.c.config)).all():
        for ids in _batches(_worker_ids(run_id, _num_workers(config))):
            connection.execute(
                sa.update(clients).where(clients.c.id.in_(ids)).values(run_id=run_id)
            )


def _num_workers(config: object) -> int:
    """The run config's ``assignment.num_workers``, or 0 when it has none that fits."""
    assignment = config.get("assignment") if isinstance(config, dict) else None
    count = assignment.get("num_workers") if isinstance(assignment, dict) else None
    if isinstance(count, bool) or not isinstance(count, int):
        return 0
    return count if 0 < count <= MAX_WORKERS else 0


def _worker_ids(run_id: str, num_workers: int) -> Iterator[str]:
    for worker in range(num_workers):
        yield str(uuid.uuid5(uuid.NAMESPACE_URL, f"phalanx-sim:{run_id}:{worker}"))


def _batches(ids: Iterator[str]) -> Iterator[list[str]]:
    batch: list[str] = []
    for client_id in ids:
        batch.append(client_id)
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch
