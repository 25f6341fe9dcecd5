"""Runs of the coordinator on the in-process transport, kept in memory."""

from __future__ import annotations

from phalanx.config import RunConfig
from phalanx.data import load_dataset
from phalanx.reports import RoundReport
from phalanx.roster import simulated_roster
from phalanx.runs import execute_run
from phalanx_clients.behaviour import RedTeam
from phalanx_clients.inprocess import InProcessTransport, Tamper
from phalanx_clients.worker import Worker

RUN_ID = "run-under-test"


class FakeSink:
    """Keeps rounds and checkpoints in memory (a test double of the database)."""

    def __init__(self) -> None:
        self.reports: list[RoundReport] = []
        self.checkpoints: dict[int, bytes] = {}

    def round_finished(self, report: RoundReport, checkpoint: bytes) -> None:
        self.checkpoints[report.round] = checkpoint
        self.reports.append(report)


def transport(config: RunConfig, tamper: Tamper | None = None) -> InProcessTransport:
    train = load_dataset(config.data.dataset, "train")
    team = RedTeam.from_config(config)
    workers = {}
    for ident in simulated_roster(RUN_ID, config.assignment.num_workers):
        workers[ident.worker] = Worker(
            config=config,
            train_set=train,
            client_id=ident.client_id,
            private_key=ident.private_key,
            behaviour=team.behaviour_of(ident.worker) if team else None,
        )
    return InProcessTransport(workers, tamper=tamper)


def run(config: RunConfig, tamper: Tamper | None = None, **kw: object) -> FakeSink:
    sink = FakeSink()
    execute_run(config, run_id=RUN_ID, sink=sink, transport=transport(config, tamper), **kw)  # type: ignore[arg-type]
    return sink


def run_interrupted(config: RunConfig, stop_after: int) -> tuple[FakeSink, FakeSink]:
    """Run ``stop_after`` rounds, then resume from that round's checkpoint with fresh workers."""
    first = FakeSink()
    execute_run(
        config,
        run_id=RUN_ID,
        sink=first,
        transport=transport(config),
        should_stop=lambda: len(first.reports) >= stop_after,
    )
    resumed = FakeSink()
    execute_run(
        config,
        run_id=RUN_ID,
        sink=resumed,
        transport=transport(config),
        start_round=stop_after + 1,
        checkpoint=first.checkpoints[stop_after],
    )
    return first, resumed
