"""Running one case of ``eval_stragglers.py`` end to end, many in processes, and merging rows.

A run goes through the in-process transport (a test double of Flower's runtime)
or Flower's simulation engine; :func:`derive` turns its round reports into a
:class:`Row`: accuracy and the simulated clock round by round, late and missing
replies, who was flagged against the adversaries and against the persistent
stragglers. A run the platform refuses or that fails becomes a row that says why.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from pydantic import ValidationError

from benchmarks.lib.case_pool import run_cases
from benchmarks.lib.inprocess_sharing import ReportSink
from benchmarks.lib.results import machine
from benchmarks.lib.robustness_grid import FLOWER
from benchmarks.lib.robustness_runs import in_process_transport
from benchmarks.lib.stragglers_grid import SEED, Case
from phalanx.config import RunConfig
from phalanx.flower.simulation import SimulationEngine
from phalanx.plan import adversaries
from phalanx.reports import RoundReport
from phalanx.runs import execute_run, precision_recall
from phalanx.systems import draw_profiles
from phalanx.validation_messages import one_line


@dataclass(frozen=True)
class Row:
    """One line of stragglers.json (the first twelve keys are the documented ones).

    ``rounds`` is the rounds configured; ``accuracy_by_round`` and the other
    ``*_by_round`` lists hold those recorded. ``time_to_target_s`` and
    ``target_accuracy`` are filled once every row of the cell is in
    (:func:`benchmarks.lib.stragglers_goals.with_targets`). A run that failed,
    or whose config the platform refused, has ``None`` metrics and the cause in
    ``error``.
    """

    profile: str
    policy: str
    scheme: str
    attack: str
    q: int
    time_to_target_s: float | None
    final_accuracy: float | None
    simulated_time_s: float | None
    late_replies: int
    precision: float | None
    recall: float | None
    transport: str
    workload: str
    model: str
    num_workers: int
    r: int
    rounds: int
    collect: dict[str, float | int | str]
    target_accuracy: float | None
    missing_replies: int
    adversaries: list[int]
    stragglers: list[int]
    flagged: list[int]
    stragglers_flagged: list[int]
    accuracy_by_round: list[float]
    clock_by_round: list[float]
    late_by_round: list[int]
    missing_by_round: list[int]
    flagged_by_round: list[list[int]]
    digest_by_round: list[str]
    seconds: float
    error: str | None = None
    note: str | None = None
    seed: int = SEED
    host: str | None = None
    """The CPU the run ran on (``Machine.cpu``; ``None`` where no record says)."""


def stragglers_of(config: RunConfig) -> list[int]:
    """The run's persistent stragglers, as the systems model draws them (none without it)."""
    if not config.systems.enabled:
        return []
    profiles = draw_profiles(config.systems, config.assignment.num_workers, config.seed)
    return [w for w, p in enumerate(profiles) if p.straggler]


