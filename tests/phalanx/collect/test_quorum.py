"""Quorum and fastest replica per file: agreement closes a file, a lone liar never does."""

from __future__ import annotations

from hypothesis import given

from phalanx.assignment import Assignment, groups_assignment
from phalanx.collect import Piece, collect, fastest_replica_close, file_close_times, quorum_close
from tests.support.arrivals import HONEST, Arrivals, arrivals

ONE_FILE = Assignment(3, ((0, 1, 2),))


def test_with_r_3_and_m_2_one_straggler_per_file_costs_nothing() -> None:
    pieces = [Piece(0, 0, 1.0, HONEST), Piece(1, 0, 2.0, HONEST), Piece(2, 0, 50.0, HONEST)]

    got = collect("quorum", ONE_FILE, pieces, m=2)

    assert (got.closed_at, got.closed_by) == (2.0, "policy")
    assert [p.worker for p in got.late] == [2]


def test_a_lone_liar_cannot_close_a_file() -> None:
    pieces = [Piece(0, 0, 1.0, "bad"), Piece(1, 0, 2.0, HONEST)]

    assert quorum_close(ONE_FILE, pieces, m=2) is None
    got = collect("quorum", ONE_FILE, pieces, m=2, deadline_s=10.0)
    assert (got.closed_at, got.closed_by) == (10.0, "deadline")
    assert {p.worker for p in got.kept} == {0, 1}


def test_a_file_whose_first_replicas_disagree_stays_open_until_m_agree() -> None:
    pieces = [Piece(0, 0, 1.0, "bad"), Piece(1, 0, 2.0, HONEST), Piece(2, 0, 3.0, HONEST)]

    got = collect("quorum", ONE_FILE, pieces, m=2, deadline_s=10.0)

    assert (got.closed_at, got.closed_by, got.late) == (3.0, "policy", ())


def test_a_liar_repeating_its_piece_has_still_one_vote() -> None:
    pieces = [Piece(0, 0, 1.0, "bad"), Piece(0, 0, 1.5, "bad"), Piece(1, 0, 2.0, HONEST)]

    assert quorum_close(ONE_FILE, pieces, m=2) is None


def test_a_file_given_to_fewer_workers_than_m_needs_all_of_them() -> None:
    assignment = Assignment(3, ((0, 1, 2), (2,)))
    pieces = [Piece(0, 0, 1.0, HONEST), Piece(1, 0, 2.0, HONEST), Piece(2, 1, 4.0, HONEST)]

    assert file_close_times(assignment, pieces, m=2) == {0: 2.0, 1: 4.0}


@given(round_=arrivals())
def test_quorum_never_closes_a_file_on_disagreeing_replicas(round_: Arrivals) -> None:
    closed = file_close_times(round_.assignment, round_.pieces, m=2)

    for f, at in closed.items():
        holders = round_.assignment.workers_of(f)
        by_then = [p for p in round_.pieces if p.file == f and p.time <= at]
        digests = [p.digest for p in by_then]
        need = min(2, len(holders))
        assert any(len({p.worker for p in by_then if p.digest == d}) >= need for d in set(digests))


def test_group_fastest_waits_for_the_fastest_worker_of_each_group() -> None:
    assignment = groups_assignment(6, 3)  # groups {0, 1, 2} and {3, 4, 5}
    times = {0: 5.0, 1: 2.0, 2: 9.0, 3: 7.0, 4: 8.0}
    pieces = [Piece(w, w // 3, t, HONEST) for w, t in times.items()]

    got = collect("group_fastest", assignment, pieces)

    assert got.closed_at == 7.0
    assert {p.worker for p in got.kept} == {0, 1, 3}
    assert got.late_workers == (2, 4, 5)


def test_group_fastest_waits_only_for_the_selected_groups() -> None:
    assignment = groups_assignment(6, 3)
    pieces = [Piece(1, 0, 2.0, HONEST), Piece(3, 1, 7.0, HONEST)]

    assert fastest_replica_close(assignment, pieces, groups=[0]) == 2.0
    assert fastest_replica_close(assignment, pieces, groups=[]) == 0.0
