"""Adversary selection: which ``q`` of the ``K`` workers are adversarial, weak or strong."""

from __future__ import annotations

from collections.abc import Collection
from typing import Literal

import numpy as np

from phalanx.assignment import Assignment
from phalanx.attacks.search import (
    EXACT_SEARCH_LIMIT,
    IntArray,
    best_subset,
    count,
    lexicographic,
    replicas_per_worker,
    replication,
)


def majority_files(assignment: Assignment, adversaries: Collection[int]) -> frozenset[int]:
    """Files on which ``adversaries`` hold a strict majority of the replicas.

    Parameters
    ----------
    assignment : Assignment
        Which workers compute which file.
    adversaries : collection of int
        The adversarial workers.

    Returns
    -------
    frozenset of int
        Files ``f`` with more than ``len(assignment.workers_of(f)) / 2``
        adversarial replicas; a majority vote accepts the adversaries' value.
    """
    counts = count(assignment, adversaries)
    return frozenset(np.flatnonzero(2 * counts > replication(assignment)).tolist())


def select_adversaries(
    assignment: Assignment,
    q: int,
    *,
    mode: Literal["weak", "strong"],
    seed: int = 0,
    exact_limit: int = EXACT_SEARCH_LIMIT,
) -> frozenset[int]:
    """Choose which ``q`` of the ``K`` workers are adversarial.

    Parameters
    ----------
    assignment : Assignment
        Which workers compute which file.
    q : int
        Number of adversaries, ``0 <= q <= K``.
    mode : {"weak", "strong"}
        ``weak``: ``q`` workers uniformly at random. ``strong``: the omniscient
        worst case of ByzShield ("max distortion"): the ``q`` workers that own
        the most file majorities (see :func:`majority_files`). Exhaustive over
        all ``C(K, q)`` sets when that is at most ``exact_limit``, otherwise
        greedy followed by single-swap local search. Ties go to the set with
        more adversarial replicas short of a majority, then to the first set
        in a seed-shuffled worker order.
    seed : int
        Seed for the random choice and the tie-break order.
    exact_limit : int
        Largest ``C(K, q)`` searched exhaustively.

    Returns
    -------
    frozenset of int
        The adversarial workers.
    """
    K = assignment.num_workers
    if not 0 <= q <= K:
        raise ValueError(f"q must be in 0..{K}, got {q}")
    if mode == "weak":
        chosen = np.random.default_rng(seed).choice(K, size=q, replace=False)
        return frozenset(int(w) for w in chosen)
    if mode != "strong":
        raise ValueError(f"mode must be 'weak' or 'strong', got {mode!r}")
    r = replication(assignment)
    need = r // 2 + 1

    def key(counts: IntArray) -> IntArray:
        majorities = (counts >= need).sum(axis=1)
        partial = np.minimum(counts, need).sum(axis=1)
        return lexicographic(majorities, partial, int(need.sum()))

    incidence = replicas_per_worker(assignment)
    return best_subset(range(K), q, incidence, key, seed=seed, exact_limit=exact_limit)
