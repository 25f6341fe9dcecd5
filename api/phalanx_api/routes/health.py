"""Probes and metrics: ``/healthz`` (alive), ``/readyz`` (database ready), ``/metrics``."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from phalanx.store import migrate
from phalanx.store.transactions import READ_ONLY
from phalanx_api.deps import ContextDep
from phalanx_api.schemas import HealthOut

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> HealthOut:
    """Answer ok while the process is alive.

    On the event loop: no worker thread, so a burst that keeps every thread busy
    does not delay it.
    """
    return HealthOut(status="ok")


@router.get(
    "/readyz",
    response_model=HealthOut,
    responses={503: {"model": HealthOut, "description": "Not ready."}},
)
def readyz(context: ContextDep) -> JSONResponse:
    """Answer ok when the database answers and is migrated to the latest revision."""
    try:
        with context.engine.connect().execution_options(**READ_ONLY) as connection:
            connection.execute(text("SELECT 1"))
    except SQLAlchemyError:
        return _unavailable("the database does not answer")
    try:
        at_head = migrate.is_at_head(context.database_url)
    except (SQLAlchemyError, migrate.MigrationsNotFoundError, RuntimeError) as exc:
        return _unavailable(f"cannot read the migration state: {exc}")
    if not at_head:
        return _unavailable("the database is not at the latest migration: run `phalanx db upgrade`")
    return JSONResponse(HealthOut(status="ok").model_dump())


def _unavailable(detail: str) -> JSONResponse:
    body = HealthOut(status="unavailable", detail=detail)
    return JSONResponse(body.model_dump(), status_code=503)


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {"content": {CONTENT_TYPE_LATEST.split(";")[0]: {}}, "description": "Metrics."}
    },
)
def metrics(context: ContextDep) -> Response:
    """Prometheus metrics: runs, clients, rounds, detection events, request latency."""
    return Response(context.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)
