"""A round whose largest agreeing groups tied: its notice, its suspects and its dropped files.

Recorded as the coordinator records it (:func:`phalanx.reports.suspects_event`, the round's
:class:`~phalanx.agreement_record.AgreementRecord`), then read through the API and the
dashboard on SQLite and PostgreSQL.
"""

from __future__ import annotations

import re

from sqlalchemy.orm import Session, sessionmaker

from tests.support.factories import Keys, TestClient, post_login
from tests.support.tie_rounds import seed_tie

HTML = {"Accept": "text/html,application/xhtml+xml"}


def test_the_run_page_lists_every_dropped_file_with_its_reason_holders_and_digests(
    fresh_client: TestClient, fresh_keys: Keys, fresh_sessions: sessionmaker[Session]
) -> None:
    run_id, dropped = seed_tie(fresh_sessions)
    assert post_login(fresh_client, fresh_keys.viewer).status_code == 303
    page = fresh_client.get(f"/runs/{run_id}", headers=HTML).text

    section = page[page.index('class="card dropped"') :]
    section = " ".join(section[: section.index("</section>")].split())
    assert f'data-dropped="{len(dropped)}"' in section
    assert {int(f) for f in re.findall(r'<tr data-file="(\d+)">', section)} == dropped
    assert "its replicas disagreed" in section and "only suspects of a tie sent it" in section
    assert "Suspects of the round's tie: workers 0, 1, 2 and 3" in section
    assert section.count("worker 0: <code>") >= 1
    # The tie itself is listed among the round's events, as the round's, not a worker's.
    assert "The round</strong>" in page and "largest agreeing groups tied" in page


def test_the_tie_notice_is_reviewable_as_medium_severity_and_bans_nobody(
    fresh_client: TestClient, fresh_keys: Keys, fresh_sessions: sessionmaker[Session]
) -> None:
    run_id, _ = seed_tie(fresh_sessions)
    listed = fresh_client.get(
        "/api/v1/events",
        params={"run_id": run_id, "evidence": "full"},
        headers=fresh_keys.headers("viewer"),
    ).json()["items"]
    (notice,) = listed
    assert (notice["kind"], notice["severity"], notice["worker"]) == ("tied_groups", "medium", None)
    assert notice["evidence"]["suspects"] == [0, 1, 2, 3]

    assert post_login(fresh_client, fresh_keys.viewer).status_code == 303
    queue = fresh_client.get("/events", params={"run_id": run_id}, headers=HTML).text
    assert "Round 1: Largest agreeing groups tied" in queue and "sev-medium" in queue
    assert "Suspects" in queue and "workers 0, 1, 2 and 3" in queue

    reviewed = fresh_client.post(
        f"/api/v1/events/{notice['id']}/review",
        json={"decision": "confirm"},
        headers=fresh_keys.headers("operator"),
    )
    assert reviewed.status_code == 200, reviewed.text
    assert reviewed.json()["client_banned"] is False
