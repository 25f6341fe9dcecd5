"""Robustness of each defence under attack: accuracy, who is flagged, what gets through.

Fashion-MNIST, K = 15 workers, q in {0, 1, 3, 5} adversaries, the attacks ALIE,
IPM, reversed gradient and constant, each in a weak mode (random adversaries,
every adversary distorts every file) and a strong mode (omniscient adversaries
chosen to own the most file majorities, distorting with the strategy that gets
the most files through this defence). Defences: r = 1 with the coordinate
median and r = 1 with Multi-Krum (the plain rules, as in the literature), r = 1
with the median after Phalanx's outlier screening, ``groups`` (DETOX) and
``mols`` (ByzShield) with r = 3 and the coordinate median, and ``subsets``
(Aspis) with r = 3 and the coordinate trimmed mean.

Every run is a real federated run of Phalanx's coordinator and workers. The grid
runs on the in-process transport (``phalanx_clients.inprocess``, a test double of
Flower's runtime: the same coordinator, workers and training code in one
process); one case per defence also runs through Flower's simulation engine and
the two must agree bit for bit (same flagged workers every round, same final
model digest).

The distorted fraction of a round is the share of its files whose accepted value
is a distorted one. It is derived from the round report (flagged workers,
dropped files) and the attack's distortion plan: honest replicas of a file are
bit-identical and colluding adversaries send identical vectors, so a file keeps a
distorted value exactly when its unflagged replicas are all distorted (Phalanx's
default when largest agreeing groups tie, ``detection.on_tie = "drop_disputed"``,
drops a file whose unflagged replicas disagree; with a unique largest group the
unflagged replicas never disagree), checked against the report's dropped files.

The cells the strong-attack goal compares (``subsets`` and the plain r = 1
median, without attack and under the strong attack at the largest q) also run
for longer (``--long-rounds``, 80 by default): at 20 rounds every model is still
far from trained, and an attack that only slows training shows little there.
``--long-only`` runs just those and merges them into the existing results;
``--grid-only`` runs the grid's rows alone (with ``--schemes``, those defences'),
merging each into the stored results as it finishes, and with ``--missing-only``
only the cases that have no row measured with the current detection rule (each
row says its rule: ``detection``). To measure the r = 3 rows again with the rule
across rounds: ``--grid-only --missing-only --schemes groups,mols,subsets --jobs 2``.

The colluders' rows (issue 17, ``benchmarks/lib/colluders_*.py``) run the
colluding strategies ``only_majorities`` and ``fixed_disagreement`` with
relabelling on, on ``mols``, ``subsets`` and ``bibd`` (K = 15, r = 3), q = 1..5,
3 seeds, each at the default bound of the proof across rounds and at
``detection.max_adversaries = 5``, and judge them by the rounds until every
adversary is flagged and the distorted fraction after round 10. ``--colluders``
runs only those and merges them into the existing results, each run as it
finishes (``--missing-only``: only the runs without a stored row, so a stopped
grid goes on); ``--colluder-qs`` and ``--colluder-bounds`` pick cells of it
(the longer check of the ``mols`` cells: ``--colluders --schemes mols --rounds
80 --colluder-qs 2,3 --colluder-bounds default --out
benchmarks/results/colluders_80_rounds``); ``--quick`` runs a tiny version of both.

Writes ``benchmarks/results/robustness.json`` (the grid's rows, then the
colluders' rows, marked ``"table": "colluders"``) and ``robustness.md``
(``robustness_quick.*`` with ``--quick``).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

if not __package__:  # run as `python benchmarks/NAME.py`: import `benchmarks` from this checkout
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.lib.colluders_grid import (
    COLLUDER_DEFENCES,
    DEADLINE,
    Q_MAX,
    QUICK_DEADLINE,
    QUICK_ROUNDS,
    colluder_grid,
    quick_grid,
)
from benchmarks.lib.colluders_grid import QS as COLLUDER_QS
from benchmarks.lib.colluders_markdown import (
    TITLE,
    colluder_notes,
    colluders_section,
    log_colluder_row,
)
from benchmarks.lib.colluders_runs import (
    ColluderRow,
    case_key,
    colluder_key,
    join_rows,
    merge_colluders,
    run_colluders,
    split_rows,
)
from benchmarks.lib.results import (
    RESULTS,
    Wall,
    machine,
    read_json,
    report_path,
    version,
    write_json,
    write_markdown,
)
from benchmarks.lib.robustness_grid import (
    ATTACKS,
    DEFENCES,
    FLOWER,
    IN_PROCESS,
    MODES,
    QS,
    Settings,
    flower_twins,
    goal_replicas,
    grid,
    long_runs,
)
from benchmarks.lib.robustness_markdown import describe, log_row, markdown
from benchmarks.lib.robustness_runs import (
    Row,
    grid_case_key,
    grid_rounds,
    merge,
    run_case,
    run_grid,
)
from benchmarks.lib.robustness_runs import case_key as grid_row_key


def _whole_numbers(text: str) -> tuple[int, ...]:
    """``"2,3"`` as ``(2, 3)``; anything else refused in words."""
    try:
        numbers = tuple(int(x) for x in text.split(",") if x)
    except ValueError:
        raise SystemExit(f"--colluder-qs takes numbers separated by commas, not {text!r}") from None
    if not numbers or min(numbers) < 1:
        raise SystemExit(f"--colluder-qs takes q of 1 or more, not {text!r}")
    return numbers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="reduced grid, under five minutes")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per run")
    parser.add_argument("--model", choices=("mlp", "cnn"), default="mlp")
    parser.add_argument("--eval-samples", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=1, help="in-process runs at a time")
    parser.add_argument("--no-flower", action="store_true", help="skip the Flower rows")
    parser.add_argument("--schemes", default=None, help="only these schemes, e.g. none,subsets")
    parser.add_argument(
        "--extra-seeds",
        default=None,
        help="seeds the goal cells run again with (default 2027,2028; none with --quick)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--long-rounds",
        type=int,
        default=None,
        help="rounds of the strong-attack goal's longer runs (default 80; 0 or --quick: none)",
    )
    parser.add_argument(
        "--long-only",
        action="store_true",
        help="run only the longer runs and merge them into robustness.json",
    )
    parser.add_argument(
        "--report-only", action="store_true", help="rewrite robustness.md from robustness.json"
    )
    parser.add_argument(
        "--colluders",
        action="store_true",
        help="run only the colluders' rows and merge them into robustness.json",
    )
    parser.add_argument(
        "--grid-only",
        action="store_true",
        help="run only the grid's rows (with --schemes, of those defences) and merge them into "
        "robustness.json, each as it finishes",
    )
    parser.add_argument(
        "--missing-only",
        action="store_true",
        help="with --colluders, run only the runs without a stored row; with --grid-only, only "
        "the cases without a row measured with the current detection rule (a stopped grid "
        "goes on)",
    )
    parser.add_argument(
        "--colluder-qs",
        default=None,
        help="colluders: only these q, e.g. 2,3 (each seed's run without attack runs too)",
    )
    parser.add_argument(
        "--colluder-bounds",
        choices=("both", "default", "stated"),
        default="both",
        help=f"colluders: the default bound of the proof across rounds, {Q_MAX}, or both",
    )
    parser.add_argument(
        "--flag-within",
        type=int,
        default=None,
        help="colluders: rounds within which every adversary should be flagged, and after "
        f"which distortion is counted (default {DEADLINE}; {QUICK_DEADLINE} with --quick)",
    )
    args = parser.parse_args(argv)

    settings = Settings(
        rounds=args.rounds or (3 if args.quick else 20),
        model=args.model,
        eval_samples=args.eval_samples,
        optimizer="adam",
        server_lr=0.005,
    )
    wanted = None if args.schemes is None else set(args.schemes.split(","))
    defences = [d for d in DEFENCES if wanted is None or d.scheme in wanted]
    if args.quick:
        cases = grid(defences, ("alie",), (0, 3), MODES, settings.seed)
        twins = flower_twins(cases, defences[:1])
    else:
        cases = grid(defences, ATTACKS, QS, MODES, settings.seed)
        twins = flower_twins(cases, defences)
    extra = (
        args.extra_seeds if args.extra_seeds is not None else ("" if args.quick else "2027,2028")
    )
    seeds = [int(x) for x in extra.split(",") if x]
    long_rounds = args.long_rounds if args.long_rounds is not None else (0 if args.quick else 80)
    longer = long_runs(cases, [settings.seed, *seeds], long_rounds) if long_rounds else []
    cases += goal_replicas(cases, seeds)
    after = args.flag_within or (QUICK_DEADLINE if args.quick else DEADLINE)
    if args.quick:
        colluder_cases = quick_grid(settings.seed, args.rounds or QUICK_ROUNDS)
    else:
        chosen = [d for d in COLLUDER_DEFENCES if wanted is None or d.scheme in wanted]
        colluder_qs = COLLUDER_QS if args.colluder_qs is None else _whole_numbers(args.colluder_qs)
        bounds = {"both": (None, Q_MAX), "default": (None,), "stated": (Q_MAX,)}
        colluder_cases = colluder_grid(
            chosen,
            colluder_qs,
            [settings.seed, *seeds],
            args.rounds or 20,
            bounds[args.colluder_bounds],
        )
    results = report_path(args.out, "robustness", ".json", quick=args.quick)
    colluders: list[ColluderRow] = []
    if args.report_only or args.long_only:
        rows, colluders = split_rows(read_json(results))
        if args.long_only:
            rows = merge(rows, run_grid(longer, settings, args.jobs, log_row))
            write_json(results, join_rows(rows, colluders))
        wall = colluder_wall = None
    elif args.grid_only:
        rows, colluders = split_rows(read_json(results)) if results.exists() else ([], [])
        todo = [*cases, *longer]
        if args.missing_only:
            current = {(*grid_row_key(r), r.transport) for r in rows if r.detection is not None}
            todo = [c for c in todo if (*grid_case_key(c, settings), IN_PROCESS) not in current]
            twins = [c for c in twins if (*grid_case_key(c, settings), FLOWER) not in current]

        def store(row: Row) -> None:
            # Each finished run is stored at once, so a stopped grid loses only its runs in flight.
            nonlocal rows
            log_row(row)
            rows = merge(rows, [row])
            write_json(results, join_rows(rows, colluders))

        run_grid(todo, settings, args.jobs, store)
        for case in [] if args.no_flower else twins:
            store(run_case(case, settings, FLOWER))
        wall = colluder_wall = None
    elif args.colluders:
        rows, colluders = split_rows(read_json(results)) if results.exists() else ([], [])
        if args.missing_only:
            stored = {colluder_key(r) for r in colluders}
            colluder_cases = [c for c in colluder_cases if case_key(c) not in stored]
        stored_before = len(colluders)
        started = time.perf_counter()

        def keep(row: ColluderRow) -> None:
            # Each finished run is stored at once, so a stopped grid loses only its runs in flight.
            nonlocal colluders
            log_colluder_row(row)
            colluders = merge_colluders(colluders, [row])
            write_json(results, join_rows(rows, colluders))

        run_colluders(colluder_cases, settings, after, args.jobs, keep)
        timed = Wall((time.perf_counter() - started) / 60, args.jobs)
        # Rows stored by earlier runs were timed by other processes, perhaps at other --jobs.
        wall, colluder_wall = None, None if stored_before else timed
    else:
        started = time.perf_counter()
        rows = run_grid([*cases, *longer], settings, args.jobs, log_row)
        for case in [] if args.no_flower else twins:
            rows.append(run_case(case, settings, FLOWER))
            log_row(rows[-1])
        wall = Wall((time.perf_counter() - started) / 60, args.jobs)
        started = time.perf_counter()
        colluders = run_colluders(colluder_cases, settings, after, args.jobs, log_colluder_row)
        colluder_wall = Wall((time.perf_counter() - started) / 60, args.jobs)
        write_json(results, join_rows(rows, colluders))
    host, torch_version = machine(), version("torch")
    text = f"{TITLE}\n"
    if rows:
        if args.report_only or args.long_only or args.colluders or args.grid_only:
            settings = dataclasses.replace(settings, rounds=grid_rounds(rows))
        notes = describe(
            settings,
            rows,
            wall,
            args.quick,
            host=host,
            torch_version=torch_version,
        )
        text = markdown(rows, notes)
    if colluders:
        notes = colluder_notes(
            colluders,
            colluder_wall,
            args.quick,
            host=host,
            torch_version=torch_version,
        )
        text += "\n" + colluders_section(colluders, notes)
    write_markdown(report_path(args.out, "robustness", ".md", quick=args.quick), text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
