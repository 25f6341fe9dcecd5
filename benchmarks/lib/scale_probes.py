"""What ``bench_scale.py`` measures around a run: memory, database size, the workers' time.

:class:`TreeMemory` samples the resident memory of this process and all its
descendants (Ray's GCS, raylet and actors for the Flower path) and keeps the
peak; :func:`tree_cpu_seconds` reads their CPU time. :func:`store_bytes` reads
a SQLite database's logical size (its used pages, write-ahead log included) and
the bytes of its detection events.
:class:`WorkClock` times every worker's task: the whole of ``Worker.answer``
and the training inside it (``file_updates``), so that the training's
share of a round is measured, not assumed. In Flower's simulation the workers
run in Ray's actors; :data:`CLOCK_DIR` names a folder where each actor appends
its records (:func:`read_clock_dir`).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

CLOCK_DIR = "PHALANX_BENCH_CLOCK_DIR"
"""Environment variable: the folder where Ray's actors write their :class:`WorkClock` records."""
PROFILE_DIR = "PHALANX_BENCH_PROFILE_DIR"
"""Environment variable: the folder where each actor writes the profile of its tasks."""


@dataclass(frozen=True)
class TaskTime:
    """One worker's task: its round, the whole of ``Worker.answer``, the training inside it.

    ``*_cpu_s``: the same spans in the thread's CPU time (``time.thread_time``), which a
    process waiting for a core does not accumulate; wall time above CPU time is waiting.
    """

    round: int
    handle_s: float
    train_s: float
    handle_cpu_s: float = float("nan")
    train_cpu_s: float = float("nan")


class TreeMemory:
    """The peak resident memory of this process and its descendants, sampled in a thread."""

    def __init__(self, interval_s: float = 0.25) -> None:
        self.interval_s = interval_s
        self.peak_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            total = 0
            try:
                processes = [me, *me.children(recursive=True)]
            except psutil.Error:
                processes = [me]
            for process in processes:
                try:
                    total += process.memory_info().rss
                except psutil.Error:  # it ended between the listing and the reading
                    continue
            self.peak_bytes = max(self.peak_bytes, total)
            self._stop.wait(self.interval_s)

    def __enter__(self) -> TreeMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def tree_cpu_seconds() -> float:
    """CPU seconds (user and system) used so far by this process and its live descendants.

    Unlike a round's wall-clock time it does not grow when other work on a shared
    machine takes the cores; a descendant that has ended is no longer counted, so
    only differences between readings while the same processes live mean anything
    (Ray's actors live through a run).
    """
    me = psutil.Process()
    total = 0.0
    try:
        processes = [me, *me.children(recursive=True)]
    except psutil.Error:
        processes = [me]
    for process in processes:
        try:
            times = process.cpu_times()
        except psutil.Error:  # it ended between the listing and the reading
            continue
        total += times.user + times.system
    return total


@dataclass(frozen=True)
class StoreSize:
    """A SQLite database's used bytes and its detection events' bytes and count."""

    used_bytes: int
    event_bytes: int
    events: int
    evidence_bytes: int


def store_bytes(path: Path) -> StoreSize:
    """Read the size of the SQLite database at ``path`` as its readers see it.

    ``used_bytes`` counts the pages in use (page count less free pages, the
    write-ahead log's committed pages included); ``event_bytes`` the bytes the
    ``detection_events`` table and its indexes hold (their records' payload, SQLite's
    ``dbstat``: not rounded to pages);
    ``evidence_bytes`` the summed length of the events' evidence.
    """
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        page = int(db.execute("PRAGMA page_size").fetchone()[0])
        pages = int(db.execute("PRAGMA page_count").fetchone()[0])
        free = int(db.execute("PRAGMA freelist_count").fetchone()[0])
        event_pages = db.execute(
            "SELECT COALESCE(SUM(payload), 0) FROM dbstat WHERE name IN "
            "(SELECT name FROM sqlite_schema WHERE tbl_name = 'detection_events')"
        ).fetchone()[0]
        events, evidence = db.execute(
            "SELECT COUNT(*), COALESCE(SUM(LENGTH(evidence)), 0) FROM detection_events"
        ).fetchone()
    return StoreSize((pages - free) * page, int(event_pages), int(events), int(evidence))


class WorkClock:
    """Times each worker's task while installed (:meth:`installed`).

    It wraps ``phalanx_clients.worker.Worker.answer`` (what the ClientApp calls, and
    ``Worker.handle`` in process) and the module's
    ``file_updates`` (each file's computation, as the worker asks for it) for as
    long as it is installed, and hands each task's :class:`TaskTime` to ``sink``.
    """

    def __init__(self, sink: Callable[[TaskTime], None]) -> None:
        self.sink = sink
        self._local = threading.local()

    @contextmanager
    def installed(self) -> Iterator[WorkClock]:
        """Wrap the worker's task and training; restore both on leaving."""
        from phalanx_clients import worker as worker_module

        answer = worker_module.Worker.answer
        train = worker_module.file_updates  # type: ignore[attr-defined]
        clock = self

        def timed_train(*args: Any, **kwargs: Any) -> Iterator[Any]:
            # A generator: each file is computed when the worker asks for it.
            files = train(*args, **kwargs)
            local = clock._local
            while True:
                started, started_cpu = time.perf_counter(), time.thread_time()
                try:
                    item = next(files)
                except StopIteration:
                    return
                finally:
                    local.train_s = getattr(local, "train_s", 0.0) + (time.perf_counter() - started)
                    local.train_cpu_s = getattr(local, "train_cpu_s", 0.0) + (
                        time.thread_time() - started_cpu
                    )
                yield item

        def timed_answer(self: Any, task: Any, downlink: Any, **options: Any) -> Any:
            local = clock._local
            local.train_s = local.train_cpu_s = 0.0
            started, started_cpu = time.perf_counter(), time.thread_time()
            try:
                return answer(self, task, downlink, **options)
            finally:
                elapsed = time.perf_counter() - started
                cpu = time.thread_time() - started_cpu
                clock.sink(TaskTime(task.round, elapsed, local.train_s, cpu, local.train_cpu_s))

        worker_module.Worker.answer = timed_answer  # type: ignore[method-assign]
        worker_module.file_updates = timed_train  # type: ignore[attr-defined]
        try:
            yield self
        finally:
            worker_module.Worker.answer = answer  # type: ignore[method-assign]
            worker_module.file_updates = train  # type: ignore[attr-defined]


def file_sink(folder: Path) -> Callable[[TaskTime], None]:
    """A sink appending each record to ``folder/<pid>.tsv`` (one file per process)."""
    path = folder / f"{os.getpid()}.tsv"

    def sink(t: TaskTime) -> None:
        with path.open("a", encoding="utf-8") as out:
            out.write(
                f"{t.round}\t{t.handle_s:.9f}\t{t.train_s:.9f}"
                f"\t{t.handle_cpu_s:.9f}\t{t.train_cpu_s:.9f}\n"
            )

    return sink


def read_clock_dir(folder: Path) -> list[TaskTime]:
    """The records every process wrote to ``folder`` (:func:`file_sink`)."""
    records = []
    for path in sorted(folder.glob("*.tsv")):
        for line in path.read_text(encoding="utf-8").splitlines():
            round_, *spans = line.split("\t")
            records.append(TaskTime(int(round_), *(float(x) for x in spans)))
    return records
