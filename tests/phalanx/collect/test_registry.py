"""`collect` by every policy: nothing lost, the deadline honoured, online and offline alike."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from phalanx.assignment import Assignment, random_assignment
from phalanx.collect import CLOSE_RULES, CollectConfig, CollectionPolicy, Piece, collect
from phalanx.collect.config import PARAMETERS
from phalanx.collect.registry import close_time
from tests.support.arrivals import HONEST, Arrivals, arrivals

OPTIONS: dict[str, dict[str, Any]] = {
    "fastest_k": {"k": 2},
    "adaptive_k": {"k": 3},
    "quorum": {"m": 2},
}


def every_policy() -> list[str]:
    return sorted(CLOSE_RULES)


def test_the_registry_and_the_config_name_the_same_policies() -> None:
    assert set(CLOSE_RULES) == set(PARAMETERS)


@pytest.mark.parametrize("policy", every_policy())
@settings(max_examples=40)
@given(round_=arrivals(), deadline=st.none() | st.integers(1, 25).map(float))
def test_every_piece_is_kept_or_late_and_every_piece_never_sent_is_missing(
    policy: str, round_: Arrivals, deadline: float | None
) -> None:
    got = collect(
        policy, round_.assignment, round_.pieces, deadline_s=deadline, **OPTIONS.get(policy, {})
    )

    assert sorted(got.kept + got.late, key=repr) == sorted(round_.pieces, key=repr)
    assert all(p.time <= got.closed_at for p in got.kept)
    assert all(p.time > got.closed_at for p in got.late)
    arrived = {(p.worker, p.file) for p in round_.pieces}
    given_out = {(w, f) for f, ws in enumerate(round_.assignment.files) for w in ws}
    assert set(got.missing) == given_out - arrived
    assert set(got.late_workers) == {p.worker for p in got.late} | {w for w, _ in got.missing}
    if deadline is not None:
        assert got.closed_at <= deadline


@given(round_=arrivals())
def test_all_keeps_every_piece(round_: Arrivals) -> None:
    got = collect("all", round_.assignment, round_.pieces)

    assert got.late == ()
    assert len(got.kept) == len(round_.pieces)
    assert got.closed_at == max((p.time for p in round_.pieces), default=0.0)


@given(round_=arrivals(), deadline=st.integers(0, 25).map(float))
def test_deadline_keeps_exactly_the_pieces_that_arrived_by_it(
    round_: Arrivals, deadline: float
) -> None:
    if deadline == 0:
        with pytest.raises(ValueError):
            CollectConfig(policy="deadline", deadline_s=deadline)
        return
    got = collect("deadline", round_.assignment, round_.pieces, deadline_s=deadline)

    assert set(got.kept) == {p for p in round_.pieces if p.time <= deadline}


@pytest.mark.parametrize("policy", every_policy())
@settings(max_examples=40)
@given(round_=arrivals(), early=st.integers(1, 25), later=st.integers(0, 10))
def test_a_later_deadline_never_keeps_fewer_pieces(
    policy: str, round_: Arrivals, early: int, later: int
) -> None:
    options = OPTIONS.get(policy, {})
    a = collect(policy, round_.assignment, round_.pieces, deadline_s=early, **options)
    b = collect(policy, round_.assignment, round_.pieces, deadline_s=early + later, **options)

    assert set(a.kept) <= set(b.kept)


@pytest.mark.parametrize("policy", every_policy())
@settings(max_examples=40)
@given(round_=arrivals())
def test_a_live_round_closes_where_the_simulated_one_does(policy: str, round_: Arrivals) -> None:
    live = CollectionPolicy(policy, deadline_s=12.0, options=OPTIONS.get(policy, {}))
    offline = live(round_.assignment, round_.pieces)
    ordered = sorted(round_.pieces, key=lambda p: p.time)
    # Replay the arrivals one instant at a time; close at the first instant the policy allows.
    instants = sorted({p.time for p in ordered} | {12.0})
    for now in instants:
        so_far = [p for p in ordered if p.time <= now]
        if live.closes_by(now, round_.assignment, so_far):
            assert now == offline.closed_at
            assert live(round_.assignment, so_far).kept == offline.kept
            return
    assert offline.closed_by == "last_arrival"


def test_a_round_closes_at_the_deadline_when_the_policy_is_not_met_by_then() -> None:
    assignment = random_assignment(6, 3, 4, seed=1)
    pieces = [Piece(w, f, 5.0, HONEST) for w in range(5) for f in assignment.files_of(w)]

    got = collect("all", assignment, pieces, deadline_s=9.0)

    assert (got.closed_at, got.closed_by) == (9.0, "deadline")
    assert got.late_workers == (5,)


def test_workers_not_dispatched_are_neither_waited_for_nor_late() -> None:
    assignment = random_assignment(6, 3, 4, seed=1)
    pieces = [Piece(w, f, float(w), HONEST) for w in range(5) for f in assignment.files_of(w)]

    got = collect("all", assignment, pieces, dispatched={0, 1, 2, 3, 4})

    assert (got.closed_at, got.closed_by, got.late_workers) == (4.0, "policy", ())


def test_an_unknown_policy_is_refused_with_the_known_ones_named() -> None:
    with pytest.raises(ValueError, match="choose one of: adaptive_k, all, bandit"):
        collect("fastest", random_assignment(3, 1, 3, seed=0), [])
    with pytest.raises(ValueError, match="unknown collection policy"):
        CollectionPolicy("slowest")


def test_the_policy_of_a_config_carries_its_parameters_with_their_defaults() -> None:
    quorum = CollectionPolicy.from_config(CollectConfig(policy="quorum", deadline_s=30))
    adaptive = CollectionPolicy.from_config(CollectConfig(policy="adaptive_k", k=4))

    assert quorum == CollectionPolicy("quorum", 30.0, {"m": 2})
    assert adaptive == CollectionPolicy("adaptive_k", None, {"k": 4})


def test_a_round_option_overrides_the_configured_one() -> None:
    assignment = Assignment(4, ((0,), (1,), (2,), (3,)))
    pieces = [Piece(w, w, float(w + 1), HONEST) for w in range(4)]
    policy = CollectionPolicy("adaptive_k", options={"k": 1})

    assert policy(assignment, pieces).closed_at == 1.0
    assert policy(assignment, pieces, k=3).closed_at == 3.0


@pytest.mark.parametrize("policy", every_policy())
def test_thousands_of_workers_and_tens_of_thousands_of_pieces_are_decided(policy: str) -> None:
    assignment = random_assignment(3000, 3, 10_000, seed=7)
    rng = random.Random(7)
    speed = [rng.expovariate(1.0) for _ in range(assignment.num_workers)]
    pieces = [
        Piece(w, f, speed[w] + rng.random(), HONEST if w % 50 else "bad")
        for f, workers in enumerate(assignment.files)
        for w in workers
        if w % 97
    ]
    options: dict[str, dict[str, Any]] = {
        "fastest_k": {"k": 2000},
        "adaptive_k": {"k": 1000},
        "quorum": {"m": 2},
    }

    got = collect(policy, assignment, pieces, deadline_s=4.0, **options.get(policy, {}))

    assert len(pieces) >= 29_000
    assert len(got.kept) + len(got.late) == len(pieces)
    assert close_time(policy, assignment, got.kept, **options.get(policy, {})) in {
        None,
        got.closed_at,
    }
