"""The report of ``eval_heterogeneity.py``: accuracy tables, the goals, screening's false flags."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from benchmarks.lib.heterogeneity_grid import IN_PROCESS, NO_ATTACK
from benchmarks.lib.heterogeneity_runs import Row

GOAL_ALPHA = 0.3
GOAL_Q = 4
GOAL_POINTS = 0.05
"""With NNM at alpha 0.3 and q = 4, every attack within 5 points of the rule without attack."""
BYZFL_NOTE = (
    "Where the definitions are the same the two agree to rounding (median, trimmed mean, "
    "centered clipping, NNM before a mean). ByzFL's Multi-Krum scores each update by its "
    "n - f - 1 nearest neighbours (Phalanx: n - f - 2, as Blanchard et al.), so it may pick "
    "other updates; its geometric median runs 3 Weiszfeld steps from zero (Phalanx's runs to "
    "convergence from the mean): a gap there measures the definitions, and carries over "
    "after NNM. The small gap of NNM + median (under 1 %) is not explained yet."
)
"""What the gaps of ByzFL's rules mean, said under their table."""
SCREENING_GOAL = 0.01
"""At most 1 % of honest updates flagged at alpha 0.3."""


def partition_label(row: Row) -> str:
    """``IID`` or ``Dirichlet 0.3``."""
    return "IID" if row.alpha is None else f"Dirichlet {row.alpha:g}"


def _pct(x: float | None, digits: int = 1) -> str:
    return "failed" if x is None else f"{100 * x:.{digits}f}"


def _columns(rows: Sequence[Row]) -> list[tuple[str, int]]:
    seen: dict[tuple[str, int], None] = {}
    for r in rows:
        seen[(r.attack, r.q)] = None
    return sorted(seen, key=lambda c: (c[0] != NO_ATTACK, c[0], c[1]))


