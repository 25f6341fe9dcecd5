"""The search for the ``k`` workers whose per-file counts maximise a key, exact or greedy."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Collection

import numpy as np
import numpy.typing as npt

from phalanx.assignment import Assignment

EXACT_SEARCH_LIMIT = 20_000
"""Largest number of candidate sets that the strong adversary searches exhaustively."""

IntArray = npt.NDArray[np.int64]
_Key = Callable[[IntArray], IntArray]


def replicas_per_worker(assignment: Assignment) -> IntArray:
    """``(K, F)`` incidence: 1 where the worker computes the file."""
    incidence = np.zeros((assignment.num_workers, assignment.num_files), dtype=np.int64)
    for f, workers in enumerate(assignment.files):
        incidence[list(workers), f] = 1
    return incidence


def replication(assignment: Assignment) -> IntArray:
    """Per file, how many workers compute it (its ``r``)."""
    return np.array([len(w) for w in assignment.files], dtype=np.int64)


def count(assignment: Assignment, workers: Collection[int]) -> IntArray:
    """Per file, how many of ``workers`` compute it."""
    chosen = set(workers)
    return np.array([sum(w in chosen for w in ws) for ws in assignment.files], dtype=np.int64)


def _exact_best(pool: IntArray, k: int, incidence: IntArray, key: _Key) -> list[int]:
    best_key, best = -1, list(range(k))
    combos = itertools.combinations(range(len(pool)), k)
    while chunk := list(itertools.islice(combos, 2048)):
        members = pool[np.array(chunk, dtype=np.int64)]
        counts = incidence[members[:, 0]]
        for j in range(1, k):
            counts = counts + incidence[members[:, j]]
        keys = key(counts)
        i = int(np.argmax(keys))
        if keys[i] > best_key:
            best_key, best = int(keys[i]), list(chunk[i])
    return best


def _greedy_best(pool: IntArray, k: int, incidence: IntArray, key: _Key) -> list[int]:
    rows = incidence[pool]
    chosen: list[int] = []
    counts = np.zeros(incidence.shape[1], dtype=np.int64)
    for _ in range(k):
        free = np.setdiff1d(np.arange(len(pool)), chosen)
        i = int(np.argmax(key(counts + rows[free])))
        chosen.append(int(free[i]))
        counts = counts + rows[free[i]]
    current = int(key(counts[None, :])[0])
    while True:  # best-improvement single swaps until none helps; the key strictly rises
        free = np.setdiff1d(np.arange(len(pool)), chosen)
        move: tuple[int, int] | None = None
        for slot, pos in enumerate(chosen if len(free) else []):
            keys = key(counts - rows[pos] + rows[free])
            j = int(np.argmax(keys))
            if keys[j] > current:
                current, move = int(keys[j]), (slot, int(free[j]))
        if move is None:
            return chosen
        slot, pos = move
        counts = counts - rows[chosen[slot]] + rows[pos]
        chosen[slot] = pos


def best_subset(
    candidates: Collection[int],
    k: int,
    incidence: IntArray,
    key: _Key,
    *,
    seed: int,
    exact_limit: int,
) -> frozenset[int]:
    """Return the ``k`` candidates with the largest ``key`` of their per-file counts.

    Exhaustive when ``C(len(candidates), k) <= exact_limit``, else greedy plus
    single swaps. Ties go to the first set in a seed-shuffled candidate order.
    """
    rng = np.random.default_rng(seed)
    pool = rng.permutation(np.array(sorted(candidates), dtype=np.int64))
    if k == 0:
        return frozenset()
    search = _exact_best if math.comb(len(pool), k) <= exact_limit else _greedy_best
    return frozenset(int(pool[p]) for p in search(pool, k, incidence, key))


def lexicographic(primary: IntArray, secondary: IntArray, bound: int) -> IntArray:
    """One key that orders by ``primary``, then by ``secondary`` (at most ``bound``)."""
    return primary * (bound + 1) + secondary
