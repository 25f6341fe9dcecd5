"""The dashboard's pages and forms over HTTP, on SQLite and on PostgreSQL (no browser).

The run is seeded with rounds whose events carry real detection evidence
(:func:`phalanx.detection.detect` on replicas of an STS(7) assignment with two
colluding liars) and a refused reply, recorded through the store like the
coordinator records them.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import torch
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from phalanx import identity
from phalanx.agreement_record import AgreementRecord
from phalanx.assignment import Assignment
from phalanx.detection import Replica, detect, payload_digest
from phalanx.event_kinds import EventKind
from phalanx.store import (
    AuditEntry,
    Client,
    ClientStatus,
    DetectionEvent,
    ReviewStatus,
    RoundData,
    rounds,
    runs,
)
from phalanx.store import dashboard as queries
from phalanx_api.main import create_app
from phalanx_api.settings import ApiSettings
from tests.support.factories import (
    Keys,
    TestClient,
    make_keys,
    post_login,
    register,
    register_and_prove,
    seed_client,
    seed_run,
    settings_for,
)
from tests.support.flagged_runs import Seeded, seed_detected_run

HTML = {"Accept": "text/html,application/xhtml+xml"}


@pytest.fixture
def settings(migrated_url: str, tmp_path: Path) -> ApiSettings:
    return settings_for(migrated_url, tmp_path / "data")


@pytest.fixture
def client(settings: ApiSettings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as test_client:
        yield test_client


@pytest.fixture
def sessions(client: TestClient) -> sessionmaker[Session]:
    factory: sessionmaker[Session] = client.app.state.phalanx.sessions  # type: ignore[attr-defined]
    return factory


@pytest.fixture
def seeded(sessions: sessionmaker[Session]) -> Seeded:
    return seed_detected_run(sessions)


@pytest.fixture
def keys_(sessions: sessionmaker[Session]) -> Keys:
    return make_keys(sessions)


def log_in(client: TestClient, secret: str) -> str:
    """Log the test client in; return the page's CSRF token."""
    response = post_login(client, secret)
    assert response.status_code == 303, response.text
    page = client.get("/", headers=HTML)
    match = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert match, "every page carries the logout form's CSRF token"
    return match.group(1)


# ------------------------------------------------------------------ access


@pytest.mark.parametrize("path", ["/", "/clients", "/events", "/runs/{run}", "/overview/panels"])
def test_without_a_session_a_browser_goes_to_login_and_a_script_gets_401(
    path: str, client: TestClient, seeded: Seeded
) -> None:
    path = path.format(run=seeded.run_id)
    page = client.get(path, headers=HTML, follow_redirects=False)
    assert page.status_code == 303
    assert page.headers["location"] == "/login?next=" + path.replace("/", "%2F")
    script = client.get(path, follow_redirects=False)
    assert script.status_code == 401
    assert script.json() == {"detail": "log in to see the dashboard"}


def test_pages_forbid_inline_script_and_load_only_their_own_files(
    client: TestClient, keys_: Keys, seeded: Seeded
) -> None:
    log_in(client, keys_.viewer)
    page = client.get(f"/runs/{seeded.run_id}", headers=HTML)
    assert page.status_code == 200
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert "<script>" not in page.text and "onclick" not in page.text
    assets = set(re.findall(r'(?:src|href)="(/static/[^"]+)"', page.text))
    assert assets == {"/static/phalanx.css", "/static/favicon.svg", "/static/live.js"}
    for asset in assets:
        assert client.get(asset).status_code == 200, asset
    assert not re.search(r'(?:src|href)="(?:https?:)?//', page.text)  # nothing off-site


def test_docs_load_swagger_ui_from_this_server(client: TestClient) -> None:
    docs = client.get("/docs")
    assert docs.status_code == 200
    assert "cdn" not in docs.text.lower()
    assets = set(re.findall(r"""['"](/static/vendor/swagger-ui/[^'"]+)['"]""", docs.text))
    assert {a.rsplit("/", 1)[1] for a in assets} == {
        "swagger-ui-bundle.js",
        "swagger-ui.css",
        "favicon-32x32.png",
    }
    for asset in assets:
        assert client.get(asset).status_code == 200, asset