def accuracy_table(rows: Sequence[Row]) -> list[str]:
    """Final accuracy (%) per aggregator (rows) and attack at q (columns), for one partition."""
    columns = _columns(rows)
    by_cell = {(r.aggregator, r.attack, r.q): r for r in rows}
    aggregators = list(dict.fromkeys(r.aggregator for r in rows))
    head = ["aggregator", *(a if a == NO_ATTACK else f"{a} q={q}" for a, q in columns)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for agg in aggregators:
        cells = []
        for attack, q in columns:
            row = by_cell.get((agg, attack, q))
            cells.append("" if row is None else _pct(row.final_accuracy))
        lines.append(f"| {agg} | " + " | ".join(cells) + " |")
    return lines


def screening_table(rows: Sequence[Row]) -> list[str]:
    """Honest updates flagged by r = 1 screening per partition, over the runs without attack."""
    lines = [
        "| partition | runs | honest updates flagged | worst run |",
        "|---|---|---|---|",
    ]
    for label in dict.fromkeys(partition_label(r) for r in rows):
        clean = [
            r
            for r in rows
            if partition_label(r) == label and r.q == 0 and r.honest_flagged is not None
        ]
        if not clean:
            continue
        mean = sum(r.honest_flagged or 0.0 for r in clean) / len(clean)
        worst = max(clean, key=lambda r: r.honest_flagged or 0.0)
        lines.append(
            f"| {label} | {len(clean)} | {_pct(mean, 2)} % | {_pct(worst.honest_flagged, 2)} % "
            f"({worst.aggregator}) |"
        )
    return lines


def goals(rows: Sequence[Row]) -> list[str]:
    """The issue's goals, each with the figures that meet or miss it."""
    local = [r for r in rows if r.transport == IN_PROCESS and r.final_accuracy is not None]
    at = [r for r in local if r.alpha == GOAL_ALPHA]
    clean = {r.aggregator: r.final_accuracy or 0.0 for r in at if r.q == 0}
    out = []
    attacked = [r for r in at if r.q == GOAL_Q and r.pre == "nnm"]
    if attacked:
        worst = max(attacked, key=lambda r: clean.get(r.aggregator, 0.0) - (r.final_accuracy or 0))
        drop = clean.get(worst.aggregator, 0.0) - (worst.final_accuracy or 0.0)
        met = "met" if drop <= GOAL_POINTS else "missed"
        out.append(
            f"- NNM at alpha {GOAL_ALPHA:g}, q = {GOAL_Q}: every attack within "
            f"{100 * GOAL_POINTS:.0f} points of the rule without attack: {met} (largest drop "
            f"{100 * drop:.1f} points, {worst.aggregator} under {worst.attack})."
        )
        plain = {
            (r.rule, r.attack): r.final_accuracy or 0.0 for r in at if r.q == GOAL_Q and not r.pre
        }
        behind = [
            r
            for r in attacked
            if any(
                acc >= (r.final_accuracy or 0.0)
                for (rule, attack), acc in plain.items()
                if attack == r.attack
            )
        ]
        out.append(
            f"- ... and ahead of every rule without NNM under the same attack: "
            f"{'met' if not behind else 'missed'}"
            + ("" if not behind else f" ({len(behind)} of {len(attacked)} cells are not)")
            + "."
        )
    screened = [r for r in at if r.q == 0 and r.honest_flagged is not None]
    if screened:
        rate = sum(r.honest_flagged or 0.0 for r in screened) / len(screened)
        met = "met" if rate <= SCREENING_GOAL else "missed"
        out.append(
            f"- Screening flags at most {100 * SCREENING_GOAL:.0f} % of honest updates at alpha "
            f"{GOAL_ALPHA:g}: {met} ({_pct(rate, 2)} % over {len(screened)} runs without attack)."
        )
    gaps = [r.byzfl_gap for r in local if r.byzfl_gap is not None]
    if gaps:
        out.append(
            f"- ByzFL's aggregators on the same updates: largest relative gap {max(gaps):.2g} "
            f"over {len(gaps)} runs (per rule below)."
        )
    return out


def gap_table(rows: Sequence[Row]) -> list[str]:
    """The largest relative gap between Phalanx's and ByzFL's aggregate, per aggregator."""
    worst: dict[str, float] = {}
    for r in rows:
        if r.byzfl_gap is not None:
            worst[r.aggregator] = max(worst.get(r.aggregator, 0.0), r.byzfl_gap)
    lines = ["| aggregator | largest relative gap to ByzFL |", "|---|---|"]
    lines += [f"| {agg} | {gap:.2g} |" for agg, gap in worst.items()]
    return lines


def markdown(rows: Sequence[Row], notes: Sequence[str]) -> str:
    """The whole report."""
    lines = ["# Robustness where honest clients differ (local data)", ""]
    for note in notes:
        lines += [note, ""]
    lines += ["## Goals", "", *goals(rows), ""]
    lines += ["## Honest updates flagged by screening (runs without attack)", ""]
    lines += [*screening_table([r for r in rows if r.transport == IN_PROCESS]), ""]
    for label in dict.fromkeys(partition_label(r) for r in rows):
        part = [r for r in rows if partition_label(r) == label and r.transport == IN_PROCESS]
        lines += [f"## {label}: final accuracy (%)", "", *accuracy_table(part), ""]
    flower = [r for r in rows if r.transport != IN_PROCESS]
    if flower:
        lines += ["## Through Flower's simulation engine", ""]
        lines += ["| partition | aggregator | attack | q | accuracy | same model as in-process |"]
        lines += ["|---|---|---|---|---|---|"]
        twins = {
            (r.partition, r.alpha, r.aggregator, r.attack, r.q): r
            for r in rows
            if r.transport == IN_PROCESS
        }
        for r in flower:
            twin = twins.get((r.partition, r.alpha, r.aggregator, r.attack, r.q))
            same = "-" if twin is None else ("yes" if twin.model_digest == r.model_digest else "no")
            lines.append(
                f"| {partition_label(r)} | {r.aggregator} | {r.attack} | {r.q} | "
                f"{_pct(r.final_accuracy)} | {same} |"
            )
        lines.append("")
    lines += ["## ByzFL on the same updates", "", *gap_table(rows), "", BYZFL_NOTE, ""]
    failed = [r for r in rows if r.error]
    if failed:
        lines += ["## Failed runs", ""]
        lines += [
            f"- {r.partition} {r.alpha} {r.aggregator} {r.attack} q={r.q}: {r.error}"
            for r in failed
        ]
        lines.append("")
    return "\n".join(lines)


def log_row(row: Row) -> None:
    """One line per finished run, on stderr."""
    print(
        f"{partition_label(row):>14} {row.aggregator:>24} {row.attack:>10} q={row.q} "
        f"{row.transport[:9]:>9}: acc {_pct(row.final_accuracy)} honest flagged "
        f"{_pct(row.honest_flagged, 2)} % recall {row.recall} ({row.seconds:.0f} s)"
        + (f" ERROR {row.error}" if row.error else ""),
        file=sys.stderr,
        flush=True,
    )
