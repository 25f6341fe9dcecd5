"""An operator's journey in headless Chromium, against the real app and a real run.

The app runs under uvicorn on a SQLite database. The run is a real federation
(7 workers on digits, 2 of them reversed-gradient adversaries, 3 rounds) run
in-process while the browser watches its page, so the rounds, the flags and
their evidence are what the coordinator wrote. The operator logs in with an API
key, watches the run page fill in without reloading, checks the accuracy chart
and the agreement graph, confirms a flagged worker's case in the review queue
(every event of its client in the run) and sees its client banned
(``PHALANX_BAN_ON_CONFIRM=true``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from phalanx.agreement_record import AgreementRecord
from phalanx.config import RunConfig
from phalanx.data import load_dataset
from phalanx.event_kinds import FLAG_KINDS
from phalanx.roster import SimulatedRoster, simulated_roster
from phalanx.runs.executor import execute
from phalanx.runs.recorder import claimer_name, create_simulated_run
from phalanx.store import (
    AuditEntry,
    Client,
    ClientStatus,
    DetectionCase,
    DetectionEvent,
    ReviewStatus,
    Role,
    Round,
    Run,
    RunStatus,
    keys,
    make_engine,
    migrate,
    rounds,
    session_factory,
)
from phalanx_clients.behaviour import RedTeam
from phalanx_clients.inprocess import InProcessTransport
from phalanx_clients.worker import Worker
from tests.support.browser import ARTIFACTS, serve
from tests.support.ci import in_ci
from tests.support.configs import small_config

try:
    from playwright.sync_api import Browser, Page, expect
except ImportError:  # without Playwright: skipped locally, an error under CI
    if in_ci():
        raise
    pytest.skip("Playwright is not installed: pip install playwright", allow_module_level=True)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

#: Bound on the federation's three rounds, however slow the machine.
RUN_TIMEOUT_S = 900
#: The CSS colours of the graph's nodes (phalanx.css: --flagged and --trusted).
FLAGGED_FILL = "rgb(198, 40, 40)"
TRUSTED_FILL = "rgb(47, 138, 95)"


def _transport(config: RunConfig, run_id: str) -> InProcessTransport:
    train = load_dataset(config.data.dataset, "train")
    team = RedTeam.from_config(config)
    return InProcessTransport(
        {
            i.worker: Worker(
                config=config,
                train_set=train,
                client_id=i.client_id,
                private_key=i.private_key,
                behaviour=team.behaviour_of(i.worker) if team else None,
            )
            for i in simulated_roster(run_id, config.assignment.num_workers)
        }
    )


@dataclass
class Federation:
    """A real run recorded in the database, run in a thread while the browser watches."""

    sessions: sessionmaker[Session]
    config: RunConfig
    run_id: str
    checkpoint_dir: Path
    thread: threading.Thread | None = None
    errors: list[BaseException] = field(default_factory=list)

    def start(self) -> None:
        """Start the run (once)."""
        if self.thread is not None:
            return
        claimer = claimer_name()

        def run() -> None:
            try:
                execute(
                    self.sessions,
                    self.run_id,
                    roster=SimulatedRoster(self.run_id),
                    claimer=claimer,
                    checkpoint_dir=self.checkpoint_dir,
                    transport=_transport(self.config, self.run_id),
                )
            except BaseException as exc:
                self.errors.append(exc)

        self.thread = threading.Thread(target=run, name="federation", daemon=True)
        self.thread.start()

    def wait(self) -> None:
        """Start the run if needed and wait for it to finish."""
        self.start()
        assert self.thread is not None
        self.thread.join(RUN_TIMEOUT_S)
        assert not self.thread.is_alive(), f"the run took more than {RUN_TIMEOUT_S} s"
        assert not self.errors, f"the run failed: {self.errors[0]!r}"


@dataclass(frozen=True)
class World:
    base_url: str
    federation: Federation
    operator_key: str
    viewer_key: str

    @property
    def sessions(self) -> sessionmaker[Session]:
        return self.federation.sessions

    @property
    def run_id(self) -> str:
        return self.federation.run_id


@pytest.fixture(scope="module")
def world(chromium: Browser, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """A migrated SQLite database with a run that has not started its rounds, and the app.

    Needs the browser first, so that nothing starts when Chromium is missing.
    """
    root = tmp_path_factory.mktemp("dashboard")
    url = f"sqlite:///{root}/phalanx.db"
    migrate.upgrade(url)
    engine = make_engine(url)
    sessions = session_factory(engine)
    config = small_config(rounds=3, name="digits-demo")
    run_id = create_simulated_run(sessions, config, claimer_name())
    with sessions.begin() as session:
        operator = keys.create_key(session, name="alice", role=Role.OPERATOR).secret
        viewer = keys.create_key(session, name="victor", role=Role.VIEWER).secret
    federation = Federation(sessions, config, run_id, root / "checkpoints")
    (root / "data").mkdir()
    with serve(url, root / "data", ban_on_confirm="true") as base_url:
        yield World(base_url, federation, operator, viewer)
        if federation.thread is not None:
            federation.thread.join(RUN_TIMEOUT_S)
    engine.dispose()


@pytest.fixture
def page(chromium: Browser) -> Iterator[Page]:
    """A fresh browser tab (own cookies) at a laptop's width; fails the test on page errors."""
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    problems: list[str] = []
    tab.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    tab.on(
        "console",
        lambda message: (
            problems.append(f"console: {message.text}") if message.type == "error" else None
        ),
    )
    yield tab
    context.close()
    assert not problems, problems


