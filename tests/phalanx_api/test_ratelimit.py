"""Token buckets per address: the arithmetic, the limiter, and what an address counts as."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from phalanx_api.ratelimit import Bucket, RateLimiter, address_key, refill, retry_after, wait_s
from tests.support.factories import FakeClock


def test_a_bucket_refills_at_its_rate_up_to_its_capacity() -> None:
    assert refill(Bucket(0.0, 10.0), 13.0, capacity=5.0, rate_per_s=0.5) == Bucket(1.5, 13.0)
    assert refill(Bucket(4.0, 10.0), 100.0, capacity=5.0, rate_per_s=0.5) == Bucket(5.0, 100.0)


def test_a_clock_going_backwards_adds_no_tokens() -> None:
    assert refill(Bucket(1.0, 10.0), 5.0, capacity=5.0, rate_per_s=1.0) == Bucket(1.0, 5.0)


def test_the_wait_is_the_time_to_one_whole_token() -> None:
    assert wait_s(Bucket(0.25, 0.0), rate_per_s=0.5) == 1.5
    assert wait_s(Bucket(2.0, 0.0), rate_per_s=0.5) == 0.0


@pytest.mark.parametrize(("seconds", "header"), [(0.0, "1"), (0.2, "1"), (1.0, "1"), (5.01, "6")])
def test_retry_after_is_whole_seconds_and_never_zero(seconds: float, header: str) -> None:
    assert retry_after(seconds) == header


@given(
    per_minute=st.integers(1, 120),
    steps=st.lists(st.tuples(st.floats(0, 30), st.booleans()), max_size=60),
)
def test_a_limiter_never_grants_more_than_its_burst_plus_what_time_refilled(
    per_minute: int, steps: list[tuple[float, bool]]
) -> None:
    clock = FakeClock()
    limiter = RateLimiter(per_minute, clock=clock)
    start, granted = clock.now, 0
    for pause, _ in steps:
        clock.advance(pause)
        granted += limiter.acquire("a") is None
    assert granted <= per_minute + (clock.now - start) * per_minute / 60 + 1e-9


def test_a_limiter_grants_a_burst_then_says_how_long_to_wait() -> None:
    clock = FakeClock()
    limiter = RateLimiter(3, clock=clock)
    assert [limiter.acquire("a") for _ in range(3)] == [None, None, None]
    assert limiter.acquire("a") == pytest.approx(20.0)
    assert limiter.acquire("b") is None  # keys are counted apart
    clock.advance(20.0)
    assert limiter.blocked("a") is None
    assert limiter.acquire("a") is None
    assert limiter.blocked("a") == pytest.approx(20.0)


def test_charging_counts_only_what_was_there() -> None:
    clock = FakeClock()
    limiter = RateLimiter(2, clock=clock)
    for _ in range(5):
        limiter.charge("a")
    clock.advance(30.0)
    assert limiter.blocked("a") is None  # one token back after 30 s, not -3 + 1


def test_concurrent_acquisitions_grant_exactly_the_burst() -> None:
    limiter = RateLimiter(50, clock=FakeClock())
    granted: list[bool] = []
    lock = threading.Lock()

    def take() -> None:
        for _ in range(20):
            ok = limiter.acquire("shared") is None
            with lock:
                granted.append(ok)

    threads = [threading.Thread(target=take) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(granted) == 50


def test_the_least_recently_seen_keys_are_forgotten_beyond_the_bound() -> None:
    limiter = RateLimiter(1, clock=FakeClock(), max_keys=2)
    limiter.acquire("a")
    limiter.acquire("b")
    limiter.acquire("c")  # forgets "a"
    assert limiter.blocked("a") is None
    assert limiter.blocked("c") is not None


def test_a_limiter_needs_a_positive_budget() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        RateLimiter(0)


def test_a_limiter_over_a_longer_window_refills_its_burst_over_that_window() -> None:
    clock = FakeClock()
    limiter = RateLimiter(5, clock=clock, window_s=600.0)
    assert [limiter.acquire("a") for _ in range(5)] == [None] * 5
    assert limiter.acquire("a") == pytest.approx(120.0)
    clock.advance(120.0)
    assert limiter.acquire("a") is None


@pytest.mark.parametrize("window", [0.0, -1.0, float("nan"), float("inf")])
def test_a_limiter_needs_a_positive_finite_window(window: float) -> None:
    with pytest.raises(ValueError, match="window_s"):
        RateLimiter(1, window_s=window)


@pytest.mark.parametrize(
    ("host", "key"),
    [
        ("192.0.2.1", "192.0.2.1"),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff::1", "2001:db8:1:2::/64"),
        ("::ffff:192.0.2.1", "192.0.2.1"),
        ("testclient", "testclient"),
        (None, "unknown"),
        ("", "unknown"),
    ],
)
def test_an_ipv6_address_counts_as_its_64_network(host: str | None, key: str) -> None:
    assert address_key(host) == key
