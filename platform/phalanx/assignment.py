"""Redundant assignment: which worker computes which file.

The data type lives here; the schemes (``none``, ``groups``, ``subsets``,
``bibd``, ``mols``, ``random``) are built by functions in this module.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np


@dataclass(frozen=True)
class Assignment:
    """Files and the workers that compute them.

    Parameters
    ----------
    num_workers : int
        ``K``; workers are ``0 .. K - 1``.
    files : tuple of tuple of int
        ``files[f]`` is the sorted tuple of distinct workers assigned file ``f``.
    scheme : str
        Name of the scheme that produced it.
    """

    num_workers: int
    files: tuple[tuple[int, ...], ...]
    scheme: str = "custom"
    _by_worker: tuple[tuple[int, ...], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_worker: list[list[int]] = [[] for _ in range(self.num_workers)]
        for f, workers in enumerate(self.files):
            if len(set(workers)) != len(workers):
                raise ValueError(f"file {f} lists a worker twice: {workers}")
            for w in workers:
                if not 0 <= w < self.num_workers:
                    raise ValueError(
                        f"file {f} names worker {w}, outside 0..{self.num_workers - 1}"
                    )
                by_worker[w].append(f)
        object.__setattr__(self, "_by_worker", tuple(tuple(fs) for fs in by_worker))

    @property
    def num_files(self) -> int:
        """Number of files."""
        return len(self.files)

    @cached_property
    def replication(self) -> int:
        """``r``: the largest number of workers on one file."""
        return max((len(w) for w in self.files), default=0)

    def workers_of(self, file: int) -> tuple[int, ...]:
        """Workers assigned ``file``."""
        return self.files[file]

    def files_of(self, worker: int) -> tuple[int, ...]:
        """Files assigned to ``worker``, in increasing order."""
        return self._by_worker[worker]

    def shared_files(self, a: int, b: int) -> tuple[int, ...]:
        """Files that workers ``a`` and ``b`` both compute."""
        fb = set(self._by_worker[b])
        return tuple(f for f in self._by_worker[a] if f in fb)

    @property
    def worker_loads(self) -> tuple[int, ...]:
        """Number of files each worker computes, indexed by worker."""
        return tuple(len(fs) for fs in self._by_worker)

    def summary(self) -> dict[str, str | int]:
        """Small JSON-safe description, as stored with each round.

        Returns
        -------
        dict
            ``scheme``, ``num_workers``, ``replication``, ``num_files`` and
            ``files_per_worker_min`` / ``files_per_worker_max``.
        """
        loads = self.worker_loads
        return {
            "scheme": self.scheme,
            "num_workers": self.num_workers,
            "replication": self.replication,
            "num_files": self.num_files,
            "files_per_worker_min": min(loads, default=0),
            "files_per_worker_max": max(loads, default=0),
        }


SCHEMES: tuple[str, ...] = ("none", "groups", "subsets", "bibd", "mols", "random")

# C(K, r) grows fast (C(100, 5) is 75 million); past this many files the subsets
# scheme is refused with a pointer to bibd, mols or random instead.
MAX_FILES = 1_000_000
"""Most files a round may have, whatever the scheme."""
MAX_SUBSET_FILES = MAX_FILES


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
        "bibd": lambda: _bibd_files(num_workers, r),
        "mols": lambda: _mols_files(num_workers, r),
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
    _check_workers("none", num_workers)
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
    _check_workers("none", num_workers)
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
    _check_replication("groups", num_workers, r)
    if num_workers % r:
        lower = num_workers // r * r
        candidates = [k for k in (lower, lower + r) if k >= r]
        divisor = min(
            (d for d in range(1, num_workers + 1) if num_workers % d == 0),
            key=lambda d: (abs(d - r), d),
        )
        raise ValueError(
            f"groups needs K to be a multiple of r; K={num_workers}, r={r} is not; "
            f"nearest valid K: {_either(_nearest(candidates, num_workers))} "
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
    _check_replication("subsets", num_workers, r)
    count = math.comb(num_workers, r)
    if count > MAX_SUBSET_FILES:
        raise ValueError(
            f"subsets with K={num_workers}, r={r} gives C(K, r) = {count} files, "
            f"more than {MAX_SUBSET_FILES}; use bibd, mols or random for this many workers"
        )
    return count


def bibd_assignment(num_workers: int, r: int = 3) -> Assignment:
    """Aspis+: a Steiner triple system STS(K) as the assignment.

    Every pair of workers shares exactly one file; there are ``K (K-1) / 6``
    files and each worker holds ``(K-1) / 2``. Built by the Bose construction
    for ``K ≡ 3 (mod 6)`` and the Skolem construction for ``K ≡ 1 (mod 6)``
    (Lindner & Rodger, *Design Theory*, ch. 1).

    Parameters
    ----------
    num_workers : int
        ``K ≡ 1 or 3 (mod 6)``, ``K >= 3``.
    r : int
        Must be 3 (a triple system).

    Returns
    -------
    Assignment
        Files in lexicographic order of their worker triples.
    """
    _bibd_files(num_workers, r)
    build = _bose_triples if num_workers % 6 == 3 else _skolem_triples
    triples = build(num_workers)
    files = tuple(sorted(tuple(sorted(t)) for t in triples))
    return Assignment(num_workers, files, "bibd")


def _bibd_files(num_workers: int, r: int) -> int:
    if r != 3:
        raise ValueError(f"bibd builds Steiner triple systems, so r must be 3; got r={r}")
    _check_workers("bibd", num_workers)
    if num_workers < 3:
        raise ValueError(
            f"bibd needs K ≡ 1 or 3 (mod 6) with K >= 3; K={num_workers} has no triples; "
            "nearest valid: 3 or 7"
        )
    if num_workers % 6 not in (1, 3):
        admissible = [k for k in range(num_workers - 5, num_workers + 6) if k % 6 in (1, 3)]
        raise ValueError(
            f"bibd needs K ≡ 1 or 3 (mod 6); K={num_workers} is not; "
            f"nearest valid: {_either(_nearest([k for k in admissible if k >= 3], num_workers))}"
        )
    return num_workers * (num_workers - 1) // 6


def _bose_triples(num_workers: int) -> list[tuple[int, int, int]]:
    """Bose construction of STS(6n + 3) on points ``(x, i) -> i m + x``, ``m = 2n + 1``."""
    m = num_workers // 3
    half = (m + 1) // 2  # the inverse of 2 modulo the odd m

    def op(a: int, b: int) -> int:
        # Idempotent commutative quasigroup on Z_m: a o b = (a + b) / 2.
        return (a + b) * half % m

    triples = [(x, m + x, 2 * m + x) for x in range(m)]
    for i in range(3):
        nxt = (i + 1) % 3
        for x, y in itertools.combinations(range(m), 2):
            triples.append((i * m + x, i * m + y, nxt * m + op(x, y)))
    return triples


def _skolem_triples(num_workers: int) -> list[tuple[int, int, int]]:
    """Skolem construction of STS(6n + 1) on ``(x, i) -> i m + x``, ``m = 2n``, ``∞ = 6n``."""
    n = num_workers // 6
    m = 2 * n
    infinity = num_workers - 1

    def op(a: int, b: int) -> int:
        # Half-idempotent commutative quasigroup on Z_2n: the addition table of
        # Z_2n with symbol 2k renamed k and 2k + 1 renamed n + k.
        s = (a + b) % m
        return s // 2 + (n if s % 2 else 0)

    triples = [(x, m + x, 2 * m + x) for x in range(n)]
    for i in range(3):
        nxt = (i + 1) % 3
        triples.extend((infinity, i * m + x + n, nxt * m + x) for x in range(n))
        for x, y in itertools.combinations(range(m), 2):
            triples.append((i * m + x, i * m + y, nxt * m + op(x, y)))
    return triples


def mols_assignment(num_workers: int, r: int) -> Assignment:
    """ByzShield: ``r`` mutually orthogonal Latin squares of prime order ``l = K / r``.

    Square ``i`` (``i = 1 .. r``) is ``L_i(x, y) = (i x + y) mod l``. File
    ``(x, y)`` (index ``x l + y``) goes to worker ``(i - 1) l + L_i(x, y)`` of
    each square ``i``. Each worker holds ``l`` files; two workers of the same
    square share none and two of different squares share exactly one.

    Parameters
    ----------
    num_workers : int
        ``K = r l`` with ``l`` a prime ``>= r + 1``.
    r : int
        Number of squares, the workers per file.

    Returns
    -------
    Assignment
        ``l²`` files.
    """
    order = math.isqrt(_mols_files(num_workers, r))
    files = tuple(
        tuple((i - 1) * order + (i * x + y) % order for i in range(1, r + 1))
        for x in range(order)
        for y in range(order)
    )
    return Assignment(num_workers, files, "mols")


def _mols_files(num_workers: int, r: int) -> int:
    _check_replication("mols", num_workers, r)
    order = num_workers // r
    if num_workers % r or order < r + 1 or not _is_prime(order):
        raise ValueError(_mols_error(num_workers, r))
    return order * order


def _mols_error(num_workers: int, r: int) -> str:
    valid = [r * p for p in _primes_between(r + 1, max(num_workers // r, r + 1) * 2 + 2)]
    below = [k for k in valid if k < num_workers][-1:]
    above = [k for k in valid if k > num_workers][:1]
    nearest = ", ".join(f"{k} (l={k // r})" for k in _nearest(below + above, num_workers))
    message = (
        f"mols needs K = r * l with l a prime >= r + 1; K={num_workers}, r={r} is not; "
        f"nearest valid K: {nearest.replace(', ', ' or ')}"
    )
    other_r = [
        d
        for d in range(1, num_workers + 1)
        if num_workers % d == 0 and num_workers // d >= d + 1 and _is_prime(num_workers // d)
    ]
    if other_r:
        message += f" (or keep K={num_workers} with r={_either(other_r)})"
    return message


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
    _check_replication("random", num_workers, r)
    files_count = num_workers if num_files is None else num_files
    if files_count < 1:
        raise ValueError(f"random needs num_files >= 1; got {files_count}; nearest valid: 1")
    if files_count > MAX_FILES:
        raise ValueError(
            f"random with num_files={files_count} has more than {MAX_FILES} files per round; "
            f"nearest valid: num_files={MAX_FILES}"
        )
    return files_count


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


def _check_workers(scheme: str, num_workers: int) -> None:
    if num_workers < 1:
        raise ValueError(f"{scheme} needs K >= 1 worker; got K={num_workers}")


def _check_replication(scheme: str, num_workers: int, r: int) -> None:
    _check_workers(scheme, num_workers)
    if r < 1:
        raise ValueError(f"{scheme} needs r >= 1; got r={r}; nearest valid: r=1")
    if r > num_workers:
        raise ValueError(
            f"{scheme} needs r <= K; got r={r} > K={num_workers}; "
            f"nearest valid: r={num_workers} or K={r}"
        )


def _nearest(candidates: list[int], target: int) -> list[int]:
    """Candidates closest to ``target`` (two on a tie), in increasing order."""
    best = min(abs(c - target) for c in candidates)
    return sorted(c for c in candidates if abs(c - target) == best)


def _either(values: list[int]) -> str:
    return " or ".join(str(v) for v in values)


def _is_prime(n: int) -> bool:
    if n < 2:
        return False
    return all(n % d for d in range(2, math.isqrt(n) + 1))


def _primes_between(low: int, high: int) -> list[int]:
    return [p for p in range(low, high + 1) if _is_prime(p)]
