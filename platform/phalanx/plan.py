"""The deterministic plan of a round, which the coordinator and every worker derive alike."""

from __future__ import annotations

from torch import Tensor

from phalanx.assignment import Assignment, make_assignment, relabel, round_seed
from phalanx.attacks import select_adversaries
from phalanx.config import RunConfig
from phalanx.data import round_batch, split_files


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


def adversaries(config: RunConfig) -> frozenset[int]:
    """Return the simulated adversaries of a run (ground truth, known only in simulation)."""
    spec = config.attack
    if spec.q == 0 or spec.name is None:
        return frozenset()
    return select_adversaries(
        base_assignment(config), spec.q, mode=spec.selection, seed=config.seed
    )
