"""Close rules over whole replies: everyone (`all`, `deadline`, `bandit`) or the fastest k.

A close rule returns the earliest time at which its condition holds over the
pieces given, or ``None`` if those pieces never meet it. Given only the pieces
so far, it says whether the round may close now; given every piece of a
simulated round, when it closed. :func:`phalanx.collect.registry.collect` adds
the deadline and splits the pieces.
"""

from __future__ import annotations

from collections.abc import Iterable, Set

from phalanx.assignment import Assignment
from phalanx.collect.pieces import Piece, first_arrivals, given_out


def everyone_arrived(
    assignment: Assignment, pieces: Iterable[Piece], *, dispatched: Set[int] | None = None
) -> float | None:
    """When the last file handed out arrived, or ``None`` while one is still out.

    Parameters
    ----------
    assignment : Assignment
        The round's assignment.
    pieces : iterable of Piece
        What arrived.
    dispatched : set of int, optional
        Workers sent work; ``None``: every worker with a file.

    Returns
    -------
    float or None
        ``0.0`` when nothing was handed out.
    """
    expected = given_out(assignment, dispatched)
    first = first_arrivals(assignment, pieces, dispatched)
    if len(first) < len(expected):
        return None
    return max((p.time for p in first.values()), default=0.0)


def completion_times(
    assignment: Assignment, pieces: Iterable[Piece], *, dispatched: Set[int] | None = None
) -> dict[int, float]:
    """When each worker had delivered every file it was given (only those that did).

    Parameters
    ----------
    assignment : Assignment
        The round's assignment.
    pieces : iterable of Piece
        What arrived.
    dispatched : set of int, optional
        Workers sent work; ``None``: every worker with a file.

    Returns
    -------
    dict of int to float
        Worker to the arrival of its last file.
    """
    delivered: dict[int, int] = {}
    last: dict[int, float] = {}
    for (worker, _), piece in first_arrivals(assignment, pieces, dispatched).items():
        delivered[worker] = delivered.get(worker, 0) + 1
        last[worker] = max(last.get(worker, 0.0), piece.time)
    return {w: t for w, t in last.items() if delivered[w] == len(assignment.files_of(w))}


def kth_complete(
    assignment: Assignment,
    pieces: Iterable[Piece],
    *,
    k: int,
    dispatched: Set[int] | None = None,
) -> float | None:
    """k-sync: when the ``k``-th worker delivered its whole reply.

    Parameters
    ----------
    assignment : Assignment
        The round's assignment.
    pieces : iterable of Piece
        What arrived.
    k : int
        Workers to wait for, ``>= 1``; more than the workers given work means all of them.
    dispatched : set of int, optional
        Workers sent work; ``None``: every worker with a file.

    Returns
    -------
    float or None
        The ``k``-th smallest completion time; ``None`` while fewer than ``k``
        workers are complete; ``0.0`` when nobody was given work.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an int >= 1, got {k!r}")
    workers = {w for w, _ in given_out(assignment, dispatched)}
    wanted = min(k, len(workers))
    if wanted == 0:
        return 0.0
    done = sorted(completion_times(assignment, pieces, dispatched=dispatched).values())
    return done[wanted - 1] if len(done) >= wanted else None
