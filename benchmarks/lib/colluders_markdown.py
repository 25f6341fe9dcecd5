"""The colluders' section of robustness.md: what ran and how, the goals, every cell and run."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from benchmarks.lib.colluders_goals import (
    accuracy_loss,
    bound_label,
    cells,
    clean_runs,
    colluder_goals,
    expected_rounds_to_proof,
    mean_distorted_after,
)
from benchmarks.lib.colluders_grid import COLLUDER_DEFENCES, DEFAULT_BOUND, STRATEGY_ATTACK
from benchmarks.lib.colluders_runs import ColluderRow, first_rounds
from benchmarks.lib.results import Machine, Wall
from benchmarks.lib.robustness_goals import pct
from benchmarks.lib.robustness_grid import K

TITLE = "# Robustness under attack (Fashion-MNIST, K = 15)"
"""robustness.md's title, for a report that has only the colluders' rows."""


def _num(x: float | None, digits: int) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known and len(known) == len(values) else None


def _until(row: ColluderRow) -> str:
    if row.error is not None:
        return "failed"
    if row.q == 0:
        return "—"
    return "never" if row.rounds_to_flag_all is None else str(row.rounds_to_flag_all)


def _flagged(row: ColluderRow) -> str:
    """Flagged workers with the round each was first flagged, by round; honest ones marked."""
    first = first_rounds(row.flagged_by_round)
    adversaries = set(row.adversaries)
    return ", ".join(
        f"{w}{'' if w in adversaries else ' (honest)'} in {t}"
        for w, t in sorted(first.items(), key=lambda item: (item[1], item[0]))
    )


def colluders_section(rows: Sequence[ColluderRow], notes: Sequence[str]) -> str:
    """The section: notes, goals, a line per cell (mean over seeds), a line per run."""
    after = rows[0].after
    lines = ["## Colluders under relabelling (issue 17)", "", *notes, "", "### Goals", ""]
    for g in colluder_goals(rows):
        lines.append(f"- **{'met' if g.met else 'NOT met'}**: {g.text}: {g.detail}.")
    lines += [
        "",
        "### Per cell (mean over seeds)",
        "",
        "| defence | strategy | attack | q | bound | rounds until every adversary is "
        "flagged (per seed) | precision | recall | distorted fraction "
        f"after round {after} | final accuracy (%) | q = 0 accuracy (%) | points lost |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (defence, strategy, q, _), runs in cells(rows).items():
        if q == 0:
            continue
        clean = clean_runs(rows, defence)
        base = [clean[r.seed].final_accuracy for r in runs if r.seed in clean]
        loss = accuracy_loss(runs, clean)
        r0 = runs[0]
        lines.append(
            f"| {defence} | {strategy} | {r0.attack} | {q} "
            f"| {bound_label(r0.bound_stated, r0.bound)} "
            f"| {', '.join(_until(r) for r in runs)} "
            f"| {_num(_mean([r.precision for r in runs]), 2)} "
            f"| {_num(_mean([r.recall for r in runs]), 2)} "
            f"| {_num(mean_distorted_after(runs), 4)} "
            f"| {pct(_mean([r.final_accuracy for r in runs]))} "
            f"| {pct(_mean(base) if base else None)} | {100 * loss:+.2f} |"
        )
    lines += [
        "",
        "### Every run",
        "",
        "| defence | strategy | q | bound | seed | adversaries | flagged (first round) "
        "| rounds until every adversary is flagged | precision | recall | distorted fraction "
        f"| distorted fraction after round {after} | final accuracy (%) | q = 0 accuracy (%) "
        "| seconds |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    notes_below = []
    for r in rows:
        mark = ""
        if r.error:
            notes_below.append(r.error)
            mark = f" [{len(notes_below)}]"
        twin = clean_runs(rows, r.defence).get(r.seed)
        lines.append(
            f"| {r.defence}{mark} | {r.strategy} | {r.q} | {bound_label(r.bound_stated, r.bound)} "
            f"| {r.seed} | {', '.join(map(str, r.adversaries)) or '—'} | {_flagged(r) or '—'} "
            f"| {_until(r)} | {_num(r.precision, 2)} | {_num(r.recall, 2)} "
            f"| {_num(r.distorted_fraction, 4)} | {_num(r.distorted_after, 4)} "
            f"| {pct(r.final_accuracy)} | {pct(twin.final_accuracy if twin else None)} "
            f"| {r.seconds:.0f} |"
        )
    if notes_below:
        lines += ["", *(f"[{i}] {text}" for i, text in enumerate(notes_below, 1))]
    return "\n".join(lines) + "\n"


def colluder_notes(
    rows: Sequence[ColluderRow],
    wall: Wall | None,
    quick: bool,
    *,
    host: Machine,
    torch_version: str | None,
) -> list[str]:
    """The paragraphs above the colluders' tables: what ran, how, and the definitions."""
    after = rows[0].after
    rounds = sorted({r.rounds for r in rows})
    seeds = sorted({r.seed for r in rows})
    fewer = {
        r.defence.split(" ")[0]: sorted({x.seed for x in rows if x.defence == r.defence})
        for r in rows
        if {x.seed for x in rows if x.defence == r.defence} != set(seeds)
    }
    only = "".join(f" ({d}: {', '.join(map(str, s))} only)" for d, s in fewer.items())
    qs = sorted({r.q for r in rows if r.q > 0})
    stated = sorted({r.bound for r in rows if r.bound_stated})
    default = sorted({r.bound for r in rows if not r.bound_stated})
    consistent = sum(r.consistent for r in rows if r.error is None)
    finished = sum(r.error is None for r in rows)
    schemes = [d for d in COLLUDER_DEFENCES if any(r.defence == d.name for r in rows)]
    by_scheme = {d.scheme: [r.seconds for r in rows if r.defence == d.name] for d in schemes}
    spent = sum(r.seconds for r in rows) / 60
    per_round = ", ".join(
        f"{s} {sum(v) / len(v) / rounds[-1]:.1f} s" for s, v in by_scheme.items() if v
    )
    return [
        f"{'Quick grid (`--quick`): ' if quick else ''}{len(rows)} runs on the in-process "
        f"transport, {' and '.join(map(str, rounds))} rounds each, seed"
        f"{'s' if len(seeds) != 1 else ''} {', '.join(map(str, seeds))}{only}; "
        + (
            f"{wall.minutes:.0f} min in all ({spent:.0f} min of runs on {wall.jobs} "
            "process(es), on "
            if wall
            else f"{spent:.0f} min of runs, each run's own time (rewritten from the stored "
            "rows, which do not say how many ran at once; on "
        )
        + f"{host.cores} cores shared with other work; torch {torch_version} on one thread per "
        f"process, {host.architecture}); a round took on average {per_round}.",
        "",
        f"**What runs.** q = {', '.join(map(str, qs))} colluders chosen to own the most "
        "file majorities of "
        'the base assignment (`attack.selection = "strong"`), with the workers relabelled '
        "every round (`assignment.relabel`, the default), so that every round hands them new "
        "files and new honest partners. Defences and training as in the grid's rows: "
        + ", ".join(
            f"`{d.scheme}` ({d.rule.replace('_', ' ')}"
            + (f" cutting {d.trim} files at each end" if d.trim else "")
            + f", {d.samples_per_file} samples per file)"
            for d in schemes
        )
        + (
            "; `subsets` keeps the grid's 4 samples per file, since its 455 files a round "
            "cost 3 s to 25 s here"
            if any(d.scheme == "subsets" for d in schemes)
            else ""
        )
        + ". Strategies (`attack.strategy`) and the update attack each sends: "
        + ", ".join(f"`{s}` with `{a}`" for s, a in STRATEGY_ATTACK.items())
        + ". Detection sees only whether replicas agree, and every built-in update attack "
        "sends a value other than the honest one, the same from every colluder on a file, "
        "so the attack decides only how far a distorted file that gets through moves the "
        "model: the reversed gradient scaled by -100 is issue 17's own report of "
        "`only_majorities` (one all-colluder file in 4 of 30 rounds cost a digits model 8.7 "
        "points), and the constant -100 cost `subsets` most under `fixed_disagreement` in the "
        "grid's committed strong rows. Each cell ran at the default bound of the proof "
        "across rounds "
        f"(`detection.max_adversaries` unset: (K - 1) // 2 = {', '.join(map(str, default))})"
        + (
            f" and at the bound an operator defending against q_max = "
            f"{', '.join(map(str, stated))} colluders would state"
            if stated
            else " only"
        )
        + "; the runs without attack ran once, at the default bound (honest replicas agree: "
        "there is no dispute to count).",
        "",
        "**Columns.** *rounds until every adversary is flagged*: the first round by which "
        "every adversary has been flagged at least once, by any flag kind; *never* if not "
        "within the run. *precision* and *recall*: of the set of workers flagged in any "
        "round. *distorted fraction*: files whose accepted value is distorted / files, over "
        f"all rounds, and over rounds {after + 1} to {rounds[-1]} (*after round {after}*). "
        "*q = 0 accuracy*: the same defence's run without attack, same seed. An adversary "
        "whose strategy gives it nothing to distort in a round sends honest values that round "
        "(`only_majorities` at q = 1 never distorts: one replica of three is never a "
        "majority); one that distorted nothing by round "
        f"{after} has nothing to be flagged by, and the goal counts it apart.",
        "",
        _proof_pace(sorted({r.bound for r in rows if r.q > 0}) or [DEFAULT_BOUND], after),
        "",
        "**Distorted fraction, derived.** The round report does not say which replica "
        "supplied each accepted file. With relabelling the distortion plan differs every "
        "round, so it is recomputed on each round's relabelled assignment, as every "
        "adversarial worker computes it (`phalanx_clients.behaviour`); a file outside the "
        "report's dropped files kept the value of its holders that replied and were neither "
        "flagged by the round (`agreement.flagged`) nor proven liars before it (replayed from "
        "the rounds' `agreement.conflicts` with the coordinator's own rule), and those agree, "
        "so the file is distorted when they are (`benchmarks/lib/colluders_runs.py` says "
        "why). The same model predicted the reported dropped files, and the replayed proofs "
        f"matched the `disputes_across_rounds` events, in {consistent} of {finished} finished "
        "runs.",
    ]


