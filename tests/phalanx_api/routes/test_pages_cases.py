"""The review queue of cases over HTTP (no browser), on SQLite and PostgreSQL.

The run is the one of ``test_pages``' kind: real detection evidence on an STS(7)
assignment with two liars (workers 2 and 5) and, in the last round, a refused reply
(worker 6), recorded through the store as the coordinator records them.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from phalanx.store import (
    Client,
    ClientStatus,
    DetectionCase,
    DetectionEvent,
    EventData,
    ReviewStatus,
    RoundData,
    Severity,
    rounds,
    runs,
)
from tests.support.factories import Keys, TestClient, post_login
from tests.support.flagged_runs import Seeded, seed_detected_run

HTML = {"Accept": "text/html,application/xhtml+xml"}


def log_in(fresh_client: TestClient, secret: str) -> str:
    """Log the test client in; return the page's CSRF token."""
    assert post_login(fresh_client, secret).status_code == 303
    match = re.search(
        r'name="csrf_token" value="([^"]+)"', fresh_client.get("/", headers=HTML).text
    )
    assert match
    return match.group(1)


def case_of(fresh_sessions: sessionmaker[Session], client_id: str) -> DetectionCase:
    with fresh_sessions() as session:
        query = select(DetectionCase).where(DetectionCase.client_id == client_id)
        return session.scalars(query).one()


def card(page: str, case_id: int) -> str:
    start = page.index(f'id="case-{case_id}"')
    return page[start : page.index("</article>", start)]


def test_the_queue_shows_one_card_per_client_with_its_rounds_and_evidence(
    fresh_client: TestClient, fresh_keys: Keys, fresh_sessions: sessionmaker[Session]
) -> None:
    seeded = seed_detected_run(fresh_sessions, num_rounds=3)
    log_in(fresh_client, fresh_keys.viewer)

    page = fresh_client.get("/cases", headers=HTML).text

    assert page.count('<article class="card event case') == 3
    assert 'data-open-cases="3"' in page
    liar = card(page, case_of(fresh_sessions, seeded.clients[2]).id)
    assert "seeded/worker-2 (worker 2)" in liar
    assert "rounds 1 to 3" in liar and "3 events" in liar
    assert "Worker 2 disagreed with workers 0, 1, 3 and 4" in liar  # round 3: 6 was refused
    assert "Latest, also the strongest: round 3" in liar
    assert "does not list them" not in liar  # the agreeing group, read from the round
    assert re.search(r"Agreeing group</dt><dd>workers [0-9, and]+</dd>", liar)
    assert "<code>outside_max_clique</code> ×3" in liar
    forger = card(page, case_of(fresh_sessions, seeded.clients[6]).id)
    assert "signature does not verify" in forger
    assert 'class="review"' not in page  # a viewer gets no forms
    assert 'id="bulk-review"' not in page
    case_id = case_of(fresh_sessions, seeded.clients[2]).id
    record = fresh_client.get(f"/events?status=all&case_id={case_id}", headers=HTML).text
    assert record.count('<article class="card event') == 3
    assert set(re.findall(r'data-worker="(\d+)"', record)) == {"2"}
    assert "of case <a" in record


def test_bulk_confirm_closes_every_open_event_bans_and_the_badge_counts_cases(
    fresh_client: TestClient, fresh_keys: Keys, fresh_sessions: sessionmaker[Session]
) -> None:
    seeded = seed_detected_run(fresh_sessions, num_rounds=3)
    token = log_in(fresh_client, fresh_keys.operator)
    liars = [case_of(fresh_sessions, seeded.clients[w]).id for w in (2, 5)]

    done = fresh_client.post(
        "/cases/review",
        data={
            "csrf_token": token,
            "case_ids": [str(i) for i in liars],
            "decision": "confirm",
            "note": "reversed gradients",
            "back": "/cases?sort=count",
        },
        follow_redirects=False,
    )

    assert done.status_code == 303, done.text
    assert done.headers["location"] == f"/cases?sort=count&reviewed={liars[0]}&reviewed={liars[1]}"
    page = fresh_client.get(done.headers["location"], headers=HTML).text
    flash = page[page.index('data-flash="cases"') :]
    flash = flash[: flash.index("</div>")]
    assert f"Case #{liars[0]}, seeded/worker-2 (worker 2): confirmed by operator-key" in flash
    assert "3 of 3 events closed" in flash
    assert flash.count('data-client-status="banned"') == 2
    assert 'data-open-cases="1"' in page  # worker 6's refusal is left
    assert page.count('<article class="card event case') == 1
    with fresh_sessions() as session:
        closed = session.scalars(
            select(DetectionEvent).where(DetectionEvent.case_id.in_(liars))
        ).all()
        assert len(closed) == 6
        assert {(e.review_status, e.note) for e in closed} == {
            (ReviewStatus.CONFIRMED, "reversed gradients")
        }
        for worker in (2, 5):
            banned = session.get(Client, seeded.clients[worker])
            assert banned is not None and banned.status == ClientStatus.BANNED


