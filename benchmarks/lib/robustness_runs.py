"""Running one case of ``eval_robustness.py`` end to end, many in processes, and merging rows.

A run goes through the in-process transport (a test double of Flower's
runtime) or Flower's simulation engine; its :class:`Row` carries the accuracy,
who was flagged, and the distorted fraction derived from the round reports
(:func:`round_distortion`). A failed run becomes a row that says what failed.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from benchmarks.lib.case_pool import run_cases
from benchmarks.lib.inprocess_sharing import ReportSink, SharedUpdates, SharingWorker
from benchmarks.lib.results import machine
from benchmarks.lib.robustness_grid import IN_PROCESS, SEED, Case, Settings
from phalanx.attacks import ALittleIsEnough, Attack, AttackContext, distortion_plan
from phalanx.config import RunConfig
from phalanx.data import ImageDataset, load_dataset
from phalanx.flower.simulation import SimulationEngine
from phalanx.plan import adversaries, round_assignment
from phalanx.reports import RoundReport
from phalanx.roster import simulated_roster
from phalanx.runs import execute_run, summarize
from phalanx_clients.behaviour import RedTeam
from phalanx_clients.inprocess import InProcessTransport
from phalanx_clients.worker import Worker


class PerRoundAttack:
    """ALIE computed once per round and sent by every colluder for every file.

    ALIE's vector is ``mean + z * std`` of ``ctx.honest_updates``, the reference
    stack that every adversary of a round holds identically; it reads neither the
    file nor the adversary's own update (beyond its shape). ``torch.std_mean``
    over that stack costs about 0.1 s on one core, and the weak attack on
    ``subsets`` calls it q x 91 times a round, so the test double computes it
    once. The Flower rows call it per adversary and file and must agree.
    """

    def __init__(self, inner: Attack) -> None:
        self.inner = inner
        self.name = inner.name
        self._round: int | None = None
        self._vector: Tensor | None = None

    def __call__(self, honest: Tensor, ctx: AttackContext) -> Tensor:
        """The round's ALIE vector."""
        if self._vector is None or ctx.round != self._round:
            self._round, self._vector = ctx.round, self.inner(honest, ctx)
        return self._vector


@functools.lru_cache(maxsize=1)
def _train_set(name: str) -> ImageDataset:
    return load_dataset(name, "train")


def in_process_transport(config: RunConfig, run_id: str) -> InProcessTransport:
    """The in-process test double, with the red team the config describes."""
    train = _train_set(config.data.dataset)
    team = RedTeam.from_config(config)
    if team is not None and isinstance(team.attack, ALittleIsEnough):
        team = dataclasses.replace(team, attack=PerRoundAttack(team.attack))
    shared = SharedUpdates()
    workers: dict[int, Worker] = {
        ident.worker: SharingWorker(
            config=config,
            train_set=train,
            client_id=ident.client_id,
            private_key=ident.private_key,
            behaviour=team.behaviour_of(ident.worker) if team else None,
            shared=shared,
        )
        for ident in simulated_roster(run_id, config.assignment.num_workers)
    }
    return InProcessTransport(workers)


def round_distortion(config: RunConfig, report: RoundReport) -> tuple[float, bool]:
    """Distorted fraction of one round, and whether the predicted drops match the report.

    A file the report dropped kept no value, whatever this model of the verdict
    predicts: with detection across rounds (the default) the verdict also drops a
    file whose every replica comes from a suspected worker, which the model, the
    per-round rule's, does not see; there the check is that the report drops at
    least the files the model drops.

    Returns
    -------
    tuple of (float, bool)
        Files whose accepted value is distorted / files of the round; ``True``
        when the files this model of the verdict drops are the reported ones (a
        subset of them with detection across rounds).
    """
    assignment = round_assignment(config, report.round)
    chosen = adversaries(config)
    plan = (
        distortion_plan(assignment, chosen, strategy=config.attack.strategy, seed=config.seed)
        if chosen
        else {}
    )
    excluded = set(report.flagged) | set(report.rejected)
    reported = set(report.dropped_files)
    distorted, dropped = 0, []
    for f, workers in enumerate(assignment.files):
        voters = [w for w in workers if w not in excluded]
        bad = sum(f in plan.get(w, ()) for w in voters)
        if config.detection.on_tie == "majority":
            keeps_bad, drops = 2 * bad > len(voters), 2 * bad == len(voters)
        else:
            keeps_bad, drops = bool(voters) and bad == len(voters), 0 < bad < len(voters)
        if keeps_bad and f not in reported:
            distorted += 1
        elif drops or not voters:
            dropped.append(f)
    if config.detection.across_rounds:
        return distorted / assignment.num_files, set(dropped) <= reported
    return distorted / assignment.num_files, tuple(dropped) == tuple(report.dropped_files)


