"""Retrying a unit of work while the database is locked or briefly out of reach.

A SQLite database under a burst of writes can stay locked past one busy
timeout; a PostgreSQL server can drop connections while it restarts, or cancel
a statement that waited too long for a lock. Those errors say nothing about the
work itself: done again a moment later, it succeeds. :func:`retry_transient`
does it again, with a growing pause, for a bounded time, then raises
:class:`DatabaseUnavailableError`, whose message is one line naming what could
not be done and for how long.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from phalanx.store.errors import StoreError

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: SQLite's result codes of a lock held by another connection (SQLITE_BUSY, SQLITE_LOCKED).
_SQLITE_LOCK_CODES = frozenset({5, 6})


class DatabaseUnavailableError(StoreError):
    """The database stayed locked or out of reach for the whole retry budget."""


@dataclass(frozen=True)
class RetryPolicy:
    """How long, and how often, to try a unit of work again.

    Attributes
    ----------
    budget_s : float
        Give up once this many seconds have passed since the first attempt
        (each SQLite attempt itself waits up to the engine's busy timeout).
    first_pause_s : float
        Pause after the first failure; each later pause doubles, up to ``max_pause_s``.
    max_pause_s : float
        Longest pause between two attempts.
    sleep : callable
        Pauses the caller (tests pass one that only advances their clock).
    clock : callable
        Monotonic seconds.
    """

    budget_s: float = 60.0
    first_pause_s: float = 0.1
    max_pause_s: float = 5.0
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        """Check the durations."""
        if self.budget_s < 0 or self.first_pause_s <= 0 or self.max_pause_s < self.first_pause_s:
            raise ValueError(
                "a retry policy needs budget_s >= 0 and 0 < first_pause_s <= max_pause_s, got "
                f"{self.budget_s}, {self.first_pause_s}, {self.max_pause_s}"
            )


def is_lock_error(exc: BaseException) -> bool:
    """Whether ``exc`` says that another connection held a lock too long.

    SQLite's "database is locked" / "database table is locked", PostgreSQL's
    ``lock_timeout`` (``LockNotAvailable``, SQLSTATE 55P03).
    """
    if not isinstance(exc, OperationalError):
        return False
    orig = exc.orig
    if isinstance(orig, sqlite3.Error):
        return getattr(orig, "sqlite_errorcode", None) in _SQLITE_LOCK_CODES
    return getattr(orig, "sqlstate", None) == "55P03"


def is_transient(exc: BaseException) -> bool:
    """Whether the same work may succeed if tried again: a lock, a lost connection, a full pool.

    On PostgreSQL every ``OperationalError`` counts (connection lost, server
    shutting down, lock or statement timeout, deadlock, serialization failure);
    on SQLite only a lock does (a missing table or a read-only file will not
    go away by waiting).
    """
    if isinstance(exc, PoolTimeoutError):
        return True
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    if not isinstance(exc, OperationalError):
        return False
    if isinstance(exc.orig, sqlite3.Error):
        return is_lock_error(exc)
    return True


def retry_transient(work: Callable[[], T], *, what: str, policy: RetryPolicy) -> T:
    """Return ``work()``, trying again after transient database errors within the policy's budget.

    ``work`` must be safe to run again after a failed attempt: one transaction
    that rolled back, or that checks whether an attempt whose commit went
    unanswered did land.

    Parameters
    ----------
    work : callable
        One attempt.
    what : str
        What the work does, for the error message, e.g. ``"recording round 3"``.
    policy : RetryPolicy
        The budget and pauses.

    Returns
    -------
    T
        What ``work`` returned.

    Raises
    ------
    DatabaseUnavailableError
        When the budget ran out; e.g. "the database stayed locked for 60 s while
        recording round 3". Errors that are not transient propagate at once.
    """
    start = policy.clock()
    pause = policy.first_pause_s
    attempts = 0
    while True:
        attempts += 1
        try:
            return work()
        except Exception as exc:
            if not is_transient(exc):
                raise
            elapsed = policy.clock() - start
            if elapsed + pause > policy.budget_s:
                raise DatabaseUnavailableError(
                    _give_up_message(exc, what, policy.clock() - start, attempts)
                ) from exc
            logger.warning(
                "database %s while %s (attempt %d); trying again in %.1f s",
                "locked" if is_lock_error(exc) else "unavailable",
                what,
                attempts,
                pause,
            )
            policy.sleep(pause)
            pause = min(2 * pause, policy.max_pause_s)


def _give_up_message(exc: BaseException, what: str, elapsed: float, attempts: int) -> str:
    tries = f"{attempts} attempt{'s' if attempts > 1 else ''}"
    if is_lock_error(exc):
        return f"the database stayed locked for {elapsed:.0f} s while {what} ({tries})"
    cause = getattr(exc, "orig", None) or exc
    first_line = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
    return (
        f"the database stayed unavailable for {elapsed:.0f} s while {what} ({tries}; "
        f"last error: {first_line})"
    )
