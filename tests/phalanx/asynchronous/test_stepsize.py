"""The step size of a buffered update: full while fresh enough, shrinking with staleness."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from phalanx.asynchronous.stepsize import buffer_scale, default_threshold, step_scale

RULES = ("delay_adaptive", "polynomial", "constant")
stalenesses = st.integers(min_value=0, max_value=10**6)
thresholds = st.floats(min_value=1e-3, max_value=1e5)
exponents = st.floats(min_value=0.0, max_value=10.0)


def test_delay_adaptive_is_the_papers_n_over_max_n_tau() -> None:
    # Mishchenko et al.'s code: lr * n / max(n, delay), with n = 4 here.
    for tau in range(0, 20):
        assert step_scale("delay_adaptive", tau, threshold=4.0) == pytest.approx(4 / max(4, tau))


def test_polynomial_is_fedbuffs_inverse_square_root_by_default() -> None:
    assert step_scale("polynomial", 3) == pytest.approx(0.5)
    assert step_scale("polynomial", 8, exponent=1.0) == pytest.approx(1 / 9)


def test_constant_never_scales() -> None:
    assert {step_scale("constant", tau) for tau in (0, 1, 10**6)} == {1.0}


@given(st.sampled_from(RULES), stalenesses, thresholds, exponents)
def test_a_scale_lies_in_zero_one_and_a_fresh_update_takes_the_full_step(
    rule: str, tau: int, threshold: float, exponent: float
) -> None:
    scale = step_scale(rule, tau, threshold=threshold, exponent=exponent)  # type: ignore[arg-type]
    assert 0.0 < scale <= 1.0
    assert step_scale(rule, 0, threshold=threshold, exponent=exponent) == 1.0  # type: ignore[arg-type]


@given(st.sampled_from(RULES), stalenesses, stalenesses, thresholds, exponents)
def test_a_staler_update_never_takes_a_larger_step(
    rule: str, a: int, b: int, threshold: float, exponent: float
) -> None:
    low, high = sorted((a, b))
    kw = {"threshold": threshold, "exponent": exponent}
    assert step_scale(rule, high, **kw) <= step_scale(rule, low, **kw)  # type: ignore[arg-type]


@given(st.lists(stalenesses, min_size=1, max_size=50), thresholds)
def test_a_buffers_scale_is_the_mean_of_its_updates_scales(taus: list[int], t: float) -> None:
    scales = [step_scale("delay_adaptive", tau, threshold=t) for tau in taus]
    got = buffer_scale("delay_adaptive", taus, threshold=t)
    assert got == pytest.approx(sum(scales) / len(scales))
    assert min(scales) - 1e-12 <= got <= max(scales) + 1e-12


def test_the_default_threshold_counts_the_papers_n_workers_in_model_versions() -> None:
    assert default_threshold(20, 5) == 4.0
    assert default_threshold(3, 10) == pytest.approx(0.3)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: step_scale("delay_adaptive", -1), "staleness must be an int >= 0"),
        (lambda: step_scale("delay_adaptive", True), "staleness must be an int >= 0"),  # type: ignore[arg-type]
        (lambda: step_scale("delay_adaptive", 1.5), "staleness must be an int >= 0"),  # type: ignore[arg-type]
        (lambda: step_scale("delay_adaptive", 2, threshold=0.0), "threshold must be finite"),
        (lambda: step_scale("delay_adaptive", 2, threshold=math.inf), "threshold must be finite"),
        (lambda: step_scale("polynomial", 2, exponent=-1.0), "exponent must be finite"),
        (lambda: step_scale("polynomial", 2, exponent=math.nan), "exponent must be finite"),
        (lambda: step_scale("fastest", 2), "unknown step-size rule"),  # type: ignore[arg-type]
        (lambda: buffer_scale("constant", []), "an empty buffer has no step"),
        (lambda: default_threshold(0, 3), "must be >= 1"),
    ],
)
def test_nonsense_is_refused_with_its_reason(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]
