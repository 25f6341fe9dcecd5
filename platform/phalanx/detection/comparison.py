"""Comparing the replicas of a file: payload digests, relative distances, agreement."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

import torch
from torch import Tensor

from phalanx.assignment import Assignment
from phalanx.finite import all_finite

Mode = Literal["exact", "tolerance", "auto"]

DEFAULT_TOL = 1e-5
"""Default relative L2 tolerance for two replicas to agree.

Honest replicas computed on different hardware or BLAS builds differ only by float32
rounding: the unit roundoff is about 6e-8 and reductions over a model's parameters
accumulate it to roughly 1e-7 .. 1e-6 relative. 1e-5 sits about two orders of magnitude
above that noise, so honest noise never flags anyone, while a distortion small enough to
pass (under 0.001 % of the update's norm) is dwarfed by the ordinary spread between
honest updates of different files, so it cannot steer training.
"""


def payload_digest(data: bytes) -> str:
    """Hex SHA-256 of a payload, as the worker signed it."""
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, eq=False)
class Replica:
    """One worker's update for one file.

    Parameters
    ----------
    worker : int
        Worker index in this round's `Assignment`.
    file : int
        File index in this round's `Assignment`.
    value : Tensor
        The decoded update: 1-D, float32, finite.
    digest : str
        `payload_digest` of the encoded payload bytes as sent.
    """

    worker: int
    file: int
    value: Tensor
    digest: str

    def __post_init__(self) -> None:
        if self.value.ndim != 1 or self.value.dtype != torch.float32:
            raise ValueError(
                f"replica of worker {self.worker} for file {self.file} must be a 1-D float32 "
                f"tensor, got shape {tuple(self.value.shape)} and {self.value.dtype}; "
                "flatten and cast the decoded update first"
            )
        if not all_finite(self.value):
            raise ValueError(
                f"replica of worker {self.worker} for file {self.file} holds NaN or Inf; "
                "reject such replies before detection"
            )


def relative_distances(values: Tensor) -> Tensor:
    """Pairwise relative L2 distances ``||a - b|| / max(||a||, ||b||)``.

    Computed in float64 (exact enough at tolerances near float32 precision, and no
    overflow on huge adversarial values). Two zero vectors are at distance 0.

    Parameters
    ----------
    values : Tensor
        Shape ``(m, d)``, one replica per row.

    Returns
    -------
    Tensor
        Shape ``(m, m)``, float64, symmetric, zero on the diagonal, at most 2.
    """
    v = values.to(torch.float64)
    # The matmul shortcut loses the small differences a tolerance test needs.
    dist = torch.cdist(v, v, compute_mode="donot_use_mm_for_euclid_dist")
    norms = torch.linalg.vector_norm(v, dim=1)
    scale = torch.maximum(norms[:, None], norms[None, :])
    return torch.where(scale > 0, dist / scale.clamp_min(torch.finfo(torch.float64).tiny), 0.0)


def check_mode(mode: str, tol: float) -> None:
    """Refuse an unknown comparison mode or a tolerance that is not a non-negative distance."""
    if mode not in get_args(Mode):
        raise ValueError(f"mode must be one of {get_args(Mode)}, got {mode!r}")
    if not tol >= 0:
        raise ValueError(f"tol must be a non-negative relative distance, got {tol}")


def replicas_agree(
    a: Replica, b: Replica, *, mode: Mode = "auto", tol: float = DEFAULT_TOL
) -> bool:
    """Whether two replicas agree.

    Parameters
    ----------
    a, b : Replica
        Replicas of the same file.
    mode : {"exact", "tolerance", "auto"}
        ``"exact"``: equal digests. ``"tolerance"``: relative L2 distance at most
        ``tol``. ``"auto"``: equal digests agree at once, otherwise the tolerance test.
    tol : float
        Relative L2 tolerance.
    """
    return bool(compare_file(a.file, (a, b), mode=mode, tol=tol).agree[0, 1])


@dataclass(frozen=True, eq=False)
class FileComparison:
    """All pairwise comparisons between the replicas of one file.

    Attributes
    ----------
    file : int
        File index.
    replicas : tuple of Replica
        The replicas received, sorted by worker.
    agree : Tensor
        ``(m, m)`` bool; ``agree[i, j]`` iff replicas ``i`` and ``j`` agree.
    distances : Tensor or None
        ``(m, m)`` relative distances; ``None`` when every digest matched and the mode
        did not need them.
    """

    file: int
    replicas: tuple[Replica, ...]
    agree: Tensor
    distances: Tensor | None

    @property
    def workers(self) -> tuple[int, ...]:
        """Workers that replied for this file, in increasing order."""
        return tuple(r.worker for r in self.replicas)

    def conflicts(self) -> Iterator[tuple[int, int]]:
        """Pairs of workers ``(a, b)``, ``a < b``, whose replicas disagree."""
        for i, j in itertools.combinations(range(len(self.replicas)), 2):
            if not self.agree[i, j]:
                yield self.replicas[i].worker, self.replicas[j].worker


def compare_file(
    file: int, replicas: Sequence[Replica], *, mode: Mode = "auto", tol: float = DEFAULT_TOL
) -> FileComparison:
    """Compare every pair of replicas of one file (see `replicas_agree` for the modes).

    Distances are computed for the whole file at once, and only when needed: always in
    ``"tolerance"`` mode, and otherwise only when some digests differ (in ``"exact"``
    mode they then serve as evidence).
    """
    check_mode(mode, tol)
    reps = tuple(sorted(replicas, key=lambda r: r.worker))
    if not reps or any(r.file != file for r in reps):
        raise ValueError(f"compare_file needs at least one replica, all of file {file}")
    digests = [r.digest for r in reps]
    same = torch.tensor([[x == y for y in digests] for x in digests], dtype=torch.bool)
    distances = None
    if mode == "tolerance" or not bool(same.all()):
        distances = relative_distances(torch.stack([r.value for r in reps]))
    within_tol = None if distances is None else distances <= tol
    if mode == "exact" or within_tol is None:
        agree = same
    elif mode == "tolerance":
        agree = within_tol
    else:
        agree = same | within_tol
    return FileComparison(file=file, replicas=reps, agree=agree, distances=distances)


def group_by_file(assignment: Assignment, replicas: Sequence[Replica]) -> dict[int, list[Replica]]:
    """Replicas per file, after checking each against the assignment."""
    by_file: dict[int, list[Replica]] = {}
    seen: set[tuple[int, int]] = set()
    length: int | None = None
    for r in replicas:
        if not 0 <= r.file < assignment.num_files:
            raise ValueError(f"replica names file {r.file}, outside 0..{assignment.num_files - 1}")
        if r.worker not in assignment.workers_of(r.file):
            raise ValueError(
                f"worker {r.worker} sent a replica for file {r.file}, which is not assigned "
                "to it; reject unassigned files before detection"
            )
        if (r.worker, r.file) in seen:
            raise ValueError(f"worker {r.worker} sent two replicas for file {r.file}")
        seen.add((r.worker, r.file))
        length = r.value.numel() if length is None else length
        if r.value.numel() != length:
            raise ValueError(
                f"replica of worker {r.worker} for file {r.file} has {r.value.numel()} "
                f"values, others have {length}; reject wrongly shaped replies before detection"
            )
        by_file.setdefault(r.file, []).append(r)
    return by_file


@dataclass(frozen=True, eq=False)
class RoundComparison:
    """Every file of a round compared: what `judge` decides on.

    Attributes
    ----------
    assignment : Assignment
        The round's assignment.
    by_file : dict of int to list of Replica
        The replicas that arrived, by file.
    replied : tuple of int
        Workers that sent at least one replica, in increasing order.
    comparisons : dict of int to FileComparison
        `compare_file` of every file with a replica (empty when no file has two).
    mode : {"exact", "tolerance", "auto"}
        How the replicas were compared.
    tol : float
        The relative tolerance they were compared with.
    """

    assignment: Assignment
    by_file: dict[int, list[Replica]]
    replied: tuple[int, ...]
    comparisons: dict[int, FileComparison]
    mode: Mode = "auto"
    tol: float = DEFAULT_TOL

    def conflicts(self) -> dict[tuple[int, int], tuple[int, ...]]:
        """Each pair of workers ``(a, b)``, ``a < b``, that disagreed, with the files."""
        files: dict[tuple[int, int], list[int]] = {}
        for c in self.comparisons.values():
            for pair in c.conflicts():
                files.setdefault(pair, []).append(c.file)
        return {pair: tuple(fs) for pair, fs in sorted(files.items())}


def compare_round(
    assignment: Assignment,
    replicas: Sequence[Replica],
    *,
    mode: Mode = "auto",
    tol: float = DEFAULT_TOL,
) -> RoundComparison:
    """Compare the replicas of every file of a round (none when no file has two)."""
    check_mode(mode, tol)
    by_file = group_by_file(assignment, replicas)
    comparisons = (
        {}
        if all(len(reps) == 1 for reps in by_file.values())
        else {f: compare_file(f, reps, mode=mode, tol=tol) for f, reps in sorted(by_file.items())}
    )
    return RoundComparison(
        assignment=assignment,
        by_file=by_file,
        replied=tuple(sorted({r.worker for r in replicas})),
        comparisons=comparisons,
        mode=mode,
        tol=tol,
    )


def compare_replicas(
    assignment: Assignment,
    replicas: Sequence[Replica],
    *,
    mode: Mode = "auto",
    tol: float = DEFAULT_TOL,
) -> dict[int, FileComparison]:
    """`compare_file` for every file that received at least one replica."""
    by_file = group_by_file(assignment, replicas)
    return {f: compare_file(f, reps, mode=mode, tol=tol) for f, reps in sorted(by_file.items())}
