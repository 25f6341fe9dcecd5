"""benchmarks/lib/case_pool.py: an evaluation's runs, in this process or in a pool."""

from __future__ import annotations

import pytest

from benchmarks.lib.case_pool import run_cases


@pytest.mark.parametrize("jobs", [1, 2])
def test_rows_come_back_in_case_order_and_each_is_logged_once(jobs: int) -> None:
    logged: list[int] = []
    rows = run_cases([-3, 1, -2, 5], abs, jobs=jobs, cost=float, log=logged.append)
    assert rows == [3, 1, 2, 5]
    assert sorted(logged) == [1, 2, 3, 5]
