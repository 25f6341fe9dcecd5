"""Persistence: SQLAlchemy models, engine, migrations and repositories.

Repositories are plain functions over a :class:`~sqlalchemy.orm.Session` that
flush but never commit; the caller owns the transaction::

    from phalanx.store import make_engine, runs, session_factory

    factory = session_factory(make_engine(url))
    with factory.begin() as session:  # commits on success, rolls back on error
        run = runs.claim_next_run(session, "coordinator@host")

The schema is created and changed only by :mod:`phalanx.store.migrate`.
"""

from phalanx.event_kinds import EventKind
from phalanx.store import (
    audit,
    cases,
    checkpoints,
    client_rounds,
    clients,
    events,
    keys,
    response_times,
    rounds,
    runs,
)
from phalanx.store.cases import CaseFilter, CasePage, CaseSort
from phalanx.store.engine import (
    make_engine,
    normalize_url,
    session_factory,
)
from phalanx.store.errors import ConflictError, LeaseLostError, NotFoundError, StoreError
from phalanx.store.events import EventFilter, EventPage, EventSummary
from phalanx.store.keys import CreatedKey
from phalanx.store.models import (
    AuditEntry,
    Base,
    CaseKind,
    Checkpoint,
    Client,
    ClientRoundRow,
    ClientStatus,
    DetectionCase,
    DetectionEvent,
    OperatorKey,
    ResponseStatus,
    ReviewStatus,
    Role,
    Round,
    Run,
    RunPartition,
    RunStatus,
    Severity,
    WorkerResponseRow,
)
from phalanx.store.rounds import EventData, RoundData, RoundRecord

__all__ = [
    "AuditEntry",
    "Base",
    "CaseFilter",
    "CaseKind",
    "CasePage",
    "CaseSort",
    "Checkpoint",
    "Client",
    "ClientRoundRow",
    "ClientStatus",
    "ConflictError",
    "CreatedKey",
    "DetectionCase",
    "DetectionEvent",
    "EventData",
    "EventFilter",
    "EventKind",
    "EventPage",
    "EventSummary",
    "LeaseLostError",
    "NotFoundError",
    "OperatorKey",
    "ResponseStatus",
    "ReviewStatus",
    "Role",
    "Round",
    "RoundData",
    "RoundRecord",
    "Run",
    "RunPartition",
    "RunStatus",
    "Severity",
    "StoreError",
    "WorkerResponseRow",
    "audit",
    "cases",
    "checkpoints",
    "client_rounds",
    "clients",
    "events",
    "keys",
    "make_engine",
    "normalize_url",
    "response_times",
    "rounds",
    "runs",
    "session_factory",
]
