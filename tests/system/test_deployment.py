"""A deployed run end to end, with real processes on loopback.

The pieces, as an operator meets them:

- the control plane (``phalanx serve``, a real process) where four clients
  register their EC keys and prove possession; an operator approves three;
- a real ``flower-superlink`` with TLS and SuperNode authentication, to which
  Phalanx admits exactly the approved clients' keys (``reconcile``);
- four real ``flower-supernode`` processes, one per client. The fourth client
  was never approved, so the SuperLink refuses its SuperNode. One approved
  client is Byzantine (``PHALANX_BYZANTINE``), as in the compose demo;
- a run queued over REST, claimed by the dispatcher loop of ``phalanx coordinator``,
  and executed on the SuperLink by its deployment backend: two rounds, every file
  on two of the three workers, so the liar is always outvoted.

Every process is stopped by its pid at the end, and none may be left.
"""

from __future__ import annotations

import base64
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from phalanx.event_kinds import FLAG_KINDS
from phalanx.flower.deployment.backend import DeploymentBackend
from phalanx.flower.deployment.control import FlowerControl
from phalanx.flower.deployment.node_config import NodeIdentity
from phalanx.flower.deployment.processes import (
    ManagedProcess,
    ProcessId,
    flower_environment,
    free_port,
    start_process,
    stop_all,
    wait_until,
)
from phalanx.flower.deployment.superlink import RunningSuperLink
from phalanx.flower.deployment.supernode import SuperNodeOptions, start_supernode
from phalanx.identity import (
    PrivateKey,
    generate_private_key,
    public_key_to_openssh,
    save_private_key,
    sign_challenge,
)
from phalanx.runs.dispatcher import Dispatcher
from phalanx.store import Role, RunStatus, clients, keys, rounds, runs
from phalanx.store.models import DetectionEvent
from tests.support.deployment import deployment_config

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

ATTACK = "reversed_gradient"


@dataclass
class Client:
    """A client machine: its key file and the id the control plane gave it."""

    name: str
    key: PrivateKey
    key_path: Path
    client_id: str = ""


@dataclass
class Processes:
    """Every process the test started, to stop by pid and check for leftovers."""

    started: list[ManagedProcess]

    def stop_all(self) -> list[ProcessId]:
        tree = [p for process in self.started for p in process.descendants()]
        stop_all(self.started, timeout=3.0)  # all at once: each shutdown takes seconds
        return [p for p in tree if p.alive()]


@pytest.fixture
def processes() -> Iterator[Processes]:
    started = Processes([])
    yield started
    assert started.stop_all() == [], "a process outlived the test"
    assert not any(p.running() for p in started.started)


def _api(tmp_path: Path, database_url: str, processes: Processes) -> httpx.Client:
    port = free_port()
    env = flower_environment(
        {
            "PHALANX_DATABASE_URL": database_url,
            "PHALANX_DATA_DIR": str(tmp_path / "api-data"),
            "PHALANX_SECRET_KEY": "end-to-end-test-secret",
        }
    )
    command = [sys.executable, "-m", "phalanx_cli", "serve", "--host", "127.0.0.1"]
    command += ["--port", str(port)]
    api = start_process("api", command, log_path=tmp_path / "logs" / "api.log", env=env)
    processes.started.append(api)
    http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60)

    def healthy() -> bool:
        try:
            return http.get("/healthz").status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(healthy, timeout=120, what="answering /healthz", process=api, interval=0.5)
    return http


def _register_over_rest(http: httpx.Client, client: Client) -> None:
    """Register the public key, then prove possession by signing the challenge."""
    answer = http.post(
        "/api/v1/clients",
        json={"name": client.name, "public_key": public_key_to_openssh(client.key.public_key())},
    )
    assert answer.status_code == 201, answer.text
    body = answer.json()
    client.client_id = body["id"]
    signature = sign_challenge(client.key, base64.b64decode(body["challenge"]))
    proof = http.post(
        f"/api/v1/clients/{client.client_id}/proof",
        json={"signature": base64.b64encode(signature).decode("ascii")},
    )
    assert proof.status_code == 200, proof.text
    assert proof.json()["status"] == "pending"


def _events(sessions: sessionmaker[Session], run_id: str) -> list[DetectionEvent]:
    with sessions() as session:
        query = select(DetectionEvent).where(DetectionEvent.run_id == run_id)
        return list(session.scalars(query))


