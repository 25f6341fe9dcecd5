"""The clients page's response times: each client's latest timed run, p90, late, slow.

Recorded as the recorder records them, read on SQLite and PostgreSQL.
"""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from tests.support.factories import Keys, TestClient, post_login
from tests.support.response_rounds import seed_timed_run

HTML = {"Accept": "text/html,application/xhtml+xml"}


def test_the_clients_page_shows_each_clients_latest_timed_run_and_whether_it_was_slow(
    fresh_client: TestClient, fresh_keys: Keys, fresh_sessions: sessionmaker[Session]
) -> None:
    timed = seed_timed_run(fresh_sessions, name="first")
    assert post_login(fresh_client, fresh_keys.viewer).status_code == 303

    page = fresh_client.get("/clients", headers=HTML).text

    def cell(worker: int) -> str:
        row = page[page.index(f'<tr data-client="{timed.clients[worker]}"') :]
        row = row[: row.index("</tr>")]
        return " ".join(row[row.index('<td class="responses"') :].split())

    straggler, quick, absent = cell(4), cell(0), cell(5)
    assert f'data-responses-run="{timed.run_id}"' in straggler
    assert "p90 40.5 s</span> · 5 late" in straggler and 'class="tag slow-tag"' in straggler
    assert 'title="Worker 4 took at least 3 times the run&#39;s median' in straggler
    assert f'<a href="/runs/{timed.run_id}">first</a>' in straggler
    assert "p90 1.0 s</span> · 0 late" in quick and "slow-tag" not in quick
    assert "p90 –</span> · 0 late · 5 missing" in absent
    assert "slow-tag" in absent
    assert "<script>" not in page.split("</main>")[0]
