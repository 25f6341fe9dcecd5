"""A worker's task as the coordinator plans it: its files and their samples."""

from __future__ import annotations

from phalanx.config import RunConfig
from phalanx.plan import round_assignment, round_samples, task_samples
from phalanx.replies import Task


def planned_task(
    config: RunConfig,
    num_train: int,
    round: int,
    worker: int,
    *,
    run_id: str = "run",
    nonce: str = "nonce",
) -> Task:
    """Worker ``worker``'s task in ``round``, with its files' sample indices."""
    assignment = round_assignment(config, round)
    files = assignment.files_of(worker)
    samples = round_samples(config, num_train, round, assignment.num_files)
    return Task(run_id, round, nonce, worker, files, samples=task_samples(samples, files))
