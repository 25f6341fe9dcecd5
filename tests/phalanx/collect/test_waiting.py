"""Whole replies: everyone, or the fastest k complete workers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from phalanx.assignment import Assignment
from phalanx.collect import Piece, collect, completion_times, everyone_arrived, kth_complete
from tests.support.arrivals import HONEST, Arrivals, arrivals, whole_replies

ASSIGNMENT = Assignment(4, ((0, 1), (1, 2), (2, 3), (3, 0)))


def test_all_closes_at_the_last_arrival_once_everyone_has_replied() -> None:
    pieces = whole_replies(ASSIGNMENT, {0: 1.0, 1: 4.0, 2: 2.0, 3: 3.0})

    assert everyone_arrived(ASSIGNMENT, pieces) == 4.0
    assert everyone_arrived(ASSIGNMENT, pieces[:-1]) is None


def test_a_worker_counts_as_complete_only_with_every_file() -> None:
    pieces = [Piece(0, 0, 1.0, HONEST), Piece(0, 3, 6.0, HONEST), Piece(1, 0, 2.0, HONEST)]

    assert completion_times(ASSIGNMENT, pieces) == {0: 6.0}


def test_fastest_k_closes_at_the_kth_complete_worker() -> None:
    pieces = whole_replies(ASSIGNMENT, {0: 1.0, 1: 4.0, 2: 2.0, 3: 3.0})

    got = collect("fastest_k", ASSIGNMENT, pieces, k=2)

    assert (got.closed_at, got.closed_by) == (2.0, "policy")
    assert got.late_workers == (1, 3)


def test_fastest_k_counts_ties_by_time_and_waits_for_all_when_k_exceeds_them() -> None:
    pieces = whole_replies(ASSIGNMENT, {0: 1.0, 1: 1.0, 2: 1.0, 3: 3.0})

    assert kth_complete(ASSIGNMENT, pieces, k=2) == 1.0
    assert kth_complete(ASSIGNMENT, pieces, k=99) == 3.0


def test_multi_message_workers_are_complete_at_their_last_file() -> None:
    pieces = [Piece(0, 0, 1.0, HONEST), Piece(0, 3, 5.0, HONEST)]
    pieces += whole_replies(ASSIGNMENT, {1: 2.0})

    assert kth_complete(ASSIGNMENT, pieces, k=2) == 5.0


@pytest.mark.parametrize("k", [0, -1, True, 1.5])
def test_k_must_be_a_positive_int(k: object) -> None:
    with pytest.raises(ValueError, match="k must be an int >= 1"):
        kth_complete(ASSIGNMENT, [], k=k)  # type: ignore[arg-type]


@given(round_=arrivals(), k=st.integers(1, 8))
def test_fastest_k_closes_at_the_kth_full_workers_time(round_: Arrivals, k: int) -> None:
    done = sorted(completion_times(round_.assignment, round_.pieces).values())
    wanted = min(
        k, sum(1 for w in range(round_.assignment.num_workers) if round_.assignment.files_of(w))
    )

    got = collect("fastest_k", round_.assignment, round_.pieces, k=k)

    if len(done) >= wanted:
        assert got.closed_at == done[wanted - 1]
        assert got.closed_by == "policy"
    else:
        assert got.closed_by == "last_arrival"
