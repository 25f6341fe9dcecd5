from __future__ import annotations

import itertools
import math
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from phalanx.systems import (
    NEVER,
    SystemsConfig,
    WorkerProfile,
    arrival_time,
    finish_times,
    is_available,
    pieces_done_by,
    round_factor,
)

# Powers of two, so every time below is exact in binary floating point.
PROFILE = WorkerProfile(
    seconds_per_sample=0.25,
    up_bytes_per_s=512.0,
    down_bytes_per_s=1024.0,
    latency_s=0.5,
    straggler=False,
)
STEADY = SystemsConfig()
DROPOUT = SystemsConfig(availability="dropout", dropout_probability=0.25)
ON_OFF = SystemsConfig(availability="on_off", mean_rounds_on=6, mean_rounds_off=2)
VARYING = SystemsConfig(round_sigma=0.5)


def _key(worker: int = 0, round_: int = 0) -> dict[str, int]:
    return {"seed": 11, "worker": worker, "round_": round_}


def test_the_arrival_is_download_plus_compute_plus_upload() -> None:
    times = finish_times(STEADY, PROFILE, **_key(), bytes_down=2048, work=[4, 8])
    assert times == (2.5 + 1.0, 2.5 + 3.0)  # download 2048 / 1024 + 0.5
    arrival = arrival_time(STEADY, PROFILE, **_key(), bytes_down=2048, work=[4, 8], bytes_up=1024)
    assert arrival == 5.5 + 2.5  # upload 1024 / 512 + 0.5


def test_without_work_the_arrival_is_the_download_and_the_upload() -> None:
    assert finish_times(STEADY, PROFILE, **_key(), bytes_down=0, work=[]) == ()
    assert arrival_time(STEADY, PROFILE, **_key(), bytes_down=0, work=[], bytes_up=0) == 1.0


@given(
    work=st.lists(st.integers(min_value=0, max_value=10_000), max_size=40),
    worker=st.integers(min_value=0, max_value=1000),
    round_=st.integers(min_value=0, max_value=1000),
)
def test_pieces_finish_in_order_and_the_reply_leaves_after_the_last(
    work: list[int], worker: int, round_: int
) -> None:
    key = {"seed": 5, "worker": worker, "round_": round_}
    times = finish_times(VARYING, PROFILE, **key, bytes_down=100, work=work)
    assert list(times) == sorted(times)
    assert all(t >= 100 / 1024 + 0.5 for t in times)
    arrival = arrival_time(VARYING, PROFILE, **key, bytes_down=100, work=work, bytes_up=64)
    assert arrival == (times[-1] if times else 100 / 1024 + 0.5) + 64 / 512 + 0.5


def test_the_round_factor_scales_the_compute_time_only() -> None:
    key = _key(worker=3, round_=9)
    factor = round_factor(VARYING, **key)
    assert factor != 1.0
    times = finish_times(VARYING, PROFILE, **key, bytes_down=1024, work=[8])
    assert times[0] == 1.5 + 8 * 0.25 * factor


def test_the_round_factor_is_one_without_variation() -> None:
    assert {
        round_factor(STEADY, seed=1, worker=w, round_=r) for w in range(5) for r in range(5)
    } == {1.0}


def test_the_round_factor_has_mean_one_and_differs_between_rounds() -> None:
    factors = [round_factor(VARYING, seed=2, worker=0, round_=r) for r in range(4000)]
    assert statistics.fmean(factors) == pytest.approx(1.0, abs=0.03)
    assert statistics.median(factors) == pytest.approx(math.exp(-0.125), abs=0.03)
    assert len(set(factors)) == 4000


def test_a_workers_draws_do_not_depend_on_other_workers_or_call_order() -> None:
    config = VARYING.model_copy(update={"availability": "dropout", "dropout_probability": 0.5})
    alone = [(round_factor(config, 4, 7, r), is_available(config, 4, 7, r)) for r in range(50)]
    for other in range(20):
        for r in reversed(range(50)):
            round_factor(config, 4, other, r)
            is_available(config, 4, other, r)
    again = [(round_factor(config, 4, 7, r), is_available(config, 4, 7, r)) for r in range(50)]
    assert again == alone


def test_dropout_misses_rounds_at_its_probability() -> None:
    missed = [not is_available(DROPOUT, 0, w, r) for w in range(20) for r in range(200)]
    assert statistics.fmean(missed) == pytest.approx(0.25, abs=0.03)


def test_a_dropout_probability_of_zero_never_misses_a_round() -> None:
    config = SystemsConfig(availability="dropout", dropout_probability=0.0)
    assert all(is_available(config, 3, w, r) for w in range(10) for r in range(50))


def test_an_absent_worker_never_arrives() -> None:
    absent = next(r for r in range(100) if not is_available(DROPOUT, 11, 0, r))
    key = _key(round_=absent)
    assert finish_times(DROPOUT, PROFILE, **key, bytes_down=1, work=[1, 2]) == (NEVER, NEVER)
    assert arrival_time(DROPOUT, PROFILE, **key, bytes_down=1, work=[1], bytes_up=1) == math.inf
    assert pieces_done_by((NEVER, NEVER), 1e300) == 0


def _runs(states: list[bool], value: bool) -> list[int]:
    """Lengths of the periods of ``value`` in ``states``, but for the two the window cuts."""
    periods = [(state, len(list(group))) for state, group in itertools.groupby(states)]
    return [length for state, length in periods[1:-1] if state == value]


def test_on_off_periods_have_their_mean_lengths_and_long_run_share() -> None:
    on_runs, off_runs, share = [], [], []
    for worker in range(30):
        states = [is_available(ON_OFF, 1, worker, r) for r in range(400)]
        on_runs += _runs(states, True)
        off_runs += _runs(states, False)
        share.append(statistics.fmean(states))
    assert statistics.fmean(on_runs) == pytest.approx(6.0, rel=0.15)
    assert statistics.fmean(off_runs) == pytest.approx(2.0, rel=0.15)
    assert statistics.fmean(share) == pytest.approx(0.75, abs=0.05)


def test_on_off_availability_is_a_pure_function_of_the_round() -> None:
    late = [is_available(ON_OFF, 9, 2, r) for r in (5000, 1, 5000, 0, 1)]
    assert late == [is_available(ON_OFF, 9, 2, r) for r in (5000, 1, 5000, 0, 1)]
    assert late[0] == late[2] and late[1] == late[4]


def test_pieces_done_by_counts_the_finished_prefix() -> None:
    times = (1.0, 2.0, 2.0, 5.0)
    assert [pieces_done_by(times, cut) for cut in (0.5, 1.0, 2.0, 4.9, 5.0, NEVER)] == [
        0,
        1,
        3,
        3,
        4,
        4,
    ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"bytes_down": -1}, "bytes_down must be >= 0"),
        ({"bytes_up": -1}, "bytes_up must be >= 0"),
        ({"work": [3, -1]}, "every piece of work needs >= 0 samples"),
        ({"round_": -1}, "round must be >= 0"),
        ({"worker": -2}, "worker must be >= 0"),
        ({"seed": -3}, "seed must be >= 0"),
    ],
)
def test_negative_inputs_are_refused_by_name(change: dict[str, object], message: str) -> None:
    call: dict[str, object] = {**_key(), "bytes_down": 1, "work": [1], "bytes_up": 1, **change}
    with pytest.raises(ValueError, match=message):
        arrival_time(ON_OFF, PROFILE, **call)  # type: ignore[arg-type]
