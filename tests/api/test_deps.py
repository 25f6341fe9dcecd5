"""The per-request session: committed on success, rolled back on error, always closed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from phalanx.store import runs
from phalanx_api.deps import SessionDep, ViewerDep
from phalanx_api.errors import BadRequestError
from phalanx_api.main import create_app
from phalanx_api.settings import ApiSettings
from tests.api.factories import Keys, TestClient, make_keys


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
