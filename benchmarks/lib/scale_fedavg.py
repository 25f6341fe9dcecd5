"""The round-time ratio of Phalanx to a plain Flower FedAvg app, over alternating pairs.

Each pair runs ``bench_round.py``'s two systems one after the other on the same
federation (r = 1, no attack, the same work per worker); the ratio of a pair is
that of its median round times, and the spread is that of the pairs' ratios.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from benchmarks.lib.round_timing import FEDAVG, PHALANX, Measurement

GOAL = 1.0
"""The issue's goal: Phalanx's round at most as long as FedAvg's (same work, r = 1)."""


def pair_ratios(measurements: Sequence[Measurement]) -> list[float]:
    """Phalanx's median round over FedAvg's, pair by pair (in the order they ran)."""
    ours = [m for m in measurements if m.system == PHALANX]
    theirs = [m for m in measurements if m.system == FEDAVG]
    return [p.median_round / f.median_round for p, f in zip(ours, theirs, strict=True)]


def ratio_summary(measurements: Sequence[Measurement]) -> dict[str, Any]:
    """The median of the pairs' ratios, their spread, and the goal."""
    ratios = pair_ratios(measurements)
    if not ratios:
        raise ValueError("no pair of runs to compare")
    median = statistics.median(ratios)
    quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [median] * 3
    return {
        "ratio": median,
        "ratio_per_pair": ratios,
        "min": min(ratios),
        "max": max(ratios),
        "q1": quartiles[0],
        "q3": quartiles[2],
        "pairs": len(ratios),
        "phalanx_round_s": statistics.median(
            m.median_round for m in measurements if m.system == PHALANX
        ),
        "fedavg_round_s": statistics.median(
            m.median_round for m in measurements if m.system == FEDAVG
        ),
        "goal": GOAL,
        "goal_met": median <= GOAL,
    }
