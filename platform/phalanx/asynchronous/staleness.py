"""Staleness: how many model versions old an update is, and which updates are refused."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


def staleness(current_version: int, given_version: int) -> int:
    """Return how many versions the model moved since the worker was given ``given_version``.

    The coordinator records which version it sent with each task; nothing a worker
    claims enters this.

    Raises
    ------
    ValueError
        When either version is negative, or the given one is newer than the current one
        (the host's bookkeeping is wrong, not the worker's).
    """
    for name, value in (("current_version", current_version), ("given_version", given_version)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    if given_version > current_version:
        raise ValueError(
            f"a task cannot carry version {given_version}, newer than the current {current_version}"
        )
    return current_version - given_version


def is_too_stale(tau: int, bound: int) -> bool:
    """Whether an update ``tau`` versions stale is refused under the staleness ``bound``.

    An update exactly ``bound`` versions stale is still taken.
    """
    if isinstance(bound, bool) or not isinstance(bound, int) or bound < 0:
        raise ValueError(f"the staleness bound must be an int >= 0, got {bound!r}")
    return tau > bound


@dataclass(frozen=True)
class StalenessSummary:
    """The staleness of the updates a buffer took, for a round's metrics."""

    count: int
    mean: float
    max: int

    @classmethod
    def of(cls, stalenesses: Iterable[int]) -> StalenessSummary:
        """Summarise ``stalenesses``; an empty buffer has mean and max 0."""
        values = list(stalenesses)
        if not values:
            return cls(0, 0.0, 0)
        return cls(len(values), sum(values) / len(values), max(values))
