"""Pieces and how a round's arrivals are split at its close."""

from __future__ import annotations

import math

import pytest

from phalanx.assignment import Assignment
from phalanx.collect import Piece
from phalanx.collect.pieces import first_arrivals, split

ASSIGNMENT = Assignment(3, ((0, 1), (1, 2)))


@pytest.mark.parametrize("time", [math.nan, math.inf, -1.0])
def test_a_piece_refuses_a_time_that_is_no_arrival(time: float) -> None:
    with pytest.raises(ValueError, match="finite and >= 0"):
        Piece(0, 0, time, "aa")


def test_a_piece_at_the_close_is_kept_and_one_after_it_is_late() -> None:
    on_time, after = Piece(0, 0, 2.0, "aa"), Piece(1, 0, 2.5, "aa")

    got = split(ASSIGNMENT, [after, on_time], closed_at=2.0, closed_by="deadline")

    assert (got.kept, got.late) == ((on_time,), (after,))
    assert got.missing == ((1, 1), (2, 1))
    assert got.late_workers == (1, 2)
    assert got.kept_workers == (0,)


def test_a_piece_of_a_file_not_given_out_is_listed_but_closes_nothing() -> None:
    stray = Piece(2, 0, 1.0, "aa")

    assert first_arrivals(ASSIGNMENT, [stray], None) == {}
    assert split(ASSIGNMENT, [stray], closed_at=1.0, closed_by="policy").kept == (stray,)


def test_ties_in_time_are_ordered_by_worker_id() -> None:
    pieces = [Piece(2, 1, 1.0, "aa"), Piece(0, 0, 1.0, "aa"), Piece(1, 1, 1.0, "aa")]

    got = split(ASSIGNMENT, pieces, closed_at=1.0, closed_by="policy")

    assert [p.worker for p in got.kept] == [0, 1, 2]
