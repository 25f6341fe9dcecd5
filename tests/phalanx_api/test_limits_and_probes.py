"""Body size limit, unknown routes, health and readiness probes, Prometheus metrics."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from fastapi import FastAPI
from sqlalchemy.orm import Session, sessionmaker

from phalanx.store.migrate import downgrade, upgrade
from phalanx_api.main import create_app
from tests.support.factories import Keys, TestClient, seed_run_with_events, settings_for


def test_a_declared_oversized_body_is_413_before_anything_runs(
    client: TestClient, api_keys: Keys
) -> None:
    response = client.post(
        "/api/v1/runs",
        content=b"{" + b" " * (64 * 1024) + b"}",
        headers={**api_keys.headers("operator"), "Content-Type": "application/json"},
    )
    assert response.status_code == 413
    assert "64" in response.json()["detail"] or "65536" in response.json()["detail"]


def test_a_streamed_oversized_body_is_413(client: TestClient) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"name": "'
        for _ in range(100):
            yield b"x" * 1024
        yield b'", "public_key": "k"}'

    response = client.post(
        "/api/v1/clients", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 413
    assert "request body too large" in response.json()["detail"]


def test_an_unknown_route_is_a_json_404(client: TestClient) -> None:
    response = client.get("/api/v1/nothing-here")
    assert response.status_code == 404
    assert response.json()["detail"]
    assert client.delete("/api/v1/runs").status_code == 405


def test_probes_answer_ok(client: TestClient) -> None:
    assert client.get("/healthz").json()["status"] == "ok"
    assert client.get("/readyz").json() == {"status": "ok", "detail": None}


def test_readyz_is_503_until_the_database_is_migrated(sqlite_url: str, tmp_path: Path) -> None:
    upgrade(sqlite_url)
    downgrade(sqlite_url, "base")
    with TestClient(create_app(settings_for(sqlite_url, tmp_path))) as client:
        response = client.get("/readyz")
        assert response.status_code == 503
        assert "phalanx db upgrade" in response.json()["detail"]
        upgrade(sqlite_url)
        assert client.get("/readyz").status_code == 200


def test_readyz_is_503_when_the_database_does_not_answer(tmp_path: Path) -> None:
    url = "postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=1"
    with TestClient(create_app(settings_for(url, tmp_path))) as client:
        response = client.get("/readyz")
        assert response.status_code == 503
        assert response.json()["status"] == "unavailable"
        listing = client.get("/api/v1/runs", headers={"Authorization": "Bearer phx_x"})
        assert listing.status_code == 503


def test_metrics_count_the_store_and_time_requests_by_route(
    fresh_app: FastAPI, fresh_keys: Keys, fresh_sessions: sessionmaker[Session]
) -> None:
    run_id, _ = seed_run_with_events(fresh_sessions, num_rounds=3)
    with TestClient(fresh_app) as client:
        client.get(f"/api/v1/runs/{run_id}", headers=fresh_keys.headers("viewer"))
        response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert 'phalanx_runs{status="queued"} 1.0' in text
    assert "phalanx_rounds_total 3.0" in text
    assert 'phalanx_detection_events_total{kind="outside_max_clique"} 3.0' in text
    assert 'phalanx_detection_events_total{kind="bad_signature"} 3.0' in text
    assert 'phalanx_clients{status="approved"} 2.0' in text
    assert (
        'phalanx_http_request_duration_seconds_count{method="GET",'
        'route="/api/v1/runs/{run_id}",status="200"} 1.0'
    ) in text


def test_two_apps_keep_separate_metrics(tmp_path: Path, sqlite_url: str) -> None:
    upgrade(sqlite_url)
    first = create_app(settings_for(sqlite_url, tmp_path / "a"))
    second = create_app(settings_for(sqlite_url, tmp_path / "b"))
    with TestClient(first) as one, TestClient(second) as two:
        one.get("/healthz")
        assert 'route="/healthz"' in one.get("/metrics").text
        assert 'route="/healthz"' not in two.get("/metrics").text


def test_openapi_documents_the_bearer_key_only_where_one_is_needed(client: TestClient) -> None:
    assert client.get("/docs").status_code == 200
    spec = client.get("/openapi.json").json()
    assert spec["components"]["securitySchemes"]["APIKey"]["scheme"] == "bearer"
    paths = spec["paths"]
    assert paths["/api/v1/runs"]["post"]["security"] == [{"APIKey": []}]
    assert paths["/api/v1/keys"]["get"]["security"] == [{"APIKey": []}]
    assert "security" not in paths["/api/v1/clients"]["post"]
    assert "security" not in paths["/api/v1/clients/{client_id}/proof"]["post"]
    assert "/login" not in paths
    assert set(paths["/api/v1/runs"]["post"]["responses"]) >= {"202", "401", "403", "413", "422"}