def _log_in(page: Page, world: World, secret: str, path: str = "/") -> None:
    page.goto(world.base_url + path)
    expect(page).to_have_url(f"{world.base_url}/login?next={path.replace('/', '%2F')}")
    page.fill("#api_key", secret)
    page.click("form[action='/login'] button[type=submit]")
    expect(page).to_have_url(world.base_url + path)


def _flagged_in_round(session: Session, run_id: str, number: int) -> set[int]:
    rows = session.scalars(
        select(DetectionEvent.worker).where(
            DetectionEvent.run_id == run_id,
            DetectionEvent.round == number,
            DetectionEvent.kind.in_(FLAG_KINDS),
        )
    )
    return {w for w in rows if w is not None}


def _assert_no_horizontal_scroll(page: Page, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"{page.url} scrolls sideways by {overflow}px at {width}px"


def test_an_operator_watches_a_run_then_confirms_a_flag_and_the_client_is_banned(
    world: World, page: Page
) -> None:
    run_path = f"/runs/{world.run_id}"

    # Logged out, the run page sends the operator to the login form and back.
    _log_in(page, world, world.operator_key, run_path)
    live = page.locator("#run-live")
    expect(live).to_have_attribute("data-status", "running")
    expect(live).to_have_attribute("data-round", "0")
    expect(page.locator("figure[data-chart=accuracy] .empty")).to_be_visible()

    # The run starts; the open page follows it to the end without reloading.
    page.evaluate("window.__stillTheSamePage = true")
    world.federation.start()
    expect(live).to_have_attribute("data-status", "succeeded", timeout=RUN_TIMEOUT_S * 1000)
    assert page.evaluate("window.__stillTheSamePage === true")
    world.federation.wait()
    expect(page.locator("[data-rounds-done]")).to_have_text("3")
    expect(page.locator(".run-head .badge")).to_have_text("succeeded")
    with world.sessions() as session:
        opened = session.scalars(select(DetectionCase.id)).all()
    expect(page.locator(".bar [data-open-cases]")).to_have_text(str(len(opened)))

    with world.sessions() as session:
        run = session.get(Run, world.run_id)
        assert run is not None and run.status == RunStatus.SUCCEEDED
        stored = session.scalars(
            select(Round).where(Round.run_id == world.run_id).order_by(Round.number)
        ).all()
        flagged_last = _flagged_in_round(session, world.run_id, 3)
        graph_last = AgreementRecord.from_dict(rounds.get_agreement(session, world.run_id, 3))
    assert [r.number for r in stored] == [1, 2, 3]
    assert len(flagged_last) == 2  # the two adversaries, caught in the last round

    # The accuracy chart plots each round's stored accuracy.
    points = page.locator("figure[data-chart=accuracy] g[data-series=accuracy] circle")
    expect(points).to_have_count(3)
    for point, row in zip(points.all(), stored, strict=True):
        assert point.get_attribute("data-round") == str(row.number)
        assert float(point.get_attribute("data-value") or "nan") == pytest.approx(
            row.metrics["accuracy"], abs=1e-12
        )
    expect(page.locator("figure[data-chart=accuracy] polyline")).to_have_count(1)
    expect(page.locator("figure[data-chart=bytes] polyline")).to_have_count(2)
    expect(page.locator("figure[data-chart=flags] rect.mark.flag")).to_have_count(6)

    # The last round's agreement graph: every worker drawn, the flagged ones in red.
    graph = page.locator("figure[data-graph-round='3']")
    expect(graph).to_have_attribute("data-flagged", ",".join(map(str, sorted(flagged_last))))
    expect(graph.locator("g.node")).to_have_count(7)
    flagged_nodes = graph.locator("g.node[data-flagged=true]")
    expect(flagged_nodes).to_have_count(2)
    shown = {int(n.get_attribute("data-worker") or "-1") for n in flagged_nodes.all()}
    assert shown == flagged_last
    for node in flagged_nodes.all():
        expect(node.locator("circle.halo")).to_have_count(1)
        fill = node.locator("circle:not(.halo)").evaluate("c => getComputedStyle(c).fill")
        assert fill == FLAGGED_FILL
    trusted = graph.locator("g.node[data-state=trusted] circle").first
    assert trusted.evaluate("c => getComputedStyle(c).fill") == TRUSTED_FILL
    # Honest workers all agree pairwise; every disagreement has a flagged end.
    edges = graph.locator("line.edge").evaluate_all(
        "lines => lines.map(l => [+l.dataset.a, +l.dataset.b, l.dataset.state])"
    )
    states = {frozenset((a, b)): state for a, b, state in edges}
    honest = sorted(set(range(7)) - flagged_last)
    assert all(states.get(frozenset((a, b))) == "agree" for a in honest for b in honest if a < b)
    disagreements = [pair for pair, state in states.items() if state == "disagree"]
    assert disagreements and all(pair & flagged_last for pair in disagreements)
    # The disagreements drawn are those stored with the round.
    assert set(disagreements) == {frozenset((e.a, e.b)) for e in graph_last.conflicts}
    page.screenshot(path=ARTIFACTS / "run-page.png", full_page=True)
    _assert_no_horizontal_scroll(page, 1024)
    page.set_viewport_size({"width": 1280, "height": 900})

    # The review queue shows one case per flagged client and lets the operator confirm it.
    page.click("nav[aria-label=Main] >> text=Review queue")
    expect(page).to_have_url(world.base_url + "/cases")
    with world.sessions() as session:
        open_cases = session.scalars(
            select(DetectionCase).where(DetectionCase.review_status == ReviewStatus.OPEN)
        ).all()
    cards = page.locator("article.case")
    expect(cards).to_have_count(len(open_cases))
    card = page.locator("article.case", has=page.locator("[data-kind=outside_max_clique]")).first
    case_id = int(card.get_attribute("data-case") or "0")
    worker = int(card.get_attribute("data-worker") or "-1")
    assert worker in flagged_last or worker in {c.worker for c in open_cases}
    expect(card.locator(".summary").first).to_contain_text(f"Worker {worker} disagreed with")
    expect(card.locator(".client-line [data-client-status]")).to_have_attribute(
        "data-client-status", "approved"
    )
    expect(card.locator("table.replicas tr.subject").first).to_contain_text(f"worker {worker}")
    card.locator("textarea[name=note]").fill("Reversed gradients every round.")
    card.locator("button[data-review=confirm]").click()

    expect(page).to_have_url(f"{world.base_url}/cases?reviewed={case_id}")
    flash = page.locator("[data-flash=cases]")
    expect(flash).to_contain_text(f"Case #{case_id}")
    expect(flash).to_contain_text("confirmed by alice")
    expect(flash.locator("[data-client-status]")).to_have_attribute("data-client-status", "banned")
    expect(cards).to_have_count(len(open_cases) - 1)
    page.set_viewport_size({"width": 1280, "height": 1500})
    page.screenshot(path=ARTIFACTS / "review-queue.png")
    _assert_no_horizontal_scroll(page, 1024)
    page.set_viewport_size({"width": 1280, "height": 900})

    with world.sessions() as session:
        reviewed = session.get(DetectionCase, case_id)
        assert reviewed is not None and reviewed.client_id is not None
        theirs = session.scalars(
            select(DetectionEvent).where(DetectionEvent.case_id == case_id)
        ).all()
        assert len(theirs) == reviewed.event_count
        assert {(e.review_status, e.reviewed_by, e.note) for e in theirs} == {
            (ReviewStatus.CONFIRMED, "alice", "Reversed gradients every round.")
        }
        client = session.get(Client, reviewed.client_id)
        assert client is not None and client.status == ClientStatus.BANNED
        bans = session.scalars(
            select(AuditEntry).where(
                AuditEntry.action == "client.ban", AuditEntry.target_id == client.id
            )
        ).all()
        assert [b.actor for b in bans] == ["alice"]
        client_id = client.id

    # The run's workers are its own, not the registry's: the clients page leaves them out,
    # the run page leads to them, and there the ban shows; the only way back is to reinstate.
    page.click("nav[aria-label=Main] >> text=Clients")
    expect(page.locator("[data-simulated-note]")).to_be_visible()
    expect(page.locator("tr[data-client]")).to_have_count(0)
    page.goto(f"{world.base_url}/runs/{world.run_id}")
    page.locator("[data-simulated-workers] a").click()
    expect(page).to_have_url(f"{world.base_url}/clients?run_id={world.run_id}")
    expect(page.locator("tr[data-client]")).to_have_count(7)
    client_row = page.locator(f"tr[data-client='{client_id}']")
    expect(client_row).to_have_attribute("data-client-status", "banned")
    expect(client_row.locator("button[data-action]")).to_have_text(["Reinstate"])
    _assert_no_horizontal_scroll(page, 1024)


def test_a_viewer_sees_the_pages_but_gets_no_buttons(world: World, page: Page) -> None:
    world.federation.wait()
    _log_in(page, world, world.viewer_key, "/cases")
    assert page.locator("article.case").count() > 0
    expect(page.locator("form.review")).to_have_count(0)
    expect(page.locator("input[data-pick]")).to_have_count(0)
    page.goto(world.base_url + "/events")
    assert page.locator("article.event").count() > 0
    expect(page.locator("form.review")).to_have_count(0)
    expect(page.locator("article.event [data-viewer-note]").first).to_contain_text("viewer role")
    page.goto(world.base_url + "/clients")
    expect(page.locator("tr[data-client]")).to_have_count(0)  # simulated workers: the run's
    page.goto(f"{world.base_url}/clients?run_id={world.run_id}")
    expect(page.locator("tr[data-client]")).to_have_count(7)
    expect(page.locator("button[data-action]")).to_have_count(0)
    page.goto(world.base_url + "/")
    expect(page.locator("tr[data-run]")).to_have_count(1)
    _assert_no_horizontal_scroll(page, 1024)
