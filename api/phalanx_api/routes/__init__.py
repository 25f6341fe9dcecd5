"""The routes: the REST API under ``/api/v1``, probes and metrics, and dashboard sessions.

Each REST router carries its full prefix (``/api/v1/runs``), so a route's path
template, which labels the latency metrics, is the path a client calls.
"""

from __future__ import annotations

from fastapi import FastAPI

from phalanx_api.responses import BAD_REQUEST, INVALID, TOO_LARGE, UNAVAILABLE, documented
from phalanx_api.routes import audit, cases, clients, events, health, keys, runs, session


def include_routes(app: FastAPI) -> None:
    """Add every route to ``app``: the REST API, probes and metrics, dashboard sessions."""
    common = documented(BAD_REQUEST, INVALID, TOO_LARGE, UNAVAILABLE)
    for module in (clients, runs, cases, events, audit, keys):
        app.include_router(module.router, responses=common)
    app.include_router(health.router)
    app.include_router(session.router)