def derive(
    case: Case,
    config: RunConfig | None,
    reports: Sequence[RoundReport],
    seconds: float,
    error: str | None = None,
) -> Row:
    """The row of a run from its round reports (``config`` is ``None`` when it was refused).

    Parameters
    ----------
    case : Case
        The run.
    config : RunConfig or None
        Its config, or ``None`` when the platform refused it.
    reports : sequence of RoundReport
        Every recorded round, in order.
    seconds : float
        Wall time of the run.
    error : str, optional
        Why the run failed; its metrics are then ``None`` (the rounds it
        recorded are still listed round by round).
    """
    finished = error is None and config is not None and bool(reports)
    chosen = sorted(adversaries(config)) if config else []
    slow = stragglers_of(config) if config else []
    flagged = sorted({w for r in reports for w in r.flagged})
    # The run summary's convention (1.0 for an empty set), on worker indices.
    precision, recall = precision_recall({str(w) for w in flagged}, {str(w) for w in chosen})
    late = [int(r.metrics.get("late_replies", 0)) for r in reports]
    missing = [int(r.metrics.get("missing_replies", 0)) for r in reports]
    clock = [r.metrics.get("simulated_total_s", 0.0) for r in reports]
    return Row(
        profile=case.profile.key,
        policy=case.policy.label,
        scheme=case.layout.scheme,
        attack=case.attack,
        q=case.q,
        time_to_target_s=None,
        final_accuracy=reports[-1].accuracy if finished else None,
        simulated_time_s=clock[-1] if finished else None,
        late_replies=sum(late),
        precision=precision if finished else None,
        recall=recall if finished else None,
        transport=case.transport,
        workload=case.workload.key,
        model=case.workload.model,
        num_workers=case.workload.num_workers,
        r=case.layout.r,
        rounds=case.rounds,
        collect=dict(config.collect.parameters()) if config else {},
        target_accuracy=None,
        missing_replies=sum(missing),
        adversaries=chosen,
        stragglers=slow,
        flagged=flagged,
        # An adversary that is also slow is rightly flagged: only honest stragglers count.
        stragglers_flagged=sorted(set(flagged) & set(slow) - set(chosen)),
        accuracy_by_round=[r.accuracy for r in reports],
        clock_by_round=clock,
        late_by_round=late,
        missing_by_round=missing,
        flagged_by_round=[list(r.flagged) for r in reports],
        digest_by_round=[r.model_digest for r in reports],
        seconds=round(seconds, 2),
        error=error,
        seed=case.seed,
    )


REFUSED = "config refused: "
"""How the error of a run whose config the platform refused begins."""


def refusal(exc: ValidationError) -> str:
    """One line for a config the platform refused: its validation messages."""
    return REFUSED + one_line(exc, RunConfig)


def run_case(case: Case) -> Row:
    """Run one case end to end on its transport; a refusal or a failure becomes a row too.

    The row names the CPU it ran on: float32 rounds differently on another.
    """
    return dataclasses.replace(_run(case), host=machine().cpu)


def _run(case: Case) -> Row:
    torch.set_num_threads(1)  # as the ClientApp does: one thread, so replicas agree bit for bit
    started = time.perf_counter()
    try:
        config = case.config()
    except ValidationError as exc:  # a policy runs do not carry yet: the grid goes on
        return derive(case, None, [], time.perf_counter() - started, refusal(exc))
    sink = ReportSink()
    try:
        if case.transport == FLOWER:
            execute_run(config, run_id=case.run_id, sink=sink, transport=SimulationEngine())
        else:
            local = in_process_transport(config, case.run_id)
            execute_run(config, run_id=case.run_id, sink=sink, transport=local)
    except Exception as exc:  # the grid goes on; the row says what failed
        error = f"round {len(sink.reports) + 1}: {type(exc).__name__}: {exc}"
        return derive(case, config, sink.reports, time.perf_counter() - started, error)
    return derive(case, config, sink.reports, time.perf_counter() - started)


def _cost(case: Case) -> int:
    """Rough work of a case, to start the longest first: a CNN round costs several MLP rounds."""
    return (10 if case.workload.model == "cnn" else 1) * case.rounds


def run_grid(cases: Sequence[Case], jobs: int, log: Callable[[Row], None]) -> list[Row]:
    """Run every case, ``jobs`` processes at a time; rows in the order of ``cases``."""
    return run_cases(cases, run_case, jobs=jobs, cost=_cost, log=log)


def case_key(row: Row) -> tuple[str, str, int, str, str, str, int, int, str]:
    """What identifies a row's run: every field of its case (layout as scheme and r)."""
    return (
        row.workload,
        row.scheme,
        row.r,
        row.profile,
        row.policy,
        row.attack,
        row.rounds,
        row.seed,
        row.transport,
    )


def merge(old: Sequence[Row], new: Sequence[Row]) -> list[Row]:
    """``old`` with each row of the same run as a new row replaced; other new rows appended."""
    fresh = {case_key(r): r for r in new}
    merged = [fresh.pop(case_key(r), r) for r in old]
    return [*merged, *fresh.values()]
