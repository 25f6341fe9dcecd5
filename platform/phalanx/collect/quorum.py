"""Close rules per file: a quorum of agreeing replicas (`quorum`), or the first (`group_fastest`).

A file closes when ``m`` of its replicas have arrived with one digest; the round
closes when every file has. With ``r = 3`` and ``m = 2`` one straggler per file
costs nothing, and a lone liar cannot close a file: its digest has one vote, so
a file whose first replicas disagree stays open until ``m`` agree (or the
deadline). ``m`` colluders sending one wrong digest can close a file; every
replica that arrived by then is kept, so detection still compares them.
"""

from __future__ import annotations

from collections.abc import Iterable, Set

from phalanx.assignment import Assignment
from phalanx.collect.pieces import Piece, first_arrivals, given_out


def file_close_times(
    assignment: Assignment,
    pieces: Iterable[Piece],
    *,
    m: int,
    files: Iterable[int] | None = None,
    dispatched: Set[int] | None = None,
) -> dict[int, float]:
    """When each file had ``m`` agreeing replicas (only the files that did).

    A file with fewer than ``m`` workers given it needs all of them to agree; a
    file given to nobody is closed at ``0.0``, since nothing of it can arrive.

    Parameters
    ----------
    assignment : Assignment
        The round's assignment.
    pieces : iterable of Piece
        What arrived.
    m : int
        Agreeing replicas that close a file, ``>= 1``.
    files : iterable of int, optional
        The files to consider; ``None``: all.
    dispatched : set of int, optional
        Workers sent work; ``None``: every worker with a file.

    Returns
    -------
    dict of int to float
        File to the arrival of the ``m``-th replica of its earliest-agreeing digest.
    """
    if isinstance(m, bool) or not isinstance(m, int) or m < 1:
        raise ValueError(f"m must be an int >= 1, got {m!r}")
    wanted = range(assignment.num_files) if files is None else sorted(set(files))
    holders: dict[int, int] = {}
    for _, f in given_out(assignment, dispatched):
        holders[f] = holders.get(f, 0) + 1
    times: dict[tuple[int, str], list[float]] = {}
    for (_, f), piece in first_arrivals(assignment, pieces, dispatched).items():
        times.setdefault((f, piece.digest), []).append(piece.time)
    closed: dict[int, float] = {}
    for (f, _), arrivals in times.items():
        need = min(m, holders[f])
        if len(arrivals) >= need:
            at = sorted(arrivals)[need - 1]
            closed[f] = min(closed.get(f, at), at)
    result: dict[int, float] = {}
    for f in wanted:
        if not holders.get(f):
            result[f] = 0.0
        elif f in closed:
            result[f] = closed[f]
    return result


def quorum_close(
    assignment: Assignment,
    pieces: Iterable[Piece],
    *,
    m: int = 2,
    dispatched: Set[int] | None = None,
) -> float | None:
    """When every file had ``m`` agreeing replicas, or ``None`` while one has not.

    Parameters
    ----------
    assignment : Assignment
        The round's assignment.
    pieces : iterable of Piece
        What arrived.
    m : int
        Agreeing replicas that close a file.
    dispatched : set of int, optional
        Workers sent work; ``None``: every worker with a file.
    """
    closed = file_close_times(assignment, pieces, m=m, dispatched=dispatched)
    if len(closed) < assignment.num_files:
        return None
    return max(closed.values(), default=0.0)


def fastest_replica_close(
    assignment: Assignment,
    pieces: Iterable[Piece],
    *,
    groups: Iterable[int] | None = None,
    dispatched: Set[int] | None = None,
) -> float | None:
    """G-CADA: when every selected group's fastest worker had replied.

    With the ``groups`` scheme group ``g`` is the workers of file ``g``, so this
    is the first replica of each selected file; with another scheme it is the
    same rule per file (no agreement asked: that is ``quorum``).

    Parameters
    ----------
    assignment : Assignment
        The round's assignment.
    pieces : iterable of Piece
        What arrived.
    groups : iterable of int, optional
        The selected groups (file indices); ``None``: all (see
        :func:`phalanx.collect.groups.lazy_groups` for the adaptive choice).
    dispatched : set of int, optional
        Workers sent work; ``None``: every worker with a file.
    """
    selected = range(assignment.num_files) if groups is None else sorted(set(groups))
    for g in selected:
        if not 0 <= g < assignment.num_files:
            raise ValueError(
                f"group {g} is not a file of this round (0..{assignment.num_files - 1})"
            )
    closed = file_close_times(assignment, pieces, m=1, files=selected, dispatched=dispatched)
    if len(closed) < len(selected):
        return None
    return max(closed.values(), default=0.0)
