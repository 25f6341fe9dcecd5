"""Rounds of arrivals for the collection policies: assignments and the pieces that came back."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from phalanx.assignment import Assignment
from phalanx.collect import Piece

HONEST = "aa"
"""Digest of every honest replica (any file): the policies only compare digests."""


@dataclass(frozen=True)
class Arrivals:
    """An assignment and what arrived of it."""

    assignment: Assignment
    pieces: tuple[Piece, ...]


def whole_replies(
    assignment: Assignment, times: dict[int, float], digest: str = HONEST
) -> list[Piece]:
    """Single-message replies: each worker in ``times`` delivers all its files at its time."""
    return [Piece(w, f, t, digest) for w, t in times.items() for f in assignment.files_of(w)]


@st.composite
def arrivals(draw: st.DrawFn, max_workers: int = 7, max_files: int = 6) -> Arrivals:
    """Draw an assignment and arrivals: whole or per-file replies, some missing, some lies."""
    num_workers = draw(st.integers(1, max_workers))
    num_files = draw(st.integers(1, max_files))
    files = tuple(
        tuple(sorted(draw(st.sets(st.integers(0, num_workers - 1), min_size=1))))
        for _ in range(num_files)
    )
    assignment = Assignment(num_workers, files)
    times = st.integers(0, 20).map(float)
    pieces: list[Piece] = []
    for w in range(num_workers):
        fate = draw(st.sampled_from(["whole", "per_file", "never"]))
        if fate == "never":
            continue
        whole = draw(times)
        for f in assignment.files_of(w):
            if fate == "per_file" and draw(st.booleans()):
                continue
            t = whole if fate == "whole" else draw(times)
            pieces.append(Piece(w, f, t, draw(st.sampled_from([HONEST, HONEST, "bad"]))))
    return Arrivals(assignment, tuple(pieces))
