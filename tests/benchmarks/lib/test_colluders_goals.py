"""How soon the proof across rounds can flag two colluders: the expectation and its premises."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from benchmarks.lib.colluders_goals import expected_rounds_to_proof
from benchmarks.lib.colluders_markdown import MOLS_MEET
from benchmarks.lib.robustness_grid import K
from phalanx.assignment.designs import bibd_assignment, mols_assignment
from phalanx.assignment.incidence import Assignment


def _shared(assignment: Assignment) -> dict[tuple[int, int], int]:
    counts = dict.fromkeys(itertools.combinations(range(assignment.num_workers), 2), 0)
    for holders in assignment.files:
        for pair in itertools.combinations(holders, 2):
            counts[pair] += 1
    return counts


def test_the_coupon_collector_of_two_coupons_takes_three_draws() -> None:
    assert expected_rounds_to_proof(2, 1) == 3.0
    assert expected_rounds_to_proof(2, 1, meet=0.5) == 6.0
    assert expected_rounds_to_proof(13, 0) == 1.0


def test_the_expectation_agrees_with_drawing_partners_at_random() -> None:
    rng = np.random.default_rng(2026)
    rounds = []
    for _ in range(4000):
        seen: set[int] = set()
        n = 0
        while len(seen) < 8:
            n += 1
            seen.add(int(rng.integers(13)))
        rounds.append(n)
    assert np.mean(rounds) == pytest.approx(expected_rounds_to_proof(13, 7), abs=0.15)


def test_every_pair_of_sts15_shares_one_file_and_of_mols_one_or_none() -> None:
    assert set(_shared(bibd_assignment(K)).values()) == {1}
    mols = _shared(mols_assignment(K, 3))
    assert set(mols.values()) == {0, 1}
    sharing = sum(mols.values()) / len(mols)
    assert sharing == pytest.approx(MOLS_MEET)


@pytest.mark.parametrize(("partners", "bound", "meet"), [(13, 13, 1.0), (13, -1, 1.0), (13, 7, 0)])
def test_a_bound_the_partners_cannot_exceed_is_refused(
    partners: int, bound: int, meet: float
) -> None:
    with pytest.raises(ValueError, match="need 0 <= bound < partners"):
        expected_rounds_to_proof(partners, bound, meet)
