"""A stragglers evaluation row to vary in tests of benchmarks/lib/stragglers_*.py."""

from __future__ import annotations

from typing import Any

from benchmarks.lib.robustness_grid import IN_PROCESS, NO_ATTACK
from benchmarks.lib.stragglers_grid import (
    POLICIES,
    PROFILES,
    WORKLOADS,
)
from benchmarks.lib.stragglers_runs import Row

CNN, MLP = WORKLOADS
EXPONENTIAL, STRAGGLERS, TRACE_DROPOUT = PROFILES
POLICY = {p.label: p for p in POLICIES}


def row(**overrides: Any) -> Row:
    """A finished in-process row of the CNN's bibd cell under (b), without attack."""
    base: dict[str, Any] = {
        "profile": STRAGGLERS.key,
        "policy": "all",
        "scheme": "bibd",
        "attack": NO_ATTACK,
        "q": 0,
        "time_to_target_s": None,
        "final_accuracy": 0.80,
        "simulated_time_s": 30.0,
        "late_replies": 0,
        "precision": 1.0,
        "recall": 1.0,
        "transport": IN_PROCESS,
        "workload": CNN.key,
        "model": "cnn",
        "num_workers": 15,
        "r": 3,
        "rounds": 5,
        "collect": {},
        "target_accuracy": None,
        "missing_replies": 0,
        "adversaries": [],
        "stragglers": [],
        "flagged": [],
        "stragglers_flagged": [],
        "accuracy_by_round": [0.5, 0.6, 0.7, 0.75, 0.8],
        "clock_by_round": [6.0, 12.0, 18.0, 24.0, 30.0],
        "late_by_round": [0] * 5,
        "missing_by_round": [0] * 5,
        "flagged_by_round": [[]] * 5,
        "digest_by_round": ["d1", "d2", "d3", "d4", "d5"],
        "seconds": 1.0,
    }
    return Row(**{**base, **overrides})
