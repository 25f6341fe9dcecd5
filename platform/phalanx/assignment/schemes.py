"""Every scheme by name: `make_assignment`, `count_files`, and the schemes without a design."""

from __future__ import annotations

import itertools
import math

import numpy as np

from phalanx.assignment.designs import bibd_assignment, bibd_files, mols_assignment, mols_files
from phalanx.assignment.incidence import Assignment
from phalanx.assignment.parameters import (
    MAX_FILES,
    MAX_SUBSET_FILES,
    SCHEMES,
    check_replication,
    check_workers,
    closest,
    either,
)


def make_assignment(
    scheme: str,
    num_workers: int,
    r: int,
    *,
    num_files: int | None = None,
    seed: int | None = None,
) -> Assignment:
    """Build the assignment of ``scheme`` for ``num_workers`` workers and replication ``r``.

    Parameters
    ----------
    scheme : str
        One of :data:`SCHEMES`.
    num_workers : int
        ``K``.
    r : int
        Workers per file.
    num_files : int, optional
        Number of files for ``random`` (default ``K``). The other schemes fix
        their own file count; passing a different one is an error.
    seed : int, optional
        Seed of the ``random`` scheme. The other schemes are deterministic; use
        :func:`relabel` to randomise them.

    Returns
    -------
    Assignment
        The assignment, with ``scheme`` set to the scheme's name.

    Raises
    ------
    ValueError
        For an unknown scheme or parameters the scheme cannot meet; the
        message names the nearest valid choice.
    """
    count_files(scheme, num_workers, r, num_files=num_files)
    if scheme == "random":
        return random_assignment(num_workers, r, num_files=num_files, seed=seed)
    builders = {
        "none": lambda: none_assignment(num_workers),
        "groups": lambda: groups_assignment(num_workers, r),
        "subsets": lambda: subsets_assignment(num_workers, r),
        "bibd": lambda: bibd_assignment(num_workers, r),
        "mols": lambda: mols_assignment(num_workers, r),
    }
    return builders[scheme]()


def count_files(scheme: str, num_workers: int, r: int, *, num_files: int | None = None) -> int:
    """Check a scheme's parameters without building it; return its number of files.

    Cheap for any ``K``: run configs are validated with it before anything starts.

    Raises
    ------
    ValueError
        Exactly as :func:`make_assignment` would, and when the scheme would
        have more than :data:`MAX_FILES` files.
    """
    counters = {
        "none": lambda: _none_files(num_workers, r),
        "groups": lambda: _groups_files(num_workers, r),
        "subsets": lambda: _subsets_files(num_workers, r),
        "bibd": lambda: bibd_files(num_workers, r),
        "mols": lambda: mols_files(num_workers, r),
        "random": lambda: _random_files(num_workers, r, num_files),
    }
    if scheme not in counters:
        raise ValueError(f"unknown assignment scheme {scheme!r}; valid: {', '.join(SCHEMES)}")
    count = counters[scheme]()
    if scheme != "random" and num_files is not None and num_files != count:
        raise ValueError(
            f"scheme {scheme!r} with K={num_workers}, r={r} has {count} files, "
            f"not num_files={num_files}; drop num_files or use scheme 'random'"
        )
    if count > MAX_FILES:
        raise ValueError(
            f"{scheme} with K={num_workers}, r={r} gives {count} files per round, more than "
            f"{MAX_FILES}; use fewer workers, or scheme 'random' with num_files <= {MAX_FILES}"
        )
    return count


def _none_files(num_workers: int, r: int) -> int:
    check_workers("none", num_workers)
    if r != 1:
        raise ValueError(
            f"scheme 'none' has r = 1; got r={r}; use r=1 or a redundant scheme "
            f"({', '.join(s for s in SCHEMES if s != 'none')})"
        )
    return num_workers


def none_assignment(num_workers: int) -> Assignment:
    """No redundancy: ``K`` files, file ``i`` on worker ``i`` (``r = 1``).

    Parameters
    ----------
    num_workers : int
        ``K >= 1``.

    Returns
    -------
    Assignment
    """
    check_workers("none", num_workers)
    return Assignment(num_workers, tuple((w,) for w in range(num_workers)), "none")


