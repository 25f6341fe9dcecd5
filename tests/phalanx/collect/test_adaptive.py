"""Adaptive k-sync: k grows when the stationarity test says the error floor is reached."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from phalanx.collect import AdaptiveK, advance_k, grow_k


def test_k_stays_while_successive_updates_agree() -> None:
    state = AdaptiveK(2)
    for _ in range(30):
        state = advance_k(state, 1.0, k_max=10, burn_in=3)

    assert state.k == 2
    assert state.pflug_sum == 27.0


def test_k_grows_by_its_step_once_the_sum_after_the_burn_in_turns_negative() -> None:
    state = AdaptiveK(2)
    for product in (-5.0, -5.0, 1.0, -2.0):  # the first two fall in the burn-in
        state = advance_k(state, product, k_max=10, step=3, burn_in=2)

    assert state == AdaptiveK(5)


def test_k_never_grows_past_the_workers_there_are() -> None:
    assert grow_k(AdaptiveK(9), k_max=10, step=4) == AdaptiveK(10)
    assert grow_k(AdaptiveK(10), k_max=10) == AdaptiveK(10)


@given(products=st.lists(st.floats(-10, 10), max_size=60))
def test_k_never_shrinks_and_never_passes_k_max(products: list[float]) -> None:
    state, ks = AdaptiveK(1), [1]
    for product in products:
        state = advance_k(state, product, k_max=6, burn_in=2)
        ks.append(state.k)

    assert ks == sorted(ks)
    assert ks[-1] <= 6


def test_the_state_survives_a_json_checkpoint() -> None:
    state = advance_k(AdaptiveK(3), 0.25, k_max=8, burn_in=0)

    assert AdaptiveK.restore(json.loads(json.dumps(state.state()))) == state


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_an_inner_product_that_is_no_number_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="finite"):
        advance_k(AdaptiveK(1), bad, k_max=4)


def test_a_state_with_a_fractional_k_is_refused() -> None:
    with pytest.raises(ValueError, match="whole numbers"):
        AdaptiveK.restore({"k": 2.5, "pflug_sum": 0.0, "rounds": 0})
