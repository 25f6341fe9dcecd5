"""The response-time bandit: explores every worker, then prefers the fast ones."""

from __future__ import annotations

import json

import pytest

from phalanx.collect import BanditState, ResponseTimeBandit, observe_times, select_workers


def run(bandit: ResponseTimeBandit, speed: list[float], rounds: int) -> list[tuple[int, ...]]:
    chosen = []
    for _ in range(rounds):
        picked = bandit.select()
        bandit.observe({w: speed[w] for w in picked})
        chosen.append(picked)
    return chosen


def test_every_worker_is_tried_before_any_is_tried_twice() -> None:
    bandit = ResponseTimeBandit(BanditState.fresh(6), k=2)

    first = run(bandit, [1.0] * 6, 3)

    assert first == [(0, 1), (2, 3), (4, 5)]


def test_the_bandit_learns_to_choose_the_fast_workers() -> None:
    speed = [5.0, 1.0, 6.0, 1.2, 7.0, 8.0, 1.1, 9.0]
    bandit = ResponseTimeBandit(BanditState.fresh(len(speed)), k=3, exploration=0.1)

    chosen = run(bandit, speed, 60)

    assert chosen[-1] == (1, 3, 6)


def test_the_choice_is_the_same_on_a_replay() -> None:
    speed = [3.0, 1.0, 2.0, 4.0, 0.5]
    runs = [run(ResponseTimeBandit(BanditState.fresh(5), k=2), speed, 20) for _ in range(2)]

    assert runs[0] == runs[1]


def test_only_available_workers_are_chosen() -> None:
    assert select_workers(BanditState.fresh(5), 3, available=[4, 2]) == (2, 4)


def test_the_state_survives_a_json_checkpoint_and_the_run_goes_on_alike() -> None:
    speed = [3.0, 1.0, 2.0, 4.0, 0.5]
    bandit = ResponseTimeBandit(BanditState.fresh(5), k=2)
    run(bandit, speed, 7)
    resumed = ResponseTimeBandit(BanditState.fresh(5), k=2)
    resumed.restore(json.loads(json.dumps(bandit.state())))

    assert resumed.learned == bandit.learned
    assert run(resumed, speed, 5) == run(bandit, speed, 5)


def test_a_mean_is_the_average_of_the_observed_times() -> None:
    state = observe_times(observe_times(BanditState.fresh(2), {0: 2.0}), {0: 4.0, 1: 1.0})

    assert (state.counts, state.means, state.rounds, state.scale) == ((2, 1), (3.0, 1.0), 2, 4.0)


@pytest.mark.parametrize(
    "state",
    [
        {"counts": [1], "means": [float("nan")], "rounds": 1, "scale": 1.0},
        {"counts": [-1], "means": [1.0], "rounds": 1, "scale": 1.0},
        {"counts": [1, 2], "means": [1.0], "rounds": 1, "scale": 1.0},
        {"counts": [True], "means": [1.0], "rounds": 1, "scale": 1.0},
    ],
)
def test_a_corrupt_checkpoint_is_refused(state: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        BanditState.restore(state)


def test_a_response_time_that_is_no_time_is_refused() -> None:
    with pytest.raises(ValueError, match="finite and >= 0"):
        observe_times(BanditState.fresh(2), {0: float("inf")})
    with pytest.raises(ValueError, match="outside"):
        observe_times(BanditState.fresh(2), {2: 1.0})
