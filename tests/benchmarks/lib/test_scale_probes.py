"""The scale bench's work clock: the workers' training timed file by file, inside each task."""

from __future__ import annotations

import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from benchmarks.lib.scale_probes import TaskTime, WorkClock
from phalanx_clients import worker as worker_module


def test_the_clock_times_each_file_a_task_computes_and_restores_the_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def fake_file_updates(*args: Any, **kwargs: Any) -> Iterator[tuple[int, str]]:
        for file in (3, 5):
            time.sleep(0.001)  # some work per file
            yield file, f"update {file}"

    def fake_answer(self: Any, task: Any, downlink: Any, **options: Any) -> list[tuple[int, str]]:
        return list(worker_module.file_updates())

    monkeypatch.setattr(worker_module, "file_updates", fake_file_updates)
    monkeypatch.setattr(worker_module.Worker, "answer", fake_answer)
    times: list[TaskTime] = []

    with WorkClock(times.append).installed():
        task = SimpleNamespace(round=4)
        answer = worker_module.Worker.answer(None, task, None, spent_s=1.0)  # type: ignore[arg-type]

    assert answer == [(3, "update 3"), (5, "update 5")]
    (timed,) = times
    assert timed.round == 4
    assert 0 < timed.train_s <= timed.handle_s
    assert worker_module.file_updates is fake_file_updates
    assert worker_module.Worker.answer is fake_answer
