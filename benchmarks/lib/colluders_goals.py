"""Judging the colluders' rows: issue 17's goals, at each bound of the proof across rounds.

Each goal is checked separately at the default bound and at the stated one
(``detection.max_adversaries = q_max``), since the bound is the operator's
setting. Accuracies are averaged over the seeds each cell ran with, and a loss
is taken between the runs with and without attack of the same seeds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from benchmarks.lib.colluders_runs import ColluderRow, first_rounds
from benchmarks.lib.robustness_goals import Goal

Cell = tuple[str, str, int, int]
"""Defence, strategy, q, bound: the runs of one cell differ only by seed."""

MAX_LISTED = 6
"""Most failing runs or cells a goal's detail names (the count is always given)."""


def expected_rounds_to_proof(partners: int, bound: int, meet: float = 1.0) -> float:
    """Expected rounds until a colluder has disputed ``bound + 1`` different workers.

    The proof across rounds flags a worker once it has disagreed with more
    different workers than could all be lying (``bound``). A pair of colluders who
    lie only where they outvote the third holder of a shared file disputes one
    honest worker a round, drawn afresh by relabelling from ``partners``, in a
    round where they share a file at all (probability ``meet``). Collecting
    ``bound + 1`` different partners is the coupon collector's problem: the i-th
    new one takes ``partners / (partners - i)`` such rounds on average.

    Parameters
    ----------
    partners : int
        The honest workers the partner is drawn from (K - q).
    bound : int
        ``detection.max_adversaries``; at most ``partners - 1``.
    meet : float
        Probability that the pair shares a file in a round (1 on STS(15), whose
        every pair of workers shares one file; 10/14 on the MOLS design of K = 15,
        where two workers of the same square share none).
    """
    if not 0 <= bound < partners or not 0 < meet <= 1:
        raise ValueError(f"need 0 <= bound < partners and 0 < meet <= 1, got {bound}, {meet}")
    return sum(partners / (partners - i) for i in range(bound + 1)) / meet


def cell_of(row: ColluderRow) -> Cell:
    """The cell of a run."""
    return (row.defence, row.strategy, row.q, row.bound)


def cells(rows: Sequence[ColluderRow]) -> dict[Cell, list[ColluderRow]]:
    """Runs by cell, each cell's runs sorted by seed, cells in the rows' order."""
    out: dict[Cell, list[ColluderRow]] = {}
    for r in rows:
        out.setdefault(cell_of(r), []).append(r)
    return {k: sorted(v, key=lambda r: r.seed) for k, v in out.items()}


def clean_runs(rows: Sequence[ColluderRow], defence: str) -> dict[int, ColluderRow]:
    """The runs of ``defence`` without attack, by seed."""
    return {r.seed: r for r in rows if r.defence == defence and r.q == 0}


def accuracy_loss(attacked: Sequence[ColluderRow], clean: dict[int, ColluderRow]) -> float:
    """Mean q = 0 accuracy minus mean attacked accuracy over the seeds both have.

    NaN when a run failed or no seed is shared: a goal is then not met.
    """
    pairs = [(clean[r.seed], r) for r in attacked if r.seed in clean]
    if not pairs:
        return math.nan
    accs = [(c.final_accuracy, a.final_accuracy) for c, a in pairs]
    if any(c is None or a is None for c, a in accs):
        return math.nan
    return sum(c - a for c, a in accs if c is not None and a is not None) / len(accs)


def mean_distorted_after(runs: Sequence[ColluderRow]) -> float:
    """Mean over seeds of the distorted fraction after the deadline; NaN if one is missing."""
    values = [r.distorted_after for r in runs]
    if not values or any(v is None for v in values):
        return math.nan
    return sum(v for v in values if v is not None) / len(values)


def missed(row: ColluderRow) -> list[int]:
    """Adversaries that lied by the deadline but were not flagged by it (all, if it failed)."""
    if row.error is not None:
        return list(row.adversaries)
    flagged = first_rounds(row.flagged_by_round)
    silent = set(row.silent)
    return [a for a in row.adversaries if a not in silent and flagged.get(a, math.inf) > row.after]


def _name(row: ColluderRow) -> str:
    return f"{row.scheme} {row.strategy} q = {row.q} seed {row.seed}"


def _cell_name(cell: Cell) -> str:
    defence, strategy, q, _ = cell
    return f"{defence.split()[0]} {strategy} q = {q}"


def _listed(names: Sequence[str]) -> str:
    more = len(names) - MAX_LISTED
    return "; ".join(names[:MAX_LISTED]) + (f"; and {more} more" if more > 0 else "")


def bound_label(stated: bool, bound: int) -> str:
    """How the tables name a bound."""
    return f"{bound} (stated: q_max)" if stated else f"{bound} (default)"


