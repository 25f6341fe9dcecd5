"""Runs: launch with the run config model, list, inspect, rounds, cancel."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from phalanx.agreement_record import AgreementRecord, ConflictEdge
from phalanx.config import RunConfig
from phalanx.store import RoundData, RunStatus, audit, rounds, runs
from phalanx_api.schemas import RoundOut
from tests.support.configs import small_config
from tests.support.factories import Keys, TestClient, seed_run, seed_run_with_events

RUNS = "/api/v1/runs"


def test_launch_queues_the_run_with_its_config(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    config = small_config(name="launched", seed=42, attack={"name": None, "q": 0})
    response = client.post(
        RUNS, json=config.model_dump(mode="json"), headers=api_keys.headers("operator")
    )
    assert response.status_code == 202
    run = response.json()
    assert run["status"] == "queued"
    assert run["name"] == "launched"
    assert run["seed"] == 42
    assert response.headers["Location"] == f"{RUNS}/{run['id']}"
    assert RunConfig.model_validate(run["config"]) == config
    with sessions() as session:
        (entry,) = audit.list_audit(session, action="run.launch", target_id=run["id"])
    assert entry.actor == "operator-key"


def test_an_empty_config_takes_the_defaults(client: TestClient, api_keys: Keys) -> None:
    response = client.post(RUNS, json={}, headers=api_keys.headers("operator"))
    assert response.status_code == 202
    assert RunConfig.model_validate(response.json()["config"]) == RunConfig()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"rounds": 0}, "body.rounds"),
        ({"assignment": {"r": 99}}, "body.assignment.r"),
        ({"assignment": {"scheme": "magic"}}, "body.assignment.scheme"),
        ({"training": {"local_lr": -1}}, "body.training.local_lr"),
        ({"unknown": 1}, "body.unknown"),
        ({"assignment": {"num_workers": 3, "r": 5}}, "assignment.r=5 exceeds"),
        ({"name": "a\x00b"}, "body.name"),
        ({"attack": {"params": {"x": "\x00"}}}, "body.attack.params.x"),
        ({"assignment": {"scheme": "random", "num_workers": 50000}}, "body.assignment.num_workers"),
        ({"assignment": {"scheme": "random", "num_files": 10**8}}, "body.assignment.num_files"),
        # limits hold on the coerced values, not only on JSON integers
        ({"assignment": {"scheme": "random", "num_workers": 5e4}}, "body.assignment.num_workers"),
        ({"assignment": {"scheme": "random", "num_workers": "50000"}}, "assignment.num_workers"),
        (
            {"assignment": {"scheme": "random", "num_files": "10000000"}},
            "body.assignment.num_files",
        ),
        ({"data": {"dataset": "cifar10"}}, "body.data.dataset"),
        ({"data": {"num_classes": 1}}, "body.data.num_classes"),
    ],
)
def test_an_invalid_config_is_422_naming_the_field(
    body: dict[str, Any], field: str, client: TestClient, api_keys: Keys
) -> None:
    response = client.post(RUNS, json=body, headers=api_keys.headers("operator"))
    assert response.status_code == 422
    assert field in response.json()["detail"]


def test_a_misspelt_field_is_422_naming_the_field_it_likely_meant(
    client: TestClient, api_keys: Keys
) -> None:
    body = {"training": {"optimiser": "adam"}}
    response = client.post(RUNS, json=body, headers=api_keys.headers("operator"))
    assert response.status_code == 422
    assert response.json()["detail"] == (
        "body.training.optimiser: unknown field; did you mean `optimizer`?"
    )


def test_a_rule_across_sections_is_422_in_the_clis_words(
    client: TestClient, api_keys: Keys
) -> None:
    body = {"assignment": {"scheme": "mols", "num_workers": 7, "r": 3}}
    response = client.post(RUNS, json=body, headers=api_keys.headers("operator"))
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert detail.startswith("body: assignment: mols needs K = r * l"), detail
    assert "Value error" not in detail


def test_a_non_finite_number_is_422(client: TestClient, api_keys: Keys) -> None:
    response = client.post(
        RUNS,
        content=b'{"training": {"local_lr": Infinity}}',
        headers={**api_keys.headers("operator"), "Content-Type": "application/json"},
    )
    assert response.status_code == 422
    assert "body.training.local_lr" in response.json()["detail"]


@pytest.mark.parametrize(
    ("content", "content_type"),
    [(b"{not json", "application/json"), (b"[1, 2]", "application/json"), (b"x", "text/plain")],
)
def test_a_body_that_is_not_a_config_object_is_422(
    content: bytes, content_type: str, client: TestClient, api_keys: Keys
) -> None:
    response = client.post(
        RUNS,
        content=content,
        headers={**api_keys.headers("operator"), "Content-Type": content_type},
    )
    assert response.status_code == 422
    assert response.json()["detail"]


def test_listing_filters_by_status_newest_first_and_pages(
    fresh_client: TestClient, fresh_keys: Keys, fresh_sessions: sessionmaker[Session]
) -> None:
    ids = [seed_run(fresh_sessions, f"run-{index}") for index in range(5)]
    with fresh_sessions.begin() as session:
        runs.request_cancel(session, ids[0])
    viewer = fresh_keys.headers("viewer")
    queued: list[str] = []
    params: dict[str, Any] = {"status": "queued", "limit": 2}
    while True:
        page = fresh_client.get(RUNS, params=params, headers=viewer).json()
        queued += [item["id"] for item in page["items"]]
        if page["next_offset"] is None:
            break
        params["offset"] = page["next_offset"]
    assert queued == list(reversed(ids[1:]))
    cancelled = fresh_client.get(RUNS, params={"status": "cancelled"}, headers=viewer).json()
    assert [item["id"] for item in cancelled["items"]] == [ids[0]]


def test_rounds_of_a_run_in_order(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    run_id, _ = seed_run_with_events(sessions, num_rounds=3)
    response = client.get(f"{RUNS}/{run_id}/rounds", headers=api_keys.headers("viewer"))
    assert response.status_code == 200
    rounds = response.json()
    assert [r["number"] for r in rounds] == [1, 2, 3]
    assert rounds[2]["bytes_up"] == 3000
    assert rounds[0]["metrics"]["accuracy"] == pytest.approx(0.6)
    run = client.get(f"{RUNS}/{run_id}", headers=api_keys.headers("viewer")).json()
    assert run["current_round"] == 3


def test_a_round_has_every_field_of_the_stored_round(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    run_id, _ = seed_run_with_events(sessions, num_rounds=1)
    (listed,) = client.get(f"{RUNS}/{run_id}/rounds", headers=api_keys.headers("viewer")).json()
    with sessions() as session:
        stored = rounds.get_round(session, run_id, 1)
        expected = RoundOut.model_validate(stored).model_dump(mode="json")
    assert listed == expected


def test_one_round_comes_with_its_agreement_graph_and_older_rounds_with_null(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    graph = AgreementRecord(
        rule="unique_clique",
        replied=(0, 1, 2, 3),
        flagged=(3,),
        degrees={0: 2, 1: 2, 2: 2, 3: 0},
        conflicts=tuple(ConflictEdge(a=w, b=3, files=(w,), num_files=1) for w in range(3)),
        num_conflicts=3,
        outside_max_cliques=((3,),),
        num_max_cliques=1,
    ).to_dict()
    run_id, _ = seed_run_with_events(sessions, num_rounds=1)
    with sessions.begin() as session:
        now = datetime(2025, 1, 2, tzinfo=UTC)
        data = RoundData(number=2, started_at=now, finished_at=now, agreement=graph)
        rounds.record_round(session, run_id, data)
    viewer = api_keys.headers("viewer")
    listed = client.get(f"{RUNS}/{run_id}/rounds", headers=viewer).json()

    old, new = (client.get(f"{RUNS}/{run_id}/rounds/{n}", headers=viewer) for n in (1, 2))

    assert old.status_code == new.status_code == 200
    assert old.json() == {**listed[0], "agreement": None}
    assert new.json() == {**listed[1], "agreement": graph}
    assert all("agreement" not in r for r in listed)  # the listing keeps its shape
    assert AgreementRecord.from_dict(new.json()["agreement"]).flagged == (3,)


def test_a_round_that_was_not_recorded_is_404_and_a_bad_number_422(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    run_id, _ = seed_run_with_events(sessions, num_rounds=1)
    viewer = api_keys.headers("viewer")
    missing = client.get(f"{RUNS}/{run_id}/rounds/9", headers=viewer)
    assert missing.status_code == 404
    assert missing.json() == {"detail": f"round 9 of run '{run_id}' not found"}
    for number in ("0", "x", str(2**31)):
        assert client.get(f"{RUNS}/{run_id}/rounds/{number}", headers=viewer).status_code == 422


def test_a_run_without_rounds_lists_none(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    run_id = seed_run(sessions)
    response = client.get(f"{RUNS}/{run_id}/rounds", headers=api_keys.headers("viewer"))
    assert response.status_code == 200
    assert response.json() == []


def test_cancel_a_queued_run_at_once_and_a_running_one_between_rounds(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    operator = api_keys.headers("operator")
    queued = seed_run(sessions)
    response = client.post(f"{RUNS}/{queued}/cancel", headers=operator)
    assert response.status_code == 202
    assert response.json()["status"] == "cancelled"

    running = seed_run(sessions)
    with sessions.begin() as session:
        runs.get_run(session, running).status = RunStatus.RUNNING
    response = client.post(f"{RUNS}/{running}/cancel", headers=operator)
    assert response.status_code == 202
    assert response.json()["status"] == "running"
    assert response.json()["cancel_requested"] is True


def test_cancelling_a_finished_run_is_a_conflict(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    run_id = seed_run(sessions)
    with sessions.begin() as session:
        runs.get_run(session, run_id).status = RunStatus.RUNNING
        runs.finish_run(session, run_id, RunStatus.SUCCEEDED)
    response = client.post(f"{RUNS}/{run_id}/cancel", headers=api_keys.headers("operator"))
    assert response.status_code == 409
    assert "succeeded" in response.json()["detail"]


UNKNOWN = "00000000-0000-4000-8000-000000000000"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", f"{RUNS}/{UNKNOWN}"),
        ("GET", f"{RUNS}/{UNKNOWN}/rounds"),
        ("POST", f"{RUNS}/{UNKNOWN}/cancel"),
    ],
)
def test_an_unknown_run_is_404(method: str, path: str, client: TestClient, api_keys: Keys) -> None:
    response = client.request(method, path, headers=api_keys.headers("operator"))
    assert response.status_code == 404
    assert UNKNOWN in response.json()["detail"]


@pytest.mark.parametrize("run_id", ["x", "1' OR '1'='1", "%00", "9" * 40])
def test_a_malformed_run_id_is_422(run_id: str, client: TestClient, api_keys: Keys) -> None:
    response = client.get(f"{RUNS}/{run_id}", headers=api_keys.headers("viewer"))
    assert response.status_code == 422


def test_the_api_never_imports_torch_or_the_coordinator() -> None:
    import subprocess
    import sys

    script = (
        "import sys, phalanx_api.main, phalanx_cli.main; "
        "print(sorted(m for m in ('torch', 'flwr', 'phalanx.runs', 'phalanx.coordinator') "
        "if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
