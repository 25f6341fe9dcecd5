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

In simulation the times come from the systems model. In a deployment each worker
times its own files and says so in its reply: a claim, which :func:`measured_round`
bounds by what the coordinator saw (a worker's compute cannot have taken longer than
its response). Claims alone could still drag the budget down: a worker that claims
no compute, or answers at once with anything, makes a budget at which it alone
finishes look fastest (its files, done at once), and that budget would cut every
honest replica and leave its files unchecked. So a deployment's budget is chosen
with ``at_least`` the median measured worker's time to finish all its files
(:func:`completion_median`): at least half of the workers finish every file, which
honest workers decide while they are the majority, and the budget cuts the slow
tail, as DropCompute means it to.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence

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


def best_threshold(rounds: Sequence[Round], overhead_s: float, *, at_least: float = 0.0) -> float:
    """Return the compute budget ``tau`` that maximises :func:`effective_speed`.

    The candidates are the measured finish times (the speed only changes there),
    those not below ``at_least`` (all of them when none is); among equally fast ones
    the largest, which drops the least work. A budget at the slowest measured finish
    drops nothing.

    Parameters
    ----------
    rounds : sequence of Round
        Measured rounds: per worker, cumulative compute times of its files.
    overhead_s : float
        Mean seconds of a round outside compute (download and upload), ``>= 0``.
    at_least : float
        The smallest budget to consider (a deployment's :func:`completion_median`).

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
    candidates = [t for t in candidates if t >= at_least] or candidates[-1:]
    speeds = [effective_speed(rounds, tau, overhead_s) for tau in candidates]
    best = max(speeds)
    return max(tau for tau, speed in zip(candidates, speeds, strict=True) if speed == best)


def measured_round(
    claims: Mapping[int, Sequence[float]], responded: Mapping[int, float]
) -> tuple[list[list[float]], float]:
    """Return a deployed round's measurements: each worker's finish times, and the overhead.

    Parameters
    ----------
    claims : mapping of int to sequence of float
        Per worker, the seconds it says each of its files took, in its task's order
        (what its accepted replies claim).
    responded : mapping of int to float
        Per worker, when its last accepted file arrived, in seconds since the round
        began (the coordinator's clock). A worker with no time here is left out.

    Returns
    -------
    list of list of float, float
        Per worker measured, the cumulative compute time at which each file finished,
        each bounded by its response time (a claim of more compute than that is not
        believed beyond it); and the mean over those workers of the response time
        less the compute, the round's seconds outside compute (``>= 0``).

    Raises
    ------
    ValueError
        When a claimed or observed time is negative or not finite (a reader's check
        lets none through: the host's bug).
    """
    rounds: list[list[float]] = []
    outside: list[float] = []
    for worker in sorted(claims):
        seconds = responded.get(worker)
        times = list(claims[worker])
        if seconds is None or not times:
            continue
        if any(not math.isfinite(t) or t < 0 for t in (*times, seconds)):
            raise ValueError(f"worker {worker}'s compute or response time is not finite and >= 0")
        finished: list[float] = []
        total = 0.0
        for took in times:
            total += took
            finished.append(min(total, seconds))
        rounds.append(finished)
        outside.append(seconds - finished[-1])
    overhead = sum(outside) / len(outside) if outside else 0.0
    return rounds, overhead


def completion_median(rounds: Sequence[Round]) -> float:
    """Return the median, over every worker of every round measured, of its last finish time.

    The time by which half of the measured workers had finished all their files (the
    upper median of an even count, so that at least half have); 0 without any.
    """
    ends = sorted(w[-1] for r in rounds for w in r if w)
    return ends[len(ends) // 2] if ends else 0.0
