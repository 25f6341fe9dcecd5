"""Values read from stored JSON (a run's config, a round's metrics), never trusted.

A run's config and a round's metrics are JSON columns: an old version, a
hand-edited row or a hostile launcher may have left anything there. These
readers return the value when it has the expected type and a default otherwise,
so a page never fails on what it reads.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from phalanx.store import Run


def section(config: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """Return the mapping ``config[name]``, or an empty one."""
    value = config.get(name)
    return value if isinstance(value, dict) else {}


def run_config(run: Run) -> Mapping[str, Any]:
    """Return a run's config, or an empty one if it is not a mapping."""
    return run.config if isinstance(run.config, dict) else {}


def total_rounds(run: Run) -> int:
    """Return the rounds a run's config asks for (0 when unreadable)."""
    return integer(run_config(run).get("rounds"), default=0)


def integer(value: object, *, default: int) -> int:
    """Return ``value`` if it is an integer (not a bool), else ``default``."""
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def finite_number(value: object) -> float | None:
    """Return ``value`` as a float if it is a finite number (not a bool), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def metric(metrics: Mapping[str, Any], name: str) -> float | None:
    """Return a finite metric of a round, or ``None``."""
    return finite_number(metrics.get(name)) if isinstance(metrics, Mapping) else None
