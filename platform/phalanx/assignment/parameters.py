"""What every scheme checks of its parameters, and the nearest valid choice its errors name."""

from __future__ import annotations

import math

SCHEMES: tuple[str, ...] = ("none", "groups", "subsets", "bibd", "mols", "random")

# C(K, r) grows fast (C(100, 5) is 75 million); past this many files the subsets
# scheme is refused with a pointer to bibd, mols or random instead.
MAX_FILES = 1_000_000
"""Most files a round may have, whatever the scheme."""
MAX_SUBSET_FILES = MAX_FILES


def check_workers(scheme: str, num_workers: int) -> None:
    """Refuse fewer than one worker."""
    if num_workers < 1:
        raise ValueError(f"{scheme} needs K >= 1 worker; got K={num_workers}")


def check_replication(scheme: str, num_workers: int, r: int) -> None:
    """Refuse ``r`` outside ``1 .. K`` (and fewer than one worker)."""
    check_workers(scheme, num_workers)
    if r < 1:
        raise ValueError(f"{scheme} needs r >= 1; got r={r}; nearest valid: r=1")
    if r > num_workers:
        raise ValueError(
            f"{scheme} needs r <= K; got r={r} > K={num_workers}; "
            f"nearest valid: r={num_workers} or K={r}"
        )


def closest(candidates: list[int], target: int) -> list[int]:
    """Candidates closest to ``target`` (two on a tie), in increasing order."""
    best = min(abs(c - target) for c in candidates)
    return sorted(c for c in candidates if abs(c - target) == best)


def either(values: list[int]) -> str:
    """Name the choices as in ``"13 or 15"``."""
    return " or ".join(str(v) for v in values)


def is_prime(n: int) -> bool:
    """Whether ``n`` is prime (trial division: orders here are small)."""
    if n < 2:
        return False
    return all(n % d for d in range(2, math.isqrt(n) + 1))


def primes_between(low: int, high: int) -> list[int]:
    """Primes in ``low .. high``, both included."""
    return [p for p in range(low, high + 1) if is_prime(p)]