def muted_refusals(
    fresh_client: TestClient, fresh_keys: Keys, fresh_sessions: sessionmaker[Session]
) -> tuple[Seeded, str, int]:
    """Two rounds; the refused worker's case dismissed from the page with its kind muted."""
    seeded = seed_detected_run(fresh_sessions, num_rounds=2)
    token = log_in(fresh_client, fresh_keys.operator)
    case_id = case_of(fresh_sessions, seeded.clients[6]).id
    data = {"csrf_token": token, "case_ids": str(case_id), "decision": "dismiss", "mute": "true"}
    assert fresh_client.post("/cases/review", data=data, follow_redirects=False).status_code == 303
    return seeded, token, case_id


def test_dismissing_with_mute_marks_later_events_as_muted_and_by_whom(
    fresh_client: TestClient, fresh_keys: Keys, fresh_sessions: sessionmaker[Session]
) -> None:
    seeded, _, case_id = muted_refusals(fresh_client, fresh_keys, fresh_sessions)
    with fresh_sessions.begin() as session:
        now = datetime(2025, 3, 1, tzinfo=UTC)
        refusal = EventData(
            kind="bad_signature",
            severity=Severity.HIGH,
            worker=6,
            client_id=seeded.clients[6],
            evidence={"reason": "signature does not verify", "round": 3},
        )
        rounds.record_round(
            session, seeded.run_id, RoundData(number=3, started_at=now, finished_at=now), [refusal]
        )

    page = fresh_client.get("/cases?status=dismissed", headers=HTML).text

    shown = card(page, case_id)
    assert "muted by operator-key" in shown
    assert "1 event arrived muted" in shown
    assert 'data-muted-by="operator-key"' in shown
    assert "Arrived dismissed: its kind was muted by operator-key." in shown
    assert "signature does not verify" in shown  # stored, never hidden


def test_the_unmute_button_lifts_the_mute_and_later_events_arrive_open(
    fresh_client: TestClient, fresh_keys: Keys, fresh_sessions: sessionmaker[Session]
) -> None:
    seeded, token, case_id = muted_refusals(fresh_client, fresh_keys, fresh_sessions)
    shown = card(fresh_client.get("/cases?status=dismissed", headers=HTML).text, case_id)
    assert 'data-unmute="bad_signature"' in shown

    unmute = {"csrf_token": token, "kind": "bad_signature", "back": "/cases?status=all"}
    answer = fresh_client.post(f"/cases/{case_id}/unmute", data=unmute, follow_redirects=False)

    assert answer.status_code == 303
    assert answer.headers["location"] == f"/cases?status=all&unmuted={case_id}"
    page = fresh_client.get(answer.headers["location"], headers=HTML).text
    assert f'data-unmuted-case="{case_id}"' in page
    assert "later events of its kinds arrive open" in page
    assert 'data-unmute="bad_signature"' not in card(page, case_id)
    again = fresh_client.post(f"/cases/{case_id}/unmute", data=unmute, headers=HTML)
    assert again.status_code == 409 and "is not muted" in again.text
    with fresh_sessions.begin() as session:
        now = datetime(2025, 3, 1, tzinfo=UTC)
        refusal = EventData(
            kind="bad_signature", severity=Severity.HIGH, worker=6, client_id=seeded.clients[6]
        )
        rounds.record_round(
            session, seeded.run_id, RoundData(number=3, started_at=now, finished_at=now), [refusal]
        )
    assert case_of(fresh_sessions, seeded.clients[6]).open_count == 1


