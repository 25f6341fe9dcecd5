"""What one app instance holds: settings, database, cookie signer, limits, metrics, templates."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import FastAPI
from fastapi.templating import Jinja2Templates
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from phalanx_api.auth import SessionSigner
from phalanx_api.metrics import ApiMetrics
from phalanx_api.ratelimit import RateLimits
from phalanx_api.session_slots import SessionSlots
from phalanx_api.settings import ApiSettings


@dataclass(frozen=True)
class AppContext:
    """The state of one app, kept in ``app.state.phalanx``.

    Attributes
    ----------
    settings : ApiSettings
        The app's settings.
    database_url : str
        The resolved database URL.
    engine : Engine
        The database engine, disposed when the app shuts down.
    sessions : sessionmaker[Session]
        The session factory whose transactions write (seeding, the CLI, tests).
    reads : sessionmaker[Session]
        The session factory of requests: read-only transactions, writes in
        :func:`phalanx_api.transactions.writing`.
    signer : SessionSigner
        Signs and checks dashboard session cookies.
    limits : RateLimits
        The per-address limits of registrations, proofs and logins.
    metrics : ApiMetrics
        The app's Prometheus registry.
    templates : Jinja2Templates
        The dashboard's templates.
    session_slots : SessionSlots
        How many requests may hold a session at once.
    """

    settings: ApiSettings
    database_url: str
    engine: Engine
    sessions: sessionmaker[Session]
    signer: SessionSigner
    limits: RateLimits
    metrics: ApiMetrics
    templates: Jinja2Templates
    reads: sessionmaker[Session]
    session_slots: SessionSlots


def app_context(app: FastAPI) -> AppContext:
    """Return the context :func:`phalanx_api.main.create_app` stored on ``app``."""
    context = app.state.phalanx
    assert isinstance(context, AppContext)
    return context
