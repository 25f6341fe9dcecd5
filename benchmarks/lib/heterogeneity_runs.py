"""Running one case of ``eval_heterogeneity.py`` end to end, and ByzFL on the same updates.

A case runs Phalanx's coordinator and simulated clients, in this process (the
in-process transport, a test double of Flower's runtime) or through Flower's
simulation engine. While it runs, :class:`PeerGap` hands every aggregation's
inputs to ByzFL's aggregator of the same rule as well and keeps the relative
distance between the two aggregates: ByzFL's rules on the very updates
Phalanx's aggregated, round by round. A gap of zero means a run with ByzFL's
aggregator would have been the same run.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from unittest import mock

import torch
from torch import Tensor

from benchmarks.lib.aggregation_peers import load_byzfl
from benchmarks.lib.case_pool import run_cases
from benchmarks.lib.heterogeneity_grid import IN_PROCESS, SEED, Case, F, K, Settings
from benchmarks.lib.inprocess_sharing import ReportSink
from benchmarks.lib.results import machine
from phalanx import coordinator
from phalanx.aggregation import aggregate
from phalanx.config import RunConfig
from phalanx.data import load_dataset
from phalanx.flower.simulation import SimulationEngine
from phalanx.local_data import client_data, model_shape, run_partition
from phalanx.plan import adversaries
from phalanx.reports import RoundReport
from phalanx.roster import simulated_roster
from phalanx.runs import execute_run, summarize
from phalanx_clients.behaviour import RedTeam
from phalanx_clients.inprocess import InProcessTransport
from phalanx_clients.worker import Worker


@functools.lru_cache(maxsize=1)
def _byzfl() -> dict[str, Any]:
    return load_byzfl()  # it registers ByzFL's modules: once per process


def byzfl_aggregator(rule: str, pre: str | None, f: int) -> Callable[[Tensor], Tensor] | None:
    """ByzFL's aggregator for ``rule`` after ``pre``, or ``None`` where it has no such rule.

    Settings as ``bench_aggregation.py`` gives them (its geometric median runs 3
    Weiszfeld steps from zero, Phalanx's from the mean; its centered clipping
    one step of radius 100), so a gap there measures the settings as much as the
    code.
    """
    byzfl = _byzfl()
    rules: dict[str, Callable[[], Any]] = {
        "mean": byzfl["Average"],
        "median": byzfl["Median"],
        "trimmed_mean": lambda: byzfl["TrMean"](f=f),
        "multi_krum": lambda: byzfl["MultiKrum"](f=f),
        "geometric_median": lambda: byzfl["GeometricMedian"](nu=0.1, T=3),
        "centered_clipping": lambda: byzfl["CenteredClipping"](tau=100.0, L=1),
    }
    if rule not in rules or pre not in (None, "nnm"):
        return None
    outer = rules[rule]()
    inner = None if pre is None else byzfl["NNM"](f=f)

    def run(updates: Tensor) -> Tensor:
        rows = updates if inner is None else torch.as_tensor(inner(updates))
        if hasattr(outer, "m"):  # centered clipping starts from its last output: from zero
            outer.m = None
        return torch.as_tensor(outer(rows), dtype=updates.dtype)

    return run


class PeerGap:
    """Phalanx's aggregation with ByzFL's beside it on the same inputs, recording the gap."""

    def __init__(
        self,
        peer: Callable[[Tensor], Tensor] | None,
        on_gap: Callable[[float, Tensor, int], None] | None = None,
    ) -> None:
        self.peer = peer
        self.on_gap = on_gap
        self.gaps: list[float] = []

    def __call__(
        self,
        name: str,
        updates: Tensor,
        *,
        f: int,
        pre: str | None = None,
        pre_options: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> Tensor:
        """Aggregate as Phalanx does; aggregate the same rows with ByzFL and keep the gap."""
        out = aggregate(name, updates, f=f, pre=pre, pre_options=pre_options, **options)
        if self.peer is not None:
            theirs = self.peer(updates.detach().clone())
            scale = max(float(torch.linalg.vector_norm(out)), 1e-12)
            self.gaps.append(float(torch.linalg.vector_norm(out - theirs)) / scale)
            if self.on_gap is not None:
                self.on_gap(self.gaps[-1], updates, f)
        return out


@contextmanager
def observed(gap: PeerGap) -> Iterator[None]:
    """Route the coordinator's robust aggregations through ``gap`` while the block runs.

    FedAvg's weighted mean of local data does not go through it (ByzFL's mean
    takes no weights): a run of ``mean`` alone records no gap.
    """
    with mock.patch.object(coordinator, "aggregate", gap):
        yield


@functools.lru_cache(maxsize=1)
def _train(name: str) -> Any:
    return load_dataset(name, "train"), load_dataset(name, "test")


def in_process_transport(config: RunConfig, run_id: str) -> InProcessTransport:
    """The run's clients in this process, each with its part of the partition and its role."""
    train, test = _train(config.data.dataset)
    partition = run_partition(config, train)[0]
    team = RedTeam.from_config(config, train_data=lambda _: train)
    return InProcessTransport(
        {
            ident.worker: Worker(
                config=config,
                train_set=client_data(train, partition, ident.worker),
                client_id=ident.client_id,
                private_key=ident.private_key,
                behaviour=team.behaviour_of(ident.worker) if team else None,
                model_shape=model_shape(test),
            )
            for ident in simulated_roster(run_id, config.assignment.num_workers)
        }
    )


