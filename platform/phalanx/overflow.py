"""Tracing an aggregate that leaves the finite floats back to the updates that caused it.

Finite float32 updates can still overflow: two workers that each send 3e38 make the
mean infinite, and an aggregate of 1e20 makes Adam's second moment infinite. When
that happens the coordinator must not apply the step (the model would turn to NaN and
every honest worker would then be refused as ``non_finite``); it leaves out the
fewest updates of largest norm that make the step finite again, and names their
senders. An honest update's norm is that of a gradient step; only a crafted (or
diverged) one is many orders of magnitude larger, so the largest norms go first.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from phalanx.detection import Mode, Replica, Verdict, replicas_agree


def update_norms(updates: Tensor) -> Tensor:
    """L2 norm of each row, in float64 so that no finite float32 row overflows.

    Parameters
    ----------
    updates : Tensor
        Shape ``(n, d)``.

    Returns
    -------
    Tensor
        Shape ``(n,)``, float64.
    """
    if updates.ndim != 2:
        raise ValueError(f"update_norms needs a (n, d) tensor, got shape {tuple(updates.shape)}")
    norms: Tensor = torch.linalg.vector_norm(updates.to(torch.float64), dim=1)
    return norms


def trace_overflow(
    norms: Tensor, fits: Callable[[Tensor], bool], *, max_removed: int
) -> tuple[int, ...] | None:
    """Return the largest-norm rows that make the aggregate overflow.

    First the fewest rows whose removal makes ``fits`` true, taken in order of
    decreasing norm (ties by row index): the number is found by binary search, which
    assumes that removing more of the largest rows never makes a fitting set stop
    fitting. Then every other row whose norm is within a factor ``n`` (the number of
    rows) of the smallest of those: the overflow needed such magnitudes, ``n`` rows of
    that size hold as much as one of the first, and an honest update is many orders of
    magnitude smaller. Without this second step, two colluders sending the same huge
    value would lose only one of them, and the other's value would still be applied.

    Parameters
    ----------
    norms : Tensor
        Shape ``(n,)``: each row's norm (see :func:`update_norms`).
    fits : callable
        Takes the indices of the rows kept (a sorted ``int64`` tensor) and says
        whether their aggregate, once applied, stays finite. ``fits`` of every row
        is taken to be false: call this only after the full aggregate failed.
    max_removed : int
        Most rows that may be removed, at most ``n - 1``.

    Returns
    -------
    tuple of int or None
        The rows to leave out, largest norm first, at most ``max_removed``; ``None``
        when even ``max_removed`` rows are not enough (the overflow is not the doing of
        a few updates).
    """
    n = int(norms.shape[0])
    if not 0 <= max_removed < max(n, 1):
        raise ValueError(f"max_removed must be in 0 .. {n - 1}, got {max_removed}")
    # Stable descending order: the key sorts by -norm, then by index.
    order = sorted(range(n), key=lambda i: (-float(norms[i]), i))

    def fits_without(k: int) -> bool:
        kept = torch.tensor(sorted(order[k:]), dtype=torch.int64)
        return fits(kept)

    if max_removed == 0 or not fits_without(max_removed):
        return None
    low, high = 0, max_removed  # fits_without(low) is false, fits_without(high) true
    while high - low > 1:
        middle = (low + high) // 2
        if fits_without(middle):
            high = middle
        else:
            low = middle
    floor = float(norms[order[high - 1]]) / n
    while high < max_removed and float(norms[order[high]]) >= floor:
        high += 1
    return tuple(order[:high])


def overflow_evidence(
    t: int,
    files: Sequence[int],
    norms: Mapping[int, float],
    median: float,
    verdict: Verdict,
    replicas: Sequence[Replica],
    *,
    mode: Mode,
    tol: float,
    rule: str,
) -> dict[int, dict[str, Any]]:
    """Write the evidence against each worker behind an update left out for overflowing.

    At r > 1 a file's accepted value was sent by every replica that agrees with it;
    each of those workers is named.

    Parameters
    ----------
    t : int
        The round.
    files : sequence of int
        The files whose accepted updates were left out.
    norms : mapping of int to float
        Each of those files' update norm.
    median : float
        The median norm of the updates kept.
    verdict : Verdict
        The round's detection verdict (who supplied each accepted value).
    replicas : sequence of Replica
        Every verified replica of the round.
    mode, tol
        How detection compared replicas (see :func:`~phalanx.detection.replicas_agree`).
    rule : str
        The aggregation rule, named in the summary.

    Returns
    -------
    dict of int to dict
        Worker -> JSON-safe evidence: ``summary``, ``round``, ``norm``, ``median_norm``
        and ``files`` (each with its replicas' digests).
    """
    by_file: dict[int, list[Replica]] = {}
    for replica in replicas:
        by_file.setdefault(replica.file, []).append(replica)
    blamed: dict[int, list[int]] = {}
    for file in files:
        source = next(r for r in by_file[file] if r.worker == verdict.accepted_from[file])
        for replica in by_file[file]:
            if replica is source or replicas_agree(source, replica, mode=mode, tol=tol):
                blamed.setdefault(replica.worker, []).append(file)
    evidence: dict[int, dict[str, Any]] = {}
    for worker, its_files in sorted(blamed.items()):
        norm = max(norms[f] for f in its_files)
        ratio = f", {norm / median:.2g} times the median accepted update's" if median > 0 else ""
        plural = "s" if len(its_files) > 1 else ""
        listing = ", ".join(str(f) for f in its_files)
        summary = (
            f"Worker {worker}'s update for file{plural} {listing} had L2 norm {norm:.3g}{ratio}. "
            f"With the {len(files)} largest update{'s' if len(files) > 1 else ''} of round {t}, "
            f"the {rule} of the accepted updates (or the server optimiser's state after the "
            "step) left float32's finite range, so they were left out. An honest gradient "
            "step is many orders of magnitude smaller."
        )
        evidence[worker] = {
            "summary": summary,
            "round": t,
            "norm": norm,
            "median_norm": median,
            "files": [
                {
                    "file": f,
                    "replicas": [{"worker": r.worker, "digest": r.digest} for r in by_file[f]],
                    "accepted_from": None,
                }
                for f in its_files
            ],
        }
    return evidence
