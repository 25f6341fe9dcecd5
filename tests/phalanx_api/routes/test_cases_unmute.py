"""Lifting a mute over the API: later events arrive open, the muted record stays, audited."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from phalanx.store import AuditEntry, DetectionEvent, ReviewStatus
from tests.support.factories import (
    Keys,
    TestClient,
    case_ids,
    record_more,
    seed_run_with_events,
)

CASES = "/api/v1/cases"
FLAG, REFUSAL = "outside_max_clique", "bad_signature"


def muted_case(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> tuple[str, str, int]:
    """A run whose client's case was dismissed with its kind muted, then muted once more."""
    run_id, (noisy,) = seed_run_with_events(sessions, num_rounds=2, kinds=(FLAG,))
    case_id = case_ids(sessions, run_id)[noisy]
    response = client.post(
        f"{CASES}/{case_id}/review",
        json={"decision": "dismiss", "note": "flaky link", "mute": True},
        headers=api_keys.headers("operator"),
    )
    assert response.status_code == 200, response.text
    record_more(sessions, run_id, noisy, FLAG)  # arrives dismissed, muted
    return run_id, noisy, case_id


def test_unmuting_lets_later_events_arrive_open_and_keeps_the_muted_ones_dismissed(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    run_id, noisy, case_id = muted_case(client, api_keys, sessions)

    response = client.post(
        f"{CASES}/{case_id}/unmute",
        json={"kinds": [FLAG], "note": "link fixed, watch again"},
        headers=api_keys.headers("operator"),
    )

    assert response.status_code == 200, response.text
    body = response.json()
    assert [(m["kind"], m["muted_by"], m["mute_note"]) for m in body["unmuted"]] == [
        (FLAG, "operator-key", "flaky link")
    ]
    assert body["case"]["kinds"][0]["muted_by"] is None
    assert body["case"]["muted_count"] == 1  # the record of what arrived muted stays
    record_more(sessions, run_id, noisy, FLAG)
    with sessions() as session:
        stored = session.scalars(
            select(DetectionEvent)
            .where(DetectionEvent.case_id == case_id)
            .order_by(DetectionEvent.id)
        ).all()
        assert [(e.review_status, e.muted) for e in stored] == [
            (ReviewStatus.DISMISSED, False),
            (ReviewStatus.DISMISSED, False),
            (ReviewStatus.DISMISSED, True),
            (ReviewStatus.OPEN, False),
        ]
        assert stored[2].reviewed_by == "operator-key"
        entry = session.scalars(
            select(AuditEntry).where(
                AuditEntry.action == "case.unmute", AuditEntry.target_id == str(case_id)
            )
        ).one()
        assert entry.actor == "operator-key"
        assert entry.details["kinds"] == [FLAG]
        assert entry.details["muted_by"] == {FLAG: "operator-key"}
        assert entry.details["note"] == "link fixed, watch again"
    listed = client.get(CASES, params={"run_id": run_id}, headers=api_keys.headers("viewer"))
    assert [(c["id"], c["open_count"]) for c in listed.json()["items"]] == [(case_id, 1)]


def test_unmuting_without_kinds_lifts_every_mute_and_a_second_unmute_is_409(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    _, _, case_id = muted_case(client, api_keys, sessions)
    operator = api_keys.headers("operator")

    first = client.post(f"{CASES}/{case_id}/unmute", json={}, headers=operator)
    again = client.post(f"{CASES}/{case_id}/unmute", json={}, headers=operator)

    assert first.status_code == 200, first.text
    assert [m["kind"] for m in first.json()["unmuted"]] == [FLAG]
    assert again.status_code == 409
    assert f"case {case_id} has no muted kind" in again.json()["detail"]


def test_unmuting_a_kind_that_is_not_muted_is_409_and_lifts_nothing(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    _, _, case_id = muted_case(client, api_keys, sessions)

    response = client.post(
        f"{CASES}/{case_id}/unmute",
        json={"kinds": [FLAG, REFUSAL]},
        headers=api_keys.headers("operator"),
    )

    assert response.status_code == 409
    assert f"'{REFUSAL}' is not muted (muted kinds: '{FLAG}')" in response.json()["detail"]
    case = client.get(f"{CASES}/{case_id}", headers=api_keys.headers("viewer")).json()
    assert case["kinds"][0]["muted_by"] == "operator-key"


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"kinds": []}, "kinds"),
        ({"kinds": [FLAG, FLAG]}, "repeated"),
        ({"kinds": ["Drop Table"]}, "kinds"),
        ({"kinds": ["x" * 65]}, "kinds"),
        ({"kinds": "outside_max_clique"}, "kinds"),
        ({"kinds": [None]}, "kinds"),
        ({"kinds": ["a"] * 65}, "kinds"),
        ({"note": "a\x00b"}, "note"),
        ({"note": "x" * 2001}, "note"),
        ({"everything": True}, "everything"),
    ],
)
def test_a_hostile_unmute_body_is_422_naming_the_field(
    body: dict[str, Any], said: str, client: TestClient, api_keys: Keys
) -> None:
    response = client.post(f"{CASES}/1/unmute", json=body, headers=api_keys.headers("operator"))
    assert response.status_code == 422, response.text
    assert said in response.json()["detail"]


def test_unmute_needs_an_operator_and_an_existing_case(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    _, _, case_id = muted_case(client, api_keys, sessions)

    refused = client.post(f"{CASES}/{case_id}/unmute", json={}, headers=api_keys.headers("viewer"))
    unknown = client.post(f"{CASES}/{2**62}/unmute", json={}, headers=api_keys.headers("operator"))
    bad_id = client.post(f"{CASES}/0/unmute", json={}, headers=api_keys.headers("operator"))

    assert refused.status_code == 403 and "operator" in refused.json()["detail"]
    assert unknown.status_code == 404
    assert bad_id.status_code == 422
    case = client.get(f"{CASES}/{case_id}", headers=api_keys.headers("viewer")).json()
    assert case["kinds"][0]["muted_by"] == "operator-key"