@dataclass(frozen=True)
class Row:
    """One line of heterogeneity.json (the first ten keys are the documented ones).

    A run that failed has ``None`` figures and its error in ``error``.
    """

    partition: str
    alpha: float | None
    aggregator: str
    attack: str
    q: int
    final_accuracy: float | None
    honest_flagged: float | None
    precision: float | None
    recall: float | None
    transport: str
    rule: str
    pre: str | None
    rounds: int
    adversaries: list[int]
    flagged_by_round: list[list[int]]
    byzfl_gap: float | None
    model_digest: str
    seconds: float
    error: str | None = None
    seed: int = SEED
    host: str | None = None
    """The CPU the run ran on (``Machine.cpu``): float32 rounds differently on another,
    so a run repeats bit for bit only there. ``None`` where no record says."""


def honest_flagged(reports: Sequence[RoundReport], liars: frozenset[int], k: int) -> float:
    """Share of honest client-rounds flagged: flags of honest clients / (rounds x honest)."""
    if not reports or k == len(liars):
        return 0.0
    wrong = sum(len(set(r.flagged) - liars) for r in reports)
    return wrong / (len(reports) * (k - len(liars)))


def run_case(
    case: Case,
    settings: Settings,
    transport: str,
    on_gap: Callable[[float, Tensor, int], None] | None = None,
) -> Row:
    """Run one case end to end on the named transport; a failure becomes a row too.

    ``on_gap`` is told each round's gap to ByzFL with the updates and ``f`` it came from.
    """
    torch.set_num_threads(1)  # as the ClientApp does
    config = case.config(settings)
    liars = frozenset(adversaries(config))
    sink = ReportSink()
    gap = PeerGap(byzfl_aggregator(case.rule, case.pre, F), on_gap)
    started = time.perf_counter()
    common: dict[str, Any] = {
        "partition": case.partition.kind,
        "alpha": case.partition.alpha,
        "aggregator": case.aggregator,
        "attack": case.attack,
        "q": case.q,
        "transport": transport,
        "rule": case.rule,
        "pre": case.pre,
        "adversaries": sorted(liars),
        "seed": case.seed,
        "host": machine().cpu,
    }
    try:
        with observed(gap):
            chosen = (
                in_process_transport(config, case.run_id)
                if transport == IN_PROCESS
                else SimulationEngine()
            )
            execute_run(config, run_id=case.run_id, sink=sink, transport=chosen)
    except Exception as exc:  # the grid goes on; the row says what failed
        return Row(
            **common,
            final_accuracy=None,
            honest_flagged=None,
            precision=None,
            recall=None,
            rounds=len(sink.reports),
            flagged_by_round=[list(r.flagged) for r in sink.reports],
            byzfl_gap=None,
            model_digest="",
            seconds=round(time.perf_counter() - started, 2),
            error=f"round {len(sink.reports) + 1}: {type(exc).__name__}: {exc}",
        )
    reports = sink.reports
    summary = summarize(config, case.run_id, reports)
    return Row(
        **common,
        final_accuracy=summary.final_accuracy,
        honest_flagged=honest_flagged(reports, liars, K),
        precision=summary.precision,
        recall=summary.recall,
        rounds=len(reports),
        flagged_by_round=[list(r.flagged) for r in reports],
        byzfl_gap=max(gap.gaps) if gap.gaps and all(map(math.isfinite, gap.gaps)) else None,
        model_digest=summary.model_digest,
        seconds=round(time.perf_counter() - started, 2),
    )


def _cost(case: Case) -> float:
    """Rough work of a case: attacks that train a crowd of references cost more."""
    return 1.0 + 0.5 * (case.q > 0 and case.attack in ("alie", "ipm"))


def run_grid(
    cases: Sequence[Case], settings: Settings, jobs: int, log: Callable[[Row], None]
) -> list[Row]:
    """Run every case on the in-process transport, ``jobs`` processes at a time."""
    run = functools.partial(run_case, settings=settings, transport=IN_PROCESS)
    return run_cases(cases, run, jobs=jobs, cost=_cost, log=log)
