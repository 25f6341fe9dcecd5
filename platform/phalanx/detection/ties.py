"""What a file keeps when the agreement graph's maximum cliques tie."""

from __future__ import annotations

from typing import Literal

from phalanx.detection.comparison import FileComparison, Replica

TiePolicy = Literal["drop_disputed", "majority"]


def majority_replica(comparison: FileComparison, flagged: frozenset[int]) -> Replica | None:
    """Replica agreeing with a strict majority of the unflagged replicas, if any."""
    voters = [i for i, r in enumerate(comparison.replicas) if r.worker not in flagged]
    if not voters:
        return None
    support = {i: sum(bool(comparison.agree[i, j]) for j in voters) for i in voters}
    best = max(voters, key=lambda i: (support[i], -i))
    return comparison.replicas[best] if 2 * support[best] > len(voters) else None


def unanimous_replica(comparison: FileComparison, flagged: frozenset[int]) -> Replica | None:
    """Return the unflagged replicas' common value when they all agree, else ``None``."""
    voters = [i for i, r in enumerate(comparison.replicas) if r.worker not in flagged]
    if not voters or not all(bool(comparison.agree[voters[0], j]) for j in voters[1:]):
        return None
    return comparison.replicas[voters[0]]
