"""Workers' response times as stored: a run's per-worker summary, each client's latest run.

The rows are written with their round by :func:`phalanx.store.rounds.record_round`;
the summaries and the rule that calls a worker persistently slow are
:mod:`phalanx.response_times`'s. Being slow is never a detection event: nothing
here touches ``detection_events`` or a client's status.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select, tuple_
from sqlalchemy.orm import Session

from phalanx.response_times import (
    ResponseSummary,
    RunResponseTimes,
    WorkerResponse,
    median,
    response_status,
    summarize,
    worker_summary,
)
from phalanx.store.models import Run, WorkerResponseRow
from phalanx.store.runs import get_run

_COLUMNS = (
    WorkerResponseRow.round,
    WorkerResponseRow.worker,
    WorkerResponseRow.client_id,
    WorkerResponseRow.seconds,
    WorkerResponseRow.status,
)


def _response(
    t: int, worker: int, client_id: str | None, seconds: float | None, status: str
) -> tuple[int, WorkerResponse]:
    """Read one stored row (the table's CHECKs keep every value one a response can hold)."""
    return t, WorkerResponse(worker, seconds, response_status(status), client_id)


def run_response_times(session: Session, run_id: str) -> RunResponseTimes:
    """Return every worker's responses over a run, summarised, and the run's median.

    Parameters
    ----------
    session : Session
        The caller's session.
    run_id : str
        The run.

    Returns
    -------
    RunResponseTimes
        No workers for a run whose rounds were not timed (no systems model).

    Raises
    ------
    NotFoundError
        When no run has this id.
    """
    query = select(*_COLUMNS).where(WorkerResponseRow.run_id == run_id)
    rows = session.execute(query).all()
    if not rows:
        get_run(session, run_id)  # a run without responses, or a NotFoundError
    return summarize(_response(t, w, c, s, status) for t, w, c, s, status in rows)


def run_medians(session: Session, run_ids: Collection[str]) -> dict[str, float]:
    """Return each run's median response, in one query whatever the number of runs.

    The database numbers each run's known times in order and returns only the
    middle one or two, so no run's times are read whole. Equal to
    :func:`phalanx.response_times.median` of the same times.

    Returns
    -------
    dict[str, float]
        Run id to its median; runs with no known time are left out.
    """
    if not run_ids:
        return {}
    of_run = WorkerResponseRow.run_id
    ranked = (
        select(
            of_run.label("run_id"),
            WorkerResponseRow.seconds.label("seconds"),
            func.row_number()
            .over(partition_by=of_run, order_by=WorkerResponseRow.seconds)
            .label("k"),
            func.count().over(partition_by=of_run).label("n"),
        )
        .where(of_run.in_(list(run_ids)), WorkerResponseRow.seconds.is_not(None))
        .subquery()
    )
    # 1-based ranks (n + 1) / 2 and (n + 2) / 2 in integer division: the middle one of an
    # odd count twice, the middle two of an even one.
    middle = select(ranked.c.run_id, ranked.c.seconds).where(
        ranked.c.k.in_([(ranked.c.n + 1) // 2, (ranked.c.n + 2) // 2])
    )
    found: defaultdict[str, list[float]] = defaultdict(list)
    for run_id, seconds in session.execute(middle):
        found[run_id].append(seconds)
    return {run_id: m for run_id, values in found.items() if (m := median(values)) is not None}


@dataclass(frozen=True)
class ClientResponseTimes:
    """A client's responses in the latest run that timed them.

    Attributes
    ----------
    run_id, run_name : str
        That run.
    run_median_s : float or None
        The run's median response.
    summary : ResponseSummary
        The client's worker in that run (its slowest, were it several).
    """

    run_id: str
    run_name: str
    run_median_s: float | None
    summary: ResponseSummary


def latest_by_client(
    session: Session, client_ids: Collection[str]
) -> dict[str, ClientResponseTimes]:
    """Return, for each client with responses, its responses in its latest such run.

    "Latest" is by the run's creation (then id). Three queries for any number of
    clients: the runs of each client, its rows in its latest, those runs' medians.

    Parameters
    ----------
    session : Session
        The caller's session.
    client_ids : Collection[str]
        The clients (a page of them).

    Returns
    -------
    dict[str, ClientResponseTimes]
        Clients without any response are left out.
    """
    if not client_ids:
        return {}
    runs_of = (
        select(WorkerResponseRow.client_id, Run.id, Run.name, Run.created_at)
        .join(Run, Run.id == WorkerResponseRow.run_id)
        .where(WorkerResponseRow.client_id.in_(list(client_ids)))
        .distinct()
    )
    latest: dict[str, tuple[datetime, str, str]] = {}
    for client_id, run_id, name, created_at in session.execute(runs_of):
        if client_id is None:
            continue
        seen = latest.get(client_id)
        if seen is None or (created_at, run_id) > seen[:2]:
            latest[client_id] = (created_at, run_id, name)
    if not latest:
        return {}
    pairs = [(client_id, run_id) for client_id, (_, run_id, _) in latest.items()]
    rows = session.execute(
        select(WorkerResponseRow.run_id, *_COLUMNS).where(
            tuple_(WorkerResponseRow.client_id, WorkerResponseRow.run_id).in_(pairs)
        )
    )
    histories: defaultdict[tuple[str, int], list[tuple[int, WorkerResponse]]] = defaultdict(list)
    for run_id, t, worker, client_id, seconds, status in rows:
        histories[(run_id, worker)].append(_response(t, worker, client_id, seconds, status))
    medians = run_medians(session, {run_id for _, run_id in pairs})
    found: dict[str, ClientResponseTimes] = {}
    for (run_id, worker), history in histories.items():
        summary = worker_summary(worker, history, medians.get(run_id))
        client_id = summary.client_id
        if client_id is None:
            continue
        shown = found.get(client_id)
        if shown is None or _slower(summary, shown.summary):
            name = latest[client_id][2]
            found[client_id] = ClientResponseTimes(run_id, name, medians.get(run_id), summary)
    return found


def _slower(a: ResponseSummary, b: ResponseSummary) -> bool:
    """Whether ``a`` is slower than ``b``: slow first, then by p90, then by worker."""
    return (a.slow, a.p90_s or 0.0, -a.worker) > (b.slow, b.p90_s or 0.0, -b.worker)