def test_a_deployed_run_flags_the_byzantine_client_and_never_admits_the_unapproved_one(
    tmp_path: Path,
    migrated_sqlite_url: str,
    sqlite_sessions: sessionmaker[Session],
    superlink: tuple[RunningSuperLink, FlowerControl],
    processes: Processes,
) -> None:
    link, control = superlink
    http = _api(tmp_path, migrated_sqlite_url, processes)
    with sqlite_sessions.begin() as session:
        admin = {
            "Authorization": f"Bearer {keys.create_key(session, name='op', role=Role.ADMIN).secret}"
        }

    # Four machines register over REST; the operator approves three.
    machines = {}
    (tmp_path / "keys").mkdir()
    for name in ("honest-a", "honest-b", "byzantine", "stranger"):
        machines[name] = Client(name, generate_private_key(), tmp_path / "keys" / f"{name}.key")
        save_private_key(machines[name].key_path, machines[name].key)
        _register_over_rest(http, machines[name])
    for name in ("honest-a", "honest-b", "byzantine"):
        approved = http.post(f"/api/v1/clients/{machines[name].client_id}/approve", headers=admin)
        assert approved.status_code == 200, approved.text
        assert approved.json()["status"] == "approved"

    # The coordinator brings approvals to the SuperLink: exactly the three approved keys.
    said: list[str] = []
    deployment = DeploymentBackend(sqlite_sessions, control, tmp_path / "logs", report=said.append)
    deployment.admit()
    approved_ids = {machines[n].client_id for n in ("honest-a", "honest-b", "byzantine")}
    with sqlite_sessions() as session:
        node_of = {c: clients.get_client(session, c).flower_node_id for c in approved_ids}
    assert None not in node_of.values() and len(said) == 3
    assert {n.node_id for n in control.supernodes()} == set(node_of.values())

    # Four SuperNodes start; the stranger's is refused by SuperNode authentication.
    nodes: dict[str, ManagedProcess] = {}
    for name, machine in machines.items():
        options = SuperNodeOptions(
            superlink=link.address,
            root_certificates=link.tls.ca_certificate,
            identity=NodeIdentity(machine.client_id, machine.key_path),
            runtime_port=free_port(),
            flwr_home=tmp_path / "supernodes" / name,
        )
        env = {"PHALANX_BYZANTINE": ATTACK} if name == "byzantine" else {}
        nodes[name] = start_supernode(
            name, options, log_path=tmp_path / "logs" / f"{name}.log", env=env
        )
        processes.started.append(nodes[name])
    stranger = nodes["stranger"]
    wait_until(lambda: not stranger.running(), timeout=300, what="refused")
    assert stranger.returncode != 0
    assert "Failed to activate SuperNode" in stranger.log_text()

    def all_online() -> bool:
        return {n.node_id for n in control.supernodes() if n.status == "online"} == set(
            node_of.values()
        )

    wait_until(all_online, timeout=300, what="all approved SuperNodes online", interval=2)

    # A run queued over REST; the coordinator claims it and executes it on the SuperLink.
    config = deployment_config(rounds=2)
    queued = http.post("/api/v1/runs", json=config.model_dump(mode="json"), headers=admin)
    assert queued.status_code == 202, queued.text
    run_id = queued.json()["id"]
    coordinator = Dispatcher(
        sqlite_sessions, "test-coordinator", {"deployment": deployment}, report=said.append
    )
    coordinator.serve(poll=1, once=True)
    with sqlite_sessions() as session:
        run = runs.get_run(session, run_id)
        status, summary, error = run.status, run.summary or {}, run.error
    assert status == RunStatus.SUCCEEDED, (error, said, link.process.log_text()[-4000:])
    assert any(f"run {run_id} succeeded" in line for line in said), said

    # Recorded like a simulated run: two rounds, the liar flagged in each, nobody else.
    byzantine = machines["byzantine"].client_id
    with sqlite_sessions() as session:
        assert [r.number for r in rounds.list_rounds(session, run_id)] == [1, 2]
    events = _events(sqlite_sessions, run_id)
    flagged = [(e.round, e.client_id) for e in events if e.kind in FLAG_KINDS]
    assert flagged == [(1, byzantine), (2, byzantine)]
    assert [e for e in events if e.kind not in FLAG_KINDS] == []
    assert summary["flagged"] == [byzantine] and summary["rounds"] == 2
    assert http.get(f"/api/v1/runs/{run_id}", headers=admin).json()["status"] == "succeeded"

    # The unapproved client never took part: no node id, no key at the SuperLink, no event.
    stranger_id = machines["stranger"].client_id
    with sqlite_sessions() as session:
        row = clients.get_client(session, stranger_id)
        assert (row.status.value, row.flower_node_id, row.last_seen_at) == ("pending", None, None)
        seen = {c.id for c in clients.list_clients(session) if c.last_seen_at is not None}
    assert seen == approved_ids
    assert stranger_id not in {e.client_id for e in events}
    assert len(control.supernodes()) == 3
