"""The FastAPI application: :func:`create_app` builds one from settings.

Run it with ``phalanx serve`` (migrates the database first), or with any ASGI
server through the factory: ``uvicorn --factory phalanx_api.main:create_app``.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from phalanx import __version__
from phalanx.store import make_engine, session_factory
from phalanx_api.auth import SessionSigner
from phalanx_api.context import AppContext, app_context
from phalanx_api.errors import install_error_handlers
from phalanx_api.head_requests import HeadAsGetMiddleware
from phalanx_api.headers import SecurityHeadersMiddleware
from phalanx_api.limits import BodySizeLimitMiddleware
from phalanx_api.metrics import ApiMetrics, MetricsMiddleware
from phalanx_api.ratelimit import RateLimits
from phalanx_api.routes import include_routes, pages
from phalanx_api.session_slots import SessionSlots
from phalanx_api.settings import ApiSettings, get_api_settings, resolve_secret_key
from phalanx_api.templating import STATIC_DIR, make_templates

DESCRIPTION = """\
Control plane of Phalanx, Byzantine-robust federated learning on Flower.

- **Clients** register themselves (`POST /api/v1/clients`, no key needed), prove
  they hold their EC key (`POST /api/v1/clients/{id}/proof`), and wait for an
  operator's approval.
- **Operators** authenticate with an API key, `Authorization: Bearer phx_...`
  (`phalanx keys create --role admin` makes the first one). Roles: `viewer`
  reads, `operator` also launches and cancels runs, reviews detection events and
  decides on clients, `admin` also manages keys. Every change is in the audit log.

Errors are JSON `{"detail": "message"}`; a 422 also lists the invalid fields.
"""


def create_app(settings: ApiSettings | None = None) -> FastAPI:
    """Build the control plane application.

    The database is not migrated here (``phalanx serve`` does it before
    starting); ``/readyz`` reports whether it is at the latest migration.

    Parameters
    ----------
    settings : ApiSettings, optional
        Defaults to the process settings (``PHALANX_*`` environment variables).

    Returns
    -------
    FastAPI
        The app; its database engine is disposed when its lifespan ends.
    """
    settings = settings or get_api_settings()
    database_url = settings.resolved_database_url
    engine = make_engine(database_url)
    sessions = session_factory(engine)
    reads = session_factory(engine, read_only=True)
    context = AppContext(
        settings=settings,
        database_url=database_url,
        engine=engine,
        sessions=sessions,
        signer=SessionSigner(resolve_secret_key(settings), max_age_s=settings.session_max_age_s),
        limits=RateLimits.of(
            registration_per_minute=settings.registration_per_minute,
            login_per_minute=settings.login_per_minute,
            proof_per_minute=settings.proof_per_minute,
            pending_per_address=settings.pending_per_address,
            challenge_ttl_s=settings.challenge_ttl_s,
        ),
        metrics=ApiMetrics(reads),
        templates=make_templates(),
        reads=reads,
        session_slots=SessionSlots(),
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # The heap built at startup (the app, its libraries) lives as long as the
        # process: frozen, it is left out of the collector's full passes, which
        # would otherwise scan it all and stall the event loop (and /healthz)
        # mid-burst, for 0.2 s of CPU here and several times that on a busy host.
        gc.freeze()
        try:
            yield
        finally:
            gc.unfreeze()
            app_context(app).engine.dispose()

    app = FastAPI(
        title="Phalanx",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # the dashboard serves /docs without a CDN
        redoc_url=None,
        openapi_url="/openapi.json",
    )
    app.state.phalanx = context
    install_error_handlers(app)
    include_routes(app)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    pages.install(app)  # the dashboard, /docs, error pages for browsers
    app.add_middleware(BodySizeLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(SecurityHeadersMiddleware)  # on every answer, a refused body's too
    app.add_middleware(HeadAsGetMiddleware)  # HEAD is GET without the body
    app.add_middleware(MetricsMiddleware, metrics=context.metrics)  # outermost: times everything
    return app
