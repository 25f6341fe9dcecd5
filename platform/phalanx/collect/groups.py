"""Which groups a G-CADA round waits for: all of them, or the lazy choice of CADA.

G-CADA (Zhu, Zhang, Simeone and Wang, "Adaptive worker grouping for
communication-efficient and straggler-tolerant distributed SGD", ISIT 2022)
puts workers that share data in groups (our ``groups`` scheme), waits for the
fastest worker of each selected group
(:func:`phalanx.collect.quorum.fastest_replica_close`), and selects groups
lazily by the rule of CADA (Chen, Sun and Yin, "CADA: communication-adaptive
distributed Adam", AISTATS 2021): a group uploads when its gradient has changed
enough since its last upload, measured against the recent movement of the
model, or when its last upload is too old.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def lazy_groups(
    innovations: Sequence[float],
    staleness: Sequence[int],
    model_moves: Sequence[float],
    *,
    c: float,
    max_staleness: int,
) -> tuple[int, ...]:
    """Return the groups CADA's condition selects this round, sorted.

    Group ``g`` is selected when ``staleness[g] >= max_staleness`` or
    ``innovations[g] > c / D * sum(model_moves)``, with ``D = len(model_moves)``
    (all groups whose innovation is positive, when ``D = 0``).

    Parameters
    ----------
    innovations : sequence of float
        ``||g_new - g_last||^2`` per group: how far the group's gradient has
        moved since it last uploaded (the caller's estimate, e.g. from the
        group's last two accepted updates).
    staleness : sequence of int
        Rounds since each group last uploaded.
    model_moves : sequence of float
        ``||theta_{t+1-d} - theta_{t-d}||^2`` for the last ``D`` rounds.
    c : float
        CADA's laziness constant, ``>= 0``; 0 selects every group that moved.
    max_staleness : int
        Rounds after which a group is selected whatever its innovation.

    Returns
    -------
    tuple of int
    """
    if len(innovations) != len(staleness):
        raise ValueError(
            f"innovations and staleness must have one entry per group, got "
            f"{len(innovations)} and {len(staleness)}"
        )
    numbers = [*innovations, *model_moves, c]
    if any(not math.isfinite(x) or x < 0 for x in numbers):
        raise ValueError("innovations, model_moves and c must be finite and >= 0")
    if max_staleness < 1:
        raise ValueError(f"max_staleness must be >= 1, got {max_staleness}")
    threshold = c / len(model_moves) * sum(model_moves) if model_moves else 0.0
    return tuple(
        g
        for g, (moved, age) in enumerate(zip(innovations, staleness, strict=True))
        if age >= max_staleness or moved > threshold
    )


def next_staleness(staleness: Sequence[int], uploaded: Sequence[int]) -> tuple[int, ...]:
    """Staleness after a round: 1 for the groups that uploaded, one more for the others."""
    done = set(uploaded)
    return tuple(1 if g in done else age + 1 for g, age in enumerate(staleness))
