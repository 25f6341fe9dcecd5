"""A worker whose code calls ``sys.exit`` fails alone: never its neighbours, never the run."""

from __future__ import annotations

from typing import Any

import pytest

from phalanx.event_kinds import EventKind
from phalanx.faults import is_interrupt
from phalanx.replies import Task
from phalanx.reports import RoundReport
from phalanx_clients.worker import Worker
from tests.support.batch_grid import run_batched
from tests.support.configs import small_config
from tests.support.coordinator_runs import run
from tests.support.fake_grid import server_task_identity

HONEST = small_config(rounds=1, attack={"name": None, "q": 0})
QUITTER = 2
"""Shares the first virtual node with workers 0, 4 and 6 in a batched run."""


@pytest.fixture
def quitter(monkeypatch: pytest.MonkeyPatch) -> None:
    real = Worker.answer

    def answer(self: Worker, task: Task, *args: Any, **kwargs: Any) -> Any:
        if task.worker == QUITTER:
            raise SystemExit("the worker's code exits its process")
        return real(self, task, *args, **kwargs)

    monkeypatch.setattr(Worker, "answer", answer)


def faults(report: RoundReport) -> list[tuple[int | None, str]]:
    return sorted((e.worker, e.kind) for e in report.events)


@pytest.mark.usefixtures("quitter")
def test_in_a_batch_only_the_worker_that_exits_fails() -> None:
    with server_task_identity():
        (report,), _ = run_batched(HONEST)
    assert faults(report) == [(QUITTER, EventKind.WORKER_ERROR.value)]
    assert not report.flagged
    assert "SystemExit" in str(report.events[0].evidence)


@pytest.mark.usefixtures("quitter")
def test_in_process_only_the_worker_that_exits_fails() -> None:
    (report,) = run(HONEST).reports
    assert faults(report) == [(QUITTER, EventKind.WORKER_ERROR.value)]
    assert not report.flagged


def test_an_interrupt_is_not_a_workers_failure() -> None:
    assert is_interrupt(KeyboardInterrupt()) and is_interrupt(GeneratorExit())
    assert not is_interrupt(SystemExit(1)) and not is_interrupt(ValueError())