def colluder_goals(rows: Sequence[ColluderRow]) -> list[Goal]:
    """Issue 17's goals for the colluders, at each bound the rows ran with."""
    out = []
    clean = [r for r in rows if r.q == 0]
    for stated in sorted({r.bound_stated for r in rows if r.q > 0}):
        attacked = [r for r in rows if r.q > 0 and r.bound_stated == stated]
        bound = attacked[0].bound
        after = attacked[0].after
        seeds = seed_counts(attacked)
        label = f"bound {bound_label(stated, bound)}"
        out.append(_flag_goal(attacked, label, after, seeds))
        judged = attacked + ([] if stated else clean)
        honest_flagged = [r for r in judged if set(r.flagged) - set(r.adversaries) or r.error]
        out.append(
            Goal(
                f"colluders, {label}: no honest worker ever flagged ({seeds}"
                + ("" if stated else "; the runs without attack too")
                + ")",
                not honest_flagged,
                f"{len(judged) - len(honest_flagged)} of {len(judged)} runs"
                + (
                    f"; honest workers flagged in: {_listed([_name(r) for r in honest_flagged])}"
                    if honest_flagged
                    else ""
                ),
            )
        )
        by_cell = cells(attacked)
        distorted = {c: mean_distorted_after(v) for c, v in by_cell.items()}
        bad = [c for c, x in distorted.items() if x != 0]  # NaN (a failed run) too
        out.append(
            Goal(
                f"colluders, {label}: distorted fraction after round {after} equal to 0 "
                "(mean over seeds)",
                not bad,
                f"{len(by_cell) - len(bad)} of {len(by_cell)} cells"
                + (
                    "; above 0: " + _listed([f"{_cell_name(c)}: {distorted[c]:.4f}" for c in bad])
                    if bad
                    else ""
                ),
            )
        )
        out.append(_accuracy_goal(by_cell, rows, label))
    return out


def _flag_goal(attacked: Sequence[ColluderRow], label: str, after: int, seeds: str) -> Goal:
    failed = [r for r in attacked if missed(r)]
    silent = [r for r in attacked if r.silent]
    times = sorted(r.rounds_to_flag_all for r in attacked if r.rounds_to_flag_all is not None)
    detail = f"{len(attacked) - len(failed)} of {len(attacked)} runs"
    if times:
        detail += (
            f"; every adversary flagged by round {times[len(times) // 2]} (median) and "
            f"{times[-1]} (latest) in the {len(times)} runs where all were"
        )
    if failed:
        detail += "; missed: " + _listed(
            [f"{_name(r)} (workers {', '.join(map(str, missed(r)))})" for r in failed]
        )
    if silent:
        count = sum(len(r.silent) for r in silent)
        detail += (
            f". {count} adversaries in {len(silent)} runs sent no distorted value in rounds "
            f"1 to {after} (nothing to flag them by, and nothing distorted; not counted: "
            + _listed([_name(r) for r in silent])
            + ")"
        )
    return Goal(
        f"colluders, {label}: every colluder flagged within {after} rounds ({seeds})",
        not failed,
        detail,
    )


def _accuracy_goal(
    by_cell: dict[Cell, list[ColluderRow]], rows: Sequence[ColluderRow], label: str
) -> Goal:
    loss = {c: accuracy_loss(v, clean_runs(rows, c[0])) for c, v in by_cell.items() if c[2] <= 3}
    # Accuracies have four decimals: compare in points, rounded past float noise.
    over = [c for c, x in loss.items() if not round(100 * x, 6) <= 1]
    worst = max(loss, key=lambda c: -math.inf if math.isnan(loss[c]) else loss[c], default=None)
    detail = f"{len(loss) - len(over)} of {len(loss)} cells"
    if worst is not None:
        detail += f"; largest loss {100 * loss[worst]:+.2f} points ({_cell_name(worst)})"
    if over:
        detail += "; over 1 point: " + _listed(
            [f"{_cell_name(c)}: {100 * loss[c]:+.2f}" for c in over]
        )
    return Goal(
        f"colluders, {label}: final accuracy within 1 point of the same defence's q = 0 "
        "accuracy for every attack at q <= 3 (mean over seeds)",
        bool(loss) and not over,
        detail,
    )


def seed_counts(rows: Sequence[ColluderRow]) -> str:
    """How many seeds each defence ran with, in words ("3 seeds each; subsets 1")."""
    counts = {d: len({r.seed for r in rows if r.defence == d}) for d in _defences(rows)}
    most = max(counts.values(), default=0)
    text = f"{most} seed{'s' if most != 1 else ''} each"
    fewer = [f"{d.split(' ')[0]} {n}" for d, n in counts.items() if n != most]
    return text + (f"; {', '.join(fewer)}" if fewer else "")


def _defences(rows: Sequence[ColluderRow]) -> list[str]:
    return list(dict.fromkeys(r.defence for r in rows))