def groups_assignment(num_workers: int, r: int) -> Assignment:
    """DETOX / G-CADA: ``K / r`` disjoint groups of ``r`` workers, one file per group.

    Group ``g`` is workers ``g r .. g r + r - 1`` and computes file ``g``.

    Parameters
    ----------
    num_workers : int
        ``K``, a multiple of ``r``.
    r : int
        Group size, ``1 <= r <= K``.

    Returns
    -------
    Assignment
        ``K / r`` files, one per worker.
    """
    _groups_files(num_workers, r)
    files = tuple(tuple(range(g * r, g * r + r)) for g in range(num_workers // r))
    return Assignment(num_workers, files, "groups")


def _groups_files(num_workers: int, r: int) -> int:
    check_replication("groups", num_workers, r)
    if num_workers % r:
        lower = num_workers // r * r
        candidates = [k for k in (lower, lower + r) if k >= r]
        divisor = min(
            (d for d in range(1, num_workers + 1) if num_workers % d == 0),
            key=lambda d: (abs(d - r), d),
        )
        raise ValueError(
            f"groups needs K to be a multiple of r; K={num_workers}, r={r} is not; "
            f"nearest valid K: {either(closest(candidates, num_workers))} "
            f"(or keep K={num_workers} with r={divisor})"
        )
    return num_workers // r


def subsets_assignment(num_workers: int, r: int) -> Assignment:
    """Aspis: one file per ``r``-subset of the ``K`` workers.

    Files follow :func:`itertools.combinations` order. Each worker holds
    ``C(K-1, r-1)`` files and each pair of workers shares ``C(K-2, r-2)``.

    Parameters
    ----------
    num_workers : int
        ``K``.
    r : int
        Subset size, ``1 <= r <= K``.

    Returns
    -------
    Assignment
        ``C(K, r)`` files.

    Raises
    ------
    ValueError
        If ``C(K, r)`` exceeds :data:`MAX_SUBSET_FILES`.
    """
    _subsets_files(num_workers, r)
    files = tuple(itertools.combinations(range(num_workers), r))
    return Assignment(num_workers, files, "subsets")


def _subsets_files(num_workers: int, r: int) -> int:
    check_replication("subsets", num_workers, r)
    count = math.comb(num_workers, r)
    if count > MAX_SUBSET_FILES:
        raise ValueError(
            f"subsets with K={num_workers}, r={r} gives C(K, r) = {count} files, "
            f"more than {MAX_SUBSET_FILES}; use bibd, mols or random for this many workers"
        )
    return count


def random_assignment(
    num_workers: int, r: int, num_files: int | None = None, seed: int | None = None
) -> Assignment:
    """Random ``r``-regular design: each file on ``r`` distinct workers, balanced load.

    The ``num_files * r`` slots are filled by consecutive random permutations
    of the workers, cut into files of ``r``; a file that straddles two
    permutations and repeats a worker swaps the repeat with a later entry of
    the second permutation. Every permutation stays a permutation, so worker
    loads differ by at most one. Work and memory are ``O(num_files r + K)``.

    Parameters
    ----------
    num_workers : int
        ``K``.
    r : int
        Workers per file, ``1 <= r <= K``.
    num_files : int, optional
        Number of files, default ``K`` (so each worker holds ``r`` files).
    seed : int, optional
        Seed of the numpy Generator; the same seed gives the same assignment.

    Returns
    -------
    Assignment
    """
    files_count = _random_files(num_workers, r, num_files)
    rng = np.random.default_rng(seed)
    slots = files_count * r
    num_perms = -(-slots // num_workers)
    perms = rng.permuted(np.tile(np.arange(num_workers), (num_perms, 1)), axis=1)
    for j in range(1, num_perms):
        start = j * num_workers
        tail_len = start % r  # entries of permutation j - 1 in the straddling file
        if tail_len == 0:
            continue
        head_len = r - tail_len
        tail = perms[j - 1, num_workers - tail_len :]
        repeats = np.flatnonzero(np.isin(perms[j, :head_len], tail))
        if repeats.size:
            free = head_len + np.flatnonzero(~np.isin(perms[j, head_len:], tail))
            # K - r + len(repeats) entries are free, so there are always enough.
            chosen = free[: repeats.size]
            perms[j, repeats], perms[j, chosen] = perms[j, chosen], perms[j, repeats].copy()
    table = np.sort(perms.reshape(-1)[:slots].reshape(files_count, r), axis=1)
    files = tuple(tuple(row) for row in table.tolist())
    return Assignment(num_workers, files, "random")


def _random_files(num_workers: int, r: int, num_files: int | None) -> int:
    check_replication("random", num_workers, r)
    files_count = num_workers if num_files is None else num_files
    if files_count < 1:
        raise ValueError(f"random needs num_files >= 1; got {files_count}; nearest valid: 1")
    if files_count > MAX_FILES:
        raise ValueError(
            f"random with num_files={files_count} has more than {MAX_FILES} files per round; "
            f"nearest valid: num_files={MAX_FILES}"
        )
    return files_count
