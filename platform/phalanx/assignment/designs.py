"""Block designs: Steiner triple systems (Aspis+) and orthogonal Latin squares (ByzShield)."""

from __future__ import annotations

import itertools
import math

from phalanx.assignment.incidence import Assignment
from phalanx.assignment.parameters import (
    check_replication,
    check_workers,
    closest,
    either,
    is_prime,
    primes_between,
)


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
    bibd_files(num_workers, r)
    build = _bose_triples if num_workers % 6 == 3 else _skolem_triples
    triples = build(num_workers)
    files = tuple(sorted(tuple(sorted(t)) for t in triples))
    return Assignment(num_workers, files, "bibd")


def bibd_files(num_workers: int, r: int) -> int:
    """Check the ``bibd`` scheme's parameters; return its number of files."""
    if r != 3:
        raise ValueError(f"bibd builds Steiner triple systems, so r must be 3; got r={r}")
    check_workers("bibd", num_workers)
    if num_workers < 3:
        raise ValueError(
            f"bibd needs K ≡ 1 or 3 (mod 6) with K >= 3; K={num_workers} has no triples; "
            "nearest valid: 3 or 7"
        )
    if num_workers % 6 not in (1, 3):
        admissible = [k for k in range(num_workers - 5, num_workers + 6) if k % 6 in (1, 3)]
        raise ValueError(
            f"bibd needs K ≡ 1 or 3 (mod 6); K={num_workers} is not; "
            f"nearest valid: {either(closest([k for k in admissible if k >= 3], num_workers))}"
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
    order = math.isqrt(mols_files(num_workers, r))
    files = tuple(
        tuple((i - 1) * order + (i * x + y) % order for i in range(1, r + 1))
        for x in range(order)
        for y in range(order)
    )
    return Assignment(num_workers, files, "mols")


def mols_files(num_workers: int, r: int) -> int:
    """Check the ``mols`` scheme's parameters; return its number of files."""
    check_replication("mols", num_workers, r)
    order = num_workers // r
    if num_workers % r or order < r + 1 or not is_prime(order):
        raise ValueError(_mols_error(num_workers, r))
    return order * order


def _mols_error(num_workers: int, r: int) -> str:
    valid = [r * p for p in primes_between(r + 1, max(num_workers // r, r + 1) * 2 + 2)]
    below = [k for k in valid if k < num_workers][-1:]
    above = [k for k in valid if k > num_workers][:1]
    nearest = ", ".join(f"{k} (l={k // r})" for k in closest(below + above, num_workers))
    message = (
        f"mols needs K = r * l with l a prime >= r + 1; K={num_workers}, r={r} is not; "
        f"nearest valid K: {nearest.replace(', ', ' or ')}"
    )
    other_r = [
        d
        for d in range(1, num_workers + 1)
        if num_workers % d == 0 and num_workers // d >= d + 1 and is_prime(num_workers // d)
    ]
    if other_r:
        message += f" (or keep K={num_workers} with r={either(other_r)})"
    return message
