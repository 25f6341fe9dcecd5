"""Uplink bytes against accuracy: Phalanx's predictive coding beside standard compressors.

Fashion-MNIST, the small CNN (421,642 parameters), K = 15 workers, no attack
(q = 0, so accuracy differences come from compression alone), the mean rule,
Adam on the server. Two assignments: r = 1 (scheme ``none``, 15 files a round)
and r = 3 (scheme ``bibd``, the Steiner triple system STS(15): 35 files, each
computed by 3 workers, 7 files per worker). Every method of one r runs from the
same seed, the same rounds' samples and the same initial model.

Methods (uplink; the downlink is what the channel sends, counted as it is):

- ``fp32``: raw float32 updates (the platform's ``PlainChannel``).
- ``zstd``: zstd level 3 on the float32 bytes, lossless (the final model must
  equal fp32's bit for bit).
- ``qsgd``: s levels per bucket of 512, stochastic rounding seeded from (run
  seed, round, file), the signed levels ANS-coded with their frequency table.
- ``top-k + EF``: the 0.5 % largest magnitudes with error feedback, r = 1 only:
  a worker's error memory is private, so with replicas honest workers would
  send different bytes for the same file and detection would flag them.
- ``signsgd``: one bit per coordinate plus one float32 scale per layer.
- ``predictive coding``: the platform's codec (``CodecChannel`` and
  ``ModelReplica`` through ``config.codec``) at several rate weights lambda; its
  downlink is the compressed global delta. ``lambda`` is ``codec.rd_lambda``;
  ``downlink_lambda`` is ``codec.downlink_rd_lambda``, the broadcast's own rate
  weight (unset: the broadcast is coded at ``rd_lambda`` too); ``unbiased``
  is ``codec.unbiased`` (stochastic rounding of the uplink); ``extra_step``
  adds a coarser step to ``codec.step_sizes``; ``rd_distortion`` is
  ``codec.rd_distortion``; ``low_rank`` is ``codec.low_rank`` (fully connected
  weights may go as two quantized factors of that rank), which the r = 1
  candidate pairs with ``codec.error_feedback``. Every row is a plain run
  config.

Baselines plug into the same coordinator and workers
(``benchmarks.lib.compression_baselines``: a ``BaselineReplica`` encodes, a
``BaselineChannel`` decodes). Runs go through the in-process transport
(``phalanx_clients.inprocess``, a test double of Flower's runtime: the same
coordinator, workers and training code in one process); one predictive-coding
case also runs through Flower's simulation engine, and its bytes and model
digests are compared round by round with the in-process run of the same config.

Bytes: ``uplink_bytes`` is the sum over rounds of the round reports'
``bytes_up`` (payloads, their SHA-256 digests and the ECDSA signatures);
``bits_per_param`` counts payload bytes only (8 x payload bytes / (payloads x
parameters)). ``reduction_vs_fp32`` is ``1 - uplink_bytes / fp32's`` at the same r.

Writes ``benchmarks/results/compression.json``, ``compression.md`` and
``compression_r1.png`` / ``compression_r3.png`` (``compression_quick*`` with
``--quick``). ``--only LABEL`` (repeatable)
reruns just those methods and merges their rows into an existing
``compression.json`` (replacing the rows of the same method and r), so one
method can be rerun without the whole grid; ``--only`` also accepts the
methods of ``EXTRA_METHODS``, which the full grid leaves out.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from dataclasses import asdict, replace  # noqa: E402
from pathlib import Path  # noqa: E402

if not __package__:  # run as `python benchmarks/NAME.py`: import `benchmarks` from this checkout
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.lib.compression_goals import with_references  # noqa: E402
from benchmarks.lib.compression_grid import (  # noqa: E402
    EXTRA_METHODS,
    FLOWER,
    IN_PROCESS,
    METHODS,
    QUICK_METHODS,
    SERVER_LR,
    Case,
    Settings,
    grid,
    predictive,
    seed_grid,
    select,
)
from benchmarks.lib.compression_markdown import describe, log_row, markdown  # noqa: E402
from benchmarks.lib.compression_plot import plot  # noqa: E402
from benchmarks.lib.compression_runs import Row, merge, run_case, run_grid  # noqa: E402
from benchmarks.lib.results import (  # noqa: E402
    RESULTS,
    load_average,
    machine,
    read_json,
    report_stem,
    version,
    write_json,
    write_markdown,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and methods")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per run")
    parser.add_argument("--flower-rounds", type=int, default=None, help="rounds of the Flower run")
    parser.add_argument("--eval-samples", type=int, default=500)
    parser.add_argument(
        "--seeds",
        type=int,
        default=None,
        help="run fp32 and the goal's candidates under this many seeds (default 5; 1 with "
        "--quick); the goal is judged on their means",
    )
    parser.add_argument("--server-lr", type=float, default=SERVER_LR, help="Adam's step")
    parser.add_argument("--r", default="1,3", help="replications to run, e.g. 1 or 1,3")
    parser.add_argument("--jobs", type=int, default=1, help="in-process runs at a time")
    parser.add_argument("--no-flower", action="store_true", help="skip the Flower comparison")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--report-only", action="store_true", help="rewrite compression.md from compression.json"
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="LABEL",
        help="run only this method (its label, e.g. 'predictive coding (lambda=0.3)', or key; "
        "repeatable) without the Flower comparison, and merge its rows into the existing "
        "compression.json of --out",
    )
    args = parser.parse_args(argv)

    settings = Settings(
        rounds=args.rounds or (4 if args.quick else 30),
        flower_rounds=args.flower_rounds or (2 if args.quick else 5),
        eval_samples=args.eval_samples,
        samples_per_file={1: 32, 3: 14},
        server_lr=args.server_lr,
        seeds=args.seeds or (1 if args.quick else 5),
    )
    rs = [int(r) for r in args.r.split(",")]
    try:
        methods = select(QUICK_METHODS if args.quick else METHODS, args.only, EXTRA_METHODS)
    except ValueError as exc:
        parser.error(str(exc))
    flower = not (args.no_flower or args.only)
    flower_case = Case(predictive(0.1), max(rs), FLOWER, rounds=settings.flower_rounds)
    twin = replace(flower_case, transport=IN_PROCESS)
    stem = report_stem("compression", quick=args.quick)
    results = args.out / f"{stem}.json"
    previous: list[Row] = []
    if args.report_only:
        rows = [Row(**x) for x in read_json(results)]
        minutes = sum(x.seconds for x in rows) / 60
        settings = replace(
            settings,
            rounds=max(x.rounds for x in rows),
            seeds=len({x.seed for x in rows}),
        )
    else:
        if args.only and results.exists():
            previous = [Row(**x) for x in read_json(results)]
            held = max(x.rounds for x in previous)
            if held != settings.rounds:
                parser.error(
                    f"{results} holds {held}-round runs; rerun with --rounds {held} to merge, "
                    "or write elsewhere with --out"
                )
        started = time.perf_counter()
        cases = grid(methods, rs) + seed_grid(methods, rs, settings.seeds)
        if flower:
            cases.append(twin)
        rows = run_grid(cases, settings, args.jobs, log_row)
        if flower:
            rows.append(run_case(flower_case, settings))
            log_row(rows[-1])
        rows = with_references(merge(previous, rows), settings.rounds)
        minutes = (time.perf_counter() - started) / 60
        write_json(results, [asdict(x) for x in rows])
    for r in rs:
        plot(rows, r, args.out / f"{stem}_r{r}.png", settings.rounds)
    notes = describe(
        settings,
        rows,
        args.jobs,
        minutes,
        args.quick,
        host=machine(),
        load=load_average(),
        torch_version=version("torch"),
        rewritten=args.report_only,
        rerun=[m.label for m in methods] if previous else (),
        stem=stem,
    )
    text = markdown(rows, notes, settings.rounds, stem=stem)
    write_markdown(args.out / f"{stem}.md", text)
    return 0 if all(x.error is None for x in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
