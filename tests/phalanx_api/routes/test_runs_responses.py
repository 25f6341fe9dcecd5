"""GET /api/v1/runs/{run_id}/responses: each worker's response times, slow apart from detection."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from phalanx.response_times import WorkerResponse
from phalanx.store import RoundData, response_times, rounds, runs
from phalanx_api.schemas import MAX_PAGE_SIZE
from tests.support.factories import Keys, TestClient, seed_run
from tests.support.response_rounds import seed_timed_run, straggler_seconds
from tests.support.store_rows import T0

RUNS = "/api/v1/runs"


def test_each_worker_comes_with_its_times_counts_and_slowness_in_words(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    timed = seed_timed_run(sessions)

    response = client.get(f"{RUNS}/{timed.run_id}/responses", headers=api_keys.headers("viewer"))

    assert response.status_code == 200, response.text
    page = response.json()
    assert [w["worker"] for w in page["items"]] == list(range(6))
    assert (page["median_s"], page["slow_workers"], page["next_offset"]) == (2.0, 2, None)
    straggler = page["items"][4]
    assert straggler == {
        "worker": 4,
        "client_id": timed.clients[4],
        "rounds": 5,
        "kept": 0,
        "late": 5,
        "missing": 0,
        "mean_s": pytest.approx(sum(straggler_seconds(t) for t in range(1, 6)) / 5),
        "median_s": straggler_seconds(3),
        "p90_s": straggler_seconds(5),
        "recent": 5,
        "slow_rounds": 5,
        "slow": True,
        "slow_reason": (
            "Worker 4 took at least 3 times the run's median response in 5 of its 5 rounds "
            "(late in 5); its median response is 40.3 s against the run's 2.0 s."
        ),
    }
    absent = page["items"][5]
    assert (absent["missing"], absent["mean_s"], absent["slow"]) == (5, None, True)
    assert absent["slow_reason"] == "Worker 5 sent no reply in 5 of its 5 rounds."
    quick = page["items"][0]
    assert (quick["kept"], quick["slow"], quick["slow_reason"]) == (5, False, None)


def test_slow_is_never_a_detection_event_nor_in_the_review_queue(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    timed = seed_timed_run(sessions)
    viewer = api_keys.headers("viewer")

    listed = client.get("/api/v1/events", params={"run_id": timed.run_id}, headers=viewer)
    by_client = client.get("/api/v1/events", params={"client_id": timed.clients[4]}, headers=viewer)
    straggler = client.get(f"/api/v1/clients/{timed.clients[4]}", headers=viewer)

    assert listed.json()["items"] == by_client.json()["items"] == []
    assert straggler.json()["status"] == "approved"


def test_only_the_slow_workers_or_the_others_and_pages_of_them(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    timed = seed_timed_run(sessions, num_workers=9)
    url, viewer = f"{RUNS}/{timed.run_id}/responses", api_keys.headers("viewer")

    slow = client.get(url, params={"slow": "true"}, headers=viewer).json()
    others = client.get(url, params={"slow": "false"}, headers=viewer).json()
    seen: list[int] = []
    params: dict[str, Any] = {"limit": 4}
    while True:
        page = client.get(url, params=params, headers=viewer).json()
        seen += [w["worker"] for w in page["items"]]
        assert page["slow_workers"] == 2
        if page["next_offset"] is None:
            break
        params["offset"] = page["next_offset"]

    assert [w["worker"] for w in slow["items"]] == [4, 5]
    assert [w["worker"] for w in others["items"]] == [0, 1, 2, 3, 6, 7, 8]
    assert seen == list(range(9))


def test_a_run_whose_rounds_were_not_timed_has_no_workers(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    queued = seed_run(sessions)
    with sessions.begin() as session:
        untimed = runs.create_run(session, name="untimed", config={}, seed=1).id
        rounds.record_round(session, untimed, RoundData(number=1, started_at=T0, finished_at=T0))

    for run_id in (queued, untimed):
        page = client.get(f"{RUNS}/{run_id}/responses", headers=api_keys.headers("viewer"))
        assert page.status_code == 200
        assert page.json() == {
            "items": [],
            "median_s": None,
            "slow_workers": 0,
            "limit": 50,
            "offset": 0,
            "next_offset": None,
        }


def test_an_unknown_run_is_404_and_a_hostile_id_or_page_422(
    client: TestClient, api_keys: Keys
) -> None:
    viewer = api_keys.headers("viewer")
    unknown = "00000000-0000-4000-8000-000000000000"
    missing = client.get(f"{RUNS}/{unknown}/responses", headers=viewer)
    assert missing.status_code == 404
    assert missing.json() == {"detail": f"run '{unknown}' not found"}
    for run_id in ("x", "1' OR '1'='1", "%00", "9" * 40, "..%2F..%2Fetc"):
        assert client.get(f"{RUNS}/{run_id}/responses", headers=viewer).status_code in (404, 422)
    for params in (
        {"limit": MAX_PAGE_SIZE + 1},
        {"limit": 0},
        {"offset": -1},
        {"offset": 2**31},
        {"slow": "maybe"},
    ):
        answer = client.get(f"{RUNS}/{unknown}/responses", params=params, headers=viewer)
        assert answer.status_code == 422, params


def test_without_a_key_the_times_are_not_shown(client: TestClient) -> None:
    unknown = "00000000-0000-4000-8000-000000000000"
    assert client.get(f"{RUNS}/{unknown}/responses").status_code == 401


def test_a_run_of_a_thousand_workers_answers_a_page_and_counts_every_slow_one(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    with sessions.begin() as session:
        run_id = runs.create_run(session, name="wide", config={}, seed=1).id
        for t in range(1, 4):
            rounds.record_round(
                session,
                run_id,
                RoundData(number=t, started_at=T0, finished_at=T0),
                responses=[
                    WorkerResponse(w, 99.0, "late")
                    if w % 250 == 0
                    else WorkerResponse(w, 1.0, "kept")
                    for w in range(1000)
                ],
            )
        expected = response_times.run_response_times(session, run_id)

    page = client.get(
        f"{RUNS}/{run_id}/responses",
        params={"limit": MAX_PAGE_SIZE, "offset": 500},
        headers=api_keys.headers("viewer"),
    ).json()

    assert [w["worker"] for w in page["items"]] == list(range(500, 1000))
    assert page["slow_workers"] == len(expected.slow) == 4
    assert page["next_offset"] is None
