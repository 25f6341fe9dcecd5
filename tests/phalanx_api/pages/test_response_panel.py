"""The run page's Response times panel, and a review queue that slowness leaves empty.

Recorded as the recorder records them, read on SQLite and PostgreSQL. The straggler's
client carries a hostile name, which the page shows as text.
"""

from __future__ import annotations

import html
import re

from markupsafe import escape
from sqlalchemy.orm import Session, sessionmaker

from phalanx.response_times import WorkerResponse
from phalanx.store import RoundData, rounds, runs
from phalanx_api.pages.response_panel import SHOWN
from tests.support.factories import Keys, TestClient, post_login
from tests.support.response_rounds import HOSTILE_NAME, seed_timed_run
from tests.support.store_rows import T0

HTML = {"Accept": "text/html,application/xhtml+xml"}


def section_of(page: str, css_class: str) -> str:
    """The ``<section class="card {css_class}" ...>`` of a page, whitespace collapsed."""
    start = page.index(f'class="card {css_class}"')
    return " ".join(page[start : page.index("</section>", start)].split())


def test_the_run_page_names_the_slow_workers_in_words_apart_from_detection(
    fresh_client: TestClient, fresh_keys: Keys, fresh_sessions: sessionmaker[Session]
) -> None:
    timed = seed_timed_run(fresh_sessions)
    assert post_login(fresh_client, fresh_keys.viewer).status_code == 303

    page = fresh_client.get(f"/runs/{timed.run_id}", headers=HTML).text

    panel = section_of(page, "responses")
    assert 'data-responses="6" data-slow="2"' in panel
    assert "the run's median response is <strong data-median>2.0 s</strong>" in panel
    assert "in seconds of the simulated clock" in panel
    escaped = str(escape(HOSTILE_NAME))
    assert f'<li data-slow-worker="4"><strong>Worker 4</strong> ({escaped}) took' in panel
    words = html.unescape(panel)
    assert (
        f"Worker 4</strong> ({HOSTILE_NAME}) took at least 3 times the run's median response in "
        "5 of its 5 rounds (late in 5); its median response is 40.3 s against the run's 2.0 s."
    ) in words
    assert "Worker 5</strong> (timed-worker-5) sent no reply in 5 of its 5 rounds." in words
    assert "Slow is not lying" in panel and "never enters the review queue" in panel
    # Slowest first: the slow workers, then by p90; one that never replied is the slowest.
    assert re.findall(r'<tr data-worker="(\d+)"', panel) == ["5", "4", "3", "2", "1", "0"]
    assert re.findall(r'<tr data-worker="(\d+)" class="slow"', panel) == ["5", "4"]
    assert "<script>" not in page.replace('<script src="/static/live.js" defer></script>', "")
    assert escaped in page
    # Nothing about it among the flags or events of the round.
    assert 'ul class="latest"' not in page


def test_a_deployed_runs_times_are_real_seconds_and_its_missing_replies_said_so(
    fresh_client: TestClient, fresh_keys: Keys, fresh_sessions: sessionmaker[Session]
) -> None:
    timed = seed_timed_run(fresh_sessions, simulated=False)
    assert post_login(fresh_client, fresh_keys.viewer).status_code == 303

    panel = section_of(fresh_client.get(f"/runs/{timed.run_id}", headers=HTML).text, "responses")

    assert "simulated" not in panel
    assert "in seconds since its task went out" in panel
    assert "it never did while the run went on" in panel


def test_the_live_panels_carry_the_response_times_too(
    fresh_client: TestClient, fresh_keys: Keys, fresh_sessions: sessionmaker[Session]
) -> None:
    timed = seed_timed_run(fresh_sessions, num_rounds=2)
    assert post_login(fresh_client, fresh_keys.viewer).status_code == 303

    panels = fresh_client.get(f"/runs/{timed.run_id}/panels", headers=HTML).text

    # Two rounds are too few to call anyone slow.
    assert 'data-responses="6" data-slow="0"' in section_of(panels, "responses")
    assert "slow-workers" not in panels


def test_a_run_whose_rounds_were_not_timed_has_no_response_panel(
    fresh_client: TestClient, fresh_keys: Keys, fresh_sessions: sessionmaker[Session]
) -> None:
    with fresh_sessions.begin() as session:
        run_id = runs.create_run(session, name="untimed", config={"rounds": 1}, seed=1).id
        rounds.record_round(session, run_id, RoundData(number=1, started_at=T0, finished_at=T0))
        queued = runs.create_run(session, name="queued", config={}, seed=1).id
    assert post_login(fresh_client, fresh_keys.viewer).status_code == 303

    for shown in (run_id, queued):
        page = fresh_client.get(f"/runs/{shown}", headers=HTML)
        assert page.status_code == 200
        assert "Response times" not in page.text and "card responses" not in page.text


def test_a_wide_run_lists_its_slowest_workers_and_points_to_the_api_for_the_rest(
    fresh_client: TestClient, fresh_keys: Keys, fresh_sessions: sessionmaker[Session]
) -> None:
    with fresh_sessions.begin() as session:
        run_id = runs.create_run(session, name="wide", config={"rounds": 3}, seed=1).id
        for t in range(1, 4):
            rounds.record_round(
                session,
                run_id,
                RoundData(number=t, started_at=T0, finished_at=T0),
                responses=[WorkerResponse(w, 1.0 + w / 100, "kept") for w in range(400)],
            )
    assert post_login(fresh_client, fresh_keys.viewer).status_code == 303

    panel = section_of(fresh_client.get(f"/runs/{run_id}", headers=HTML).text, "responses")

    workers = [int(w) for w in re.findall(r'<tr data-worker="(\d+)"', panel)]
    assert workers == list(range(399, 399 - SHOWN, -1))
    assert f"The {SHOWN} slowest of 400 workers are listed" in panel
    assert f"GET /api/v1/runs/{run_id}/responses" in panel


def test_slowness_leaves_the_review_queue_empty(
    fresh_client: TestClient, fresh_keys: Keys, fresh_sessions: sessionmaker[Session]
) -> None:
    timed = seed_timed_run(fresh_sessions)
    assert post_login(fresh_client, fresh_keys.viewer).status_code == 303

    queue = fresh_client.get("/events", params={"run_id": timed.run_id}, headers=HTML).text

    assert "data-event" not in queue and "Worker 4" not in queue
