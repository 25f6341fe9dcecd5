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
``--long-only`` runs just those and merges them into the existing results.

Writes ``benchmarks/results/robustness.json`` and ``robustness.md``
(``robustness_quick.*`` with ``--quick``).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from dataclasses import asdict
from pathlib import Path

if not __package__:  # run as `python benchmarks/NAME.py`: import `benchmarks` from this checkout
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.lib.results import (
    RESULTS,
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
from benchmarks.lib.robustness_runs import Row, grid_rounds, merge, run_case, run_grid


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
    results = report_path(args.out, "robustness", ".json", quick=args.quick)
    if args.report_only or args.long_only:
        rows = [Row(**r) for r in read_json(results)]
        if args.long_only:
            rows = merge(rows, run_grid(longer, settings, args.jobs, log_row))
            write_json(results, [asdict(r) for r in rows])
        # Wall time is not stored; the runs' own times give it back, give or take start-up.
        local_seconds = sum(r.seconds for r in rows if r.transport == IN_PROCESS)
        flower_seconds = sum(r.seconds for r in rows if r.transport == FLOWER)
        minutes = (local_seconds / args.jobs + flower_seconds) / 60
        settings = dataclasses.replace(settings, rounds=grid_rounds(rows))
    else:
        started = time.perf_counter()
        rows = run_grid([*cases, *longer], settings, args.jobs, log_row)
        for case in [] if args.no_flower else twins:
            rows.append(run_case(case, settings, FLOWER))
            log_row(rows[-1])
        minutes = (time.perf_counter() - started) / 60
        write_json(results, [asdict(r) for r in rows])
    notes = describe(
        settings,
        rows,
        args.jobs,
        minutes,
        args.quick,
        host=machine(),
        torch_version=version("torch"),
    )
    write_markdown(
        report_path(args.out, "robustness", ".md", quick=args.quick), markdown(rows, notes)
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
