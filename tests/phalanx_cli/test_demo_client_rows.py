"""The demo run twice leaves the client registry as it was: its workers belong to each run."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import func, select

from phalanx.runs.summary import RunSummary
from phalanx.store import Client, ClientStatus, make_engine, migrate, session_factory
from phalanx_cli.demo import serve_demo
from tests.support.configs import small_config
from tests.support.factories import settings_for
from tests.support.inprocess import inprocess_transport
from tests.support.live_server import free_port
from tests.support.store_rows import new_client


@dataclass
class DemoSeen:
    """What a person at the demo's terminal, and its dashboard's API, showed while it served."""

    lines: list[str] = field(default_factory=list)
    registry: list[list[dict[str, Any]]] = field(default_factory=list)
    workers: list[list[dict[str, Any]]] = field(default_factory=list)

    def say(self, line: str) -> None:
        self.lines.append(line)

    def look(self, summary: RunSummary) -> None:
        """While the dashboard is up: list the registry and the run's workers over the API."""
        at = max(i for i, line in enumerate(self.lines) if line.startswith("Dashboard: "))
        base = self.lines[at].removeprefix("Dashboard: ").rstrip("/")
        assert self.lines[at + 1] == "Log in with this admin key:"
        secret = self.lines[at + 2]
        headers = {"Authorization": f"Bearer {secret}"}
        clients = f"{base}/api/v1/clients"
        self.registry.append(httpx.get(clients, headers=headers).json()["items"])
        answer = httpx.get(clients, params={"run_id": summary.run_id}, headers=headers)
        self.workers.append(answer.json()["items"])


def test_the_demo_run_twice_leaves_the_same_client_rows_in_the_registry(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/phalanx.db"
    migrate.upgrade(url)
    engine = make_engine(url)
    try:
        sessions = session_factory(engine)
        with sessions.begin() as session:
            machine = new_client(session, "lab-machine", status=ClientStatus.APPROVED)
        config = small_config(rounds=1)
        settings = settings_for(url, tmp_path / "data", api_host="127.0.0.1", api_port=free_port())
        seen = DemoSeen()
        for _ in range(2):
            serve_demo(
                config,
                settings,
                say=seen.say,
                keep_serving=seen.look,
                federation=lambda run_id: inprocess_transport(config, run_id),
            )

        assert [[c["id"] for c in listed] for listed in seen.registry] == [[machine], [machine]]
        workers = config.assignment.num_workers
        assert [len(listed) for listed in seen.workers] == [workers, workers]
        first, second = ({c["run_id"] for c in listed} for listed in seen.workers)
        assert len(first) == len(second) == 1 and first != second
        with sessions() as session:
            rows = session.scalar(select(func.count()).select_from(Client))
            in_registry = session.scalar(
                select(func.count()).select_from(Client).where(Client.run_id.is_(None))
            )
        assert in_registry == 1  # the registry's one machine, after two demos
        assert rows == 1 + 2 * workers  # each demo's workers are its run's own
    finally:
        engine.dispose()
