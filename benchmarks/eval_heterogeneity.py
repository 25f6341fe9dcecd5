"""Robustness where honest clients differ: local data under IID and Dirichlet partitions.

Fashion-MNIST, K = 20 clients, each training on its own part of a seeded
partition (``data.mode = "local"``, r = 1): IID, and Dirichlet over labels with
alpha in {1.0, 0.3, 0.1}. Aggregators: mean (FedAvg's, weighted by the clients'
sample counts), median, trimmed mean, Multi-Krum, geometric median and centered
clipping, each alone and after nearest-neighbour mixing (NNM), every one told to
tolerate f = 4. Attacks: none, ALIE, IPM, sign flip and label flip at q = 2 and
4. Outlier screening runs as in any run (its defaults), so the rows without
attack measure how many honest updates it flags per partition.

Every run is a real federated run of Phalanx's coordinator and clients on the
in-process transport (a test double of Flower's runtime: the same coordinator,
clients and training code in one process); one case per partition also runs
through Flower's simulation engine and must end with the same model. ByzFL, the
peer, aggregates the very updates Phalanx aggregated in every round of every
run (`benchmarks/lib/heterogeneity_runs.py`); its largest relative gap per
aggregator is reported.

The grid is 432 runs; ``--partitions``, ``--aggregators``, ``--attacks`` and
``--qs`` select part of it, and ``--merge`` adds the rows to those stored, so the
grid can be filled over several invocations. ``--seeds`` runs the cases under
more seeds (each draws its own partition, adversaries and initial model); a cell
of several seeds shows its mean and range, and the goals read the means. Writes
``benchmarks/results/heterogeneity.json`` and ``heterogeneity.md`` for the MLP
(the default: the full grid on two cores takes about 8 process-hours),
``heterogeneity_cnn.*`` for the CNN (``--model cnn``, 3 to 6 times the cost per
run, so measured on the goal cells), ``heterogeneity_quick.*`` with ``--quick``.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

if not __package__:  # run as `python benchmarks/NAME.py`: import `benchmarks` from this checkout
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.lib.heterogeneity_grid import (
    ATTACKS,
    FLOWER,
    IN_PROCESS,
    NO_ATTACK,
    PARTITIONS,
    PRES,
    QS,
    RULES,
    SEED,
    Case,
    Settings,
    grid,
)
from benchmarks.lib.heterogeneity_markdown import MLP_TIES, log_row, markdown
from benchmarks.lib.heterogeneity_runs import Row, run_case, run_grid
from benchmarks.lib.results import (
    RESULTS,
    hosts,
    load_average,
    machine,
    read_json,
    report_path,
    version,
    write_json,
    write_markdown,
)

FLOWER_AGGREGATOR = ("median", "nnm")
"""The aggregator of the per-partition runs through Flower's simulation engine."""


def row_key(row: Row) -> tuple[object, ...]:
    """What identifies a row: its case and transport."""
    return (row.partition, row.alpha, row.aggregator, row.attack, row.q, row.seed, row.transport)


def merged(old: list[Row], new: list[Row]) -> list[Row]:
    """``old`` with the rows of the same case and transport replaced by ``new``'s, then the rest."""
    fresh = {row_key(r): r for r in new}
    kept = [fresh.pop(row_key(r), r) for r in old]
    return [*kept, *fresh.values()]


def missing(cases: list[Case], stored: list[Row]) -> list[Case]:
    """The in-process ``cases`` that have no stored row, or only a failed one."""
    done = {row_key(r) for r in stored if r.error is None}
    return [
        c
        for c in cases
        if (c.partition.kind, c.partition.alpha, c.aggregator, c.attack, c.q, c.seed, IN_PROCESS)
        not in done
    ]


def _document(settings: Settings, rows: list[Row]) -> dict[str, object]:
    return {"settings": dataclasses.asdict(settings), "rows": [dataclasses.asdict(r) for r in rows]}


def stored_settings(document: dict[str, Any]) -> Settings:
    """The settings of stored rows (the seed, once one for all, is now each row's own)."""
    given = dict(document["settings"])
    given.pop("seed", None)
    return Settings(**given)


