"""Stragglers: how soon each collection policy reaches a target accuracy, in simulated time.

Two workloads: Fashion-MNIST's CNN with K = 15 workers (every policy on STS(15),
the default run config's ``bibd`` assignment, r = 3; ``group_fastest`` on
``groups`` of 3) and its MLP with K = 100 (every policy on ``groups`` of 4).
Three device profiles (``RunConfig.systems``): (a) shifted exponential compute
speeds, (b) 20 % persistent stragglers 5 times slower, (c) the shipped device
trace ``examples/traces/devices-100.csv`` with 10 % of the workers away each
round. The collection policies (``RunConfig.collect``): ``all``, ``deadline``,
``fastest_k``, ``adaptive_k``, ``quorum``, ``group_fastest`` (every group, and
G-CADA's lazy choice) and ``bandit``; each without attack and under 3 ALIE
adversaries chosen at random. The asynchronous mode (``RunConfig.asynchronous``,
r = 1 only) runs on the MLP at K = 100 with a buffer of 50, with its default
staleness bound (``asynchronous``) and dropping every stale update
(``asynchronous-fresh``), beside ``all`` at r = 1 (scheme ``none``, 64 samples a
worker, as on ``groups``); a round there is one model update, half the work of a
round of ``all``. The grid and its parameters are
``benchmarks/lib/stragglers_grid.py``; the goals and the target are
``benchmarks/lib/stragglers_goals.py``.

Every run is a real federated run of Phalanx's coordinator and workers on the
in-process transport (``phalanx_clients.inprocess``, a test double of Flower's
runtime); the systems model times every reply, the policy closes each round,
and the round reports carry the simulated clock. One run per policy also goes
through Flower's simulation engine (the CNN under profile (b) and the attack,
5 rounds), beside an in-process run of the same config: the two must agree
round by round. A policy the platform refuses for now gets a row with the
refusal instead of figures.

*Target*: per workload, scheme, profile and attack, the accuracy ``all``
reaches at 80 % of its rounds (after round 24 of 30). *Time to target*: the
simulated time after the first round whose accuracy reaches it.

Writes ``benchmarks/results/stragglers.json`` (one object per run; the keys
``profile``, ``policy``, ``scheme``, ``attack``, ``q``, ``time_to_target_s``,
``final_accuracy``, ``simulated_time_s``, ``late_replies``, ``precision``,
``recall``, ``transport`` first), ``stragglers.md`` and a plot per workload,
``stragglers_cnn-k15.png`` and ``stragglers_mlp-k100.png``
(``stragglers_quick*`` with ``--quick``: 3 rounds, the CNN under (b) only,
one Flower run of 2 rounds, for ``quorum``). ``--workloads``, ``--profiles``,
``--attacks``, ``--policies`` and ``--only-transport`` run a part of the grid
and merge its rows into the stored results, replacing the rows of the same
runs; without ``all`` among the policies, the others are compared with the
stored ``all`` runs (e.g. ``--policies group_fastest-lazy``). ``--report-only``
rewrites the report and the plots.

Time: the quick grid (66 runs, 24 of them then refused at once, and one Flower
run of 2 rounds with its twin) took 13 min in one process on two cores shared
with other work (load average 7 to 12): about 14 s a CNN round and 2 s an MLP
round. The full grid runs 48 CNN and 42 MLP runs of 30 rounds in-process (and
12 of lazy ``group_fastest``, refused before the platform ran them), 5 through
Flower of 5 rounds and their twins. With a core per process (measured with half a core each: a CNN
round 7 s, an MLP round 2 s; so about 3.5 s and 1 s), that is about 105 min of
runs, so about 70 to 80 min with ``--jobs 2`` on a quiet two-core machine, the
Flower runs (some 8 min) included.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import asdict
from pathlib import Path

if not __package__:  # run as `python benchmarks/NAME.py`: import `benchmarks` from this checkout
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.lib.results import (
    RESULTS,
    load_average,
    machine,
    read_json,
    report_stem,
    version,
    write_json,
    write_markdown,
)
from benchmarks.lib.robustness_grid import FLOWER, IN_PROCESS, NO_ATTACK
from benchmarks.lib.stragglers_goals import with_targets
from benchmarks.lib.stragglers_grid import (
    ATTACK,
    FLOWER_ROUNDS,
    POLICIES,
    PROFILES,
    QUICK_ROUNDS,
    WORKLOADS,
    Case,
    flower_twins,
    grid,
    quick_grid,
    select,
)
from benchmarks.lib.stragglers_markdown import describe, log_row, markdown, plot_name
from benchmarks.lib.stragglers_plot import plot
from benchmarks.lib.stragglers_runs import REFUSED, Row, merge, run_case, run_grid

TRANSPORTS = {"in-process": IN_PROCESS, "flower": FLOWER}


def positive(text: str) -> int:
    """A count of rounds given on the command line: a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tiny grid of 3 rounds")
    parser.add_argument("--rounds", type=positive, default=None, help="rounds per run")
    parser.add_argument(
        "--flower-rounds",
        type=positive,
        default=None,
        help=f"rounds of the Flower runs and their twins (default {FLOWER_ROUNDS}; 2 with --quick)",
    )
    parser.add_argument("--jobs", type=int, default=1, help="in-process runs at a time")
    keys = {
        "workloads": [w.key for w in WORKLOADS],
        "profiles": [p.key for p in PROFILES],
        "attacks": [NO_ATTACK, ATTACK],
        "policies": [p.key for p in POLICIES],
    }
    for name, known in keys.items():
        parser.add_argument(
            f"--{name}", default=None, help=f"only these, comma-separated: {', '.join(known)}"
        )
    parser.add_argument(
        "--only-transport",
        choices=tuple(TRANSPORTS),
        default=None,
        help="run only the in-process grid, or only the Flower runs and their twins",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--report-only", action="store_true", help="rewrite the report and plots from the JSON"
    )
    args = parser.parse_args(argv)

    try:
        workloads = select(WORKLOADS, args.workloads, "workload")
        profiles = select(PROFILES, args.profiles, "profile")
        attacks = select((NO_ATTACK, ATTACK), args.attacks, "attack")
        policies = select(POLICIES, args.policies, "policy")
    except ValueError as exc:
        parser.error(str(exc))

    def chosen(case: Case) -> bool:
        return case.workload in workloads and case.profile in profiles and case.attack in attacks

    if args.quick:
        cases = quick_grid(policies, args.rounds or QUICK_ROUNDS)
        quorum = [p for p in policies if p.key == "quorum"]
        twins = flower_twins(quorum, args.flower_rounds or 2)
    else:
        cases = grid(workloads, profiles, attacks, policies, args.rounds)
        twins = flower_twins(policies, args.flower_rounds or FLOWER_ROUNDS)
    cases = [c for c in cases if chosen(c)]
    twins = [(f, t) for f, t in twins if chosen(f)]
    if args.only_transport == "flower":
        cases = []
    if args.only_transport == "in-process":
        twins = []

    stem = report_stem("stragglers", quick=args.quick)
    results = args.out / f"{stem}.json"
    subset = any(getattr(args, name) is not None for name in [*keys, "only_transport"])
    keep = subset or args.report_only
    stored = [Row(**x) for x in read_json(results)] if keep and results.exists() else []
    host, load = machine(), load_average()
    if args.report_only:
        if not stored:
            parser.error(f"{results} holds no rows to report")
        rows = stored
        minutes = sum(r.seconds for r in rows) / 60
    else:
        started = time.perf_counter()
        fresh = run_grid([*cases, *(t for _, t in twins)], args.jobs, log_row)
        for flower, _ in twins:
            fresh.append(run_case(flower))
            log_row(fresh[-1])
        minutes = (time.perf_counter() - started) / 60
        rows = with_targets(merge(stored, fresh))
        write_json(results, [asdict(r) for r in rows])
    for w in WORKLOADS:
        plot(rows, w.key, w.label, args.out / plot_name(stem, w.key))
    notes = describe(
        rows,
        jobs=args.jobs,
        minutes=minutes,
        quick=args.quick,
        host=host,
        torch_version=version("torch"),
        load=load,
        # Rows run by other invocations were timed there, perhaps on another host.
        rewritten=args.report_only or bool(stored),
    )
    write_markdown(args.out / f"{stem}.md", markdown(rows, notes, stem=stem))
    failed = [r for r in rows if r.error is not None and not r.error.startswith(REFUSED)]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
