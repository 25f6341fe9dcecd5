"""G-CADA's lazy group selection by CADA's rule."""

from __future__ import annotations

import pytest

from phalanx.collect import lazy_groups, next_staleness


def test_a_group_is_selected_when_its_gradient_moved_more_than_the_model() -> None:
    # threshold = c / D * sum(moves) = 1.0 / 2 * (1 + 3) = 2.0
    selected = lazy_groups([1.0, 2.0, 2.5], [1, 1, 1], [1.0, 3.0], c=1.0, max_staleness=5)

    assert selected == (2,)


def test_a_group_too_long_silent_is_selected_whatever_its_innovation() -> None:
    assert lazy_groups([0.0, 0.0], [5, 4], [1.0], c=1.0, max_staleness=5) == (0,)


def test_without_model_history_every_group_that_moved_is_selected() -> None:
    assert lazy_groups([0.0, 0.1], [1, 1], [], c=1.0, max_staleness=5) == (1,)


def test_staleness_restarts_for_the_groups_that_uploaded() -> None:
    assert next_staleness([1, 3, 2], uploaded=[1]) == (2, 1, 3)


@pytest.mark.parametrize(
    ("innovations", "moves", "c"),
    [([float("nan")], [1.0], 1.0), ([1.0], [-1.0], 1.0), ([1.0], [1.0], float("inf"))],
)
def test_numbers_that_are_not_finite_and_non_negative_are_refused(
    innovations: list[float], moves: list[float], c: float
) -> None:
    with pytest.raises(ValueError, match="finite and >= 0"):
        lazy_groups(innovations, [1], moves, c=c, max_staleness=3)
