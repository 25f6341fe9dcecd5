"""Jobs in flight come back in the order of the simulated clock, ties by worker."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from phalanx.asynchronous.jobs import Job, JobQueue


def job(worker: int, returns: float, started: float = 0.0) -> Job[str]:
    return Job(worker, 0, 1, started, returns, f"w{worker}")


@given(
    st.lists(
        st.tuples(st.integers(0, 50), st.floats(min_value=0.0, max_value=1e6)),
        min_size=1,
        max_size=60,
    )
)
def test_jobs_come_back_earliest_first_then_by_worker(entries: list[tuple[int, float]]) -> None:
    queue: JobQueue[str] = JobQueue()
    for worker, returns in entries:
        queue.push(job(worker, returns))
    popped = [queue.pop() for _ in entries]
    keys = [(j.returns_s, j.worker) for j in popped]
    assert keys == sorted(keys)
    assert not queue


def test_an_empty_queue_says_nothing_is_in_flight() -> None:
    queue: JobQueue[str] = JobQueue()
    with pytest.raises(IndexError, match="no job is in flight"):
        queue.pop()


def test_the_queue_knows_who_is_at_work() -> None:
    queue: JobQueue[str] = JobQueue()
    queue.push(job(3, 1.0))
    queue.push(job(5, 0.5))
    assert queue.workers() == {3, 5} and len(queue) == 2


def test_a_job_lasts_from_its_start_to_its_return() -> None:
    assert job(0, 2.5, started=1.0).duration_s == 1.5


@pytest.mark.parametrize(
    ("started", "returns"), [(2.0, 1.0), (-1.0, 1.0), (0.0, math.inf), (math.nan, 1.0)]
)
def test_a_job_cannot_return_before_it_starts_or_at_no_time(started: float, returns: float) -> None:
    with pytest.raises(ValueError, match="a job"):
        job(0, returns, started=started)
