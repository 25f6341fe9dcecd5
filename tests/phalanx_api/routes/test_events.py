"""Detection events: filtered keyset listing, and reviews that may ban the client."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi import FastAPI
from sqlalchemy.orm import Session, sessionmaker

from phalanx.store import EventData, EventFilter, RoundData, Severity, audit, events, rounds, runs
from phalanx_api.main import create_app
from phalanx_api.settings import ApiSettings
from tests.support.factories import Keys, TestClient, seed_run_with_events

EVENTS = "/api/v1/events"
#: What every listed event carries; ``evidence`` is null unless asked for.
LIST_FIELDS = {
    "id",
    "run_id",
    "round",
    "client_id",
    "worker",
    "kind",
    "severity",
    "review_status",
    "reviewed_by",
    "reviewed_at",
    "note",
    "created_at",
    "case_id",
    "muted",
    "summary",
    "evidence",
}
FLAG_SUMMARY = (
    "Worker 1 disagreed with workers 0 and 2 on files 4 and 7 (relative distance 2 on each, "
    "tolerance 0.001); the 2 workers 0 and 2 agree with one another on every shared file."
)
#: Evidence as the coordinator stores it: a flag (with its summary, bulky per-file
#: records) and a refused reply (a reason, no summary).
FLAG_EVIDENCE = {
    "worker": 1,
    "clique": [0, 2],
    "disagreed_with": [0, 2],
    "files": [
        {
            "file": f,
            "replicas": [{"worker": w, "digest": "ab" * 32} for w in (0, 1, 2)],
            "distances": [{"a": 0, "b": 1, "distance": 2.0, "agree": False}],
            "accepted_from": 0,
        }
        for f in (4, 7)
    ],
    "summary": FLAG_SUMMARY,
}
REFUSAL_EVIDENCE = {"reason": "signature does not verify", "round": 1}


def _seed_flag_and_refusal(sessions: sessionmaker[Session]) -> str:
    """A run whose one round has a flag (worker 1) and a refused reply (worker 2)."""
    now = datetime(2025, 6, 1, tzinfo=UTC)
    with sessions.begin() as session:
        run_id = runs.create_run(session, name="evidence", config={}, seed=1).id
        found = [
            EventData(
                kind="outside_max_clique", severity=Severity.HIGH, worker=1, evidence=FLAG_EVIDENCE
            ),
            EventData(
                kind="bad_signature", severity=Severity.HIGH, worker=2, evidence=REFUSAL_EVIDENCE
            ),
        ]
        data = RoundData(number=1, started_at=now, finished_at=now)
        rounds.record_round(session, run_id, data, found)
    return run_id


def _event_ids(sessions: sessionmaker[Session], run_id: str, kind: str) -> list[int]:
    with sessions() as session:
        page = events.list_events(session, EventFilter(run_id=run_id, kind=kind))
        return [event.id for event in page.items]


def _page_through(client: TestClient, headers: dict[str, str], **params: Any) -> list[int]:
    seen: list[int] = []
    while True:
        response = client.get(EVENTS, params=params, headers=headers)
        assert response.status_code == 200, response.text
        page = response.json()
        seen += [item["id"] for item in page["items"]]
        if page["next_before"] is None:
            return seen
        params["before"] = page["next_before"]


def test_filters_and_keyset_pages_cover_each_event_once_newest_first(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    run_id, (liar, forger) = seed_run_with_events(sessions, num_rounds=5)
    viewer = api_keys.headers("viewer")
    everything = _page_through(client, viewer, run_id=run_id, limit=3)
    assert len(everything) == 10
    assert everything == sorted(everything, reverse=True)

    by_kind = _page_through(client, viewer, run_id=run_id, kind="bad_signature", limit=2)
    assert by_kind == _event_ids(sessions, run_id, "bad_signature")
    by_client = _page_through(client, viewer, client_id=liar, limit=4)
    assert by_client == _event_ids(sessions, run_id, "outside_max_clique")
    assert _page_through(client, viewer, run_id=run_id, round=2, worker=1) == [by_kind[-2]]
    assert _page_through(client, viewer, run_id=run_id, severity="low") == []
    assert len(_page_through(client, viewer, run_id=run_id, review_status="open")) == 10
    assert forger != liar


def test_a_listed_event_carries_its_evidence_in_words_not_the_evidence(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    run_id = _seed_flag_and_refusal(sessions)
    viewer = api_keys.headers("viewer")

    response = client.get(EVENTS, params={"run_id": run_id}, headers=viewer)

    assert response.status_code == 200
    refusal, flag = response.json()["items"]
    assert set(flag) == set(refusal) == LIST_FIELDS
    assert (flag["kind"], flag["worker"], flag["summary"]) == (
        "outside_max_clique",
        1,
        FLAG_SUMMARY,
    )
    assert (refusal["kind"], refusal["summary"]) == ("bad_signature", "signature does not verify")
    assert flag["evidence"] is None and refusal["evidence"] is None


def test_a_listed_event_agrees_with_the_event_itself(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    run_id = _seed_flag_and_refusal(sessions)
    viewer = api_keys.headers("viewer")

    items = client.get(EVENTS, params={"run_id": run_id}, headers=viewer).json()["items"]

    for item in items:
        detail = client.get(f"{EVENTS}/{item['id']}", headers=viewer).json()
        assert set(detail) == LIST_FIELDS - {"summary"}
        assert {k: v for k, v in item.items() if k not in ("summary", "evidence")} == {
            k: v for k, v in detail.items() if k != "evidence"
        }
    flag = client.get(f"{EVENTS}/{items[1]['id']}", headers=viewer).json()
    assert flag["evidence"] == FLAG_EVIDENCE


def test_the_full_evidence_is_listed_when_asked_for(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    run_id = _seed_flag_and_refusal(sessions)
    viewer = api_keys.headers("viewer")
    params = {"run_id": run_id}

    compact = client.get(EVENTS, params=params, headers=viewer)
    full = client.get(EVENTS, params={**params, "evidence": "full"}, headers=viewer)
    summaries = client.get(EVENTS, params={**params, "evidence": "summary"}, headers=viewer)

    assert full.status_code == 200
    assert [item["evidence"] for item in full.json()["items"]] == [REFUSAL_EVIDENCE, FLAG_EVIDENCE]
    assert [item["summary"] for item in full.json()["items"]] == [
        item["summary"] for item in compact.json()["items"]
    ]
    assert summaries.json() == compact.json()
    assert len(compact.content) < len(full.content) / 2


@pytest.mark.parametrize("evidence", ["none", "FULL", ""])
def test_an_unknown_evidence_form_is_422(evidence: str, client: TestClient, api_keys: Keys) -> None:
    response = client.get(EVENTS, params={"evidence": evidence}, headers=api_keys.headers("viewer"))
    assert response.status_code == 422
    assert "evidence" in response.json()["detail"]


def test_an_event_shows_its_evidence(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    run_id, (client_id,) = seed_run_with_events(sessions, num_rounds=1, kinds=("outlier",))
    (event_id,) = _event_ids(sessions, run_id, "outlier")
    body = client.get(f"{EVENTS}/{event_id}", headers=api_keys.headers("viewer")).json()
    assert body["client_id"] == client_id
    assert body["evidence"] == {"files": [0], "distance": 0.5}
    assert body["review_status"] == "open"


def test_confirming_bans_the_client_and_both_are_audited(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    run_id, (client_id,) = seed_run_with_events(sessions, num_rounds=1, kinds=("bad_shape",))
    (event_id,) = _event_ids(sessions, run_id, "bad_shape")
    response = client.post(
        f"{EVENTS}/{event_id}/review",
        json={"decision": "confirm", "note": "digest differs from both replicas"},
        headers=api_keys.headers("operator"),
    )
    assert response.status_code == 200
    review = response.json()
    assert review["review_status"] == "confirmed"
    assert review["reviewed_by"] == "operator-key"
    assert review["note"] == "digest differs from both replicas"
    assert review["client_status"] == "banned"
    assert review["client_banned"] is True
    with sessions() as session:
        assert [e.action for e in audit.list_audit(session, target_id=str(event_id))] == [
            "event.review"
        ]
        (ban,) = audit.list_audit(session, action="client.ban", target_id=client_id)
    assert ban.details is not None
    assert ban.details["event_id"] == event_id


def test_confirming_a_workers_own_failure_never_bans_it(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    run_id, _ = seed_run_with_events(sessions, num_rounds=1, kinds=("worker_error",))
    (event_id,) = _event_ids(sessions, run_id, "worker_error")
    review = client.post(
        f"{EVENTS}/{event_id}/review",
        json={"decision": "confirm", "note": "its disk was full"},
        headers=api_keys.headers("operator"),
    ).json()
    assert review["review_status"] == "confirmed"
    assert review["client_status"] == "approved"
    assert review["client_banned"] is False


def test_dismissing_leaves_the_client_alone(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    run_id, _ = seed_run_with_events(sessions, num_rounds=1, kinds=("low_degree",))
    (event_id,) = _event_ids(sessions, run_id, "low_degree")
    review = client.post(
        f"{EVENTS}/{event_id}/review",
        json={"decision": "dismiss"},
        headers=api_keys.headers("operator"),
    ).json()
    assert review["review_status"] == "dismissed"
    assert review["client_status"] == "approved"
    assert review["client_banned"] is False


def test_without_the_ban_policy_confirming_does_not_ban(
    fresh_settings: ApiSettings, fresh_keys: Keys, fresh_sessions: sessionmaker[Session]
) -> None:
    app: FastAPI = create_app(fresh_settings.model_copy(update={"ban_on_confirm": False}))
    run_id, _ = seed_run_with_events(fresh_sessions, num_rounds=1, kinds=("outlier",))
    (event_id,) = _event_ids(fresh_sessions, run_id, "outlier")
    with TestClient(app) as client:
        review = client.post(
            f"{EVENTS}/{event_id}/review",
            json={"decision": "confirm"},
            headers=fresh_keys.headers("operator"),
        ).json()
    assert review["review_status"] == "confirmed"
    assert review["client_status"] == "approved"


def test_reviewing_twice_is_a_conflict(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    run_id, _ = seed_run_with_events(sessions, num_rounds=1, kinds=("stale_round",))
    (event_id,) = _event_ids(sessions, run_id, "stale_round")
    operator = api_keys.headers("operator")
    first = client.post(
        f"{EVENTS}/{event_id}/review", json={"decision": "dismiss"}, headers=operator
    )
    assert first.status_code == 200
    second = client.post(
        f"{EVENTS}/{event_id}/review", json={"decision": "confirm"}, headers=operator
    )
    assert second.status_code == 409
    assert "already dismissed" in second.json()["detail"]


@pytest.mark.parametrize(
    "body",
    [
        {"decision": "ban"},
        {},
        {"decision": "confirm", "note": "x" * 2001},
        {"decision": "confirm", "note": "\x00"},
    ],
)
def test_a_malformed_review_is_422(
    body: dict[str, Any], client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    run_id, _ = seed_run_with_events(sessions, num_rounds=1, kinds=("wrong_nonce",))
    (event_id,) = _event_ids(sessions, run_id, "wrong_nonce")
    response = client.post(
        f"{EVENTS}/{event_id}/review", json=body, headers=api_keys.headers("operator")
    )
    assert response.status_code == 422
    assert response.json()["detail"]


@pytest.mark.parametrize("event_id", ["0", "-1", "abc", "1.5", str(2**63), "9" * 30])
def test_a_malformed_event_id_is_422(event_id: str, client: TestClient, api_keys: Keys) -> None:
    response = client.get(f"{EVENTS}/{event_id}", headers=api_keys.headers("viewer"))
    assert response.status_code == 422


def test_an_unknown_event_is_404(client: TestClient, api_keys: Keys) -> None:
    operator = api_keys.headers("operator")
    assert client.get(f"{EVENTS}/{2**63 - 1}", headers=operator).status_code == 404
    response = client.post(
        f"{EVENTS}/{2**63 - 1}/review", json={"decision": "confirm"}, headers=operator
    )
    assert response.status_code == 404
    assert "not found" in response.json()["detail"]


@pytest.mark.parametrize(
    "params",
    [
        {"limit": 0},
        {"limit": 501},
        {"before": 0},
        {"before": 2**63},
        {"round": -1},
        {"round": 2**31},
        {"kind": "k" * 65},
        {"kind": "a\x00b"},
        {"run_id": "nope"},
        {"review_status": "maybe"},
    ],
)
def test_bad_filters_are_422(params: dict[str, Any], client: TestClient, api_keys: Keys) -> None:
    response = client.get(EVENTS, params=params, headers=api_keys.headers("viewer"))
    assert response.status_code == 422
    assert response.json()["errors"]