def test_errors_are_pages_for_browsers_and_json_for_the_api(
    client: TestClient, keys_: Keys
) -> None:
    log_in(client, keys_.viewer)
    missing = "00000000-0000-4000-8000-000000000000"
    page = client.get(f"/runs/{missing}", headers=HTML)
    assert page.status_code == 404
    assert page.headers["content-type"].startswith("text/html")
    assert f"run &#39;{missing}&#39; not found" in page.text
    assert 'data-error-status="404"' in page.text
    api = client.get(f"/api/v1/runs/{missing}", headers=HTML)
    assert api.status_code == 404 and api.json()["detail"]


# ---------------------------------------------------------------- overview


def test_the_overview_shows_runs_with_latest_accuracy_and_the_open_cases(
    client: TestClient, keys_: Keys, seeded: Seeded
) -> None:
    log_in(client, keys_.viewer)
    page = client.get("/", headers=HTML).text
    row = page[page.index(f'data-run="{seeded.run_id}"') :]
    row = row[: row.index("</tr>")]
    assert "70.0%" in row  # round 2's accuracy
    assert "2 / 5 rounds" in row
    # 2 + 2 flags and 1 refusal: the cases of 3 clients
    assert f'href="/cases?run_id={seeded.run_id}">3</a>' in row
    assert 'data-open-cases="3"' in page


# ---------------------------------------------------------------- run page


def test_the_run_page_draws_curves_flags_and_the_last_agreement_graph(
    client: TestClient, keys_: Keys, seeded: Seeded
) -> None:
    log_in(client, keys_.viewer)
    page = client.get(f"/runs/{seeded.run_id}", headers=HTML).text
    accuracy = page[page.index('data-chart="accuracy"') :]
    accuracy = accuracy[: accuracy.index("</figure>")]
    assert re.findall(r'data-round="(\d+)" data-value="([\d.]+)"', accuracy) == [
        ("1", "0.5"),
        ("2", "0.7"),
    ]
    assert page.count('<rect class="mark flag"') == 4  # two liars in two rounds
    assert page.count('<rect class="mark refused"') == 1
    graph = page[page.index('data-graph-round="2"') :]
    graph = graph[: graph.index("</figure>")]
    assert 'data-flagged="2,5"' in graph
    assert re.findall(r'data-worker="(\d)" data-state="(\w+)"', graph) == [
        ("0", "trusted"),
        ("1", "trusted"),
        ("2", "flagged"),
        ("3", "trusted"),
        ("4", "trusted"),
        ("5", "flagged"),
        ("6", "rejected"),
    ]
    assert "reply refused (1)" in graph
    assert re.findall(r'data-a="(\d)" data-b="(\d)" data-state="disagree"', graph) == [
        ("0", "2"),
        ("0", "5"),
        ("1", "2"),
        ("1", "5"),
        ("2", "3"),
        ("2", "4"),
        ("3", "5"),
        ("4", "5"),
    ]
    assert "Worker 2: flagged; agreed with 1 of 5 others" in graph  # 6 was not compared
    assert "adversaries caught" not in page  # no summary until the run ends
    assert 'id="run-live"' in page and 'data-terminal="false"' in page


def test_the_run_page_draws_the_graph_stored_with_the_round(
    client: TestClient, keys_: Keys, sessions: sessionmaker[Session]
) -> None:
    # Tied groups: {0, 1, 4, 5} and {2, 3, 4, 5}; only 6 is flagged, yet 0 and 2 disagreed.
    # No event names them: only the stored graph can tell.
    assignment = Assignment(num_workers=7, files=tuple(itertools.combinations(range(7), 2)))
    replicas = []
    for f, (a, b) in enumerate(assignment.files):
        honest = torch.randn(8, generator=torch.Generator().manual_seed(f))
        for w, other in ((a, b), (b, a)):
            lies = w == 6 or (w in (0, 1) and other in (2, 3))
            value = (-honest + w if lies else honest).to(torch.float32)
            replicas.append(Replica(w, f, value, payload_digest(value.numpy().tobytes())))
    verdict = detect(assignment, replicas)
    assert verdict.rule == "unanimity" and verdict.flagged == {6}
    run_id = _seed_round(sessions, AgreementRecord.from_verdict(verdict).to_dict())
    log_in(client, keys_.viewer)

    graph = _graph(client.get(f"/runs/{run_id}", headers=HTML).text, 1)

    assert 'data-flagged="6"' in graph and 'data-drawing="full"' in graph
    assert 'data-a="0" data-b="2" data-state="disagree"' in graph
    assert 'data-a="0" data-b="4" data-state="agree"' in graph
    assert "2 groups of agreeing workers tied for largest" in graph


