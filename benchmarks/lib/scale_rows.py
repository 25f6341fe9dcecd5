"""What one run of ``bench_scale.py`` measured (:class:`Trace`) and its row (:func:`build_row`).

Pure functions of the measurements, so that the tests can check them. Round 1
is left out of every per-round figure (it starts the workers); a round's time
is the time between the ends of consecutive rounds.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from benchmarks.lib.scale_probes import StoreSize, TaskTime

OWN_WORK = ("assign", "verify", "detect", "aggregate", "persist")
"""The coordinator's own phases (its ``timings``): all but the exchange and the evaluation."""


@dataclass(frozen=True)
class Trace:
    """Everything measured in one run; ``store`` has one size before round 1, then one per round."""

    transport: str
    workers: int
    r: int
    scheme: str
    samples_per_file: int
    round_ends: list[float]
    round_starts: list[float]
    launched: float
    timings: list[dict[str, float]]
    flagged: list[tuple[int, ...]]
    store: list[StoreSize]
    tasks: list[TaskTime]
    peak_rss_bytes: int
    adversaries: tuple[int, ...]
    load_average: tuple[float, float]
    cpu_s: list[float] = field(default_factory=list)
    """CPU seconds of the process tree at the end of each round (:func:`tree_cpu_seconds`)."""


@dataclass(frozen=True)
class Row:
    """One line of ``scale.json``; the issue's keys first."""

    K: int
    scheme: str
    transport: str
    round_s: float
    per_worker_ms: float
    training_share: float
    peak_rss_mb: float
    db_bytes_per_round: float
    precision: float | None
    recall: float
    r: int
    samples_per_file: int
    rounds_timed: int
    training_s: float
    """The workers' training per round, summed over the round's tasks."""
    worker_overhead_s: float
    """The workers' ``Worker.answer`` less its training, summed over the round's tasks."""
    own_work_s: float
    """The coordinator's own phases per round (:data:`OWN_WORK`)."""
    phase_s: dict[str, float]
    events_per_round: float
    bytes_per_event: float | None
    evidence_bytes_per_event: float | None
    startup_s: float
    """From launch (the transport's start) to round 1's start: the dispatch of its tasks."""
    load_average: tuple[float, float]
    cpu_s_per_round: float | None = None
    """CPU seconds of the whole process tree per timed round (median): what a round costs
    whatever else the shared machine runs."""
    training_cpu_s: float | None = None
    """The workers' training per round in their threads' CPU time; below ``training_s``
    by the time the workers waited for a core."""
    worker_overhead_cpu_s: float | None = None
    """``worker_overhead_s`` in CPU time."""


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def round_seconds(ends: Sequence[float]) -> list[float]:
    """Times of rounds 2 .. N from the end times of rounds 1 .. N."""
    return [b - a for a, b in itertools.pairwise(ends)]


def per_round(
    tasks: Sequence[TaskTime], rounds: Sequence[int], *, cpu: bool = False
) -> tuple[list[float], list[float]]:
    """Per round of ``rounds``: the summed training, and the summed handling less training.

    ``cpu``: in the workers' CPU time instead of wall time.
    """
    train = {t: 0.0 for t in rounds}
    overhead = {t: 0.0 for t in rounds}
    for task in tasks:
        if task.round in train:
            handle, trained = (
                (task.handle_cpu_s, task.train_cpu_s) if cpu else (task.handle_s, task.train_s)
            )
            train[task.round] += trained
            overhead[task.round] += handle - trained
    return [train[t] for t in rounds], [overhead[t] for t in rounds]


def detection_scores(
    flagged: Sequence[Sequence[int]], adversaries: Sequence[int]
) -> tuple[float | None, float]:
    """Precision (``None`` when nobody was flagged) and recall of the run's flagged workers."""
    caught = {w for ws in flagged for w in ws}
    true = caught & set(adversaries)
    precision = len(true) / len(caught) if caught else None
    recall = len(true) / len(adversaries) if adversaries else 1.0
    return precision, recall


def growth(store: Sequence[StoreSize]) -> tuple[float, float | None, float | None, float]:
    """Median used bytes added per round 2 .. N; bytes and evidence per event; events per round.

    ``store[0]`` is the database before round 1 and ``store[t]`` after round ``t``.
    """
    timed = store[1:]
    added = [b.used_bytes - a.used_bytes for a, b in itertools.pairwise(timed)]
    events = timed[-1].events - timed[0].events if len(timed) > 1 else 0
    rounds = max(len(timed) - 1, 1)
    if events <= 0:
        return _median(added), None, None, 0.0
    table = (timed[-1].event_bytes - timed[0].event_bytes) / events
    evidence = (timed[-1].evidence_bytes - timed[0].evidence_bytes) / events
    return _median(added), table, evidence, events / rounds


def build_row(trace: Trace) -> Row:
    """The row of one run."""
    times = round_seconds(trace.round_ends)
    timed_rounds = list(range(2, len(trace.round_ends) + 1))
    train, overhead = per_round(trace.tasks, timed_rounds)
    train_cpu, overhead_cpu = per_round(trace.tasks, timed_rounds, cpu=True)
    own = [sum(t.get(p, 0.0) for p in OWN_WORK) for t in trace.timings[1:]]
    phases = sorted({p for t in trace.timings for p in t})
    phase_s = {p: _median([t.get(p, 0.0) for t in trace.timings[1:]]) for p in phases}
    db_per_round, per_event, evidence, events = growth(trace.store)
    precision, recall = detection_scores(trace.flagged, trace.adversaries)
    round_s = _median(times)
    return Row(
        K=trace.workers,
        scheme=trace.scheme,
        transport=trace.transport,
        round_s=round_s,
        per_worker_ms=1000.0 * round_s / trace.workers,
        training_share=sum(train) / sum(times) if times else float("nan"),
        peak_rss_mb=trace.peak_rss_bytes / 2**20,
        db_bytes_per_round=db_per_round,
        precision=precision,
        recall=recall,
        r=trace.r,
        samples_per_file=trace.samples_per_file,
        rounds_timed=len(times),
        training_s=_median(train),
        worker_overhead_s=_median(overhead),
        own_work_s=_median(own),
        phase_s=phase_s,
        events_per_round=events,
        bytes_per_event=per_event,
        evidence_bytes_per_event=evidence,
        startup_s=trace.round_starts[0] - trace.launched if trace.round_starts else float("nan"),
        load_average=trace.load_average,
        cpu_s_per_round=_median(round_seconds(trace.cpu_s)) if len(trace.cpu_s) > 1 else None,
        training_cpu_s=_finite(_median(train_cpu)),
        worker_overhead_cpu_s=_finite(_median(overhead_cpu)),
    )


def _finite(value: float) -> float | None:
    """``value``, or ``None`` when it is not a number (records without CPU times)."""
    return value if math.isfinite(value) else None
