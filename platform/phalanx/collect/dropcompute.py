"""DropCompute: a compute budget per round, chosen from measured compute times.

Giladi, Dhir, Lerner, Hoffer and Soudry ("DropCompute: simple and more robust
distributed synchronous training via compute variance reduction", NeurIPS
2023): each worker stops computing once its compute time for the round passes
a threshold ``tau`` and sends what it finished. The threshold is chosen from
measured compute times to maximise the *effective speed*, work finished per
second of round::

    S(tau) = E[ sum_n M_n(tau) ] / ( E[ max_n min(T_n, tau) ] + T_comm )

with ``M_n(tau)`` the pieces of work worker ``n`` finished by ``tau``, ``T_n``
its compute time for the whole round, and ``T_comm`` the round's time outside
compute. Here a piece is a file: a worker cuts only between files, so every
replica of a file it sends is the whole file, as its other replicas are, and
replicas stay comparable. The expectations are means over the rounds measured.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

Round = Sequence[Sequence[float]]
"""One round's measurements: per worker, the compute time at which each of its files
was finished (non-decreasing, seconds since it started computing)."""


def effective_speed(rounds: Sequence[Round], tau: float, overhead_s: float) -> float:
    """Return ``S(tau)``: files finished per second of round, averaged over ``rounds``."""
    if not rounds:
        raise ValueError("effective speed needs at least one measured round")
    done = sum(bisect.bisect_right(w, tau) for r in rounds for w in r) / len(rounds)
    busy = sum(max((min(w[-1], tau) for w in r if w), default=0.0) for r in rounds) / len(rounds)
    return done / (busy + overhead_s) if busy + overhead_s > 0 else 0.0


def best_threshold(rounds: Sequence[Round], overhead_s: float) -> float:
    """Return the compute budget ``tau`` that maximises :func:`effective_speed`.

    The candidates are the measured finish times (the speed only changes there);
    among equally fast ones the largest, which drops the least work. A budget at
    the slowest measured finish drops nothing.

    Parameters
    ----------
    rounds : sequence of Round
        Measured rounds: per worker, cumulative compute times of its files.
    overhead_s : float
        Mean seconds of a round outside compute (download and upload), ``>= 0``.

    Raises
    ------
    ValueError
        Without a measured file, or with a time or overhead that is negative or not finite.
    """
    if not math.isfinite(overhead_s) or overhead_s < 0:
        raise ValueError(f"overhead_s must be finite and >= 0, got {overhead_s!r}")
    times = [t for r in rounds for w in r for t in w]
    if not times:
        raise ValueError("a compute budget needs at least one measured file")
    if any(not math.isfinite(t) or t < 0 for t in times):
        raise ValueError("measured compute times must be finite and >= 0")
    candidates = sorted(set(times))
    speeds = [effective_speed(rounds, tau, overhead_s) for tau in candidates]
    best = max(speeds)
    return max(tau for tau, speed in zip(candidates, speeds, strict=True) if speed == best)
