"""Round time of Phalanx against a plain Flower FedAvg app on the same federation.

Both run through Flower's simulation engine, one after the other in this
process, on the same federation: K workers, Fashion-MNIST, r = 1 (scheme
``none``, no relabelling, so worker i trains file i), no attack, and
FedAvg-equivalent settings. Every worker runs H local SGD steps from the global
model on its file of the round; Phalanx aggregates the deltas
``params - local`` with the mean and applies server SGD with momentum 0 and
lr 1.0, which sets the global model to the mean of the local models, as
FedAvg does with equal file sizes. The Flower baseline is a ``ServerApp``
running ``flwr.serverapp.strategy.FedAvg`` with a ``ClientApp`` that calls the
same ``phalanx.training.compute_update`` on the same samples with the same
seed, so both do the same work per worker and the difference is the
framework. Both evaluate the global model on the server after every round.

Phalanx runs as ``phalanx run`` does: recorded in a (temporary) SQLite
database with checkpoints on disk, replies signed and verified, detection on.

A round's time is the wall-clock time between the ends of consecutive rounds
(Phalanx: the coordinator's ``on_round``; FedAvg: the server-side evaluation
that closes each round); round 1, which starts the workers, is left out. The
two systems alternate, ``--repeats`` times each, and the ratio is that of the
median round times.

Writes ``benchmarks/results/round.json`` and ``round.md`` (``round_quick.*`` with
``--quick``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from flwr.simulation import run_simulation

from phalanx.config import RunConfig
from phalanx.flower.simulation import SimulationEngine
from phalanx.reports import RoundReport
from phalanx.roster import SimulatedRoster
from phalanx.runs.executor import execute
from phalanx.runs.recorder import claimer_name, create_simulated_run
from phalanx.store import make_engine, migrate, session_factory

if not __package__:  # run as `python benchmarks/NAME.py`: import `benchmarks` from this checkout
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.lib.fedavg_apps import backend_config, fedavg_client_app, fedavg_server_app
from benchmarks.lib.results import (
    RESULTS,
    Machine,
    machine,
    report_path,
    version,
    write_json,
    write_markdown,
)
from benchmarks.lib.round_timing import (
    FEDAVG,
    PHALANX,
    PHASES,
    Measurement,
    summary,
    timed,
)


def federation(
    *, rounds: int, workers: int, model: str, local_steps: int, samples_per_file: int
) -> RunConfig:
    """The federation both systems run."""
    return RunConfig.model_validate(
        {
            "name": "bench-round",
            "seed": 11,
            "rounds": rounds,
            "data": {
                "dataset": "fashion-mnist",
                "model": model,
                "samples_per_file": samples_per_file,
                "eval_samples": 1000,
            },
            "assignment": {"scheme": "none", "num_workers": workers, "r": 1, "relabel": False},
            "aggregation": {"rule": "mean", "f": 0},
            "training": {
                "local_steps": local_steps,
                "local_lr": 0.05,
                "optimizer": "sgd",
                "momentum": 0.0,
                "server_lr": 1.0,
            },
        }
    )


# --------------------------------------------------------------------------- Phalanx


def run_phalanx(config: RunConfig, repeat: int) -> Measurement:
    """Run the federation with Phalanx, recorded in a temporary SQLite database."""
    ends: list[float] = []
    reports: list[RoundReport] = []

    def on_round(report: RoundReport) -> None:
        ends.append(time.perf_counter())
        reports.append(report)

    with tempfile.TemporaryDirectory(prefix="phalanx-bench-") as tmp:
        url = f"sqlite:///{Path(tmp) / 'phalanx.db'}"
        migrate.upgrade(url)
        engine = make_engine(url)
        sessions = session_factory(engine)
        claimer = claimer_name()
        run_id = create_simulated_run(sessions, config, claimer)
        summary = execute(
            sessions,
            run_id,
            transport=SimulationEngine(),
            roster=SimulatedRoster(run_id),
            claimer=claimer,
            checkpoint_dir=Path(tmp) / "checkpoints",
            on_round=on_round,
        )
        engine.dispose()
    middle = reports[1:-1]
    phases = {p: statistics.median(r.timings.get(p, 0.0) for r in middle) for p in PHASES}
    rounds, evals = timed(ends, [r.timings.get("evaluate", 0.0) for r in reports])
    return Measurement(PHALANX, repeat, rounds, evals, summary.final_accuracy, phases)


# --------------------------------------------------------------------------- plain Flower


def run_fedavg(config: RunConfig, repeat: int) -> Measurement:
    """Run the federation with a plain Flower FedAvg app."""
    ends: list[float] = []
    evals: list[float] = []
    accuracy: list[float] = []
    # Ray's workers unpickle the ClientApp by reference to its module (Flower puts the
    # driver's sys.path on their PYTHONPATH), so its dataset cache resolves there.
    run_simulation(
        server_app=fedavg_server_app(config, ends, evals, accuracy),
        client_app=fedavg_client_app(config),
        num_supernodes=config.assignment.num_workers,
        backend_config=backend_config(),
    )
    rounds, eval_times = timed(ends, evals)
    return Measurement(FEDAVG, repeat, rounds, eval_times, accuracy[-1] if accuracy else 0.0, {})


# --------------------------------------------------------------------------- report


def markdown(
    config: RunConfig,
    measurements: Sequence[Measurement],
    result: dict[str, Any],
    quick: bool,
    *,
    host: Machine,
    torch_version: str | None,
) -> str:
    """round.md; ``host`` and ``torch_version`` describe the machine that ran it."""
    t = config.training
    lines = [
        "# Round time: Phalanx vs a plain Flower FedAvg app",
        "",
        f"{'Quick run (`--quick`). ' if quick else ''}Both through Flower's simulation engine "
        f"(Ray, {host.cores} CPUs shared with other work, one CPU and one torch thread "
        f"per ClientApp instance) in one process, alternating, {len(measurements) // 2} "
        f"run(s) each; {host.architecture}, torch {torch_version}.",
        "",
        f"Federation: Fashion-MNIST, the `{config.data.model}` of `phalanx.nets`, "
        f"K = {config.assignment.num_workers} workers, r = 1 (scheme `none`), no attack, "
        f"{config.data.samples_per_file} samples per worker and round, {t.local_steps} local "
        f"SGD steps with lr {t.local_lr} per round (`phalanx.training.compute_update` in both "
        "systems, same samples, same seeds). Phalanx: rule `mean`, server optimiser "
        f"`{t.optimizer}` with momentum {t.momentum} and lr {t.server_lr} (the global model "
        "becomes the mean of the local models: FedAvg with equal weights), raw float32 "
        "uplink, signed replies, detection on, every round recorded in SQLite with its "
        "checkpoint. Flower: `flwr.serverapp.strategy.FedAvg` (fraction_train 1.0, no "
        "client-side evaluation). Both evaluate on the server after every round "
        f"({config.data.eval_samples} test samples; all 10,000 after the last round).",
        "",
        f"{config.rounds} rounds per run; rounds 2 to {config.rounds - 1} are timed (round 1 "
        "starts the workers, the last evaluates the whole test set); a round's time is the "
        "time between the ends of consecutive rounds. The machine was shared with other "
        "work, so single rounds vary; medians over all timed rounds of all runs are "
        "compared.",
        "",
        "| system | median round (s) | rounds timed | final accuracy (%) |",
        "|---|---|---|---|",
    ]
    for system, key in ((PHALANX, "phalanx_round_s"), (FEDAVG, "fedavg_round_s")):
        runs = [m for m in measurements if m.system == system]
        accuracy = ", ".join(f"{100 * m.final_accuracy:.2f}" for m in runs)
        timed = sum(len(m.round_seconds) for m in runs)
        lines.append(f"| {system} | {result[key]:.3f} | {timed} | {accuracy} |")
    verdict = "met" if result["goal_met"] else "NOT met"
    lines += [
        "",
        f"**Ratio Phalanx / FedAvg: {result['ratio']:.2f}** (goal at most 1.2: {verdict}). "
        "Without the server-side evaluation, which both do alike: "
        f"{result['ratio_without_evaluation']:.2f}. Per pair of runs: "
        + ", ".join(f"{r:.2f}" for r in result["ratio_per_repeat"])
        + ".",
        "",
        "Per run (median round, s): "
        + "; ".join(f"{m.system} #{m.repeat}: {m.median_round:.3f}" for m in measurements)
        + ".",
        "",
        "## Where a Phalanx round goes",
        "",
        "The coordinator's `timings` of each round (median over the timed rounds, then over "
        "the runs).",
        "",
        "| phase | seconds | share |",
        "|---|---|---|",
    ]
    for p in PHASES:
        lines.append(
            f"| {p} | {result['phase_s'][p]:.4f} | {100 * result['phase_share'][p]:.1f} % |"
        )
    lines += [
        "",
        f"Coordinator's own work (assign, verify, detect, aggregate, persist to the "
        f"database): **{100 * result['own_work_share']:.1f} %** of a round; exchange with "
        f"the workers (their training included): {100 * result['exchange_share']:.1f} %; "
        f"server-side evaluation: {100 * result['evaluate_share']:.1f} %.",
        "",
        "Time outside the coordinator's phases (the run's heartbeat in the database between "
        "rounds, Flower's scheduling) counts in the round time above but in no phase.",
        "",
        "**Same model?** Not bit for bit. With r = 1 Phalanx's detection still scores "
        "outliers and leaves a flagged update out of the mean, which FedAvg never does; up to "
        "the first round in which an honest worker is flagged the two global models are the "
        "same (up to the order of the float sums), then they drift apart. Flower's FedAvg also "
        "sums the replies in the order they arrive, so its final accuracy varies a little "
        "from run to run; Phalanx aggregates files in a fixed order and repeats exactly on the "
        "same CPU.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one short run of each system")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None, help="runs of each system")
    parser.add_argument("--workers", type=int, default=15)
    parser.add_argument("--model", choices=("cnn", "mlp"), default="cnn")
    parser.add_argument("--local-steps", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    torch.set_num_threads(1)
    config = federation(
        rounds=args.rounds or (5 if args.quick else 12),  # two rounds are not timed
        workers=args.workers,
        model=args.model,
        local_steps=args.local_steps,
        samples_per_file=32,
    )
    repeats = args.repeats or (1 if args.quick else 3)
    measurements: list[Measurement] = []
    started = time.perf_counter()
    for repeat in range(1, repeats + 1):
        for runner in (run_phalanx, run_fedavg):
            measurements.append(runner(config, repeat))
            m = measurements[-1]
            sys.stderr.write(
                f"{m.system} #{repeat}: median round {m.median_round:.3f} s, "
                f"accuracy {100 * m.final_accuracy:.2f}\n"
            )
    result = summary(measurements)
    result["seconds"] = time.perf_counter() - started
    document = {
        "config": config.model_dump(mode="json"),
        "result": result,
        "runs": [asdict(m) for m in measurements],
    }
    write_json(report_path(args.out, "round", ".json", quick=args.quick), document)
    table = markdown(
        config, measurements, result, args.quick, host=machine(), torch_version=version("torch")
    )
    write_markdown(report_path(args.out, "round", ".md", quick=args.quick), table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
