"""Rate limits per caller: token buckets keyed by the client's address (or a key prefix).

A bucket holds at most ``per_minute`` tokens and gains ``per_minute / 60`` a
second; a request takes one, and when none is left the caller is told how long
to wait (``429`` with ``Retry-After``). :func:`refill` and :func:`wait_s` are the
arithmetic; :class:`RateLimiter` keeps one bucket per key behind a lock, in this
process's memory (each server process counts for itself).

The address is the peer of the TCP connection, or the client named by
``X-Forwarded-For`` when the peer is a proxy that uvicorn trusts
(``--forwarded-allow-ips``). An IPv6 address counts as its /64 network, which one
host usually holds whole.
"""

from __future__ import annotations

import ipaddress
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

#: Most keys a limiter remembers; the least recently seen are forgotten first.
MAX_KEYS = 100_000


@dataclass(frozen=True)
class Bucket:
    """The tokens of one key at one moment.

    Attributes
    ----------
    tokens : float
        Tokens left, at most the limiter's capacity.
    at : float
        When, on the limiter's clock (seconds).
    """

    tokens: float
    at: float


def refill(bucket: Bucket, now: float, *, capacity: float, rate_per_s: float) -> Bucket:
    """Return the bucket at ``now``: its tokens grown at ``rate_per_s``, up to ``capacity``.

    A clock that went backwards adds nothing.
    """
    elapsed = max(0.0, now - bucket.at)
    return Bucket(tokens=min(capacity, bucket.tokens + elapsed * rate_per_s), at=now)


def wait_s(bucket: Bucket, *, rate_per_s: float) -> float:
    """Return the seconds until the bucket holds a whole token (0 when it does)."""
    return max(0.0, (1.0 - bucket.tokens) / rate_per_s)


def retry_after(seconds: float) -> str:
    """Return the ``Retry-After`` value for a wait: whole seconds, at least 1."""
    return str(max(1, math.ceil(seconds)))


class RateLimiter:
    """Token buckets keyed by a string, safe to share between threads.

    Parameters
    ----------
    per_minute : int
        Requests a key may make in a burst, and per ``window_s`` (a minute by
        default) in the long run.
    clock : callable, optional
        Seconds on a monotonic clock; tests pass their own.
    max_keys : int
        Most keys remembered (least recently used forgotten first; a forgotten
        key starts again with a full bucket).
    window_s : float
        Seconds over which a bucket refills whole.
    """

    def __init__(
        self,
        per_minute: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = MAX_KEYS,
        window_s: float = 60.0,
    ) -> None:
        if per_minute < 1:
            raise ValueError(f"per_minute must be at least 1, got {per_minute}")
        if not math.isfinite(window_s) or window_s <= 0:
            raise ValueError(f"window_s must be a positive number of seconds, got {window_s}")
        self.per_minute = per_minute
        self._capacity = float(per_minute)
        self._rate = per_minute / window_s
        self._clock = clock
        self._max_keys = max_keys
        self._buckets: OrderedDict[str, Bucket] = OrderedDict()
        self._lock = threading.Lock()

    def acquire(self, key: str) -> float | None:
        """Take a token for ``key``; return ``None`` if one was there, else the seconds to wait."""
        with self._lock:
            bucket = self._current(key)
            if bucket.tokens >= 1.0:
                self._store(key, Bucket(bucket.tokens - 1.0, bucket.at))
                return None
            self._store(key, bucket)
            return wait_s(bucket, rate_per_s=self._rate)

    def blocked(self, key: str) -> float | None:
        """Return the seconds ``key`` must wait for a token, or ``None``; take nothing."""
        with self._lock:
            bucket = self._current(key)
            if bucket.tokens >= 1.0:
                return None
            return wait_s(bucket, rate_per_s=self._rate)

    def charge(self, key: str) -> None:
        """Take a token for ``key`` if it has one (a failure that counts against it)."""
        with self._lock:
            bucket = self._current(key)
            self._store(key, Bucket(max(0.0, bucket.tokens - 1.0), bucket.at))

    def _current(self, key: str) -> Bucket:
        now = self._clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            return Bucket(self._capacity, now)
        return refill(bucket, now, capacity=self._capacity, rate_per_s=self._rate)

    def _store(self, key: str, bucket: Bucket) -> None:
        self._buckets[key] = bucket
        self._buckets.move_to_end(key)
        while len(self._buckets) > self._max_keys:
            self._buckets.popitem(last=False)


def address_key(host: str | None) -> str:
    """Return the key a request's address is counted under.

    An IPv4 address (or anything that is not an IP address, such as a Unix
    socket's empty host) as it is; an IPv6 address as its /64 network, since
    one host usually holds a whole /64.
    """
    if not host:
        return "unknown"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is None:
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


@dataclass(frozen=True)
class RateLimits:
    """The limiters of one app.

    Attributes
    ----------
    registration : RateLimiter
        Client registrations (``POST /api/v1/clients``) per address.
    pending_by_address : RateLimiter
        Registrations per address over a challenge's lifetime: a bucket of
        ``pending_per_address`` that refills over ``challenge_ttl_s``, so an address
        holds at most twice that many unproven registrations at once and a few
        addresses cannot fill the server's waiting list (``max_pending_clients``).
    login_by_address : RateLimiter
        Failed dashboard logins per address.
    login_by_prefix : RateLimiter
        Failed dashboard logins per key prefix (the first characters of the key tried).
    proof_by_address : RateLimiter
        Proofs of possession (``POST /api/v1/clients/{id}/proof``) per address.
    proof_by_client : RateLimiter
        Proofs of possession per client id, but for the registrant's own (which
        shows its registration token): strangers cannot spend its budget.
    """

    registration: RateLimiter
    pending_by_address: RateLimiter
    login_by_address: RateLimiter
    login_by_prefix: RateLimiter
    proof_by_address: RateLimiter
    proof_by_client: RateLimiter

    @classmethod
    def of(
        cls,
        *,
        registration_per_minute: int,
        login_per_minute: int,
        proof_per_minute: int,
        pending_per_address: int = 10,
        challenge_ttl_s: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> RateLimits:
        """Build fresh limiters from their budgets, on ``clock``."""
        return cls(
            registration=RateLimiter(registration_per_minute, clock=clock),
            pending_by_address=RateLimiter(
                pending_per_address, clock=clock, window_s=challenge_ttl_s
            ),
            login_by_address=RateLimiter(login_per_minute, clock=clock),
            login_by_prefix=RateLimiter(login_per_minute, clock=clock),
            proof_by_address=RateLimiter(proof_per_minute, clock=clock),
            proof_by_client=RateLimiter(proof_per_minute, clock=clock),
        )