def test_a_round_recorded_before_graphs_were_stored_says_so_on_the_run_page(
    client: TestClient, keys_: Keys, sessions: sessionmaker[Session]
) -> None:
    run_id = _seed_round(sessions, None)
    log_in(client, keys_.viewer)

    graph = _graph(client.get(f"/runs/{run_id}", headers=HTML).text, 1)

    assert 'data-drawing="unrecorded"' in graph and "<svg" not in graph
    assert "comparisons were not recorded" in graph


def _seed_round(sessions: sessionmaker[Session], agreement: dict[str, object] | None) -> str:
    """A run with one round of 7 workers, no events, and ``agreement`` stored with it."""
    now = datetime(2025, 1, 1, tzinfo=UTC)
    config = {"name": "one", "rounds": 2, "assignment": {"scheme": "subsets", "num_workers": 7}}
    with sessions.begin() as session:
        run = runs.create_run(session, name="one", config=config, seed=1)
        data = RoundData(
            number=1,
            started_at=now,
            finished_at=now,
            assignment={"scheme": "subsets", "num_workers": 7, "r": 2},
            agreement=agreement,
        )
        rounds.record_round(session, run.id, data)
        return run.id


def _graph(page: str, round_number: int) -> str:
    graph = page[page.index(f'data-graph-round="{round_number}"') :]
    return graph[: graph.index("</figure>")]


def test_the_progress_endpoint_tells_the_page_when_to_redraw(
    client: TestClient, keys_: Keys, seeded: Seeded, sessions: sessionmaker[Session]
) -> None:
    log_in(client, keys_.viewer)
    progress = client.get(f"/runs/{seeded.run_id}/progress").json()
    assert {k: progress[k] for k in ("status", "current_round", "rounds", "terminal")} == {
        "status": "running",
        "current_round": 2,
        "rounds": 5,
        "terminal": False,
    }
    assert progress["open_cases"] == 3  # the clients of workers 2, 5 and 6
    panels = client.get(f"/runs/{seeded.run_id}/panels", headers=HTML)
    assert panels.status_code == 200
    assert "<html" not in panels.text and 'data-chart="accuracy"' in panels.text


def test_an_operator_cancels_a_running_run_from_its_page(
    client: TestClient, keys_: Keys, seeded: Seeded, sessions: sessionmaker[Session]
) -> None:
    token = log_in(client, keys_.operator)
    assert 'action="/runs/' in client.get(f"/runs/{seeded.run_id}", headers=HTML).text
    done = client.post(
        f"/runs/{seeded.run_id}/cancel", data={"csrf_token": token}, follow_redirects=False
    )
    assert done.status_code == 303
    with sessions() as session:
        assert runs.get_run(session, seeded.run_id).cancel_requested


# ------------------------------------------------------------------- clients


def test_simulated_workers_are_counted_on_their_run_page_not_listed_as_clients(
    client: TestClient, keys_: Keys, sessions: sessionmaker[Session]
) -> None:
    run_id = seed_run(sessions, name="quick")
    with sessions.begin() as session:
        seed_client(session, "lab-machine")
        for worker in range(3):
            seed_client(session, f"quick/worker-{worker}", run_id=run_id)
    log_in(client, keys_.viewer)

    run_page = client.get(f"/runs/{run_id}", headers=HTML).text
    clients_page = client.get("/clients", headers=HTML).text
    workers_page = client.get(f"/clients?run_id={run_id}", headers=HTML).text

    assert 'data-simulated-workers="3"' in run_page
    assert f'<a href="/clients?run_id={run_id}">3 simulated workers</a>' in run_page
    assert "lab-machine" in clients_page and "quick/worker-" not in clients_page
    assert "data-simulated-note" in clients_page
    assert f'data-run-workers="{run_id}"' in workers_page
    assert workers_page.count('<tr data-client="') == 3 and "lab-machine" not in workers_page
    assert "Workers of run quick" in workers_page
    assert client.get("/clients?run_id=x", headers=HTML).status_code == 422


