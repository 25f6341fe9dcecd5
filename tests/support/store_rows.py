"""Rows for the store's tests: a run, a round's data, a client, all at a fixed time."""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import JSON, Integer, String, column, insert, inspect, table
from sqlalchemy.orm import Session

from phalanx.store import Run, clients, make_engine, runs
from phalanx.store.rounds import RoundData
from phalanx.store.types import UTCDateTime

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def table_names(url: str) -> set[str]:
    """The tables of the database at ``url``."""
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            return set(inspect(connection).get_table_names())
    finally:
        engine.dispose()


def new_run(session: Session, *, name: str = "run", created_at: datetime = T0) -> Run:
    return runs.create_run(session, name=name, config={"rounds": 3}, seed=7, now=created_at)


def round_data(number: int, /, **overrides: object) -> RoundData:
    fields: dict[str, object] = {
        "number": number,
        "started_at": T0 + timedelta(minutes=number),
        "finished_at": T0 + timedelta(minutes=number, seconds=30),
        "timings": {"collect": 20.0, "detect": 0.5},
        "bytes_up": 10_000,
        "bytes_down": 40_000,
        "metrics": {"accuracy": 0.5 + number / 100, "loss": 1.0},
        "num_flagged": 1,
        "num_rejected": 0,
        "assignment": {"scheme": "subsets", "r": 3},
        "model_digest": f"digest-{number}",
    }
    fields.update(overrides)
    return RoundData(**fields)  # type: ignore[arg-type]


def new_client(session: Session, name: str, **kwargs: object) -> str:
    client = clients.create_client(
        session,
        name=name,
        public_key=f"-----BEGIN PUBLIC KEY-----\n{name}\n-----END PUBLIC KEY-----\n",
        fingerprint=hashlib.sha256(name.encode()).hexdigest(),
        **kwargs,  # type: ignore[arg-type]
    )
    return client.id


#: ``detection_events`` as revisions before 0007 made it (no ``case_id``, no ``muted``).
EVENTS_BEFORE_CASES = table(
    "detection_events",
    column("id", Integer),
    column("run_id", String),
    column("round", Integer),
    column("client_id", String),
    column("worker", Integer),
    column("kind", String),
    column("severity", String),
    column("evidence", JSON),
    column("review_status", String),
    column("created_at", UTCDateTime),
)


def add_event_before_cases(session: Session, **values: object) -> None:
    """Insert an event into a schema older than cases (migration tests)."""
    row = {"review_status": "open", "created_at": T0, "evidence": {}, **values}
    session.execute(insert(EVENTS_BEFORE_CASES).values(**row))


#: ``clients`` as revisions before 0009 made it (no ``run_id``).
CLIENTS_BEFORE_RUN_IDS = table(
    "clients",
    column("id", String),
    column("name", String),
    column("public_key", String),
    column("fingerprint", String),
    column("status", String),
    column("proven_at", UTCDateTime),
    column("created_at", UTCDateTime),
)


def add_client_before_run_ids(session: Session, name: str, client_id: str | None = None) -> str:
    """Insert an approved, proven client into a schema older than 0009; return its id."""
    found = client_id or str(uuid.uuid4())
    row = {
        "id": found,
        "name": name,
        "public_key": "pem",
        "fingerprint": hashlib.sha256(found.encode()).hexdigest(),
        "status": "approved",
        "proven_at": T0,
        "created_at": T0,
    }
    session.execute(insert(CLIENTS_BEFORE_RUN_IDS).values(**row))
    return found