def test_a_hostile_unmute_form_is_4xx_and_a_viewer_cannot_unmute(
    fresh_client: TestClient, fresh_keys: Keys, fresh_sessions: sessionmaker[Session]
) -> None:
    seeded = seed_detected_run(fresh_sessions, num_rounds=1)
    token = log_in(fresh_client, fresh_keys.operator)
    case_id = case_of(fresh_sessions, seeded.clients[6]).id
    for path, data, status in (
        (f"/cases/{case_id}/unmute", {"kind": "DROP TABLE"}, 422),
        (f"/cases/{case_id}/unmute", {"kind": "x" * 65}, 422),
        (f"/cases/{case_id}/unmute", {"note": "a\x00b"}, 422),
        ("/cases/0/unmute", {}, 422),
        (f"/cases/{2**63}/unmute", {}, 422),
        (f"/cases/{2**62}/unmute", {}, 404),
        (f"/cases/{case_id}/unmute", {}, 409),  # nothing muted
    ):
        refused = fresh_client.post(
            path, data={"csrf_token": token, **data}, headers=HTML, follow_redirects=False
        )
        assert refused.status_code == status, (path, data, refused.text)
    fresh_client.post("/logout", data={"csrf_token": token})
    viewer_token = log_in(fresh_client, fresh_keys.viewer)
    viewer = fresh_client.post(
        f"/cases/{case_id}/unmute", data={"csrf_token": viewer_token}, follow_redirects=False
    )
    assert viewer.status_code == 403


@pytest.mark.parametrize(
    "query",
    ["sort=loudness", "order=up", "status=maybe", "offset=-1", "reviewed=0", "kind=DROP%20TABLE"],
)
def test_a_bad_sort_or_filter_is_422_naming_it(
    query: str, fresh_client: TestClient, fresh_keys: Keys
) -> None:
    log_in(fresh_client, fresh_keys.viewer)
    response = fresh_client.get(f"/cases?{query}", headers=HTML)
    assert response.status_code == 422
    assert query.split("=")[0] in response.text


def test_a_form_without_cases_or_with_hostile_ids_is_422_and_a_viewer_is_403(
    fresh_client: TestClient, fresh_keys: Keys, fresh_sessions: sessionmaker[Session]
) -> None:
    seeded = seed_detected_run(fresh_sessions, num_rounds=1)
    token = log_in(fresh_client, fresh_keys.operator)
    case_id = case_of(fresh_sessions, seeded.clients[2]).id
    for ids, said in (
        ([], "select 1 to 100 cases, got 0"),
        (["two"], "case_ids"),
        ([str(case_id), str(case_id)], "repeated"),
        ([str(2**63)], "case_ids"),
    ):
        data = {"csrf_token": token, "case_ids": ids, "decision": "confirm"}
        refused = fresh_client.post(
            "/cases/review", data=data, headers=HTML, follow_redirects=False
        )
        assert refused.status_code == 422, (ids, refused.text)
        assert said in refused.text
    fresh_client.post("/logout", data={"csrf_token": token})
    viewer_token = log_in(fresh_client, fresh_keys.viewer)
    data = {"csrf_token": viewer_token, "case_ids": str(case_id), "decision": "confirm"}
    assert fresh_client.post("/cases/review", data=data, follow_redirects=False).status_code == 403
    with fresh_sessions() as session:
        assert session.get(DetectionCase, case_id).open_count == 1  # type: ignore[union-attr]


def test_with_10000_events_the_queue_page_stays_small(
    fresh_client: TestClient, fresh_keys: Keys, fresh_sessions: sessionmaker[Session]
) -> None:
    evidence = {"summary": "Worker w disagreed with every other replica of its files."}
    with fresh_sessions.begin() as session:
        run_id = runs.create_run(session, name="big", config={}, seed=1).id
        now = datetime(2025, 1, 1, tzinfo=UTC)
        for number in range(1, 101):
            found = [
                EventData(
                    kind="outside_max_clique", severity=Severity.HIGH, worker=w, evidence=evidence
                )
                for w in range(100)
            ]
            data = RoundData(number=number, started_at=now, finished_at=now)
            rounds.record_round(session, run_id, data, found)
    log_in(fresh_client, fresh_keys.viewer)

    page = fresh_client.get("/cases", headers=HTML)

    assert page.status_code == 200
    assert page.text.count('<article class="card event case') == 20
    assert 'data-total="100"' in page.text and 'data-open-cases="100"' in page.text
    assert "100 events" in page.text and "rounds 1 to 100" in page.text
    assert len(page.content) < 120_000, len(page.content)