def test_clients_show_their_events_and_operators_change_their_status(
    client: TestClient, keys_: Keys, seeded: Seeded, sessions: sessionmaker[Session]
) -> None:
    token = log_in(client, keys_.operator)
    page = client.get("/clients", headers=HTML).text
    liar = seeded.clients[2]
    row = page[page.index(f'data-client="{liar}"') :]
    row = row[: row.index("</tr>")]
    assert "2 open / 2</a>" in row
    assert re.findall(r'data-action="(\w+)"', row) == ["suspend", "ban"]

    refused = client.post(f"/clients/{liar}/ban", data={}, headers=HTML, follow_redirects=False)
    assert refused.status_code == 403 and "CSRF" in refused.text
    banned = client.post(
        f"/clients/{liar}/ban",
        data={"csrf_token": token, "reason": "reversed gradients", "back": "/clients"},
        follow_redirects=False,
    )
    assert banned.status_code == 303
    assert banned.headers["location"] == f"/clients?changed={liar}"
    shown = client.get(banned.headers["location"], headers=HTML).text
    assert 'data-flash="client"' in shown and 'data-status="banned"' in shown
    with sessions() as session:
        assert session.get(Client, liar).status == ClientStatus.BANNED  # type: ignore[union-attr]
        entry = session.scalars(select(AuditEntry).where(AuditEntry.action == "client.ban")).one()
        assert entry.details is not None and entry.details["reason"] == "reversed gradients"

    again = client.post(
        f"/clients/{liar}/ban", data={"csrf_token": token}, headers=HTML, follow_redirects=False
    )
    assert again.status_code == 409 and "it is banned" in again.text


def test_an_unproven_registration_is_marked_and_offers_no_approval(
    client: TestClient, keys_: Keys
) -> None:
    key = identity.generate_private_key("P-256")
    unproven = register(client, key)
    proven = register_and_prove(client)
    log_in(client, keys_.operator)
    page = client.get("/clients?status=pending", headers=HTML).text

    def row(client_id: str) -> str:
        found = page[page.index(f'data-client="{client_id}"') :]
        return found[: found.index("</tr>")]

    assert "key not proven yet" in row(unproven["id"])
    assert re.findall(r'data-action="(\w+)"', row(unproven["id"])) == ["suspend", "ban"]
    assert "key not proven yet" not in row(proven)
    assert "data-proven" in row(proven) and "key proven" in row(proven)
    assert "data-proven" not in row(unproven["id"])
    assert re.findall(r'data-action="(\w+)"', row(proven)) == ["approve", "suspend", "ban"]


def test_a_viewer_gets_no_buttons_and_cannot_post_the_forms(
    client: TestClient, keys_: Keys, seeded: Seeded
) -> None:
    token = log_in(client, keys_.viewer)
    assert "data-action=" not in client.get("/clients", headers=HTML).text
    assert 'class="review"' not in client.get("/events", headers=HTML).text
    refused = client.post(
        f"/clients/{seeded.clients[2]}/ban", data={"csrf_token": token}, follow_redirects=False
    )
    assert refused.status_code == 403


# -------------------------------------------------------------- review queue


def test_the_queue_explains_each_event_in_words(
    client: TestClient, keys_: Keys, seeded: Seeded
) -> None:
    log_in(client, keys_.viewer)
    page = client.get("/events", headers=HTML).text
    assert page.count('<article class="card event') == 5
    assert "Worker 2 disagreed with workers 0, 1, 3, 4 and 6" in page
    assert "worker 2 sent the same update as worker 5" in page
    assert "The coordinator refused worker 6&#39;s reply: signature does not verify." in page
    assert "Reply signature did not verify" in page


