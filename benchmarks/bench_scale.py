"""Round cost against the federation's size K: in-process and through Flower's simulation.

Each case is a recorded run (SQLite, checkpoints on disk, signed replies,
detection on) of K workers on Fashion-MNIST with 5 % reversed-gradient
adversaries (``detection.max_adversaries`` set to their number), r = 1
(scheme ``none``) or r = 3 (scheme ``random``, relabelled every round), the
``mlp`` of ``phalanx.nets``, in a process of its own; see
``benchmarks/lib/scale_runs.py``. A round's time is the time between the ends
of consecutive rounds, round 1 (which starts the workers) left out, the median
over the timed rounds. The workers' training is timed inside them
(``benchmarks/lib/scale_probes.WorkClock``; in Flower's Ray actors too), the
database's growth is read from its pages after each round, the peak memory is
that of the process and all its descendants (Ray's included).

Then the round-time ratio to a plain Flower FedAvg app (``bench_round.py``'s two
systems, same work, r = 1) over alternating pairs, with their spread.

Rows already in ``scale.json`` for cases not run again are kept (each row says
when it was measured), so the larger K can be run later by the same script:
``--workers 3000 --transports in-process,flower`` and ``--workers 10000
--transports in-process``.

Writes ``benchmarks/results/scale.json`` and ``scale.md`` (``scale_quick.*``
with ``--quick``).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if not __package__:  # run as `python benchmarks/NAME.py`: import `benchmarks` from this checkout
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.lib.results import (
    RESULTS,
    hosts,
    machine,
    read_json,
    report_path,
    version,
    write_json,
    write_markdown,
)
from benchmarks.lib.scale_fedavg import ratio_summary
from benchmarks.lib.scale_markdown import fedavg_lines, goals, table
from benchmarks.lib.scale_probes import PROFILE_DIR
from benchmarks.lib.scale_rows import build_row
from benchmarks.lib.scale_runs import FLOWER, TRANSPORTS, Case, Settings, run_isolated

DEFAULT_WORKERS = (50, 100, 300, 1000, 3000)
IN_PROCESS_ONLY = (10_000,)
"""K run in-process only: through Flower a worker took 2.6 MB at K = 3,000 (Ray's processes
included), some 29 GB at K = 10,000, beyond this 24 GB machine."""


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


def _names(text: str) -> tuple[str, ...]:
    names = tuple(x.strip() for x in text.split(",") if x.strip())
    unknown = [n for n in names if n not in TRANSPORTS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown transport {unknown[0]!r}; use {TRANSPORTS}")
    return names


def cases(workers: tuple[int, ...], transports: tuple[str, ...], rs: tuple[int, ...]) -> list[Case]:
    """Every (transport, r, K); Flower only up to the largest K it is run at by default."""
    return [
        Case(t, k, r)
        for t in transports
        for r in rs
        for k in workers
        if not (t == FLOWER and k in IN_PROCESS_ONLY)
    ]


def merged(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``old``'s rows for cases not in ``new``, then ``new``'s."""
    keys = {(x["transport"], x["r"], x["K"]) for x in new}
    return [x for x in old if (x["transport"], x["r"], x["K"]) not in keys] + new


def run_fedavg_pairs(pairs: int, workers: int, rounds: int, settings: Settings) -> dict[str, Any]:
    """Alternate Phalanx and plain Flower FedAvg ``pairs`` times; the ratio and its spread."""
    from benchmarks.bench_round import federation, run_fedavg, run_phalanx

    config = federation(
        rounds=rounds,
        workers=workers,
        model=settings.model,
        local_steps=settings.local_steps,
        samples_per_file=settings.samples_per_file,
    )
    measurements = []
    for pair in range(1, pairs + 1):
        for runner in (run_phalanx, run_fedavg):
            measurements.append(runner(config, pair))
            m = measurements[-1]
            sys.stderr.write(f"{m.system} #{pair}: median round {m.median_round:.3f} s\n")
    result = ratio_summary(measurements)
    result.update(
        workers=workers,
        rounds=rounds,
        runs=[dataclasses.asdict(m) for m in measurements],
        measured=_stamp(),
        host=machine().cpu,
    )
    return result


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


