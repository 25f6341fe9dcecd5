"""Cases over the API: the listing, its sorts and filters, bulk reviews, mutes; hostile input."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from phalanx.store import (
    AuditEntry,
    Client,
    ClientStatus,
    DetectionEvent,
    ReviewStatus,
)
from tests.support.factories import (
    Keys,
    TestClient,
    case_ids,
    record_more,
    seed_run_with_events,
)

CASES = "/api/v1/cases"
FLAG, REFUSAL, FAULT = "outside_max_clique", "bad_signature", "worker_error"


def events_of(sessions: sessionmaker[Session], run_id: str) -> list[DetectionEvent]:
    with sessions() as session:
        query = select(DetectionEvent).where(DetectionEvent.run_id == run_id)
        return list(session.scalars(query.order_by(DetectionEvent.id)))


def test_the_listing_gives_one_case_per_client_with_counts_rounds_and_evidence(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    run_id, (liar, forger) = seed_run_with_events(sessions, num_rounds=5)
    viewer = api_keys.headers("viewer")

    response = client.get(CASES, params={"run_id": run_id}, headers=viewer)

    assert response.status_code == 200, response.text
    page = response.json()
    assert (page["total"], page["limit"], page["offset"], page["next_offset"]) == (2, 50, 0, None)
    by_client = {item["client_id"]: item for item in page["items"]}
    case = by_client[liar]
    assert (case["event_count"], case["open_count"], case["dismissed_count"]) == (5, 5, 0)
    assert (case["first_round"], case["last_round"]) == (1, 5)
    assert (case["review_status"], case["severity"], case["subject"]) == (
        "open",
        "high",
        f"client:{liar}",
    )
    assert case["kinds"] == [
        {"kind": FLAG, "events": 5, "muted_by": None, "muted_at": None, "mute_note": None}
    ]
    assert case["latest"]["round"] == 5 and case["latest"]["case_id"] == case["id"]
    assert case["latest"]["evidence"] is None
    detail = client.get(f"{CASES}/{case['id']}", headers=viewer).json()
    assert detail["latest"]["evidence"] == {"files": [0], "distance": 0.5}
    under = client.get(
        "/api/v1/events", params={"case_id": case["id"], "limit": 500}, headers=viewer
    ).json()["items"]
    assert len(under) == 5 and {e["client_id"] for e in under} == {liar}
    assert by_client[forger]["kinds"][0]["kind"] == REFUSAL


def test_cases_sort_and_filter_by_run_kind_client_and_status(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    run_id, (liar, forger) = seed_run_with_events(sessions, num_rounds=2)
    record_more(sessions, run_id, forger, REFUSAL, FLAG)
    viewer = api_keys.headers("viewer")

    def listed(**params: Any) -> list[str | None]:
        response = client.get(CASES, params={"run_id": run_id, **params}, headers=viewer)
        assert response.status_code == 200, response.text
        return [item["client_id"] for item in response.json()["items"]]

    assert listed(sort="count") == [forger, liar]  # 4 events against 2
    assert listed(sort="count", order="asc") == [liar, forger]
    assert listed(sort="recency") == [forger, liar]
    assert listed(kind=FLAG) == [forger, liar] and listed(kind=REFUSAL) == [forger]
    assert listed(client_id=liar) == [liar]
    assert listed(status="confirmed") == [] and len(listed(status="all")) == 2
    assert listed(severity="low") == []
    assert listed(limit=1, sort="count") == [forger]
    assert listed(limit=1, offset=1, sort="count") == [liar]


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"sort": "loudness"}, "sort"),
        ({"order": "up"}, "order"),
        ({"status": "maybe"}, "status"),
        ({"severity": "huge"}, "severity"),
        ({"run_id": "not-a-uuid"}, "run_id"),
        ({"client_id": "1; DROP TABLE clients"}, "client_id"),
        ({"kind": "x" * 65}, "kind"),
        ({"kind": "a\x00b"}, "kind"),
        ({"limit": 0}, "limit"),
        ({"limit": 501}, "limit"),
        ({"offset": -1}, "offset"),
        ({"offset": 2**40}, "offset"),
        ({"sortby": "count"}, "sortby"),
        ({"run": "x"}, "run"),
    ],
)
def test_a_bad_sort_or_filter_is_422_naming_it(
    params: dict[str, Any], named: str, client: TestClient, api_keys: Keys
) -> None:
    response = client.get(CASES, params=params, headers=api_keys.headers("viewer"))
    assert response.status_code == 422, response.text
    assert named in response.json()["detail"]


def test_bulk_confirm_closes_every_open_event_bans_the_clients_and_audits_each_event(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    run_id, (liar, forger) = seed_run_with_events(sessions, num_rounds=6)
    ids = case_ids(sessions, run_id)

    response = client.post(
        f"{CASES}/review",
        json={"case_ids": [ids[liar], ids[forger]], "decision": "confirm", "note": "both lie"},
        headers=api_keys.headers("operator"),
    )

    assert response.status_code == 200, response.text
    items = response.json()["items"]
    assert [i["case"]["id"] for i in items] == [ids[liar], ids[forger]]
    assert [(i["closed_events"], i["client_status"], i["client_banned"]) for i in items] == [
        (6, "banned", True),
        (6, "banned", True),
    ]
    assert items[0]["case"]["review_status"] == "confirmed"
    assert items[0]["case"]["reviewed_by"] == "operator-key"
    stored = events_of(sessions, run_id)
    assert {(e.review_status, e.reviewed_by, e.note) for e in stored} == {
        (ReviewStatus.CONFIRMED, "operator-key", "both lie")
    }
    with sessions() as session:
        entries = session.scalars(
            select(AuditEntry).where(
                AuditEntry.actor == "operator-key", AuditEntry.target_type == "event"
            )
        )
        reviewed = [e for e in entries if e.target_id in {str(s.id) for s in stored}]
        assert {e.action for e in reviewed} == {"event.review"} and len(reviewed) == 12
        assert {e.details["case_id"] for e in reviewed if e.details} == set(ids.values())
        logged = session.scalars(
            select(AuditEntry).where(
                AuditEntry.action == "case.review",
                AuditEntry.target_id.in_([str(i) for i in ids.values()]),
            )
        ).all()
        assert sorted((e.details or {}).get("events", 0) for e in logged) == [6, 6]
        bans = session.scalars(
            select(AuditEntry).where(
                AuditEntry.action == "client.ban", AuditEntry.target_id == liar
            )
        ).all()
        assert [b.details["case_id"] for b in bans if b.details] == [ids[liar]]
        assert session.get(Client, forger).status == ClientStatus.BANNED  # type: ignore[union-attr]

    again = client.post(
        f"{CASES}/{ids[liar]}/review",
        json={"decision": "dismiss"},
        headers=api_keys.headers("operator"),
    )
    assert again.status_code == 409
    assert f"case {ids[liar]} was already confirmed by 'operator-key'" in again.json()["detail"]


def test_bulk_dismiss_with_mute_closes_every_open_event_and_bans_nobody(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    run_id, (liar, forger) = seed_run_with_events(sessions, num_rounds=4)
    ids = case_ids(sessions, run_id)

    response = client.post(
        f"{CASES}/review",
        json={
            "case_ids": [ids[liar], ids[forger]],
            "decision": "dismiss",
            "note": "a test federation",
            "mute": True,
        },
        headers=api_keys.headers("operator"),
    )

    assert response.status_code == 200, response.text
    items = response.json()["items"]
    assert [(i["closed_events"], i["client_status"], i["client_banned"]) for i in items] == [
        (4, "approved", False),
        (4, "approved", False),
    ]
    assert [i["muted_kinds"] for i in items] == [[FLAG], [REFUSAL]]
    assert {(e.review_status, e.reviewed_by, e.note) for e in events_of(sessions, run_id)} == {
        (ReviewStatus.DISMISSED, "operator-key", "a test federation")
    }
    with sessions() as session:
        statuses = [session.scalar(select(Client.status).where(Client.id == c)) for c in ids]
    assert statuses == [ClientStatus.APPROVED] * 2
    record_more(sessions, run_id, liar, FLAG)  # muted: it arrives dismissed, the queue stays empty
    viewer = api_keys.headers("viewer")
    assert client.get(CASES, params={"run_id": run_id}, headers=viewer).json()["items"] == []


def test_confirming_a_case_of_faults_alone_never_bans(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    run_id, (broken,) = seed_run_with_events(sessions, num_rounds=3, kinds=(FAULT,))
    response = client.post(
        f"{CASES}/{case_ids(sessions, run_id)[broken]}/review",
        json={"decision": "confirm", "note": "its disk is full"},
        headers=api_keys.headers("operator"),
    )
    assert response.status_code == 200, response.text
    review = response.json()
    assert (review["closed_events"], review["client_status"], review["client_banned"]) == (
        3,
        "approved",
        False,
    )


def test_dismissing_with_mute_stores_later_events_of_that_kind_dismissed_and_says_by_whom(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    run_id, (noisy,) = seed_run_with_events(sessions, num_rounds=2, kinds=(FLAG,))
    case_id = case_ids(sessions, run_id)[noisy]
    response = client.post(
        f"{CASES}/{case_id}/review",
        json={"decision": "dismiss", "note": "flaky link", "mute": True},
        headers=api_keys.headers("operator"),
    )
    assert response.status_code == 200, response.text
    assert response.json()["muted_kinds"] == [FLAG]
    assert response.json()["client_status"] == "approved"

    record_more(sessions, run_id, noisy, FLAG)
    viewer = api_keys.headers("viewer")
    case = client.get(f"{CASES}/{case_id}", headers=viewer).json()
    assert (case["review_status"], case["event_count"], case["muted_count"]) == ("dismissed", 3, 1)
    assert case["kinds"][0]["muted_by"] == "operator-key"
    assert (case["latest"]["muted"], case["latest"]["review_status"]) == (True, "dismissed")
    assert case["latest"]["reviewed_by"] == "operator-key"
    assert client.get(CASES, params={"run_id": run_id}, headers=viewer).json()["items"] == []

    record_more(sessions, run_id, noisy, REFUSAL)  # another kind is not muted: the case reopens
    reopened = client.get(CASES, params={"run_id": run_id}, headers=viewer).json()["items"]
    assert [(c["id"], c["open_count"]) for c in reopened] == [(case_id, 1)]


@pytest.mark.parametrize(
    ("body", "status", "said"),
    [
        ({"case_ids": [], "decision": "confirm"}, 422, "case_ids"),
        ({"case_ids": [7, 7], "decision": "confirm"}, 422, "repeated: [7]"),
        ({"case_ids": list(range(1, 102)), "decision": "confirm"}, 422, "case_ids"),
        ({"case_ids": ["seven"], "decision": "confirm"}, 422, "case_ids"),
        ({"case_ids": [0], "decision": "confirm"}, 422, "case_ids"),
        ({"case_ids": [2**63], "decision": "confirm"}, 422, "case_ids"),
        ({"case_ids": [1], "decision": "ban"}, 422, "decision"),
        ({"case_ids": [1], "decision": "confirm", "mute": True}, 422, "mute"),
        ({"case_ids": [1], "decision": "dismiss", "mute": "sometimes"}, 422, "mute"),
        ({"case_ids": [1], "decision": "confirm", "admin": True}, 422, "admin"),
        ({"case_ids": [1], "decision": "confirm", "note": "a\x00b"}, 422, "note"),
        ({"case_ids": [1], "decision": "confirm", "note": "x" * 2001}, 422, "note"),
        ({"decision": "confirm"}, 422, "case_ids"),
    ],
)
def test_a_hostile_bulk_body_is_a_clear_4xx(
    body: dict[str, Any], status: int, said: str, client: TestClient, api_keys: Keys
) -> None:
    response = client.post(f"{CASES}/review", json=body, headers=api_keys.headers("operator"))
    assert response.status_code == status, response.text
    assert said in response.json()["detail"]


def test_a_bulk_review_with_unknown_or_closed_cases_changes_nothing(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    run_id, (liar, forger) = seed_run_with_events(sessions, num_rounds=2)
    ids = case_ids(sessions, run_id)
    operator = api_keys.headers("operator")
    unknown = client.post(
        f"{CASES}/review",
        json={"case_ids": [ids[liar], 2**62, 2**62 + 1], "decision": "confirm"},
        headers=operator,
    )
    assert unknown.status_code == 404
    assert f"[{2**62}, {2**62 + 1}]" in unknown.json()["detail"]
    done = client.post(
        f"{CASES}/{ids[forger]}/review", json={"decision": "dismiss"}, headers=operator
    )
    assert done.status_code == 200

    mixed = client.post(
        f"{CASES}/review",
        json={"case_ids": [ids[liar], ids[forger]], "decision": "confirm"},
        headers=operator,
    )

    assert mixed.status_code == 409
    assert f"case {ids[forger]} was already dismissed" in mixed.json()["detail"]
    theirs = [e for e in events_of(sessions, run_id) if e.client_id == liar]
    assert {e.review_status for e in theirs} == {ReviewStatus.OPEN}
    with sessions() as session:
        assert session.get(Client, liar).status == ClientStatus.APPROVED  # type: ignore[union-attr]


def test_a_huge_bulk_body_is_413_not_a_crash(client: TestClient, api_keys: Keys) -> None:
    body = '{"decision": "confirm", "case_ids": [' + ",".join(["1"] * 2_000_000) + "]}"
    response = client.post(
        f"{CASES}/review",
        content=body,
        headers={**api_keys.headers("operator"), "Content-Type": "application/json"},
    )
    assert response.status_code == 413


def test_a_viewer_reads_cases_but_cannot_review_them(
    client: TestClient, api_keys: Keys, sessions: sessionmaker[Session]
) -> None:
    run_id, (liar, _) = seed_run_with_events(sessions, num_rounds=1)
    case_id = case_ids(sessions, run_id)[liar]
    viewer = api_keys.headers("viewer")
    assert client.get(f"{CASES}/{case_id}", headers=viewer).status_code == 200
    for path, body in (
        (f"{CASES}/{case_id}/review", {"decision": "confirm"}),
        (f"{CASES}/review", {"case_ids": [case_id], "decision": "confirm"}),
    ):
        refused = client.post(path, json=body, headers=viewer)
        assert refused.status_code == 403 and "operator" in refused.json()["detail"]
    assert {e.review_status for e in events_of(sessions, run_id)} == {ReviewStatus.OPEN}
    assert client.get(f"{CASES}/{2**62}", headers=viewer).status_code == 404
    assert client.get(f"{CASES}/0", headers=viewer).status_code == 422
