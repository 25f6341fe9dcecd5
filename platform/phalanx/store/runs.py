"""Runs: creation, listing, and the lease a coordinator holds while it trains.

A coordinator claims the oldest claimable run (:func:`claim_next_run`), proves
it is alive with :func:`heartbeat`, and ends the run with :func:`finish_run`.
A run whose heartbeat is older than ``stale_after`` is claimable again, so a
killed coordinator's run is resumed by the next one.

Like every repository here, these functions flush but never commit: the caller
owns the transaction (``with factory.begin() as session: ...``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, and_, func, or_, select, update
from sqlalchemy.orm import Session

from phalanx.redaction import redact_host_paths
from phalanx.store.errors import ConflictError, LeaseLostError, NotFoundError
from phalanx.store.models import Run, RunPartition, RunStatus
from phalanx.store.types import utcnow

#: A running run whose heartbeat is older than this is reclaimed by the next claimer.
DEFAULT_STALE_AFTER = timedelta(minutes=5)


def create_run(
    session: Session,
    *,
    name: str,
    config: dict[str, Any],
    seed: int,
    now: datetime | None = None,
) -> Run:
    """Queue a new run.

    Parameters
    ----------
    session : Session
        The caller's session; the run is flushed, not committed.
    name : str
        A human-readable name.
    config : dict
        The run config as JSON-compatible data.
    seed : int
        The run's root seed (signed 64-bit).
    now : datetime, optional
        Creation time; defaults to the current UTC time.

    Returns
    -------
    Run
        The queued run, with its id assigned.
    """
    run = Run(name=name, config=config, seed=seed, created_at=now or utcnow())
    session.add(run)
    session.flush()
    return run


def get_run(session: Session, run_id: str) -> Run:
    """Return the run with this id.

    Raises
    ------
    NotFoundError
        When no run has this id.
    """
    run = session.get(Run, run_id)
    if run is None:
        raise NotFoundError("run", run_id)
    return run


def record_partition(session: Session, run_id: str, report: dict[str, Any]) -> RunPartition:
    """Store the report of a local-data run's partition; storing the same one again is a no-op.

    Raises
    ------
    NotFoundError
        When no run has this id.
    ConflictError
        When the run holds a different partition already: a run's partition is
        fixed by its config and never changes.
    """
    get_run(session, run_id)
    stored = session.get(RunPartition, run_id)
    if stored is not None:
        if stored.report != report:
            raise ConflictError(f"run {run_id!r} holds a different partition already")
        return stored
    stored = RunPartition(run_id=run_id, report=dict(report))
    session.add(stored)
    session.flush()
    return stored


def get_partition(session: Session, run_id: str) -> dict[str, Any] | None:
    """Return the report of a run's partition, or ``None`` when it has none (assigned data)."""
    stored = session.get(RunPartition, run_id)
    return None if stored is None else stored.report


def list_runs(
    session: Session,
    *,
    status: RunStatus | None = None,
    limit: int = 100,
    offset: int = 0,
) -> Sequence[Run]:
    """List runs, newest first.

    Parameters
    ----------
    session : Session
        The caller's session.
    status : RunStatus, optional
        Only runs in this status.
    limit, offset : int
        The page.

    Returns
    -------
    Sequence[Run]
        At most ``limit`` runs.
    """
    query = select(Run).order_by(Run.created_at.desc(), Run.id.desc()).limit(limit).offset(offset)
    if status is not None:
        query = query.where(Run.status == status)
    return session.scalars(query).all()


def claim_next_run(
    session: Session,
    claimer: str,
    *,
    stale_after: timedelta = DEFAULT_STALE_AFTER,
    now: datetime | None = None,
) -> Run | None:
    """Claim the oldest queued run, or the oldest running run whose coordinator went silent.

    One ``UPDATE ... WHERE id = (SELECT ... FOR UPDATE SKIP LOCKED) RETURNING``:
    on PostgreSQL concurrent claimers skip each other's rows and never claim the
    same run; on SQLite the transaction holds the database's write lock, which
    serialises claimers. Commit promptly after claiming.

    Parameters
    ----------
    session : Session
        The caller's session.
    claimer : str
        Who claims, e.g. ``"coordinator@host:pid"``; heartbeats must match it.
    stale_after : timedelta
        A running run whose heartbeat is older than this (or missing) is reclaimed.
    now : datetime, optional
        The current time; defaults to UTC now.

    Returns
    -------
    Run or None
        The claimed run, now ``running``, or ``None`` when nothing is claimable.
    """
    now = now or utcnow()
    oldest = (
        select(Run.id)
        .where(_claimable(now, stale_after))
        .order_by(Run.created_at, Run.id)
        .limit(1)
        .with_for_update(skip_locked=True)
        .scalar_subquery()
    )
    return _claim(session, Run.id == oldest, claimer, now)


def start_run(
    session: Session,
    run_id: str,
    claimer: str,
    *,
    stale_after: timedelta = DEFAULT_STALE_AFTER,
    now: datetime | None = None,
) -> Run:
    """Claim one given run, e.g. a run the CLI created to execute at once, or resumes.

    The run must be claimable as in :func:`claim_next_run`: queued, or running
    with a heartbeat older than ``stale_after``.

    Parameters
    ----------
    session : Session
        The caller's session.
    run_id : str
        The run.
    claimer : str
        Who claims; heartbeats must match it.
    stale_after : timedelta
        How old the heartbeat of a running run must be to take it over.
    now : datetime, optional
        The current time; defaults to UTC now.

    Returns
    -------
    Run
        The run, now ``running`` under ``claimer``.

    Raises
    ------
    NotFoundError
        When no run has this id.
    ConflictError
        When the run is finished, or running under a live coordinator.
    """
    now = now or utcnow()
    run = _claim(session, and_(Run.id == run_id, _claimable(now, stale_after)), claimer, now)
    if run is None:
        current = get_run(session, run_id)
        raise ConflictError(
            f"run {run_id!r} is {current.status.value}"
            + (f" under {current.claimed_by!r}" if current.status == RunStatus.RUNNING else "")
            + "; it cannot be started"
        )
    return run