def missing_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Which of the default cases have no row yet, and the command that adds them."""
    have = {(x["transport"], x["r"], x["K"]) for x in rows}
    wanted = cases(DEFAULT_WORKERS + IN_PROCESS_ONLY, TRANSPORTS, (1, 3))
    missing = [c for c in wanted if (c.transport, c.r, c.workers) not in have]
    if not missing:
        return []
    by_k: dict[int, set[str]] = {}
    for c in missing:
        by_k.setdefault(c.workers, set()).add(c.transport)
    commands = ", ".join(
        f"`python benchmarks/bench_scale.py --workers {k} --transports "
        f"{','.join(sorted(ts))} --fedavg-pairs 0`"
        for k, ts in sorted(by_k.items())
    )
    return [
        "Not measured yet (the rows above are kept when these run): "
        + "; ".join(f"{c.transport} K = {c.workers:,} r = {c.r}" for c in missing)
        + f". Run {commands}.",
        "",
    ]


def markdown(document: dict[str, Any], quick: bool) -> str:
    """scale.md."""
    host = document["machine"]
    s = document["settings"]
    lines = [
        "# Scale: round cost against the federation's size",
        "",
        f"{'Quick run (`--quick`). ' if quick else ''}Each row is one recorded run (SQLite, "
        "checkpoints on disk, signed replies, detection on) in a process of its own, on "
        f"{host['cores']} CPUs shared with other work (rows on "
        f"{hosts(row.get('host') for row in document['rows'])}; torch "
        f"{document['torch']}, flwr {document['flwr']} where the report was written); the "
        "load average at the start and the end of each run is in the table, and the column "
        "`measured` says which run a row is from.",
        "",
        f"Federation: Fashion-MNIST, the `{s['model']}` of `phalanx.nets`, "
        f"{s['samples_per_file']} samples per file (fewer where K files would not fit in "
        f"60,000), {s['local_steps']} local SGD steps, rule `mean`, "
        f"{100 * s['adversary_share']:.0f} % reversed-gradient adversaries "
        "(`detection.max_adversaries` set to their number); r = 1 is scheme `none`, r = 3 "
        f"scheme `random` relabelled every round; {s['rounds']} rounds, rounds 2 to "
        f"{s['rounds']} timed (the time between the ends of consecutive rounds, median).",
        "",
        "- **CPU per round**: the CPU seconds (user and system) of the process and all its "
        "descendants per timed round (median): unlike the round's time it does not grow when "
        "other work takes the shared cores.",
        "- **per worker**: the round's time over K. **training share**: the workers' "
        "training (`file_updates`, timed inside each worker, in Flower's Ray actors "
        "too) summed over the timed rounds, over those rounds' time; through Flower several "
        "actors train at once, so it may pass 100 %.",
        "- **coordinator's own work**: its phases but the exchange and the evaluation "
        "(assign, verify, detect, aggregate, persist). **workers' overhead**: each task's "
        "`Worker.answer` less its training (the downlink, the plan, encoding, signing), "
        "summed over the round's tasks (the ClientApp's message handling outside it is not "
        "counted). **training**: the same sum of the training alone.",
        "- **peak RSS**: this process and all its descendants (Ray's GCS, raylet and "
        "actors), sampled every 0.25 s.",
        "- **DB bytes per round**: the growth of the SQLite file's used pages per timed "
        "round (median). **DB bytes per event**: the bytes `detection_events` and its "
        "indexes hold (their records, SQLite's `dbstat`), added over the timed rounds, per "
        "event added; **evidence bytes**: the "
        "events' JSON evidence alone.",
        "- **startup**: from the transport's start (Ray and the nodes for Flower; the "
        "workers built for in-process) to round 1's start, when its tasks go out.",
        "- **precision, recall**: of the workers flagged in any round against the adversaries.",
        "",
        *table(document["rows"]),
        "",
        *missing_lines(document["rows"]),
        "## Goals",
        "",
        *goals(document["rows"]),
        "",
        "## Round time against plain Flower FedAvg",
        "",
        "`bench_round.py`'s two systems through Flower's simulation engine, same federation "
        "and work per worker (r = 1, scheme `none`, no attack, rule `mean`, server lr 1; "
        "FedAvg's ClientApp trains with Phalanx's `compute_update` on the same samples), "
        "alternating; a pair's ratio is that of its median rounds.",
        "",
        *fedavg_lines(document.get("fedavg")),
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="K = 50 and 100, two pairs")
    parser.add_argument("--workers", type=_ints, default=None, help="K, comma-separated")
    parser.add_argument("--transports", type=_names, default=TRANSPORTS)
    parser.add_argument("--r", type=_ints, default=(1, 3))
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--fedavg-pairs", type=int, default=None, help="0: skip")
    parser.add_argument("--fedavg-workers", type=int, default=100)
    parser.add_argument("--fedavg-rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--profile-actors",
        type=Path,
        default=None,
        metavar="DIR",
        help="Flower's actors write the profile of their tasks to DIR/<pid>.prof",
    )
    parser.add_argument(
        "--render-only", action="store_true", help="rewrite scale.md from scale.json, run nothing"
    )
    args = parser.parse_args(argv)

    settings = Settings(rounds=args.rounds or (3 if args.quick else 4))
    workers = args.workers or ((50, 100) if args.quick else DEFAULT_WORKERS + IN_PROCESS_ONLY)
    pairs = args.fedavg_pairs if args.fedavg_pairs is not None else (2 if args.quick else 10)
    json_path = report_path(args.out, "scale", ".json", quick=args.quick)
    previous = read_json(json_path) if json_path.exists() else {}
    md_path = report_path(args.out, "scale", ".md", quick=args.quick)
    if args.render_only:
        write_markdown(md_path, markdown(previous, args.quick))
        return 0
    if args.profile_actors is not None:
        args.profile_actors.mkdir(parents=True, exist_ok=True)
        # The cases' processes, Ray's actors among them, inherit it.
        os.environ[PROFILE_DIR] = str(args.profile_actors.resolve())
    started = time.perf_counter()
    rows = []
    for case in cases(workers, args.transports, args.r):
        row = build_row(run_isolated(case, settings))
        rows.append({**dataclasses.asdict(row), "measured": _stamp(), "host": machine().cpu})
        sys.stderr.write(
            f"{case.transport} K={case.workers} r={case.r}: round {row.round_s:.2f} s, "
            f"training {row.training_s:.2f} s, startup {row.startup_s:.1f} s\n"
        )
    fedavg = previous.get("fedavg")
    if pairs > 0:
        fedavg = run_fedavg_pairs(pairs, args.fedavg_workers, args.fedavg_rounds, settings)
    document = {
        "settings": dataclasses.asdict(settings),
        "machine": dataclasses.asdict(machine()),
        "torch": version("torch"),
        "flwr": version("flwr"),
        "rows": merged(previous.get("rows", []), rows),
        "fedavg": fedavg,
        "seconds": time.perf_counter() - started,
    }
    write_json(json_path, document)
    write_markdown(
        report_path(args.out, "scale", ".md", quick=args.quick), markdown(document, args.quick)
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
