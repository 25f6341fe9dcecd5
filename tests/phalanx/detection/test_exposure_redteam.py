"""Red team of `exposed_files`: never below the exact count, and how far above it."""

from __future__ import annotations

import itertools
import random

import pytest

from phalanx.assignment import make_assignment
from phalanx.detection.exposure import exposed_files


def most_files_inside(supporters: dict[int, tuple[int, ...]], liars: int) -> int:
    """The exact count, by enumerating every set of ``liars`` workers."""
    workers = sorted({w for ws in supporters.values() for w in ws})
    size = min(liars, len(workers))
    return max(
        (
            sum(1 for ws in supporters.values() if ws and set(ws) <= set(chosen))
            for chosen in itertools.combinations(workers, size)
        ),
        default=0,
    )


@pytest.mark.parametrize("seed", range(6))
def test_mixed_sizes_and_repeated_supporter_sets_never_undercount(seed: int) -> None:
    # Up to 11 workers and 40 files of 1 to 5 supporters, a third repeating an earlier set
    # (the same-set bound), some listing a worker twice.
    rng = random.Random(seed)
    for _ in range(150):
        workers = rng.randint(1, 11)
        supporters: dict[int, tuple[int, ...]] = {}
        for f in range(rng.randint(0, 40)):
            if supporters and rng.random() < 0.3:
                supporters[f] = rng.choice(list(supporters.values()))
            else:
                group = rng.sample(range(workers), min(workers, rng.choice([1, 2, 3, 3, 4, 5])))
                supporters[f] = (*group, group[0]) if rng.random() < 0.1 else tuple(group)
        liars = rng.randint(0, workers + 1)
        assert exposed_files(supporters, liars) >= most_files_inside(supporters, liars)


def test_the_count_is_exact_on_the_default_design() -> None:
    # The built-in STS(15) has no Fano subplane: 7 of its workers hold at most 5 files
    # together, where the pair bound alone says 7.
    supporters = dict(enumerate(make_assignment("bibd", 15, 3).files))
    assert most_files_inside(supporters, 7) == 5
    assert exposed_files(supporters, 7) == 5


def test_beyond_the_budget_of_the_exact_count_the_bound_stays_sound() -> None:
    # 40 workers, 19 liars: C(40, 19) sets are far too many to try.
    supporters = dict(enumerate(make_assignment("random", 40, 3, num_files=200, seed=1).files))
    assert exposed_files(supporters, 19) >= 1
    assert exposed_files(supporters, 19) <= 200
