"""Staleness is counted by the coordinator in model versions; the bound is inclusive."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from phalanx.asynchronous.staleness import StalenessSummary, is_too_stale, staleness

versions = st.integers(min_value=0, max_value=10**9)


@given(versions, versions)
def test_staleness_is_the_versions_the_model_moved_since_the_task(a: int, b: int) -> None:
    given_version, current = sorted((a, b))
    assert staleness(current, given_version) == current - given_version


@given(st.integers(min_value=0, max_value=10**6), st.integers(min_value=0, max_value=10**6))
def test_only_an_update_beyond_the_bound_is_refused(tau: int, bound: int) -> None:
    assert is_too_stale(tau, bound) == (tau > bound)


def test_a_bound_of_zero_takes_only_updates_on_the_newest_model() -> None:
    assert not is_too_stale(0, 0)
    assert is_too_stale(1, 0)


@pytest.mark.parametrize(
    ("current", "given_version", "message"),
    [
        (3, 4, "newer than the current"),
        (-1, 0, "current_version must be an int >= 0"),
        (2, -1, "given_version must be an int >= 0"),
        (True, 0, "current_version must be an int >= 0"),
        (2.0, 1, "current_version must be an int >= 0"),
    ],
)
def test_impossible_versions_are_the_hosts_bug_and_raise(
    current: object, given_version: object, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        staleness(current, given_version)  # type: ignore[arg-type]


@pytest.mark.parametrize("bound", [-1, True, 2.5])
def test_a_bound_that_is_no_count_is_refused(bound: object) -> None:
    with pytest.raises(ValueError, match="staleness bound must be an int >= 0"):
        is_too_stale(3, bound)  # type: ignore[arg-type]


def test_a_summary_gives_count_mean_and_max() -> None:
    assert StalenessSummary.of([0, 1, 5]) == StalenessSummary(3, 2.0, 5)
    assert StalenessSummary.of([]) == StalenessSummary(0, 0.0, 0)
