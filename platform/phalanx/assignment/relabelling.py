"""Fresh worker labels every round: `relabel` and the round's seed."""

from __future__ import annotations

import hashlib

import numpy as np

from phalanx.assignment.incidence import Assignment


def relabel(assignment: Assignment, seed: int) -> Assignment:
    """Rename workers by a random permutation drawn from ``seed``.

    Files keep their indices; worker ``w`` becomes ``perm[w]``. For a fresh
    labelling each round use ``relabel(a, seed=round_seed(run_seed, round))``.

    Parameters
    ----------
    assignment : Assignment
        The assignment to relabel.
    seed : int
        Non-negative seed of the numpy Generator.

    Returns
    -------
    Assignment
        Same scheme, same structure, new worker labels.
    """
    perm = np.random.default_rng(seed).permutation(assignment.num_workers).tolist()
    files = tuple(tuple(sorted(perm[w] for w in workers)) for workers in assignment.files)
    return Assignment(assignment.num_workers, files, assignment.scheme)


def round_seed(run_seed: int, round: int) -> int:
    """Seed of one round, a stable hash of the run seed and the round number.

    Parameters
    ----------
    run_seed : int
        The run's seed (any integer).
    round : int
        The round number.

    Returns
    -------
    int
        A 64-bit non-negative integer, identical across platforms and versions.
    """
    digest = hashlib.blake2b(f"phalanx/round/{run_seed}/{round}".encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "big")
