"""DropCompute's budget: the threshold that finishes the most files per second of round."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from phalanx.collect.dropcompute import best_threshold, effective_speed


def cumulative(per_file: float, files: int = 3) -> list[float]:
    return [per_file * (i + 1) for i in range(files)]


def test_a_straggler_s_files_are_not_worth_waiting_for() -> None:
    # Six workers finish a file a second; one takes 50 s a file. Waiting for it triples
    # nothing but the round's length: the budget stops at the others' third file.
    round_ = [cumulative(1.0)] * 6 + [cumulative(50.0)]
    assert best_threshold([round_], overhead_s=0.5) == 3.0


def test_alike_workers_lose_nothing_to_the_budget() -> None:
    round_ = [cumulative(1.0)] * 4
    assert best_threshold([round_, round_], overhead_s=0.5) == 3.0


def test_the_speed_counts_files_done_against_the_round_s_length() -> None:
    round_ = [[1.0, 2.0], [1.0, 4.0]]
    assert effective_speed([round_], 2.0, 1.0) == pytest.approx(3 / 3)
    assert effective_speed([round_], 4.0, 1.0) == pytest.approx(4 / 5)


@pytest.mark.parametrize(
    ("rounds", "overhead", "message"),
    [
        ([], 0.0, "at least one measured file"),
        ([[[]]], 0.0, "at least one measured file"),
        ([[[1.0, math.nan]]], 0.0, "finite"),
        ([[[1.0]]], -1.0, "overhead_s"),
        ([[[-1.0]]], 0.0, "finite and >= 0"),
    ],
)
def test_what_cannot_be_measured_is_refused(
    rounds: list[list[list[float]]], overhead: float, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        best_threshold(rounds, overhead)


times = st.lists(st.floats(0.0, 100.0), min_size=1, max_size=4).map(sorted)


@given(st.lists(st.lists(times, min_size=1, max_size=5), min_size=1, max_size=3), st.floats(0, 10))
def test_no_measured_time_gives_a_faster_round_than_the_budget_chosen(
    rounds: list[list[list[float]]], overhead: float
) -> None:
    chosen = best_threshold(rounds, overhead)
    assert any(chosen in w for r in rounds for w in r)
    best = effective_speed(rounds, chosen, overhead)
    assert all(effective_speed(rounds, t, overhead) <= best for r in rounds for w in r for t in w)
