"""Per-worker response times: a round's responses, their summaries, the rule for "slow"."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from phalanx.assignment import Assignment
from phalanx.collect import Piece
from phalanx.collect.pieces import split
from phalanx.response_times import (
    SLOW_RATIO,
    SLOW_ROUNDS,
    WINDOW,
    LateResponse,
    WorkerResponse,
    is_slow_round,
    median,
    p90,
    round_responses,
    seconds_text,
    settle_late,
    summarize,
    summary_of,
    worker_history,
)
from tests.support.arrivals import Arrivals, arrivals, whole_replies

ASSIGNMENT = Assignment(4, ((0, 1), (1, 2), (2, 3)))


def kept(worker: int, seconds: float) -> WorkerResponse:
    return WorkerResponse(worker, seconds, "kept")


def late(worker: int, seconds: float) -> WorkerResponse:
    return WorkerResponse(worker, seconds, "late")


def missing(worker: int) -> WorkerResponse:
    return WorkerResponse(worker, None, "missing")


# ------------------------------------------------------------ one round


def test_each_dispatched_worker_is_kept_late_or_missing_by_its_last_piece() -> None:
    pieces = whole_replies(ASSIGNMENT, {0: 1.0, 1: 2.0, 2: 9.0})
    collection = split(ASSIGNMENT, pieces, closed_at=2.0, closed_by="policy")

    got = round_responses(collection, {0, 1, 2, 3}, clients={0: "c0", 3: "c3"})

    assert got == (
        WorkerResponse(0, 1.0, "kept", "c0"),
        WorkerResponse(1, 2.0, "kept"),
        WorkerResponse(2, 9.0, "late"),
        WorkerResponse(3, None, "missing", "c3"),
    )


def test_a_reply_in_pieces_takes_as_long_as_its_last_piece() -> None:
    pieces = [Piece(1, 0, 1.0, "aa"), Piece(1, 1, 4.0, "aa")]
    collection = split(ASSIGNMENT, pieces, closed_at=2.0, closed_by="deadline", dispatched={1})

    (response,) = round_responses(collection, {1})

    assert response == WorkerResponse(1, 4.0, "late")


def test_a_reply_cut_short_by_its_compute_budget_takes_as_long_as_what_it_sent() -> None:
    pieces = [Piece(1, 0, 1.0, "aa")]  # worker 1 also holds file 1, which it never sent
    collection = split(ASSIGNMENT, pieces, closed_at=5.0, closed_by="last_arrival")

    (response,) = round_responses(collection, {1})

    assert response == kept(1, 1.0)


def test_a_reply_nobody_asked_for_is_no_response() -> None:
    pieces = whole_replies(ASSIGNMENT, {0: 1.0, 3: 1.0})
    collection = split(ASSIGNMENT, pieces, closed_at=1.0, closed_by="policy", dispatched={0})

    assert round_responses(collection, {0}) == (kept(0, 1.0),)


@given(arrivals(), st.integers(0, 20).map(float))
def test_every_dispatched_worker_has_exactly_one_response_that_matches_the_collection(
    drawn: Arrivals, closed_at: float
) -> None:
    assignment = drawn.assignment
    dispatched = {w for w in range(assignment.num_workers) if assignment.files_of(w)}
    collection = split(assignment, drawn.pieces, closed_at=closed_at, closed_by="policy")

    got = round_responses(collection, dispatched)

    assert [r.worker for r in got] == sorted(dispatched)
    for response in got:
        mine = [p.time for p in drawn.pieces if p.worker == response.worker]
        if not mine:
            assert response == missing(response.worker)
        else:
            assert response.seconds == max(mine)
            assert response.status == ("late" if max(mine) > closed_at else "kept")


@pytest.mark.parametrize(
    ("seconds", "status"),
    [
        (math.nan, "kept"),
        (math.inf, "late"),
        (-0.5, "kept"),
        (None, "kept"),
        (1.0, "missing"),
        (1.0, "slow"),
        (True, "kept"),
    ],
)
def test_a_response_refuses_values_no_clock_gives(seconds: object, status: str) -> None:
    with pytest.raises(ValueError, match="response"):
        WorkerResponse(0, seconds, status)  # type: ignore[arg-type]


def test_a_response_refuses_a_negative_or_boolean_worker() -> None:
    for worker in (-1, True):
        with pytest.raises(ValueError, match="worker"):
            WorkerResponse(worker, 1.0, "kept")


@pytest.mark.parametrize(
    "fields",
    [
        {"round": -1},
        {"round": True},
        {"worker": -3},
        {"worker": 1.0},
        {"seconds": math.nan},
        {"seconds": -1.0},
        {"seconds": math.inf},
        {"seconds": False},
        {"seconds": "3"},
    ],
)
def test_a_late_response_refuses_values_no_transport_gives(fields: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="late response"):
        LateResponse(**{"round": 1, "worker": 0, "seconds": 1.0, **fields})  # type: ignore[arg-type]


def test_a_late_reply_settles_only_its_rounds_response_the_latest_one_counting() -> None:
    responses = [
        (1, WorkerResponse(0, None, "missing", "c0")),
        (1, WorkerResponse(1, 2.0, "kept")),
        (1, WorkerResponse(2, 4.0, "kept")),
        (2, WorkerResponse(0, None, "missing", "c0")),
    ]
    late = [
        LateResponse(1, 0, 12.0),
        LateResponse(1, 0, 9.0),
        # One message per file: worker 1's first file came by the close, another after it.
        LateResponse(1, 1, 5.0),
        LateResponse(1, 2, 3.0),  # earlier than the time it has: nothing to change
    ]

    assert settle_late(responses, late) == [
        (1, WorkerResponse(0, 12.0, "late", "c0")),
        (1, WorkerResponse(1, 5.0, "late")),
        (1, WorkerResponse(2, 4.0, "kept")),
        (2, WorkerResponse(0, None, "missing", "c0")),
    ]


# ----------------------------------------------------------- statistics


@given(st.lists(st.floats(0, 1e300), min_size=1, max_size=60))
def test_median_and_p90_are_what_they_say(values: list[float]) -> None:
    m, top = median(values), p90(values)
    assert m is not None and top is not None
    assert m == pytest.approx(statistics.median(values))
    assert top in values and top >= m
    assert sum(v <= top for v in values) >= 0.9 * len(values)
    assert sum(v < top for v in values) < 0.9 * len(values)


def test_statistics_of_nothing_are_none() -> None:
    assert median([]) is None and p90([]) is None


def test_the_mean_of_huge_times_does_not_overflow() -> None:
    history = worker_history([(1, kept(0, 1.7e308)), (2, kept(0, 1.7e308))])
    summary = summary_of(0, history, None)
    assert summary.mean_s == 1.7e308


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(41.23, "41.2 s"), (3.1, "3.1 s"), (0.0312, "0.031 s"), (1204.4, "1,204 s"), (0.0, "0 s")],
)
def test_seconds_read_as_a_person_reads_them(seconds: float, text: str) -> None:
    assert seconds_text(seconds) == text
    assert seconds_text(None) == seconds_text(math.nan) == "–"


# ------------------------------------------------------------- the run


def straggler_run(
    rounds: int, straggler_times: list[float | None]
) -> list[tuple[int, WorkerResponse]]:
    """Workers 0..3 answer in 1 s, in time; worker 4 takes the given times, late above 1 s."""
    history = []
    for t in range(1, rounds + 1):
        history += [(t, kept(w, 1.0)) for w in range(4)]
        seconds = straggler_times[t - 1]
        if seconds is None:
            history.append((t, missing(4)))
        else:
            history.append((t, (kept if seconds <= 1.0 else late)(4, seconds)))
    return history


def test_a_worker_late_and_slow_in_most_of_its_last_rounds_is_slow_in_words() -> None:
    run = summarize(straggler_run(5, [1.0, 41.2, 41.2, 41.2, 41.2]))

    assert run.median_s == 1.0
    (slow,) = run.slow
    assert (slow.worker, slow.rounds, slow.late, slow.missing, slow.slow_rounds) == (4, 5, 4, 0, 4)
    assert slow.mean_s == pytest.approx((1 + 4 * 41.2) / 5)
    assert slow.p90_s == 41.2
    assert slow.slow_reason == (
        "Worker 4 took at least 3 times the run's median response in 4 of its 5 rounds "
        "(late in 4); its median response is 41.2 s against the run's 1.0 s."
    )
    assert all(not w.slow and w.reason is None for w in run.workers if w.worker != 4)


def test_two_slow_rounds_are_noise_and_three_of_the_last_five_are_not() -> None:
    twice = summarize(straggler_run(6, [50.0, 50.0, 1.0, 1.0, 1.0, 1.0]))
    assert twice.slow == ()
    # Old slow rounds leave the window: the worker got faster and lost the mark.
    recovered = summarize(straggler_run(8, [50.0] * 5 + [1.0] * 3))
    assert recovered.slow == ()
    assert recovered.workers[4].slow_rounds == 2
    thrice = summarize(straggler_run(7, [1.0, 1.0, 50.0, 1.0, 50.0, 1.0, 50.0]))
    (slow,) = thrice.slow
    assert slow.slow_reason is not None and "3 of its last 5 rounds" in slow.slow_reason


def test_a_worker_that_never_replies_is_slow_and_the_words_say_so() -> None:
    run = summarize(straggler_run(5, [1.0, None, None, None, 1.0]))

    (slow,) = run.slow
    assert (slow.missing, slow.mean_s, slow.median_s) == (3, 1.0, 1.0)
    assert slow.reason == (
        "sent no reply in 3 of its 5 rounds; its median response is 1.0 s against the run's 1.0 s."
    )


def test_slow_and_absent_rounds_are_named_apart() -> None:
    run = summarize(straggler_run(6, [1.0, 9.0, None, 9.0, 1.0, None]))

    (slow,) = run.slow
    assert slow.reason is not None
    assert slow.reason.startswith(
        "took at least 3 times the run's median response, or sent no reply, in 4 of its last 5 "
        "rounds (late in 2, no reply in 2)"
    )


def test_waiting_for_everyone_still_names_the_worker_that_holds_every_round_up() -> None:
    history = [(t, kept(w, 50.0 if w == 4 else 1.0)) for t in range(1, 6) for w in range(5)]

    (slow,) = summarize(history).slow

    assert (slow.worker, slow.late, slow.slow_rounds) == (4, 0, 5)
    assert "late" not in (slow.reason or "")


def test_late_by_the_policy_alone_is_not_slow() -> None:
    # fastest_k keeps the first three; the next two are late by a hair every round.
    times = {0: 1.0, 1: 1.0, 2: 1.0, 3: 1.1, 4: 1.2}
    history = [
        (t, (kept if s <= 1.0 else late)(w, s)) for t in range(1, 9) for w, s in times.items()
    ]

    run = summarize(history)

    assert [w.late for w in run.workers] == [0, 0, 0, 8, 8]
    assert run.slow == ()


def test_one_or_two_rounds_never_make_a_worker_slow() -> None:
    run = summarize(straggler_run(2, [None, None]))
    assert run.slow == ()


def test_a_run_where_nothing_arrived_has_no_median_and_only_absence_is_slow() -> None:
    history = [(t, missing(w)) for t in range(1, 4) for w in range(2)]

    run = summarize(history)

    assert run.median_s is None
    assert [w.slow for w in run.workers] == [True, True]
    assert run.workers[0].reason == "sent no reply in 3 of its 3 rounds."


def test_a_slow_round_needs_a_time_of_three_medians_or_none() -> None:
    assert is_slow_round(None, 1.0) and is_slow_round(None, None)
    assert is_slow_round(SLOW_RATIO * 2.0, 2.0)
    assert not is_slow_round(SLOW_RATIO * 2.0 - 1e-9, 2.0)
    assert not is_slow_round(5.0, None)
    assert not is_slow_round(0.0, 0.0) and is_slow_round(0.1, 0.0)


responses_of_a_run = st.lists(
    st.tuples(
        st.integers(1, 12),
        st.integers(0, 5),
        st.one_of(st.none(), st.floats(0, 1e6)),
        st.booleans(),
    ),
    max_size=80,
)


@given(responses_of_a_run)
def test_a_summary_accounts_for_every_round_of_every_worker(
    drawn: list[tuple[int, int, float | None, bool]],
) -> None:
    unique = {(t, w): (s, is_late) for t, w, s, is_late in drawn}
    history = [
        (t, missing(w) if s is None else (late if is_late else kept)(w, s))
        for (t, w), (s, is_late) in unique.items()
    ]

    run = summarize(history)

    assert [w.worker for w in run.workers] == sorted({w for _, w in unique})
    for summary in run.workers:
        mine = [r for _, r in history if r.worker == summary.worker]
        times = [r.seconds for r in mine if r.seconds is not None]
        assert summary.kept + summary.late + summary.missing == summary.rounds == len(mine)
        assert summary.recent == min(WINDOW, len(mine))
        assert summary.recent_missing <= summary.slow_rounds <= summary.recent
        assert summary.slow == (summary.slow_rounds >= SLOW_ROUNDS)
        assert (summary.reason is not None) == summary.slow
        if times:
            assert summary.mean_s is not None and summary.p90_s is not None
            assert min(times) <= summary.mean_s * (1 + 1e-9) + 1e-9
            assert summary.mean_s <= max(times) * (1 + 1e-9)
            assert summary.p90_s >= (summary.median_s or 0.0)
        else:
            assert summary.mean_s is summary.median_s is summary.p90_s is None


def test_a_thousand_workers_over_fifty_rounds_are_summarised() -> None:
    history = [
        (t, late(w, 100.0) if w % 100 == 0 else kept(w, 1.0 + (w % 7) / 10))
        for t in range(1, 51)
        for w in range(1000)
    ]

    run = summarize(history)

    assert len(run.workers) == 1000
    assert [w.worker for w in run.slow] == list(range(0, 1000, 100))
