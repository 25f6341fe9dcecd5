"""``robustness.md``: what ran and how, the goals, transport agreement, a summary and every run."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence

from benchmarks.lib.results import Machine, Wall
from benchmarks.lib.robustness_goals import agreements, goals, mean_accuracy, pct
from benchmarks.lib.robustness_grid import (
    ATTACKS,
    DEFENCES,
    FLOWER,
    IN_PROCESS,
    MODES,
    NO_ATTACK,
    SEED,
    Settings,
)
from benchmarks.lib.robustness_runs import Row, case_key, grid_rounds


def _cell(row: Row | None) -> str:
    return "—" if row is None else pct(row.final_accuracy)


def _num(x: float | None, digits: int) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def markdown(rows: Sequence[Row], notes: Sequence[str]) -> str:
    """robustness.md: settings, goals, transport agreement, a summary and every run."""
    lines = ["# Robustness under attack (Fashion-MNIST, K = 15)", "", *notes, "", "## Goals", ""]
    for g in goals(rows):
        lines.append(f"- **{'met' if g.met else 'NOT met'}**: {g.text}: {g.detail}.")
    lines += [
        "",
        "## In-process test double vs Flower's simulation engine",
        "",
        "The same case on both transports: flagged workers compared round by round, final "
        "model compared by its SHA-256 digest.",
        "",
        "| defence | attack | mode | q | accuracy, in-process | accuracy, Flower "
        "| same flagged every round | same final model | seconds, in-process | seconds, Flower |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in agreements(rows):
        a, b = p.inprocess, p.flower
        lines.append(
            f"| {a.defence} | {a.attack} | {a.mode} | {a.q} | {pct(a.final_accuracy)} "
            f"| {pct(b.final_accuracy)} | {'yes' if p.same_flagged else 'NO'} "
            f"| {'yes' if p.same_digest else 'NO'} | {a.seconds:.0f} | {b.seconds:.0f} |"
        )
    local = {case_key(r): r for r in rows if r.transport == IN_PROCESS}
    q = max(r.q for r in rows)
    main = grid_rounds(rows)
    lines += [
        "",
        f"## Final accuracy (%) at q = {q}, and without attack",
        "",
        "| defence | q = 0 | " + " | ".join(f"{a}, {m}" for a in ATTACKS for m in MODES) + " |",
        "|---|---|" + "---|" * (len(ATTACKS) * len(MODES)),
    ]
    for d in DEFENCES:
        cells = [_cell(local.get((d.name, NO_ATTACK, "none", 0, SEED, main)))]
        cells += [_cell(local.get((d.name, a, m, q, SEED, main))) for a in ATTACKS for m in MODES]
        if any(r.defence == d.name for r in rows):
            lines.append(f"| {d.name} | " + " | ".join(cells) + " |")
    lines += _long_table(rows, main, q)
    lines += [
        "",
        "## Every run",
        "",
        "| defence | aggregator | attack | mode | strategy | q | seed | rounds "
        "| final accuracy (%) | precision | recall | distorted fraction | transport |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    notes_below = []
    for r in rows:
        mark = ""
        if r.note or r.error:
            notes_below.append(r.note or r.error or "")
            mark = f" [{len(notes_below)}]"
        lines.append(
            f"| {r.defence} | {r.aggregator} (f = {r.f}){mark} | {r.attack} | {r.mode} "
            f"| {r.strategy} | {r.q} | {r.seed} | {r.rounds} | {pct(r.final_accuracy)} "
            f"| {_num(r.precision, 2)} "
            f"| {_num(r.recall, 2)} | {_distortion(r)} | {r.transport} |"
        )
    if notes_below:
        lines += ["", *(f"[{i}] {text}" for i, text in enumerate(notes_below, 1))]
    return "\n".join(lines) + "\n"


def _long_table(rows: Sequence[Row], main: int, q: int) -> list[str]:
    """Mean final accuracy of the longer runs, per defence, without attack and strong at q."""
    long = [r for r in rows if r.transport == IN_PROCESS and r.rounds != main]
    lines = []
    for rounds in sorted({r.rounds for r in long}):
        at = [r for r in long if r.rounds == rounds]
        columns = [(NO_ATTACK, "none", 0), *((a, "strong", q) for a in ATTACKS)]
        lines += [
            "",
            f"## Longer training: {rounds} rounds (mean final accuracy % over seeds "
            f"{', '.join(str(s) for s in sorted({r.seed for r in at}))})",
            "",
            "| defence | q = 0 | " + " | ".join(f"{a}, strong, q = {q}" for a in ATTACKS) + " |",
            "|---|---|" + "---|" * len(ATTACKS),
        ]
        for d in DEFENCES:
            mine = [r for r in at if r.defence == d.name]
            if mine:
                cells = [
                    [r for r in mine if (r.attack, r.mode, r.q) == column] for column in columns
                ]
                text = [f"{100 * mean_accuracy(c):.2f}" if c else "—" for c in cells]
                lines.append(f"| {d.name} | " + " | ".join(text) + " |")
    return lines


def _detection_sentence(rows: Sequence[Row]) -> str:
    """Which detection rule the rows were measured with: the grid was not all run at once."""
    counts = Counter(r.detection or "before" for r in rows)
    parts = {
        "across_rounds": "with the current default (proofs across rounds, outsiders suspected)",
        "per_round": "with `detection.across_rounds = false`",
        "before": "before detection kept evidence across rounds (outsiders of a unique largest "
        "agreeing group flagged, the Aspis rule)",
    }
    said = [f"{n} measured {parts[k]}" for k, n in counts.most_common()]
    return f"Of these rows, {'; '.join(said)}."


def describe(
    settings: Settings,
    rows: Sequence[Row],
    wall: Wall | None,
    quick: bool,
    *,
    host: Machine,
    torch_version: str | None,
) -> list[str]:
    """The paragraphs above the tables: what ran, with which settings, and the definitions.

    ``host`` and ``torch_version`` describe the machine that writes the report.
    """
    inproc = [r for r in rows if r.transport == IN_PROCESS]
    flower = [r for r in rows if r.transport == FLOWER]
    consistent = sum(r.drops_consistent for r in rows if r.error is None)
    upper = sum(counted_dropped_files(r) for r in rows)
    finished = sum(r.error is None for r in rows)
    longer = [r for r in inproc if r.rounds != settings.rounds]
    lengths = " and ".join(str(n) for n in sorted({r.rounds for r in longer}))
    local = sum(r.seconds for r in inproc) / 60
    through_flower = sum(r.seconds for r in flower) / 60
    return [
        f"{'Quick grid (`--quick`): ' if quick else ''}{len(inproc) - len(longer)} runs on the "
        f"in-process transport (`phalanx_clients.inprocess`, a test double of Flower's "
        f"runtime) and {len(flower)} through Flower's simulation engine, {settings.rounds} "
        "rounds each"
        + (
            f", and {len(longer)} in-process runs of {lengths} rounds (the strong-attack "
            "goal's cells trained for longer)"
            if longer
            else ""
        )
        + "; "
        + (
            f"{wall.minutes:.0f} min in all ({local:.0f} min of in-process runs on "
            f"{wall.jobs} process(es), {through_flower:.0f} min through Flower)"
            if wall
            else f"{local:.0f} min of in-process runs and {through_flower:.0f} min through "
            "Flower, each run's own time (rewritten from the stored rows, which do not say "
            "how many ran at once)"
        )
        + f" on {host.cores} cores shared with other work; torch "
        f"{torch_version} on one thread per process, {host.architecture}. "
        + _detection_sentence(rows),
        "",
        f"**Settings.** The `{settings.model}` of `phalanx.nets` (the CNN costs 3 to 6 times "
        "more per file update, too much for the 455-file Aspis runs of this grid on two "
        f"cores); workers send gradients (local_steps = 1); the server applies "
        f"{settings.optimizer} with lr {settings.server_lr}. "
        + (
            "Three rounds only check that every path runs. "
            if quick
            else f"{settings.rounds} rounds (not 30 or more: a 455-file Aspis round costs 3 s "
            "to 25 s here, depending on the other work on the machine, and the grid has 25 "
            "of those runs). "
        )
        + (
            f"At {settings.rounds} rounds every model is still far from trained, and an attack "
            "that slows training more than it derails it shows little, so the cells of the "
            f"strong-attack goal also ran for {lengths} rounds (`--long-rounds`), under every "
            "seed. "
            if longer
            else ""
        )
        + "Accuracy is measured on the first "
        f"{settings.eval_samples} test samples after every round and on all 10,000 after the "
        f"last round (*final accuracy*). Seed {settings.seed} everywhere: same initial model, "
        "same data, same weak adversaries.",
        "",
        "**Defences** (files per round x samples per file): `r=1 median` and `r=1 "
        "multi-krum` (scheme `none`, 15 x 32, f = q) are the plain rules of the literature, "
        "with Phalanx's r = 1 outlier screening off (`detection.outlier_threshold = null`); "
        "`r=1 median + screening` is the same median after that screening at robust z-score "
        "3.5 (Iglewicz and Hoaglin's cut-off; Phalanx's default is 8, which flags fewer "
        "honest workers and still every IPM, reversed-gradient and constant update); "
        "`groups` (DETOX, r = 3, 5 x 96) and `mols` (ByzShield, r = 3, "
        "25 x 20) aggregate the accepted files with the coordinate median (f = 0: detection "
        "runs first, and the median reads f only to check n > 2f); `subsets` (Aspis, r = 3, "
        "455 x 4: four samples per file so that each file's gradient means something; the "
        "others see about 480 distinct samples a round, Aspis 1,820) with the coordinate "
        "trimmed mean cutting 45 of the 455 files at each end of every coordinate, since the "
        "median of 455 four-sample gradients is a poor estimate of their mean. When flagged "
        "workers leave fewer inputs than f needs, the coordinator lowers f to the largest the "
        "rule accepts (reported per round as `f_used`). Largest agreeing groups that tie "
        'leave disputed files out (`detection.on_tie = "drop_disputed"`, the default).',
        "",
        "**Attacks.** *weak*: q random adversaries, each distorting every file it computes "
        "(strategy `all`), workers relabelled every round. *strong*: the q workers owning "
        "the most file majorities (`select_adversaries(mode='strong')`), no relabelling (so "
        "they keep them), distorting with the strategy (`only_majorities` or "
        "`fixed_disagreement`) that gets the most distorted files past this defence's "
        "detection in a synthetic round. With r = 1 every strategy distorts every file, so "
        "strong and weak differ only in which workers attack.",
        "",
        "**Columns.** *precision* and *recall*: of the set of workers flagged in any round, "
        "against the true adversaries (1.00 by convention for an empty set). *distorted "
        "fraction*: files whose accepted value came from a distorting adversary / files, "
        "averaged over rounds. The round report does not carry the verdict's "
        "`accepted_from`, so it is derived from each round's flagged workers and the "
        "distortion plan (see the module docstring); the files this derivation drops "
        f"matched the report's dropped files in {consistent} of {finished} finished runs"
        + (
            f"; in {upper} runs measured with detection across rounds the rounds "
            "also dropped files whose every replica came from a suspected worker, which "
            "that derivation (the per-round rule's) counted as distorted: their fraction "
            "is an upper bound (shown as <=; the derivation now leaves out every file a "
            "round dropped)"
            if upper
            else ""
        )
        + ".",
        "",
        "**In-process shortcuts** (checked by the Flower rows, which take neither): workers "
        "share the round's honest file updates (a pure function of model, round and file) "
        "instead of computing each replica, and ALIE's vector (a function of the round's "
        "shared reference updates only) is computed once per round.",
        "",
        "**Reading the table.** The plain r = 1 rules take every update; with screening, "
        "IPM, the reversed gradient and the constant attack are flagged and left out before "
        "the median sees them (honest workers are sometimes flagged too: precision below 1, "
        "also at q = 0), and only ALIE, built to stay inside the honest spread, gets "
        "through. With `groups`, workers of different groups share no file, so the honest "
        "workers are not the largest agreeing group whenever two adversaries sit in one "
        "group: under the per-round rule (the rows measured before detection kept evidence "
        "across rounds) the unique maximum clique contains the adversaries and flags the "
        "honest third worker of that group (precision 0 under the strong attack); under "
        "the current rule a round's outsiders are only suspected, and no honest worker is "
        "flagged. Under the strong attack on `subsets` and `mols`, q colluders who disagree "
        "only with q chosen honest workers are, in the agreement graph, indistinguishable "
        "from those honest workers: the largest groups tie, nobody can be flagged (recall "
        "0), and the disputed files are dropped; under the per-round rule files whose "
        "replicas are all adversarial keep a distorted value, while under the current rule "
        "every strong-attack cell of `groups`, `mols` and `subsets` ends with the same "
        "model whatever the attack: no distorted value reached it. A final accuracy is "
        "one evaluation of one run: runs whose models "
        "differ by a few files a round follow different trajectories and end a point or two "
        "apart in either direction, so the goals average the cells they compare over "
        f"{len({r.seed for r in rows})} seeds (`goal_replicas`); the tables below show seed "
        f"{SEED}.",
    ]


def counted_dropped_files(row: Row) -> bool:
    """Whether a row's distorted fraction may count files its rounds dropped (an upper bound).

    Rows measured with detection across rounds before the derivation took the round's
    dropped files into account: their rounds dropped files (held only by suspected
    workers) that the derivation, the per-round rule's, counted as distorted.
    """
    return row.detection == "across_rounds" and not row.drops_consistent and row.error is None


def _distortion(row: Row) -> str:
    shown = _num(row.distorted_fraction, 3)
    return f"<= {shown}" if counted_dropped_files(row) else shown


def log_row(row: Row) -> None:
    """One line on stderr per finished run."""
    sys.stderr.write(
        f"{'flower' if row.transport == FLOWER else 'local':<6} {row.defence:<18} "
        f"{row.attack:<17} {row.mode:<6} q={row.q} acc={pct(row.final_accuracy)} "
        f"P={_num(row.precision, 2)} R={_num(row.recall, 2)} "
        f"dist={_num(row.distorted_fraction, 3)} {row.seconds:.0f}s"
        f"{' ' + (row.note or row.error or '') if row.note or row.error else ''}\n"
    )
