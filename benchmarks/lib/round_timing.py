"""Round times of ``bench_round.py``: one run's measurement, and the medians and ratios.

Pure functions of the measured times, so that the tests can check them.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

PHASES = ("assign", "exchange", "verify", "detect", "aggregate", "evaluate", "persist")
OWN_WORK = ("assign", "verify", "detect", "aggregate", "persist")
PHALANX = "phalanx"
FEDAVG = "flower-fedavg"


@dataclass(frozen=True)
class Measurement:
    """One run of one system."""

    system: str
    repeat: int
    round_seconds: list[float]
    eval_seconds: list[float]
    final_accuracy: float
    phase_seconds: dict[str, float]

    @property
    def median_round(self) -> float:
        """Median time of the timed rounds."""
        return statistics.median(self.round_seconds)


def timed(ends: Sequence[float], evals: Sequence[float]) -> tuple[list[float], list[float]]:
    """Round and evaluation times of rounds 2 .. N-1 from the end times of rounds 1 .. N.

    Round 1 starts the workers; round N evaluates the whole test set.
    """
    rounds = [b - a for a, b in itertools.pairwise(ends)][:-1]
    return rounds, list(evals[1:-1])


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summary(measurements: Sequence[Measurement]) -> dict[str, Any]:
    """Medians, the ratios and the phase shares."""

    def pooled(system: str, without_eval: bool) -> float:
        times = [
            t - (e if without_eval else 0.0)
            for m in measurements
            if m.system == system
            for t, e in zip(m.round_seconds, m.eval_seconds, strict=True)
        ]
        return _median(times)

    phalanx, fedavg = pooled(PHALANX, False), pooled(FEDAVG, False)
    runs = [m for m in measurements if m.system == PHALANX]
    phases = {p: _median([m.phase_seconds[p] for m in runs]) for p in PHASES}
    total = sum(phases.values())
    return {
        "phalanx_round_s": phalanx,
        "fedavg_round_s": fedavg,
        "ratio": phalanx / fedavg,
        "ratio_without_evaluation": pooled(PHALANX, True) / pooled(FEDAVG, True),
        "ratio_per_repeat": [
            p.median_round / f.median_round
            for p, f in zip(runs, [m for m in measurements if m.system == FEDAVG], strict=True)
        ],
        "goal": 1.2,
        "goal_met": phalanx / fedavg <= 1.2,
        "phase_s": phases,
        "phase_share": {p: v / total for p, v in phases.items()},
        "own_work_share": sum(phases[p] for p in OWN_WORK) / total,
        "exchange_share": phases["exchange"] / total,
        "evaluate_share": phases["evaluate"] / total,
    }
