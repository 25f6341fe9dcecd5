"""What arrived in a round (`Piece`) and what a policy made of it (`Collection`).

A *piece* is one worker's update of one file: a worker's single reply is its
pieces with one arrival time; a multi-message reply (one message per file) has a
time per file. Times are seconds since the round started, simulated or measured
alike. A worker that never replies simply has no pieces.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Set
from dataclasses import dataclass
from typing import Literal

from phalanx.assignment import Assignment

ClosedBy = Literal["policy", "deadline", "last_arrival"]
"""Why a round closed: the policy's condition held, its deadline passed, or (in
simulation, where every arrival is known) nothing more was going to arrive."""


@dataclass(frozen=True)
class Piece:
    """One worker's update of one file, as it arrived.

    Parameters
    ----------
    worker : int
        The worker that sent it.
    file : int
        The file it is an update of.
    time : float
        Arrival, in seconds since the round started: finite and non-negative.
    digest : str
        Hex digest of the replica's payload; equal digests mean equal replicas.
    """

    worker: int
    file: int
    time: float
    digest: str

    def __post_init__(self) -> None:
        # The arrival time is measured or simulated by the coordinator, never sent by a
        # worker: a bad one is the host's bug, so it raises.
        if not math.isfinite(self.time) or self.time < 0:
            raise ValueError(f"a piece's arrival time must be finite and >= 0, got {self.time!r}")


def arrival_order(piece: Piece) -> tuple[float, int, int, str]:
    """Sort key of pieces: by time, ties broken by worker id, then file, then digest."""
    return (piece.time, piece.worker, piece.file, piece.digest)


@dataclass(frozen=True)
class Collection:
    """A round's pieces split at the time the round closed.

    Every piece lands in exactly one of ``kept`` and ``late``; a piece dispatched
    but never received is in ``missing``. Nothing is dropped without being listed.

    Parameters
    ----------
    kept : tuple of Piece
        Pieces that arrived at or before ``closed_at``, in arrival order.
    late : tuple of Piece
        Pieces that arrived after ``closed_at``, in arrival order.
    missing : tuple of (int, int)
        ``(worker, file)`` pairs given out that never arrived, sorted.
    closed_at : float
        When the round closed, in seconds since it started.
    closed_by : {"policy", "deadline", "last_arrival"}
        Why it closed then.
    """

    kept: tuple[Piece, ...]
    late: tuple[Piece, ...]
    missing: tuple[tuple[int, int], ...]
    closed_at: float
    closed_by: ClosedBy

    @property
    def late_workers(self) -> tuple[int, ...]:
        """Workers with a piece that arrived late or never, sorted."""
        return tuple(sorted({p.worker for p in self.late} | {w for w, _ in self.missing}))

    @property
    def kept_workers(self) -> tuple[int, ...]:
        """Workers with at least one kept piece, sorted."""
        return tuple(sorted({p.worker for p in self.kept}))


def given_out(assignment: Assignment, dispatched: Set[int] | None) -> list[tuple[int, int]]:
    """Return the ``(worker, file)`` pairs handed out this round, sorted.

    Parameters
    ----------
    assignment : Assignment
        The round's assignment.
    dispatched : set of int, optional
        Workers that were sent their files (a benched or unselected worker is
        not); ``None``: every worker with a file.
    """
    workers = range(assignment.num_workers) if dispatched is None else sorted(dispatched)
    return [(w, f) for w in workers for f in assignment.files_of(w)]


def first_arrivals(
    assignment: Assignment, pieces: Iterable[Piece], dispatched: Set[int] | None
) -> dict[tuple[int, int], Piece]:
    """Return the earliest piece of every ``(worker, file)`` pair handed out.

    Pieces of a pair that was not handed out, and a pair's repeats, count
    toward no policy's condition (a worker cannot close a file twice, nor one it
    was not given); :func:`split` still lists them as kept or late.
    """
    expected = set(given_out(assignment, dispatched))
    first: dict[tuple[int, int], Piece] = {}
    for piece in pieces:
        pair = (piece.worker, piece.file)
        if pair in expected:
            seen = first.get(pair)
            if seen is None or arrival_order(piece) < arrival_order(seen):
                first[pair] = piece
    return first


def split(
    assignment: Assignment,
    pieces: Iterable[Piece],
    *,
    closed_at: float,
    closed_by: ClosedBy,
    dispatched: Set[int] | None = None,
) -> Collection:
    """Split ``pieces`` into kept (time <= ``closed_at``), late and missing.

    Parameters
    ----------
    assignment : Assignment
        The round's assignment.
    pieces : iterable of Piece
        Everything that arrived, in any order.
    closed_at : float
        When the round closed.
    closed_by : {"policy", "deadline", "last_arrival"}
        Why.
    dispatched : set of int, optional
        Workers sent work; ``None``: every worker with a file.

    Returns
    -------
    Collection
    """
    ordered = sorted(pieces, key=arrival_order)
    cut = bisect_right(ordered, closed_at, key=lambda p: p.time)
    arrived = {(p.worker, p.file) for p in ordered}
    missing = tuple(pair for pair in given_out(assignment, dispatched) if pair not in arrived)
    return Collection(tuple(ordered[:cut]), tuple(ordered[cut:]), missing, closed_at, closed_by)
