"""The goal of ``eval_compression.py``, judged on the rows: 99 % less uplink, 1 point at most.

Every row is compared with fp32 at the same r and seed; a method is judged on
its mean over the seeds it ran with.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

from benchmarks.lib.compression_grid import IN_PROCESS, SEED
from benchmarks.lib.compression_runs import Row

GOAL_REDUCTION = 0.99
GOAL_ACCURACY_DROP = 0.01


def fp32_reference(rows: Sequence[Row], r: int, seed: int = SEED) -> Row | None:
    """The finished in-process fp32 row at ``r`` and ``seed``, if there is one."""
    return next(
        (
            x
            for x in rows
            if x.method == "fp32"
            and x.r == r
            and x.seed == seed
            and x.transport == IN_PROCESS
            and x.error is None
        ),
        None,
    )


def with_references(rows: Sequence[Row], full_rounds: int) -> list[Row]:
    """Fill ``reduction_vs_fp32`` and ``accuracy_drop_vs_fp32`` against fp32 at the same r and seed.

    A shorter run (the Flower comparison) is compared with fp32's first rounds;
    its accuracy, read on the evaluation subset, is not compared.
    """
    out = []
    for row in rows:
        ref = fp32_reference(rows, row.r, row.seed)
        if ref is None or row.error is not None or not row.rounds:
            out.append(row)
            continue
        fp32_up = sum(ref.uplink_by_round[: row.rounds])
        drop = None
        if row.rounds == full_rounds and row.final_accuracy is not None:
            assert ref.final_accuracy is not None
            drop = ref.final_accuracy - row.final_accuracy
        out.append(
            replace(
                row, reduction_vs_fp32=1 - row.uplink_bytes / fp32_up, accuracy_drop_vs_fp32=drop
            )
        )
    return out


@dataclass(frozen=True)
class Outcome:
    """One method at one r, over the seeds it ran with (means of the per-seed comparisons)."""

    label: str
    r: int
    seeds: tuple[int, ...]
    reduction: float
    drop: float
    drops: tuple[float, ...]


def outcomes(rows: Sequence[Row], full_rounds: int) -> list[Outcome]:
    """Each predictive-coding method at each r, averaged over its seeds.

    A seed counts if its run finished and fp32 ran under it too (each seed's
    drop is against fp32 of the same seed).
    """
    groups: dict[tuple[int, str], list[Row]] = {}
    for x in rows:
        if (
            x.method == "predictive coding"
            and x.transport == IN_PROCESS
            and x.rounds == full_rounds
            and x.reduction_vs_fp32 is not None
            and x.accuracy_drop_vs_fp32 is not None
        ):
            groups.setdefault((x.r, x.label), []).append(x)
    out = []
    for (r, label), runs in groups.items():
        runs.sort(key=lambda x: x.seed)
        drops = tuple(x.accuracy_drop_vs_fp32 or 0.0 for x in runs)
        out.append(
            Outcome(
                label=label,
                r=r,
                seeds=tuple(x.seed for x in runs),
                reduction=statistics.fmean(x.reduction_vs_fp32 or 0.0 for x in runs),
                drop=statistics.fmean(drops),
                drops=drops,
            )
        )
    return out


@dataclass(frozen=True)
class Goal:
    """The issue's goal at one r: >= 99 % less uplink than fp32, <= 1 point less accuracy."""

    r: int
    met: bool
    detail: str


def goals(rows: Sequence[Row], full_rounds: int) -> list[Goal]:
    """Check the goal on the predictive-coding rows of each r.

    A method is judged on its mean over the seeds it ran with; only methods
    that ran with the most seeds any method of that r ran with can meet it (a
    single seed moves fp32's final accuracy by a point or two).
    """
    out = []
    everything = outcomes(rows, full_rounds)
    for r in sorted({o.r for o in everything}):
        mine = [o for o in everything if o.r == r]
        most = max(len(o.seeds) for o in mine)
        passing = [
            o
            for o in mine
            if len(o.seeds) == most
            and o.reduction >= GOAL_REDUCTION
            and o.drop <= GOAL_ACCURACY_DROP
        ]
        parts = [
            f"{o.label}: {100 * o.reduction:.2f} % less uplink, final accuracy "
            f"{points(o.drop)} points against fp32"
            + (
                f" (mean over seeds {', '.join(map(str, o.seeds))}: "
                f"{', '.join(points(d) for d in o.drops)}; standard error "
                f"{spread(o.drops)})"
                if len(o.seeds) > 1
                else ""
            )
            for o in mine
        ]
        where = ", ".join(o.label for o in passing) if passing else "no lambda"
        judged = f"judged on the mean over {most} seeds" if most > 1 else "one seed"
        out.append(Goal(r, bool(passing), f"met by {where} ({judged}). " + "; ".join(parts)))
    return out


def points(drop: float | None) -> str:
    """Accuracy minus fp32's, in points, signed (a drop is negative)."""
    return "—" if drop is None else f"{-100 * drop + 0.0:+.2f}"


def standard_error(values: Sequence[float]) -> float | None:
    """Standard error of the mean of ``values`` (``None`` for fewer than two)."""
    if len(values) < 2:
        return None
    return statistics.stdev(values) / math.sqrt(len(values))


def spread(drops: Sequence[float]) -> str:
    """The standard error of ``drops`` in points, or a dash."""
    error = standard_error(drops)
    return "—" if error is None else f"{100 * error:.2f}"
