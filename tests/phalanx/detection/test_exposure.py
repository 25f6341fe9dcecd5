from __future__ import annotations

import itertools
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from phalanx.assignment import make_assignment
from phalanx.detection import exposure
from phalanx.detection.exposure import exposed_files


def most_files_inside(supporters: dict[int, tuple[int, ...]], liars: int) -> int:
    """The exact count: the most files whose supporters all lie in one set of liars."""
    workers = sorted({w for ws in supporters.values() for w in ws})
    size = min(liars, len(workers))
    return max(
        (
            sum(1 for ws in supporters.values() if ws and set(ws) <= set(chosen))
            for chosen in itertools.combinations(workers, size)
        ),
        default=0,
    )


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.integers(0, 30),
        st.lists(st.integers(0, 7), min_size=0, max_size=4, unique=True).map(tuple),
        max_size=14,
    ),
    st.integers(0, 8),
)
def test_the_count_is_exact_when_cheap_and_the_bound_never_undercounts(
    supporters: dict[int, tuple[int, ...]], liars: int
) -> None:
    exact = most_files_inside(supporters, liars)
    assert exposed_files(supporters, liars) == exact
    with patch.object(exposure, "EXACT_BUDGET", 0):  # the bounds alone
        bound = exposed_files(supporters, liars)
    assert exact <= bound <= sum(1 for ws in supporters.values() if ws)


@pytest.mark.parametrize(
    ("scheme", "workers", "liars", "exact"),
    [
        ("bibd", 15, 7, 5),  # no Fano subplane: the pair bound alone would say 7
        ("bibd", 15, 3, 1),
        ("subsets", 15, 7, 35),  # every triple of the 7
        ("subsets", 9, 4, 4),
        ("groups", 15, 7, 2),  # two whole groups
    ],
)
def test_the_count_is_exact_on_the_designs_of_the_assignment(
    scheme: str, workers: int, liars: int, exact: int
) -> None:
    assignment = make_assignment(scheme, workers, 3)
    supporters = dict(enumerate(assignment.files))
    assert exposed_files(supporters, liars) == exact


def test_single_replicas_are_each_exposed_to_one_liar() -> None:
    assert exposed_files({0: (3,), 1: (4,), 2: (3,)}, 1) == 2
    assert exposed_files({0: (3,), 1: (4,), 2: (3,)}, 0) == 0


def test_a_negative_number_of_liars_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 0"):
        exposed_files({}, -1)
