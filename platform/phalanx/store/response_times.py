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

from sqlalchemy import String, func, select, tuple_, type_coerce
from sqlalchemy.orm import Session

from phalanx.response_times import (
    History,
    ResponseSummary,
    RunResponseTimes,
    median,
    summarize_histories,
    summary_of,
)
from phalanx.store.models import Run, WorkerResponseRow
from phalanx.store.runs import get_run

#: What a summary reads of each row, the status as the stored text (no enum made per
#: row: a run of 10,000 workers has as many rows a round). The table's CHECKs hold
#: every value to what :class:`phalanx.response_times.WorkerResponse` allows.
_COLUMNS = (
    WorkerResponseRow.worker,
    WorkerResponseRow.seconds,
    type_coerce(WorkerResponseRow.status, String),
    WorkerResponseRow.client_id,
)
#: Rows in the primary key's order, so each worker's history comes oldest round first.
_IN_ROUND_ORDER = (WorkerResponseRow.round, WorkerResponseRow.worker)


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
    query = select(*_COLUMNS).where(WorkerResponseRow.run_id == run_id).order_by(*_IN_ROUND_ORDER)
    histories: defaultdict[int, History] = defaultdict(History)
    for worker, seconds, status, client_id in session.execute(query):
        histories[worker].add(seconds, status, client_id)
    if not histories:
        get_run(session, run_id)  # a run without responses, or a NotFoundError
    return summarize_histories(histories)


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
        select(WorkerResponseRow.run_id, *_COLUMNS)
        .where(tuple_(WorkerResponseRow.client_id, WorkerResponseRow.run_id).in_(pairs))
        .order_by(WorkerResponseRow.run_id, *_IN_ROUND_ORDER)
    )
    by_run: defaultdict[str, defaultdict[int, History]] = defaultdict(lambda: defaultdict(History))
    for run_id, worker, seconds, status, client_id in rows:
        by_run[run_id][worker].add(seconds, status, client_id)
    medians = run_medians(session, list(by_run))
    found: dict[str, ClientResponseTimes] = {}
    for run_id, histories in by_run.items():
        for worker, history in histories.items():
            summary = summary_of(worker, history, medians.get(run_id))
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
