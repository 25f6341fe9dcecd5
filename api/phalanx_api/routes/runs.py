"""Runs: launch, list, inspect, rounds (one with its agreement graph), responses, clients, cancel.

The rounds listing is ``async``: it reads and builds its answer in one worker
thread, and FastAPI checks and serializes it on the event loop.
"""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Path, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import TypeAdapter
from sqlalchemy.orm import Session

from phalanx.store import RunStatus, client_rounds, response_times, rounds, runs
from phalanx_api import actions
from phalanx_api.deps import OperatorDep, SessionDep, SettingsDep, ViewerDep
from phalanx_api.paths import API_PREFIX
from phalanx_api.responses import CONFLICT, NOT_FOUND, UNAUTHORIZED, documented
from phalanx_api.routes.params import MAX_INT32, Limit, Offset
from phalanx_api.schemas import (
    DEFAULT_PAGE_SIZE,
    ClientViewOut,
    ClientViewPage,
    ResponseTimesPage,
    RoundDetailOut,
    RoundOut,
    RunDetailOut,
    RunLaunchIn,
    RunOut,
    RunPage,
    WorkerResponsesOut,
)
from phalanx_api.transactions import writing

router = APIRouter(prefix=f"{API_PREFIX}/runs", tags=["runs"])

#: Validates a run's rounds, read as plain records, in one call.
_ROUNDS = TypeAdapter(list[RoundOut])


@router.post("", status_code=202, responses=UNAUTHORIZED)
def launch_run(
    config: RunLaunchIn,
    db: SessionDep,
    user: OperatorDep,
    settings: SettingsDep,
    response: Response,
) -> RunOut:
    """Queue a run with this config (the same model as ``phalanx run CONFIG``).

    ``idx:``/``npz:`` data must lie in the server's datasets directory
    (``PHALANX_DATASETS_DIR``), relative paths being relative to it; data
    present there is checked before the run is queued. A simulated attack
    (``attack``) is refused with 403 unless the server sets
    ``PHALANX_API_ALLOW_ATTACKS=true``, and with 422 when it does not load. A
    coordinator (``phalanx coordinator``) claims it; follow it at ``Location``.
    """
    with writing(db):
        run = actions.launch_run(
            db,
            config,
            actor=user,
            datasets_dir=settings.datasets_dir,
            allow_attacks=settings.api_allow_attacks,
            attack_plugins=settings.attack_plugins,
        )
    response.headers["Location"] = f"{router.prefix}/{run.id}"
    return RunOut.model_validate(run)


@router.get("", responses=UNAUTHORIZED)
def list_runs(
    db: SessionDep,
    _: ViewerDep,
    status: RunStatus | None = None,
    limit: Limit = DEFAULT_PAGE_SIZE,
    offset: Offset = 0,
) -> RunPage:
    """List runs, newest first."""
    rows = runs.list_runs(db, status=status, limit=limit + 1, offset=offset)
    return RunPage(
        items=[RunOut.model_validate(row) for row in rows[:limit]],
        limit=limit,
        offset=offset,
        next_offset=offset + limit if len(rows) > limit else None,
    )


@router.get("/{run_id}", responses=documented(UNAUTHORIZED, NOT_FOUND))
def get_run(run_id: UUID, db: SessionDep, _: ViewerDep) -> RunDetailOut:
    """One run; a simulated local-data run with its partition (samples and labels per client)."""
    run = RunOut.model_validate(runs.get_run(db, str(run_id)))
    partition = runs.get_partition(db, str(run_id))
    return RunDetailOut.model_validate({**dict(run), "partition": partition})


@router.get("/{run_id}/rounds", responses=documented(UNAUTHORIZED, NOT_FOUND))
async def list_rounds(run_id: UUID, db: SessionDep, _: ViewerDep) -> list[RoundOut]:
    """Every finished round of a run, in order."""
    return await run_in_threadpool(_rounds, db, str(run_id))


def _rounds(db: Session, run_id: str) -> list[RoundOut]:
    records = rounds.list_round_records(db, run_id)
    if not records:
        runs.get_run(db, run_id)  # a run without rounds, or a 404
    return _ROUNDS.validate_python(records, from_attributes=True)


@router.get("/{run_id}/rounds/{number}", responses=documented(UNAUTHORIZED, NOT_FOUND))
def get_round(
    run_id: UUID,
    number: Annotated[int, Path(ge=1, le=MAX_INT32, description="The round, from 1.")],
    db: SessionDep,
    _: ViewerDep,
) -> RoundDetailOut:
    """One finished round of a run, with its agreement graph."""
    return RoundDetailOut.model_validate(rounds.get_round(db, str(run_id), number))


@router.get("/{run_id}/responses", responses=documented(UNAUTHORIZED, NOT_FOUND))
def list_response_times(
    run_id: UUID,
    db: SessionDep,
    _: ViewerDep,
    slow: bool | None = None,
    limit: Limit = DEFAULT_PAGE_SIZE,
    offset: Offset = 0,
) -> ResponseTimesPage:
    """Each worker's response times over the run (mean, median, p90, late, missing), by worker.

    A worker is persistently slow when at least 3 of its last 5 rounds given work
    had a reply that never arrived or took at least 3 times the run's median
    response (``slow_reason`` says so in words). Slow is not lying: it is never a
    detection event. ``slow=true`` lists only slow workers, ``slow=false`` the
    others. Empty for a run whose rounds were not timed (``systems.enabled`` off).
    """
    found = response_times.run_response_times(db, str(run_id))
    workers = [w for w in found.workers if slow is None or w.slow == slow]
    return ResponseTimesPage(
        items=[WorkerResponsesOut.model_validate(w) for w in workers[offset : offset + limit]],
        median_s=found.median_s,
        slow_workers=len(found.slow),
        limit=limit,
        offset=offset,
        next_offset=offset + limit if len(workers) > offset + limit else None,
    )


@router.get("/{run_id}/clients", responses=documented(UNAUTHORIZED, NOT_FOUND))
def list_client_view(
    run_id: UUID,
    db: SessionDep,
    _: ViewerDep,
    limit: Limit = DEFAULT_PAGE_SIZE,
    offset: Offset = 0,
) -> ClientViewPage:
    """List a local-data run's clients by worker, with their latest figures.

    Per client: its part of the partition, its claimed count, its latest local
    accuracy (federated evaluation), its distance to the aggregate over the round's
    median, and its flags. Empty for a run on assigned data. The partition's label
    histograms (the heat map's data) are in ``GET /api/v1/runs/{run_id}``'s
    ``partition``.
    """
    views = client_rounds.client_view(db, str(run_id))
    return ClientViewPage(
        items=[ClientViewOut.model_validate(v) for v in views[offset : offset + limit]],
        limit=limit,
        offset=offset,
        next_offset=offset + limit if len(views) > offset + limit else None,
    )


@router.post(
    "/{run_id}/cancel", status_code=202, responses=documented(UNAUTHORIZED, NOT_FOUND, CONFLICT)
)
def cancel_run(run_id: UUID, db: SessionDep, user: OperatorDep) -> RunOut:
    """Cancel a queued run now, or a running one between rounds (``cancel_requested``)."""
    with writing(db):
        run = actions.cancel_run(db, str(run_id), actor=user)
    return RunOut.model_validate(run)