MOLS_MEET = 10 / 14
"""On the MOLS design of K = 15 two workers share a file unless they sit in the same one of
its three squares of five: 4 of the other 14 workers do."""


def _proof_pace(bounds: Sequence[int], after: int) -> str:
    """Why two colluders take longer to prove than more: the expected rounds, per bound."""
    partners = K - 2

    def pace(meet: float) -> str:
        rounds = [f"{expected_rounds_to_proof(partners, b, meet):.1f}" for b in bounds]
        return f"{rounds[0]} rounds at bound {bounds[0]}" + "".join(
            f" and {x} at bound {b}" for x, b in zip(rounds[1:], bounds[1:], strict=True)
        )

    return (
        "**How soon a proof can come.** A worker is proven once it has disputed more "
        "different workers than the bound allows to be lying. Two colluders who lie only "
        "where they outvote a file's third holder dispute one honest worker a round, drawn "
        f"afresh by relabelling from the {partners} others; collecting bound + 1 different "
        f"ones takes on average {pace(1.0)} on STS(15), whose every pair of workers "
        f"shares one file, and {pace(MOLS_MEET)} on mols, where a pair shares a file in 10 of "
        "14 relabellings (`expected_rounds_to_proof`); on subsets every pair shares 13 files, "
        "one with each honest worker, and the proof comes in round 1. So at q = 2 on bibd and "
        f"mols the goal's {after} rounds ask for more than a proof that flags no honest worker can "
        "give at the default bound; more colluders dispute more workers a round and are "
        "proven sooner."
    )


def log_colluder_row(row: ColluderRow) -> None:
    """One line on stderr per finished run."""
    sys.stderr.write(
        f"colluders {row.scheme:<8} {row.strategy:<18} q={row.q} bound={row.bound} "
        f"seed={row.seed} all flagged by {_until(row)} acc={pct(row.final_accuracy)} "
        f"P={_num(row.precision, 2)} R={_num(row.recall, 2)} "
        f"dist>{row.after}={_num(row.distorted_after, 4)} {row.seconds:.0f}s"
        f"{' ' + row.error if row.error else ''}\n"
    )
