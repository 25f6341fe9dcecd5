"""Distortion plans: which files each adversary distorts (the Aspis attack modes)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Literal

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
from phalanx.attacks.selection import majority_files


def _check_adversaries(assignment: Assignment, adversaries: Collection[int]) -> frozenset[int]:
    chosen = frozenset(adversaries)
    outside = sorted(w for w in chosen if not 0 <= w < assignment.num_workers)
    if outside:
        raise ValueError(f"adversaries {outside} are outside 0..{assignment.num_workers - 1}")
    return chosen


def disagreement_targets(
    assignment: Assignment,
    adversaries: Collection[int],
    *,
    seed: int = 0,
    exact_limit: int = EXACT_SEARCH_LIMIT,
) -> frozenset[int]:
    """Choose the fixed set ``T`` of honest workers that ``fixed_disagreement`` targets.

    ``T`` holds ``min(q, K - q)`` honest workers chosen to maximise the number
    of distorted files, i.e. files with at least one adversary whose honest
    replicas all lie in ``T`` (see :func:`distortion_plan`). The search is
    that of :func:`select_adversaries` (exhaustive up to ``exact_limit``
    candidate sets); ties go to the first set in a seed-shuffled order.

    Parameters
    ----------
    assignment : Assignment
        Which workers compute which file.
    adversaries : collection of int
        The adversarial workers.
    seed : int
        Seed for the tie-break order.
    exact_limit : int
        Largest number of candidate sets searched exhaustively.

    Returns
    -------
    frozenset of int
        The targeted honest workers.
    """
    adv = _check_adversaries(assignment, adversaries)
    honest = [w for w in range(assignment.num_workers) if w not in adv]
    size = min(len(adv), len(honest))
    adv_counts = count(assignment, adv)
    touched = adv_counts > 0
    honest_replicas = replication(assignment) - adv_counts

    def key(counts: IntArray) -> IntArray:
        distorted = (touched & (counts == honest_replicas)).sum(axis=1)
        covered = (counts * touched).sum(axis=1)
        return lexicographic(distorted, covered, int(honest_replicas.sum()))

    incidence = replicas_per_worker(assignment)
    return best_subset(honest, size, incidence, key, seed=seed, exact_limit=exact_limit)


def distortion_plan(
    assignment: Assignment,
    adversaries: Collection[int],
    *,
    strategy: Literal["all", "only_majorities", "fixed_disagreement"],
    seed: int = 0,
    targets: Collection[int] | None = None,
) -> dict[int, frozenset[int]]:
    """For each adversary, the files it sends a malicious value for (Aspis attack modes).

    Parameters
    ----------
    assignment : Assignment
        Which workers compute which file.
    adversaries : collection of int
        The adversarial workers ``A`` (``q = |A|``).
    strategy : {"all", "only_majorities", "fixed_disagreement"}
        ``all`` (Aspis' weak attack): every adversary distorts every file it
        computes. ``only_majorities``: only the files of
        :func:`majority_files`. ``fixed_disagreement``: fix a set ``T`` of
        honest workers (``targets``, or :func:`disagreement_targets`); a file is
        distorted, by every adversary on it, exactly when it has at least one
        adversarial replica and all of its honest replicas lie in ``T``.
        Adversaries then disagree only with workers of ``T`` and agree with
        each other and with every honest worker outside ``T``, so ``A`` plus
        the ``K - 2q`` honest workers outside ``T`` form a clique as large as
        the honest one.
    seed : int
        Tie-break seed for :func:`disagreement_targets`.
    targets : collection of int, optional
        ``T`` for ``fixed_disagreement``; honest workers only.

    Returns
    -------
    dict of int to frozenset of int
        Adversary -> files it distorts. Every adversary is a key.
    """
    adv = _check_adversaries(assignment, adversaries)
    if strategy == "all":
        distorted = frozenset(range(assignment.num_files))
    elif strategy == "only_majorities":
        distorted = majority_files(assignment, adv)
    elif strategy == "fixed_disagreement":
        if targets is None:
            fixed = disagreement_targets(assignment, adv, seed=seed)
        else:
            fixed = _check_adversaries(assignment, targets)
            if fixed & adv:
                raise ValueError(f"targets must be honest, got adversaries {sorted(fixed & adv)}")
        distorted = frozenset(
            f
            for f, workers in enumerate(assignment.files)
            if any(w in adv for w in workers) and all(w in adv or w in fixed for w in workers)
        )
    else:
        raise ValueError(
            f"strategy must be 'all', 'only_majorities' or 'fixed_disagreement', got {strategy!r}"
        )
    return {a: frozenset(assignment.files_of(a)) & distorted for a in sorted(adv)}
