"""Fixtures of the deployment tests: a migrated SQLite database, client rows, a real SuperLink."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from phalanx.config import RunConfig
from phalanx.flower.deployment.certificates import TlsFiles, ensure_tls_files
from phalanx.flower.deployment.control import FlowerControl, SuperLinkConnection
from phalanx.flower.deployment.processes import free_port
from phalanx.flower.deployment.superlink import RunningSuperLink, SuperLinkOptions, start_superlink
from phalanx.identity import (
    PrivateKey,
    generate_private_key,
    public_key_fingerprint,
    public_key_to_pem,
)
from phalanx.store import ClientStatus, clients, make_engine, session_factory
from phalanx.store.migrate import upgrade


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


@pytest.fixture
def database_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/phalanx.db"
    upgrade(url)
    return url


@pytest.fixture
def sessions(database_url: str) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(database_url)
    yield session_factory(engine)
    engine.dispose()


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


@pytest.fixture
def tls(tmp_path: Path) -> TlsFiles:
    return ensure_tls_files(tmp_path / "tls")


@pytest.fixture
def superlink(
    tmp_path: Path, tls: TlsFiles, database_url: str
) -> Iterator[tuple[RunningSuperLink, FlowerControl]]:
    """A real ``flower-superlink`` with TLS and SuperNode authentication, and its Control API.

    Its ServerApps write to ``database_url``. Stopped by pid after the test.
    """
    options = SuperLinkOptions(
        tls=tls,
        database=tmp_path / "superlink" / "state.db",
        port=free_port(),
        flwr_home=tmp_path / "superlink" / "flwr-home",
    )
    running = start_superlink(
        options,
        log_path=tmp_path / "logs" / "superlink.log",
        env={"PHALANX_DATABASE_URL": database_url, "PHALANX_DATA_DIR": str(tmp_path / "data")},
    )
    try:
        control = FlowerControl(
            SuperLinkConnection(running.address, tls.ca_certificate), tmp_path / "flwr-home"
        )
        yield running, control
    finally:
        tree = running.process.descendants()
        running.stop()
        assert [p.pid for p in tree if p.alive()] == [], "a SuperLink process outlived the test"


@pytest.fixture
def tls_ca(tls: TlsFiles) -> Path:
    return tls.ca_certificate