def _choose(given: str | None, known: tuple[str, ...], what: str) -> tuple[str, ...]:
    if given is None:
        return known
    chosen = tuple(x for x in given.split(",") if x)
    unknown = sorted(set(chosen) - set(known))
    if unknown:
        raise SystemExit(f"unknown {what}: {', '.join(unknown)}; choose from {', '.join(known)}")
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tiny grid, a few minutes")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per run (default 30)")
    parser.add_argument(
        "--model", choices=("mlp", "cnn"), default="mlp", help="cnn writes heterogeneity_cnn.*"
    )
    parser.add_argument("--steps", type=int, default=10, help="local steps per round")
    parser.add_argument("--eval-samples", type=int, default=2000)
    parser.add_argument("--jobs", type=int, default=1, help="in-process runs at a time")
    parser.add_argument("--partitions", default=None, help="e.g. iid,dirichlet-0.3")
    parser.add_argument("--aggregators", default=None, help="rules, e.g. median,mean")
    parser.add_argument("--pres", default=None, help="none,nnm (default both)")
    parser.add_argument("--attacks", default=None, help=f"of {','.join(ATTACKS)}")
    parser.add_argument(
        "--qs", default=None, help="adversaries, e.g. 4 (default 0,2,4; 0: without attack)"
    )
    parser.add_argument(
        "--seeds",
        default=str(SEED),
        help=f"comma-separated seeds; each draws partition, adversaries, model (default {SEED})",
    )
    parser.add_argument("--no-flower", action="store_true", help="skip the Flower rows")
    parser.add_argument("--merge", action="store_true", help="add the rows to the stored ones")
    parser.add_argument(
        "--missing-only",
        action="store_true",
        help="with --merge, run only the cases without a stored row (a stopped grid goes on)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--report-only", action="store_true", help="rewrite the .md from the .json")
    args = parser.parse_args(argv)

    settings = Settings(
        rounds=args.rounds or (2 if args.quick else 30),
        model="mlp" if args.quick else args.model,
        steps=args.steps,
        batch_size=32,
        lr=0.05,
        eval_samples=500 if args.quick else args.eval_samples,
    )
    by_label = {p.label: p for p in PARTITIONS}
    partitions = [by_label[x] for x in _choose(args.partitions, tuple(by_label), "partitions")]
    rules = _choose(args.aggregators, RULES, "aggregators")
    pres = tuple(
        None if x == "none" else x for x in _choose(args.pres, ("none", "nnm"), "pre-aggregators")
    )
    attacks = _choose(args.attacks, ATTACKS, "attacks")
    qs = tuple(int(q) for q in _choose(args.qs, tuple(str(q) for q in QS), "q"))
    try:
        seeds = tuple(dict.fromkeys(int(x) for x in args.seeds.split(",") if x))
    except ValueError:
        raise SystemExit(
            f"--seeds takes whole numbers separated by commas, not {args.seeds!r}"
        ) from None
    if not seeds:
        raise SystemExit("--seeds names no seed")
    if args.quick:
        partitions, rules, pres, attacks, qs = [PARTITIONS[2]], ("median",), PRES, (), (0,)
    name = "heterogeneity" if settings.model == "mlp" else f"heterogeneity_{settings.model}"
    results = report_path(args.out, name, ".json", quick=args.quick)
    document = read_json(results) if results.exists() else None
    stored = [Row(**r) for r in document["rows"]] if document else []
    if args.missing_only and not args.merge:
        raise SystemExit("--missing-only adds to the stored rows: give --merge too")
    if document and (args.report_only or args.merge):
        kept = stored_settings(document)
        if args.merge and kept != settings:
            raise SystemExit(
                f"the stored rows were run with {kept}; merging rows of {settings} would mix "
                "them: give the same --rounds, --model, --steps and --eval-samples"
            )
        settings = kept
    started = time.perf_counter()
    done: list[Row] = []

    def keep(row: Row) -> None:
        """Log a finished run and store every row so far: a stopped grid keeps what ran."""
        log_row(row)
        done.append(row)
        so_far = merged(stored, done) if args.merge else done
        write_json(results, _document(settings, so_far))

    if args.report_only:
        rows = stored
    else:
        cases = grid(partitions, rules, pres, attacks, qs, seeds)
        if args.missing_only:
            cases = missing(cases, stored)
        run_grid(cases, settings, args.jobs, keep)
        if not args.no_flower:
            for partition in partitions:
                case = Case(partition, *FLOWER_AGGREGATOR, NO_ATTACK, 0, seeds[0])
                keep(run_case(case, settings, FLOWER))
        rows = merged(stored, done) if args.merge else done
    host = machine()
    notes = [
        f"Fashion-MNIST {settings.model.upper()}, K = 20, r = 1, {settings.rounds} rounds of "
        f"{settings.steps} local SGD steps (batch {settings.batch_size}, lr {settings.lr:g}) "
        f"per client, FedAvg's server step; every rule tolerates f = 4; screening at its "
        f"defaults; accuracy on {settings.eval_samples} test samples after the last round.",
        f"Hosts: {hosts(r.host for r in rows)}; {host.cores} cores, Python {host.python}; torch "
        f"{version('torch')}, flwr {version('flwr')}, byzfl {version('byzfl')}; the runs took "
        f"{sum(r.seconds for r in rows) / 60:.0f} min of one process"
        + (
            ""
            if args.report_only
            else f" (this invocation {(time.perf_counter() - started) / 60:.0f} min; load "
            f"average {load_average():.1f} at its end)"
        )
        + ".",
        f"Rows: {len(rows)} ({sum(r.transport == IN_PROCESS for r in rows)} in-process, "
        f"{sum(r.transport == FLOWER for r in rows)} through Flower); the grid has 432 "
        "in-process cases.",
    ]
    examined = [MLP_TIES] if name == "heterogeneity" and not args.quick else []
    write_markdown(
        report_path(args.out, name, ".md", quick=args.quick), markdown(rows, notes, examined)
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
