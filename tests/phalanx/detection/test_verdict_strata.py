"""r = 1 screening within strata: updates computed on different model versions are
scored among their own, never against each other (asynchronous mode's buffers)."""

from __future__ import annotations

import torch

from phalanx.assignment import Assignment
from phalanx.detection import Replica, compare_round, judge

D = 200


def two_versions(fresh: int, stale: int, seed: int = 0) -> list[Replica]:
    """Honest updates around two centres, as on two model versions; a file each."""
    g = torch.Generator().manual_seed(seed)
    centre_fresh = torch.randn(D, generator=g)
    centre_stale = centre_fresh + 3.0 * torch.randn(D, generator=g)  # the model moved
    values = [centre_fresh + 0.3 * torch.randn(D, generator=g) for _ in range(fresh)]
    values += [centre_stale + 0.3 * torch.randn(D, generator=g) for _ in range(stale)]
    return [Replica(w, w, v, f"d{w}") for w, v in enumerate(values)]


def judged(replicas: list[Replica], strata: dict[int, int] | None = None) -> frozenset[int]:
    n = len(replicas)
    buffer = Assignment(n, tuple((w,) for w in range(n)), "none")
    return judge(compare_round(buffer, replicas), strata=strata).flagged


def test_honest_updates_of_a_newer_version_are_flagged_among_the_older_but_not_alone() -> None:
    replicas = two_versions(fresh=80, stale=20)
    # Scored together, the minority version looks like twenty outliers.
    assert len(judged(replicas)) >= 15
    versions = {w: (1 if w < 80 else 0) for w in range(100)}
    assert judged(replicas, versions) == frozenset()


def test_a_liar_is_still_flagged_within_its_version() -> None:
    replicas = two_versions(fresh=40, stale=20)
    liar = replicas[5]
    replicas[5] = Replica(liar.worker, liar.file, -100 * liar.value, "liar")
    versions = {w: (1 if w < 40 else 0) for w in range(60)}
    assert judged(replicas, versions) == frozenset({5})


def test_a_stratum_too_small_to_score_is_left_alone_and_a_reference_fills_it() -> None:
    replicas = two_versions(fresh=20, stale=2)
    lie = Replica(21, 21, -100 * replicas[21].value, "liar")
    replicas[21] = lie
    versions = {w: (1 if w < 20 else 0) for w in range(22)}
    n = len(replicas)
    buffer = Assignment(n, tuple((w,) for w in range(n)), "none")
    compared = compare_round(buffer, replicas)
    assert judge(compared, strata=versions).flagged == frozenset()  # 2 < f + 3
    crowd = torch.stack([r.value for r in two_versions(fresh=0, stale=6, seed=0)])
    assert judge(compared, strata=versions, reference={0: crowd}).flagged == frozenset({21})


def test_without_strata_the_screening_is_as_it_was() -> None:
    replicas = two_versions(fresh=30, stale=0)
    replicas[3] = Replica(3, 3, 50 * replicas[3].value, "liar")
    assert judged(replicas) == judged(replicas, {w: 7 for w in range(30)}) == frozenset({3})
