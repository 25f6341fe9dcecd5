"""GET /api/v1/runs/{run_id}/clients: a local-data run's per-client view."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from tests.support.factories import Keys, TestClient, seed_run
from tests.support.local_runs import ATTACKER, HISTOGRAMS, seed_local_run

RUNS = "/api/v1/runs"


def test_each_client_comes_with_its_part_accuracy_distance_and_flags(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    seeded = seed_local_run(sessions)
    viewer = api_keys.headers("viewer")

    response = client.get(f"{RUNS}/{seeded.run_id}/clients", headers=viewer)

    assert response.status_code == 200, response.text
    page = response.json()
    assert [c["worker"] for c in page["items"]] == [0, 1, 2]
    assert page["items"][0] == {
        "worker": 0,
        "client_id": seeded.clients[0],
        "part": 90,
        "samples": 72,
        "distance_round": 3,
        "distance": 0.5,
        "distance_ratio": 1.0,
        "eval_round": 3,
        "eval_status": "counted",
        "eval_loss": 0.9,
        "eval_accuracy": 0.73,
        "eval_samples": 18,
        "flags": 0,
    }
    attacker = page["items"][ATTACKER]
    assert (attacker["distance_ratio"], attacker["flags"], attacker["eval_status"]) == (
        15.0,
        2,
        "refused",
    )
    # The heat map's data: the run's partition, in its detail.
    detail = client.get(f"{RUNS}/{seeded.run_id}", headers=viewer).json()
    assert detail["partition"]["histograms"] == HISTOGRAMS


def test_pages_of_clients_an_assigned_data_run_and_an_unknown_run(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    seeded = seed_local_run(sessions)
    viewer = api_keys.headers("viewer")
    url = f"{RUNS}/{seeded.run_id}/clients"

    seen: list[int] = []
    params: dict[str, Any] = {"limit": 2}
    while True:
        page = client.get(url, params=params, headers=viewer).json()
        seen += [c["worker"] for c in page["items"]]
        if page["next_offset"] is None:
            break
        params["offset"] = page["next_offset"]
    assert seen == [0, 1, 2]

    assigned = seed_run(sessions)
    assert client.get(f"{RUNS}/{assigned}/clients", headers=viewer).json()["items"] == []
    missing = client.get(f"{RUNS}/00000000-0000-0000-0000-000000000000/clients", headers=viewer)
    assert missing.status_code == 404
    assert client.get(url).status_code == 401
    assert client.get(url, params={"limit": 0}, headers=viewer).status_code == 422