@dataclass(frozen=True)
class Row:
    """One line of robustness.json (the first ten keys are the documented ones).

    A run that failed has ``None`` metrics and its error in ``error``.
    """

    scheme: str
    aggregator: str
    attack: str
    mode: str
    q: int
    final_accuracy: float | None
    precision: float | None
    recall: float | None
    distorted_fraction: float | None
    transport: str
    defence: str
    strategy: str
    f: int
    samples_per_file: int
    rounds: int
    adversaries: list[int]
    flagged: list[int]
    flagged_by_round: list[list[int]]
    drops_consistent: bool
    model_digest: str
    seconds: float
    error: str | None = None
    note: str | None = None
    seed: int = SEED
    detection: str | None = None
    """The detection rule the run had: ``across_rounds`` (proofs across rounds, outsiders
    suspected) or ``per_round`` (``detection.across_rounds = false``); ``None`` for rows
    measured before the field, all of them with the per-round rule."""
    host: str | None = None
    """The CPU the run ran on; ``None`` where no record says."""


def detection_rule(config: RunConfig) -> str:
    """How a row names its config's detection rule (see `Row.detection`)."""
    return "across_rounds" if config.detection.across_rounds else "per_round"


def run_case(case: Case, settings: Settings, transport: str) -> Row:
    """Run one case end to end on the named transport; a failure becomes a row too."""
    torch.set_num_threads(1)  # as the ClientApp does: one thread, so replicas agree bit for bit
    config = case.config(settings)
    sink = ReportSink()
    started = time.perf_counter()
    common: dict[str, Any] = {
        "scheme": case.defence.scheme,
        "aggregator": case.defence.rule,
        "attack": case.attack,
        "mode": case.mode,
        "q": case.q,
        "transport": transport,
        "defence": case.defence.name,
        "strategy": case.strategy if case.q else "-",
        "f": case.f,
        "samples_per_file": case.defence.samples_per_file,
        "adversaries": sorted(adversaries(config)),
        "seed": case.seed,
        "detection": detection_rule(config),
        "host": machine().cpu,
    }
    try:
        if transport == IN_PROCESS:
            local = in_process_transport(config, case.run_id)
            execute_run(config, run_id=case.run_id, sink=sink, transport=local)
        else:
            execute_run(config, run_id=case.run_id, sink=sink, transport=SimulationEngine())
    except Exception as exc:  # the grid goes on; the row says what failed
        return Row(
            **common,
            final_accuracy=None,
            precision=None,
            recall=None,
            distorted_fraction=None,
            rounds=len(sink.reports),
            flagged=sorted({w for r in sink.reports for w in r.flagged}),
            flagged_by_round=[list(r.flagged) for r in sink.reports],
            drops_consistent=True,
            model_digest="",
            seconds=round(time.perf_counter() - started, 2),
            error=f"round {len(sink.reports) + 1}: {type(exc).__name__}: {exc}",
        )
    seconds = time.perf_counter() - started
    reports = sink.reports
    summary = summarize(config, case.run_id, reports)
    distortion = [round_distortion(config, r) for r in reports]
    return Row(
        **common,
        final_accuracy=summary.final_accuracy,
        precision=summary.precision,
        recall=summary.recall,
        distorted_fraction=sum(d for d, _ in distortion) / len(distortion),
        rounds=len(reports),
        flagged=sorted({w for r in reports for w in r.flagged}),
        flagged_by_round=[list(r.flagged) for r in reports],
        drops_consistent=all(ok for _, ok in distortion),
        model_digest=summary.model_digest,
        seconds=round(seconds, 2),
    )


def _cost(case: Case) -> int:
    """Rough work of a case: replicas per round (the subsets runs dominate), times rounds."""
    per_round = {"subsets": 1365, "mols": 75}.get(case.defence.scheme, 15)
    return per_round * (case.rounds or 20)


def run_grid(
    cases: Sequence[Case], settings: Settings, jobs: int, log: Callable[[Row], None]
) -> list[Row]:
    """Run every case on the in-process transport, ``jobs`` processes at a time."""
    run = functools.partial(run_case, settings=settings, transport=IN_PROCESS)
    return run_cases(cases, run, jobs=jobs, cost=_cost, log=log)


def case_key(row: Row) -> tuple[str, str, str, int, int, int]:
    """What identifies a row's case across transports: defence, attack, mode, q, seed, rounds."""
    return (row.defence, row.attack, row.mode, row.q, row.seed, row.rounds)


def grid_case_key(case: Case, settings: Settings) -> tuple[str, str, str, int, int, int]:
    """The :func:`case_key` of the row ``case`` gives."""
    rounds = case.rounds or settings.rounds
    return (case.defence.name, case.attack, case.mode, case.q, case.seed, rounds)


def grid_rounds(rows: Sequence[Row]) -> int:
    """Rounds of the grid: the most common among the rows (the long runs are few)."""
    counts: dict[int, int] = {}
    for r in rows:
        counts[r.rounds] = counts.get(r.rounds, 0) + 1
    return max(counts, key=lambda n: (counts[n], -n))


def merge(old: Sequence[Row], new: Sequence[Row]) -> list[Row]:
    """``old`` with each row of the same case and transport as a new row replaced.

    New rows of cases ``old`` does not have are appended.
    """

    def case_of(r: Row) -> tuple[object, ...]:
        return (*case_key(r), r.transport)

    fresh = {case_of(r): r for r in new}
    merged = [fresh.pop(case_of(r), r) for r in old]
    return [*merged, *fresh.values()]
