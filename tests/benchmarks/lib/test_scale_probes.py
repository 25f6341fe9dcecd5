"""The scale bench's work clock: the workers' training timed file by file, inside each task."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from benchmarks.lib.scale_probes import TaskTime, WorkClock, file_sink, read_clock_dir
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


def test_the_clock_counts_a_wait_in_wall_time_and_not_in_cpu_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def waiting_file_updates(*args: Any, **kwargs: Any) -> Iterator[tuple[int, str]]:
        time.sleep(0.05)  # a worker waiting for a core, or for anything else
        yield 1, "update 1"

    def fake_answer(self: Any, task: Any, downlink: Any, **options: Any) -> list[tuple[int, str]]:
        return list(worker_module.file_updates())

    monkeypatch.setattr(worker_module, "file_updates", waiting_file_updates)
    monkeypatch.setattr(worker_module.Worker, "answer", fake_answer)
    times: list[TaskTime] = []

    with WorkClock(times.append).installed():
        worker_module.Worker.answer(None, SimpleNamespace(round=2), None)  # type: ignore[arg-type]

    (timed,) = times
    assert 0 <= timed.train_cpu_s <= timed.handle_cpu_s
    assert timed.train_cpu_s < timed.train_s  # the 50 ms asleep are not CPU time


def test_records_written_by_actors_read_back_with_their_cpu_times(tmp_path: Path) -> None:
    sink = file_sink(tmp_path)
    sink(TaskTime(3, 0.5, 0.25, 0.125, 0.0625))
    (tmp_path / "1.tsv").write_text("2\t1.0\t0.5\n", encoding="utf-8")  # a record without them

    records = sorted(read_clock_dir(tmp_path), key=lambda t: t.round)

    assert records[1] == TaskTime(3, 0.5, 0.25, 0.125, 0.0625)
    old = records[0]
    assert (old.round, old.handle_s, old.train_s) == (2, 1.0, 0.5)
    assert math.isnan(old.handle_cpu_s) and math.isnan(old.train_cpu_s)
