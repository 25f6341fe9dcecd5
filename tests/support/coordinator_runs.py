"""Runs of the coordinator on the in-process transport, kept in memory."""

from __future__ import annotations

from phalanx.config import RunConfig
from phalanx.reports import RoundReport
from phalanx.runs import execute_run
from phalanx_clients.inprocess import InProcessTransport, Tamper, TamperReport
from tests.support.inprocess import inprocess_workers

RUN_ID = "run-under-test"


class FakeSink:
    """Keeps rounds and checkpoints in memory (a test double of the database)."""

    def __init__(self) -> None:
        self.reports: list[RoundReport] = []
        self.checkpoints: dict[int, bytes] = {}

    def round_finished(self, report: RoundReport, checkpoint: bytes) -> None:
        self.checkpoints[report.round] = checkpoint
        self.reports.append(report)


def transport(
    config: RunConfig, tamper: Tamper | None = None, tamper_report: TamperReport | None = None
) -> InProcessTransport:
    return InProcessTransport(
        inprocess_workers(config, RUN_ID), tamper=tamper, tamper_report=tamper_report
    )


def run(
    config: RunConfig,
    tamper: Tamper | None = None,
    tamper_report: TamperReport | None = None,
    **kw: object,
) -> FakeSink:
    sink = FakeSink()
    execute_run(
        config,
        run_id=RUN_ID,
        sink=sink,
        transport=transport(config, tamper, tamper_report),
        **kw,  # type: ignore[arg-type]
    )
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
