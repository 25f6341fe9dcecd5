"""Running one case of ``bench_scale.py``: a recorded run of K workers, and its trace.

A case is a federation (K workers, r = 1 or 3, Fashion-MNIST, 5 % reversed-gradient
adversaries) and a transport: the in-process test double
(``phalanx_clients.inprocess``) or Flower's simulation engine
(``phalanx.flower.simulation.SimulationEngine``). The run is executed as
``phalanx run`` does, recorded in a SQLite file, in a process of its own (so that
its peak memory is its own); its :class:`~benchmarks.lib.scale_rows.Trace` holds
what was measured, and :func:`~benchmarks.lib.scale_rows.build_row` turns it
into a row.
"""

from __future__ import annotations

import functools
import os
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

import torch
from sqlalchemy.orm import Session, sessionmaker

from benchmarks.lib.scale_probes import (
    CLOCK_DIR,
    StoreSize,
    TaskTime,
    TreeMemory,
    WorkClock,
    read_clock_dir,
    store_bytes,
    tree_cpu_seconds,
)
from benchmarks.lib.scale_rows import Trace
from phalanx.config import RunConfig
from phalanx.data import ImageDataset, load_dataset
from phalanx.exchange import Transport
from phalanx.flower.simulation import SimulationEngine
from phalanx.plan import adversaries
from phalanx.reports import RoundReport
from phalanx.roster import SimulatedRoster, simulated_roster
from phalanx.runs.executor import Federation, execute
from phalanx.runs.recorder import claimer_name, create_simulated_run
from phalanx.store import make_engine, migrate, session_factory
from phalanx_clients.behaviour import RedTeam
from phalanx_clients.inprocess import InProcessTransport
from phalanx_clients.worker import Worker

IN_PROCESS = "in-process"
FLOWER = "flower"
TRANSPORTS = (IN_PROCESS, FLOWER)
TRAIN_SAMPLES = 60_000
"""Fashion-MNIST's training set: K files of ``samples_per_file`` must fit in it."""
SCALE_CLIENT_APP = "benchmarks.lib.scale_client_app:app"


@dataclass(frozen=True)
class Settings:
    """What every case shares."""

    rounds: int = 4
    model: str = "mlp"
    local_steps: int = 5
    samples_per_file: int = 16
    adversary_share: float = 0.05


@dataclass(frozen=True)
class Case:
    """One federation on one transport."""

    transport: str
    workers: int
    r: int

    @property
    def scheme(self) -> str:
        """``none`` at r = 1 (worker i trains file i), ``random`` otherwise."""
        return "none" if self.r == 1 else "random"

    def samples_per_file(self, settings: Settings) -> int:
        """The settings' file size, less when K files would not fit in the training set."""
        return min(settings.samples_per_file, TRAIN_SAMPLES // self.workers)

    def config(self, settings: Settings) -> RunConfig:
        """The run this case executes."""
        q = max(1, round(settings.adversary_share * self.workers))
        return RunConfig.model_validate(
            {
                "name": f"scale-{self.transport}-k{self.workers}-r{self.r}",
                "seed": 19,
                "rounds": settings.rounds,
                "data": {
                    "dataset": "fashion-mnist",
                    "model": settings.model,
                    "samples_per_file": self.samples_per_file(settings),
                    "eval_samples": 1000,
                },
                "assignment": {
                    "scheme": self.scheme,
                    "num_workers": self.workers,
                    "r": self.r,
                    "relabel": self.r > 1,
                },
                "attack": {"name": "reversed_gradient", "q": q},
                "detection": {"max_adversaries": q},
                "aggregation": {"rule": "mean", "f": 0},
                "training": {"local_steps": settings.local_steps, "local_lr": 0.05},
            }
        )


@functools.lru_cache(maxsize=1)
def _train_set(name: str) -> ImageDataset:
    return load_dataset(name, "train")


def inprocess_transport(config: RunConfig, run_id: str) -> InProcessTransport:
    """The run's workers (its red team included) in this process, each computing its own."""
    train = _train_set(config.data.dataset)
    team = RedTeam.from_config(config)
    return InProcessTransport(
        {
            ident.worker: Worker(
                config=config,
                train_set=train,
                client_id=ident.client_id,
                private_key=ident.private_key,
                behaviour=team.behaviour_of(ident.worker) if team else None,
            )
            for ident in simulated_roster(run_id, config.assignment.num_workers)
        }
    )


def run_case(case: Case, settings: Settings) -> Trace:
    """Execute the case, recorded in a temporary SQLite file, and return what was measured."""
    torch.set_num_threads(1)
    config = case.config(settings)
    ends: list[float] = []
    reports: list[RoundReport] = []
    sizes: list[StoreSize] = []
    tasks: list[TaskTime] = []
    cpu: list[float] = []
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="phalanx-scale-") as tmp:
        db = Path(tmp) / "phalanx.db"
        migrate.upgrade(f"sqlite:///{db}")
        engine = make_engine(f"sqlite:///{db}")
        sessions = session_factory(engine)
        claimer = claimer_name()
        run_id = create_simulated_run(sessions, config, claimer)

        def on_round(report: RoundReport) -> None:
            ends.append(time.perf_counter())
            cpu.append(tree_cpu_seconds())
            reports.append(report)
            sizes.append(store_bytes(db))

        sizes.append(store_bytes(db))
        clock_dir = Path(tmp) / "clock"
        clock_dir.mkdir()
        launched = time.time()
        with TreeMemory() as memory:
            if case.transport == IN_PROCESS:
                transport = inprocess_transport(config, run_id)
                launched = time.time()  # the workers exist: nothing to start
                with WorkClock(tasks.append).installed():
                    _execute(sessions, run_id, claimer, Path(tmp), transport, on_round)
            else:
                os.environ[CLOCK_DIR] = str(clock_dir)  # Ray's processes inherit it
                try:
                    federation = SimulationEngine(client_app=SCALE_CLIENT_APP)
                    _execute(sessions, run_id, claimer, Path(tmp), federation, on_round)
                finally:
                    del os.environ[CLOCK_DIR]
                tasks = read_clock_dir(clock_dir)
        engine.dispose()
    return Trace(
        transport=case.transport,
        workers=case.workers,
        r=case.r,
        scheme=case.scheme,
        samples_per_file=config.data.samples_per_file,
        round_ends=ends,
        round_starts=[r.started_at.timestamp() for r in reports],
        launched=launched,
        timings=[dict(r.timings) for r in reports],
        flagged=[tuple(r.flagged) for r in reports],
        store=sizes,
        tasks=tasks,
        peak_rss_bytes=memory.peak_bytes,
        adversaries=tuple(sorted(adversaries(config))),
        load_average=(load_before, os.getloadavg()[0]),
        cpu_s=cpu,
    )


def _execute(
    sessions: sessionmaker[Session],
    run_id: str,
    claimer: str,
    folder: Path,
    transport: Transport | Federation,
    on_round: Callable[[RoundReport], None],
) -> None:
    execute(
        sessions,
        run_id,
        transport=transport,
        roster=SimulatedRoster(run_id),
        claimer=claimer,
        checkpoint_dir=folder / "checkpoints",
        on_round=on_round,
    )


def run_isolated(case: Case, settings: Settings) -> Trace:
    """:func:`run_case` in a fresh process, so that its memory is measured alone."""
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        return pool.submit(run_case, case, settings).result()