def _claimable(now: datetime, stale_after: timedelta) -> ColumnElement[bool]:
    """Queued runs, and running runs whose heartbeat is missing or older than ``stale_after``."""
    return or_(
        Run.status == RunStatus.QUEUED,
        and_(
            Run.status == RunStatus.RUNNING,
            or_(Run.heartbeat_at.is_(None), Run.heartbeat_at < now - stale_after),
        ),
    )


def _claim(session: Session, which: ColumnElement[bool], claimer: str, now: datetime) -> Run | None:
    """Mark the run selected by ``which`` running under ``claimer``; return it, or ``None``."""
    claim = (
        update(Run)
        .where(which)
        .values(
            status=RunStatus.RUNNING,
            claimed_by=claimer,
            heartbeat_at=now,
            started_at=func.coalesce(Run.started_at, now),
            attempts=Run.attempts + 1,
        )
        .returning(Run.id)
        .execution_options(synchronize_session=False)
    )
    claimed_id = session.execute(claim).scalar_one_or_none()
    if claimed_id is None:
        return None
    return session.get_one(Run, claimed_id, populate_existing=True)


def heartbeat(session: Session, run_id: str, claimer: str, *, now: datetime | None = None) -> Run:
    """Record that ``claimer`` is still working on the run.

    Parameters
    ----------
    session : Session
        The caller's session.
    run_id : str
        The run.
    claimer : str
        The name given to :func:`claim_next_run`.
    now : datetime, optional
        The current time; defaults to UTC now.

    Returns
    -------
    Run
        The run; check ``cancel_requested`` to learn whether to stop.

    Raises
    ------
    LeaseLostError
        When the run is no longer running under ``claimer`` (it was reclaimed
        after a stale heartbeat, or finished): stop working on it.
    """
    beat = (
        update(Run)
        .where(Run.id == run_id, Run.claimed_by == claimer, Run.status == RunStatus.RUNNING)
        .values(heartbeat_at=now or utcnow())
        .returning(Run.id)
        .execution_options(synchronize_session=False)
    )
    if session.execute(beat).scalar_one_or_none() is None:
        raise LeaseLostError(f"run {run_id!r} is not running under {claimer!r}")
    return session.get_one(Run, run_id, populate_existing=True)


def request_cancel(session: Session, run_id: str, *, now: datetime | None = None) -> Run:
    """Cancel a queued run at once, or ask the coordinator of a running run to stop.

    Returns
    -------
    Run
        The run: ``cancelled`` if it was queued, ``cancel_requested`` if running;
        an already cancelled run is returned unchanged.

    Raises
    ------
    NotFoundError
        When no run has this id.
    ConflictError
        When the run already succeeded or failed.
    """
    run = get_run(session, run_id)
    if run.status == RunStatus.QUEUED:
        run.status = RunStatus.CANCELLED
        run.finished_at = now or utcnow()
    elif run.status == RunStatus.RUNNING:
        run.cancel_requested = True
    elif run.status != RunStatus.CANCELLED:
        raise ConflictError(f"run {run_id!r} already {run.status.value}; nothing to cancel")
    session.flush()
    return run


def finish_run(
    session: Session,
    run_id: str,
    status: RunStatus,
    *,
    error: str | None = None,
    summary: dict[str, Any] | None = None,
    final_model_digest: str | None = None,
    claimer: str | None = None,
    now: datetime | None = None,
) -> Run:
    """End a run with a terminal status.

    Parameters
    ----------
    session : Session
        The caller's session.
    run_id : str
        The run.
    status : RunStatus
        ``succeeded``, ``failed`` or ``cancelled``.
    error : str, optional
        What went wrong, for ``failed``. Every viewer reads it, so host paths
        are replaced by their last component (:func:`~phalanx.redaction.redact_host_paths`).
    summary : dict, optional
        Final metrics and counts as JSON-compatible data.
    final_model_digest : str, optional
        SHA-256 of the final model.
    claimer : str, optional
        When given, the run must be running under this claimer: a coordinator
        whose run was reclaimed cannot overwrite its outcome.
    now : datetime, optional
        Finish time; defaults to UTC now.

    Returns
    -------
    Run
        The finished run.

    Raises
    ------
    ValueError
        When ``status`` is not terminal.
    NotFoundError
        When no run has this id.
    ConflictError
        When the run is already finished.
    LeaseLostError
        When ``claimer`` is given and the run is not running under it.
    """
    if not status.is_terminal:
        raise ValueError(f"finish_run needs a terminal status, got {status.value!r}")
    run = get_run(session, run_id)
    if run.status.is_terminal:
        raise ConflictError(f"run {run_id!r} already {run.status.value}")
    if claimer is not None and (run.status != RunStatus.RUNNING or run.claimed_by != claimer):
        raise LeaseLostError(f"run {run_id!r} is not running under {claimer!r}")
    run.status = status
    run.error = None if error is None else redact_host_paths(error)
    run.summary = summary
    run.final_model_digest = final_model_digest
    run.finished_at = now or utcnow()
    session.flush()
    return run
