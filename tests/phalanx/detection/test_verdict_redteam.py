"""Red team of `detect` with proven liars, drops and ties (issue 17).

Each test says how it could fail: a file accepted from a flagged or proven worker, a
drop list that disagrees with `dropped`, or an honest worker flagged because a proven
liar still counted in the search for the largest agreeing group.
"""

from __future__ import annotations

import itertools

import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import Tensor

from phalanx.assignment import Assignment
from phalanx.detection import Replica, detect, payload_digest

K = 9


def value(file: int, lie: int = 0) -> Tensor:
    """File ``file``'s honest update, or the ``lie``-th forged one (lie > 0)."""
    return torch.tensor([float(file + 1), float(-lie)], dtype=torch.float32)


def replica(worker: int, file: int, lie: int = 0) -> Replica:
    v = value(file, lie)
    return Replica(worker, file, v, payload_digest(v.numpy().tobytes()))


TRIPLES = tuple(itertools.combinations(range(K), 3))


def test_two_proven_liars_on_one_file_do_not_flag_its_honest_holder() -> None:
    """Could fail if proven liars still count in the largest agreeing group.

    Workers 0 and 1 are proven; on file (0, 1, 7) they send the same forged value, so
    honest 7 disagrees with both. Were 0 and 1 part of the clique search, the unique
    largest group would be everyone but 7, and 7 would be flagged.
    """
    files = ((0, 1, 7), (2, 3, 4), (5, 6, 8), (0, 2, 5), (1, 3, 6))
    assignment = Assignment(K, files)
    replicas = [
        replica(w, f, lie=1 if f == 0 and w in (0, 1) else 0)
        for f, workers in enumerate(files)
        for w in workers
    ]
    verdict = detect(assignment, replicas, mode="exact", distrusted=frozenset({0, 1}))
    assert 7 not in verdict.flagged
    assert verdict.flagged == {0, 1}  # they lied again
    assert verdict.accepted_from[0] == 7  # the honest replica keeps the file
    assert verdict.suspects == frozenset()


def test_a_proven_liar_cannot_make_groups_tie() -> None:
    """Could fail the same way: one proven liar against one honest worker is a tie."""
    files = ((0, 7), (1, 2, 3), (4, 5, 6), (0, 1, 4))
    replicas = [
        replica(w, f, lie=1 if (f, w) == (0, 0) else 0)
        for f, workers in enumerate(files)
        for w in workers
    ]
    verdict = detect(Assignment(K, files), replicas, mode="exact", distrusted=frozenset({0}))
    assert verdict.rule == "unique_clique"
    assert verdict.flagged == {0} and verdict.suspects == frozenset()
    assert 0 not in verdict.dropped


@st.composite
def rounds(draw: st.DrawFn) -> tuple[Assignment, list[Replica], frozenset[int], frozenset[int]]:
    """A few files of three workers, liars lying where they like, some of them proven."""
    files = draw(st.lists(st.sampled_from(TRIPLES), min_size=1, max_size=12, unique=True))
    assignment = Assignment(K, tuple(files))
    liars = draw(st.sets(st.integers(0, K - 1), max_size=4))
    proven = draw(st.sets(st.sampled_from(sorted(liars)), max_size=len(liars))) if liars else set()
    silent = draw(st.sets(st.integers(0, K - 1), max_size=2))
    replicas = []
    for f, workers in enumerate(assignment.files):
        for w in workers:
            if w in silent:
                continue
            lie = draw(st.integers(0, 2)) if w in liars else 0
            replicas.append(replica(w, f, lie))
    return assignment, replicas, frozenset(liars), frozenset(proven)


@given(rounds(), st.sampled_from(["drop_disputed", "majority"]))
def test_no_file_comes_from_a_flagged_or_proven_worker_and_drops_are_exactly_dropped(
    case: tuple[Assignment, list[Replica], frozenset[int], frozenset[int]], on_tie: str
) -> None:
    """Could fail if a value came from a worker the round distrusts, or the drop list
    (what the run page shows) missed or invented a file."""
    assignment, replicas, _, proven = case
    verdict = detect(assignment, replicas, mode="exact", on_tie=on_tie, distrusted=proven)  # type: ignore[arg-type]
    assert not set(verdict.accepted_from.values()) & (verdict.flagged | proven)
    assert set(verdict.drops) == set(verdict.dropped)
    assert set(verdict.accepted) | set(verdict.dropped) == set(range(assignment.num_files))
    assert not set(verdict.accepted) & set(verdict.dropped)
    for f, drop in verdict.drops.items():
        assert drop.holders == assignment.files[f]
        assert set(drop.digests) <= set(drop.holders)


@given(rounds())
def test_once_every_liar_is_proven_no_honest_worker_is_flagged_or_suspected(
    case: tuple[Assignment, list[Replica], frozenset[int], frozenset[int]],
) -> None:
    """Could fail if proven liars still shaped the largest agreeing group."""
    assignment, replicas, liars, _ = case
    verdict = detect(assignment, replicas, mode="exact", distrusted=liars)
    assert verdict.flagged <= liars
    assert verdict.suspects == frozenset()
    for f, v in verdict.accepted.items():
        assert torch.equal(v, value(f))
