"""The deterministic plan of a round, which the coordinator derives once per round.

A worker never rebuilds it: its task names its files and their sample indices
(:func:`round_samples`, :func:`task_samples`). The simulated red team, which knows
the plan by definition, is the one party besides the coordinator that derives it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from torch import Tensor

from phalanx.assignment import Assignment, make_assignment, relabel, round_seed
from phalanx.attacks import select_adversaries
from phalanx.config import RunConfig
from phalanx.data import round_batch, split_files
from phalanx.replies import Task


def base_assignment(config: RunConfig) -> Assignment:
    """Build the run's assignment before any per-round relabelling.

    Raises
    ------
    ValueError
        When the scheme cannot be built from the configured parameters.
    """
    a = config.assignment
    return make_assignment(a.scheme, a.num_workers, a.r, num_files=a.num_files, seed=config.seed)


def round_assignment(config: RunConfig, round: int, base: Assignment | None = None) -> Assignment:
    """Return the assignment used in ``round`` (relabelled per round when configured)."""
    assignment = base if base is not None else base_assignment(config)
    if config.assignment.relabel:
        return relabel(assignment, seed=round_seed(config.seed, round))
    return assignment


def file_samples(config: RunConfig, num_train: int, round: int, num_files: int) -> list[Tensor]:
    """Return the indices of the training samples of each file in ``round``."""
    batch = round_batch(
        num_train, config.data.samples_per_file * num_files, seed=config.seed, round=round
    )
    return split_files(batch, num_files)


def file_bounds(batch_size: int, num_files: int) -> list[tuple[int, int]]:
    """Return each file's ``[start, stop)`` in the round's batch, as :func:`split_files` cuts it.

    Sizes differ by at most one; the first ``batch_size % num_files`` files hold the
    extra sample (``torch.tensor_split``'s rule).

    Raises
    ------
    ValueError
        Unless ``1 <= num_files <= batch_size``.
    """
    if not 1 <= num_files <= batch_size:
        raise ValueError(f"num_files must be in 1..{batch_size}, got {num_files}")
    size, extra = divmod(batch_size, num_files)
    return [
        (f * size + min(f, extra), (f + 1) * size + min(f + 1, extra)) for f in range(num_files)
    ]


def round_samples(
    config: RunConfig, num_train: int, round: int, num_files: int
) -> list[tuple[int, ...]]:
    """Return each file's sample indices in ``round`` as plain ints (the coordinator's plan).

    The same indices as :func:`file_samples`, drawn once per round; a task carries its
    files' share (:func:`task_samples`).
    """
    batch = round_batch(
        num_train, config.data.samples_per_file * num_files, seed=config.seed, round=round
    ).tolist()
    return [tuple(batch[start:stop]) for start, stop in file_bounds(len(batch), num_files)]


def task_samples(
    samples: Sequence[tuple[int, ...]], files: Sequence[int]
) -> tuple[tuple[int, ...], ...]:
    """Return the sample indices of ``files`` out of a round's :func:`round_samples`."""
    return tuple(samples[f] for f in files)


def assigned_tasks(
    run_id: str,
    round: int,
    nonce: str,
    assignment: Assignment,
    samples: Sequence[tuple[int, ...]],
    workers: Iterable[int],
) -> dict[int, Task]:
    """Return the task of each of ``workers``: its files and their samples (assigned data).

    ``samples`` is the round's :func:`round_samples`; each task takes its own files'
    share, so a worker learns its part of the plan from its task alone.
    """
    tasks = {}
    for w in workers:
        files = assignment.files_of(w)
        tasks[w] = Task(run_id, round, nonce, w, files, samples=task_samples(samples, files))
    return tasks


def adversaries(config: RunConfig) -> frozenset[int]:
    """Return the simulated adversaries of a run (ground truth, known only in simulation)."""
    spec = config.attack
    if spec.q == 0 or spec.name is None:
        return frozenset()
    return select_adversaries(
        base_assignment(config), spec.q, mode=spec.selection, seed=config.seed
    )
