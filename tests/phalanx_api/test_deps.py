"""The per-request session reads; a route's ``writing`` block commits, or rolls back on error."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from datetime import datetime

import anyio
import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from phalanx.store import make_engine, runs, session_factory
from phalanx.store.engine import MAX_OVERFLOW, POOL_SIZE
from phalanx.store.keys import find_key
from phalanx_api.deps import SessionDep, ViewerDep
from phalanx_api.errors import BadRequestError
from phalanx_api.main import create_app
from phalanx_api.session_slots import READ_SLOTS, WRITE_SLOTS, SessionSlots
from phalanx_api.settings import ApiSettings
from phalanx_api.transactions import writing
from tests.support.factories import Keys, TestClient, make_keys
from tests.support.write_lock import WriteLock


class KeepingError(BadRequestError):
    """An error whose request's writes stand."""

    keep_changes = True


OUTCOMES = {
    "ok": None,
    "error": BadRequestError("refused after writing"),
    "error keeping changes": KeepingError("refused, but the write stands"),
}


@pytest.fixture
def app(fresh_settings: ApiSettings) -> FastAPI:
    """An app with a test route that writes a run named after the outcome, then maybe fails."""
    app = create_app(fresh_settings)

    def write_then(outcome: str, db: SessionDep, _: ViewerDep) -> dict[str, str]:
        with writing(db):
            run = runs.create_run(db, name=outcome, config={}, seed=1)
            failure = OUTCOMES[outcome]
            if failure is not None:
                raise failure
        return {"id": run.id}

    app.add_api_route("/test/write-then/{outcome}", write_then, methods=["POST"])
    return app


@pytest.fixture
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app) as test_client:
        yield test_client


@pytest.fixture
def sessions(app: FastAPI) -> sessionmaker[Session]:
    factory: sessionmaker[Session] = app.state.phalanx.sessions
    return factory


@pytest.fixture
def keys(sessions: sessionmaker[Session]) -> Keys:
    return make_keys(sessions)


def _run_names(sessions: sessionmaker[Session]) -> list[str]:
    with sessions() as session:
        return [run.name for run in runs.list_runs(session)]


@pytest.mark.parametrize(
    ("outcome", "status", "kept"),
    [("ok", 200, True), ("error", 400, False), ("error keeping changes", 400, True)],
)
def test_a_request_keeps_its_writes_only_when_it_succeeds_or_the_error_says_so(
    outcome: str,
    status: int,
    kept: bool,
    client: TestClient,
    sessions: sessionmaker[Session],
    keys: Keys,
) -> None:
    response = client.post(f"/test/write-then/{outcome}", headers=keys.headers("viewer"))

    assert response.status_code == status
    assert _run_names(sessions) == ([outcome] if kept else [])


def test_every_request_gives_its_connection_back(
    app: FastAPI, client: TestClient, keys: Keys
) -> None:
    engine: Engine = app.state.phalanx.engine
    viewer = keys.headers("viewer")
    for outcome in [*OUTCOMES, "ok"]:
        client.post(f"/test/write-then/{outcome}", headers=viewer)
    client.get("/api/v1/events", headers=viewer)
    client.get("/api/v1/events/12345", headers=viewer)  # 404
    client.get("/api/v1/events", headers={"Authorization": "Bearer nope"})  # 401

    assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]


def test_a_listing_answers_while_another_connection_holds_the_write_lock(
    client: TestClient, sessions: sessionmaker[Session], keys: Keys, fresh_settings: ApiSettings
) -> None:
    with sessions.begin() as session:
        runs.create_run(session, name="listed", config={}, seed=1)
    lock = WriteLock(str(fresh_settings.database_url))
    lock.hold()
    try:
        listing = client.get("/api/v1/runs", headers=keys.headers("viewer"))
        health = client.get("/healthz")
    finally:
        lock.release()
        lock.close()

    assert listing.status_code == 200, listing.text
    assert [run["name"] for run in listing.json()["items"]] == ["listed"]
    assert health.status_code == 200
    # The key's first use could not be noted while the lock was held; the next request notes it.
    assert _last_used(sessions, keys.viewer) is None
    assert client.get("/api/v1/runs", headers=keys.headers("viewer")).status_code == 200
    assert _last_used(sessions, keys.viewer) is not None


def _last_used(sessions: sessionmaker[Session], secret: str) -> datetime | None:
    with sessions() as session:
        key = find_key(session, secret)
        assert key is not None
        return key.last_used_at


def test_requests_beyond_the_slots_queue_and_all_get_their_answer(app: FastAPI) -> None:
    context = app.state.phalanx
    app.state.phalanx = dataclasses.replace(
        context, session_slots=SessionSlots(reads=anyio.Semaphore(2), writes=anyio.Semaphore(1))
    )
    inside = {"now": 0, "most": 0}

    async def hold_a_session(db: SessionDep) -> dict[str, int]:
        inside["now"] += 1
        inside["most"] = max(inside["most"], inside["now"])
        await anyio.sleep(0.01)  # give the queued requests a chance to push in
        inside["now"] -= 1
        return inside

    app.add_api_route("/test/hold", hold_a_session, methods=["GET", "POST"])

    async def burst(method: str) -> list[int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            answers = await asyncio.gather(*(http.request(method, "/test/hold") for _ in range(6)))
        return [answer.status_code for answer in answers]

    assert asyncio.run(burst("GET")) == [200] * 6
    assert inside["most"] == 2
    inside["most"] = 0
    assert asyncio.run(burst("POST")) == [200] * 6
    assert inside["most"] == 1
    # Admitted requests never wait for a pooled connection.
    assert READ_SLOTS + WRITE_SLOTS < POOL_SIZE + MAX_OVERFLOW


def test_no_free_connection_is_a_503_with_retry_after(
    app: FastAPI, client: TestClient, keys: Keys, fresh_settings: ApiSettings
) -> None:
    engine = make_engine(
        str(fresh_settings.database_url), pool_size=1, max_overflow=0, pool_timeout_s=0.1
    )
    context = app.state.phalanx
    app.state.phalanx = dataclasses.replace(context, reads=session_factory(engine, read_only=True))
    try:
        with engine.connect():  # the pool's only connection
            response = client.get("/api/v1/runs", headers=keys.headers("viewer"))
    finally:
        app.state.phalanx = context
        engine.dispose()

    assert response.status_code == 503
    assert response.headers["Retry-After"] == "2"
    assert response.json() == {"detail": "the database is busy; try again in 2 s"}
