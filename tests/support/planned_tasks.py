"""A worker's task as the coordinator plans it: its files and samples, or its model's shape."""

from __future__ import annotations

from phalanx.config import RunConfig
from phalanx.data_mode import ModelShape
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


def local_task(
    config: RunConfig,
    round: int,
    worker: int,
    shape: ModelShape,
    *,
    run_id: str = "run",
    nonce: str = "nonce",
) -> Task:
    """Worker ``worker``'s local-data task in ``round``: its one file and the model's shape."""
    files = round_assignment(config, round).files_of(worker)
    return Task(run_id, round, nonce, worker, files, model_shape=shape)
