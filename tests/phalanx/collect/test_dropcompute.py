"""DropCompute's budget: the threshold that finishes the most files per second of round."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from phalanx.collect.dropcompute import (
    best_threshold,
    completion_median,
    effective_speed,
    measured_round,
)


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


def test_a_deployed_round_is_measured_from_the_claims_bounded_by_the_responses() -> None:
    claims = {0: [1.0, 1.0], 1: [2.0, 50.0], 2: [0.5], 3: [1.0]}
    # Worker 1 claims 52 s of compute but answered after 10: it is believed up to 10.
    # Worker 3 sent nothing that counted: no response time, left out.
    responded = {0: 2.5, 1: 10.0, 2: 1.0}
    rounds, overhead = measured_round(claims, responded)
    assert rounds == [[1.0, 2.0], [2.0, 10.0], [0.5]]
    assert overhead == pytest.approx((0.5 + 0.0 + 0.5) / 3)


@pytest.mark.parametrize(("claim", "answered"), [(0.0, 1.0), (0.0, 0.2), (0.05, 0.2)])
def test_a_worker_claiming_no_compute_cannot_make_a_budget_of_nothing_look_fastest(
    claim: float, answered: float
) -> None:
    # Six honest workers compute a file a second; one liar claims its three files took
    # (next to) nothing, and may even answer at once with anything. Chosen by the speed
    # alone, the budget is the liar's: every honest replica cut, its files unchecked.
    claims = {**{w: [1.0, 1.0, 1.0] for w in range(6)}, 6: [claim] * 3}
    responded = {**dict.fromkeys(range(6), 3.1), 6: answered}
    rounds, overhead = measured_round(claims, responded)
    assert best_threshold([rounds], overhead) < 1.0
    floor = completion_median([rounds])
    assert floor == 3.0
    assert best_threshold([rounds], overhead, at_least=floor) == 3.0


def test_half_of_the_workers_finish_every_file_by_the_completion_median() -> None:
    rounds = [[[1.0, 2.0], [1.0, 5.0], [0.5, 1.0], [3.0, 9.0]]]
    assert completion_median(rounds) == 5.0  # two of four (2.0 and 1.0 before it, and it)
    assert completion_median([]) == 0.0


def test_straggling_workers_are_still_cut_with_the_floor() -> None:
    # Six workers at a file a second, one fifty times slower: the median worker finishes
    # by 3 s, and the budget still stops there, without the straggler's files.
    round_ = [cumulative(1.0)] * 6 + [cumulative(50.0)]
    assert best_threshold([round_], 0.5, at_least=completion_median([round_])) == 3.0


def test_a_deployed_round_without_claims_measures_nothing() -> None:
    assert measured_round({}, {0: 1.0}) == ([], 0.0)
    assert measured_round({0: []}, {0: 1.0}) == ([], 0.0)


@pytest.mark.parametrize(
    ("claims", "responded"), [({0: [math.nan]}, {0: 1.0}), ({0: [1.0]}, {0: -1.0})]
)
def test_a_time_no_reader_lets_through_is_the_host_s_bug(
    claims: dict[int, list[float]], responded: dict[int, float]
) -> None:
    with pytest.raises(ValueError, match="finite"):
        measured_round(claims, responded)


@given(
    st.dictionaries(st.integers(0, 5), st.lists(st.floats(0, 1e6), min_size=1, max_size=4)),
    st.dictionaries(st.integers(0, 5), st.floats(0, 1e4)),
)
def test_no_claim_measures_a_worker_slower_than_it_answered(
    claims: dict[int, list[float]], responded: dict[int, float]
) -> None:
    rounds, overhead = measured_round(claims, responded)
    bound = max(responded.values(), default=0.0)
    assert all(t <= bound for r in rounds for t in r)
    assert all(r == sorted(r) for r in rounds)
    assert overhead >= 0
    if rounds:
        best_threshold([rounds], overhead)  # always a budget it can choose from
