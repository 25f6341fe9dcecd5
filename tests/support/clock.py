"""A clock for retry policies that never waits: each pause only moves its time on."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from phalanx.store.retry import RetryPolicy


@dataclass
class FakeClock:
    """Monotonic time that a pause advances at once; calls ``on_pause`` after each pause.

    Attributes
    ----------
    now : float
        The current time, in seconds.
    pauses : list[float]
        Every pause asked for, in order.
    on_pause : callable, optional
        Called with the clock after each pause (e.g. to release a lock).
    """

    now: float = 0.0
    pauses: list[float] = field(default_factory=list)
    on_pause: Callable[[FakeClock], None] | None = None

    def __call__(self) -> float:
        """Return the current time."""
        return self.now

    def sleep(self, seconds: float) -> None:
        """Move the time on by ``seconds``."""
        self.pauses.append(seconds)
        self.now += seconds
        if self.on_pause is not None:
            self.on_pause(self)

    def policy(self, budget_s: float = 60.0) -> RetryPolicy:
        """A retry policy on this clock."""
        return RetryPolicy(budget_s=budget_s, sleep=self.sleep, clock=self)
