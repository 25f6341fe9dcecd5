"""What the deployment tests share: their run config, clients put straight into the store, and
a deployed run executed over a Grid test double."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from phalanx.config import RunConfig
from phalanx.flower.deployment.backend import DeploymentBackend
from phalanx.flower.deployment.control import FlowerControl
from phalanx.flower.deployment.node_config import (
    BYZANTINE_KEY,
    CLIENT_ID_KEY,
    KEY_PATH_KEY,
    SLOW_COMPUTE_KEY,
)
from phalanx.flower.server_app import GridFederation
from phalanx.identity import (
    PrivateKey,
    generate_private_key,
    public_key_fingerprint,
    public_key_to_pem,
    save_private_key,
)
from phalanx.runs.dispatcher import Dispatcher
from phalanx.runs.enrolled import EnrolledRoster
from phalanx.runs.executor import execute
from phalanx.store import ClientStatus, RunStatus, clients, runs


def deployment_config(rounds: int = 1, *, nodes_timeout_s: float = 600.0) -> RunConfig:
    """Three workers, every file on two of them: one liar is outvoted by the other two."""
    return RunConfig.model_validate(
        {
            "name": "deployed",
            "seed": 3,
            "rounds": rounds,
            "data": {"dataset": "digits", "model": "mlp", "samples_per_file": 16},
            "assignment": {"scheme": "subsets", "num_workers": 3, "r": 2},
            "training": {"optimizer": "adam", "server_lr": 0.01},
            "deployment": {"backend": "deployment", "nodes_timeout_s": nodes_timeout_s},
        }
    )


def add_client(
    sessions: sessionmaker[Session],
    name: str,
    status: ClientStatus = ClientStatus.APPROVED,
    *,
    key: PrivateKey | None = None,
    node_id: int | None = None,
) -> tuple[str, PrivateKey]:
    """Register a client straight in the store; return its id and private key."""
    key = key or generate_private_key()
    with sessions.begin() as session:
        client = clients.create_client(
            session,
            name=name,
            public_key=public_key_to_pem(key.public_key()),
            fingerprint=public_key_fingerprint(key.public_key()),
            status=status,
            flower_node_id=node_id,
        )
        return client.id, key


def execute_on_grid(
    sessions: sessionmaker[Session], config: RunConfig, grid: object, checkpoint_dir: Path
) -> str:
    """Record ``config`` as a run and execute it as the deployed ServerApp would; return its id.

    ``grid`` stands in for Flower's Grid (``tests.support.fake_grid``); the workers are
    the approved clients online on it (the enrolled roster).
    """
    with sessions.begin() as session:
        run_id = runs.create_run(
            session, name=config.name, config=config.model_dump(mode="json"), seed=config.seed
        ).id
        runs.start_run(session, run_id, "me")
    execute(
        sessions,
        run_id,
        transport=GridFederation(grid, poll_interval=0.0),  # type: ignore[arg-type]
        roster=EnrolledRoster(sessions),
        claimer="me",
        checkpoint_dir=checkpoint_dir,
    )
    return run_id


def enrolled_node_configs(
    sessions: sessionmaker[Session],
    tmp_path: Path,
    nodes: Iterable[int],
    *,
    byzantine: Mapping[int, str] | None = None,
    slow_compute_s: Mapping[int, float] | None = None,
) -> dict[int, dict[str, str]]:
    """Approve one client per node (its key saved as ``tmp_path/NODE.key``); return the
    node config each node's SuperNode would pass its ClientApp.

    ``byzantine`` makes a node lie with the attack named; ``slow_compute_s`` makes it a
    slow device.
    """
    configs = {}
    for node in nodes:
        client_id, key = add_client(sessions, f"client-{node}", node_id=node)
        key_path = tmp_path / f"{node}.key"
        save_private_key(key_path, key)
        configs[node] = {CLIENT_ID_KEY: client_id, KEY_PATH_KEY: str(key_path)}
        if byzantine and node in byzantine:
            configs[node][BYZANTINE_KEY] = byzantine[node]
        if slow_compute_s and node in slow_compute_s:
            configs[node][SLOW_COMPUTE_KEY] = str(slow_compute_s[node])
    return configs


def admit_clients(
    sessions: sessionmaker[Session], control: FlowerControl, names: Iterable[str], tmp_path: Path
) -> tuple[DeploymentBackend, dict[str, str]]:
    """Approve a client per name, its key saved as ``tmp_path/keys/NAME.key``; admit them all.

    Returns the deployment backend (its logs under ``tmp_path/logs``) and each name's client id.
    """
    ids = {}
    (tmp_path / "keys").mkdir()
    for name in names:
        ids[name], key = add_client(sessions, name)
        save_private_key(tmp_path / "keys" / f"{name}.key", key)
    deployment = DeploymentBackend(sessions, control, tmp_path / "logs")
    deployment.admit()
    return deployment, ids


def serve_to_success(
    sessions: sessionmaker[Session], deployment: DeploymentBackend, run_id: str
) -> None:
    """Have the coordinator serve the queued run ``run_id``; check that it succeeded."""
    said: list[str] = []
    Dispatcher(sessions, "test-coordinator", {"deployment": deployment}, report=said.append).serve(
        poll=1, once=True
    )
    with sessions() as session:
        run = runs.get_run(session, run_id)
        assert run.status == RunStatus.SUCCEEDED, (run.error, said)


def run_to_success(
    sessions: sessionmaker[Session], deployment: DeploymentBackend, config: RunConfig
) -> str:
    """Queue a run of ``config`` and serve it to success; return its id."""
    with sessions.begin() as session:
        run_id = runs.create_run(
            session, name=config.name, config=config.model_dump(mode="json"), seed=config.seed
        ).id
    serve_to_success(sessions, deployment, run_id)
    return run_id