def test_confirming_an_event_bans_its_client_and_the_queue_says_so(
    client: TestClient, keys_: Keys, seeded: Seeded, sessions: sessionmaker[Session]
) -> None:
    token = log_in(client, keys_.operator)
    with sessions() as session:
        event = session.scalars(
            select(DetectionEvent).where(DetectionEvent.worker == 5).order_by(DetectionEvent.id)
        ).first()
        assert event is not None
    reviewed = client.post(
        f"/events/{event.id}/review",
        data={"csrf_token": token, "decision": "confirm", "note": "lies", "back": "/events"},
        follow_redirects=False,
    )
    assert reviewed.status_code == 303
    assert reviewed.headers["location"] == f"/events?reviewed={event.id}"
    page = client.get(reviewed.headers["location"], headers=HTML).text
    flash = page[page.index('data-flash="review"') :]
    flash = flash[: flash.index("</p>")]
    assert f"Event #{event.id} confirmed by operator-key" in flash
    assert 'data-client-status="banned"' in flash
    assert "It has 1 more open event." in flash
    with sessions() as session:
        stored = session.get(DetectionEvent, event.id)
        assert stored is not None and stored.review_status == ReviewStatus.CONFIRMED
        assert stored.note == "lies"
        assert session.get(Client, seeded.clients[5]).status == ClientStatus.BANNED  # type: ignore[union-attr]

    twice = client.post(
        f"/events/{event.id}/review",
        data={"csrf_token": token, "decision": "dismiss"},
        headers=HTML,
        follow_redirects=False,
    )
    assert twice.status_code == 409 and "already confirmed" in twice.text


def test_dismissing_keeps_the_client_and_the_filters_narrow_the_queue(
    client: TestClient, keys_: Keys, seeded: Seeded, sessions: sessionmaker[Session]
) -> None:
    token = log_in(client, keys_.operator)
    with sessions() as session:
        refusal = session.scalars(
            select(DetectionEvent).where(DetectionEvent.kind == EventKind.BAD_SIGNATURE)
        ).one()
    back = f"/events?status=open&kind=bad_signature&run_id={seeded.run_id}"
    done = client.post(
        f"/events/{refusal.id}/review",
        data={"csrf_token": token, "decision": "dismiss", "back": back},
        follow_redirects=False,
    )
    assert done.headers["location"] == f"{back}&reviewed={refusal.id}"
    page = client.get(done.headers["location"], headers=HTML).text
    assert "Nothing to review" in page  # the only open refusal is gone
    assert 'data-client-status="approved"' in page
    dismissed = client.get("/events?status=dismissed", headers=HTML).text
    assert dismissed.count('<article class="card event') == 1


# ----------------------------------------------------------- store queries


def test_dashboard_queries_answer_for_many_rows_at_once(
    sessions: sessionmaker[Session], seeded: Seeded
) -> None:
    other = seed_detected_run(sessions, num_rounds=1)
    with sessions() as session:
        latest = queries.latest_rounds(session, [seeded.run_id, other.run_id, "missing"])
        assert {k: v.number for k, v in latest.items()} == {seeded.run_id: 2, other.run_id: 1}
        counts = queries.event_counts_by_client(session, seeded.clients)
        assert [counts[c].total for c in seeded.clients] == [0, 0, 2, 0, 0, 2, 1]
        assert counts[seeded.clients[2]].open == 2
        flagged = queries.flagged_workers(session, seeded.run_id)
        assert [(f.round, f.worker) for f in flagged] == [(1, 2), (1, 5), (2, 2), (2, 5), (2, 6)]
        assert queries.open_events_by_run(session, [seeded.run_id, other.run_id]) == {
            seeded.run_id: 5,
            other.run_id: 3,  # two flags and the refusal of its only round
        }
        assert queries.run_names(session, [seeded.run_id]) == {seeded.run_id: "seeded"}
        assert set(queries.clients_by_id(session, seeded.clients[:2])) == set(seeded.clients[:2])
        assert queries.latest_rounds(session, []) == {}
