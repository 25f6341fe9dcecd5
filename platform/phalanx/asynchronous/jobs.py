"""Work in flight in asynchronous mode: each worker's task, and when it comes back.

A :class:`Job` is one task given to one worker on one model version; it comes back
at a simulated time (its start plus the systems model's download, compute and
upload). :class:`JobQueue` hands the jobs back in order of that time, the worker
index breaking ties, so the event-driven loop replays identically for a seed.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Job(Generic[T]):
    """A task in flight.

    Parameters
    ----------
    worker : int
        Who computes it.
    version : int
        The model version it was given.
    number : int
        The worker's task count so far, this one included (its data round).
    started_s, returns_s : float
        Simulated seconds since the run began: when it went out, when it comes back.
    outcome : T
        What comes back (a reply, a fault, nothing for a worker away).
    """

    worker: int
    version: int
    number: int
    started_s: float
    returns_s: float
    outcome: T

    def __post_init__(self) -> None:
        if not (math.isfinite(self.started_s) and math.isfinite(self.returns_s)):
            raise ValueError(
                f"a job's times must be finite, got {self.started_s!r} and {self.returns_s!r}"
            )
        if not 0 <= self.started_s <= self.returns_s:
            raise ValueError(
                f"a job returns after it starts, at times >= 0; got started {self.started_s}, "
                f"returns {self.returns_s}"
            )

    @property
    def duration_s(self) -> float:
        """How long the worker took, in simulated seconds."""
        return self.returns_s - self.started_s


@dataclass
class JobQueue(Generic[T]):
    """Jobs in flight, handed back earliest first (then by worker, then by start)."""

    _heap: list[tuple[float, int, int, Job[T]]] = field(default_factory=list)
    _pushed: int = 0

    def push(self, job: Job[T]) -> None:
        """Put ``job`` in flight."""
        self._pushed += 1
        heapq.heappush(self._heap, (job.returns_s, job.worker, self._pushed, job))

    def pop(self) -> Job[T]:
        """Return the job that comes back next.

        Raises
        ------
        IndexError
            When nothing is in flight.
        """
        if not self._heap:
            raise IndexError("no job is in flight")
        return heapq.heappop(self._heap)[-1]

    def __len__(self) -> int:
        return len(self._heap)

    def workers(self) -> set[int]:
        """Return the workers with a job in flight."""
        return {entry[1] for entry in self._heap}
