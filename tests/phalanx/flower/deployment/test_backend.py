"""The deployment backend when things go wrong: refused, cancelled, invalid."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from phalanx.flower.deployment.backend import (
    DeploymentBackend,
    create_deployed_run,
    run_on_superlink,
)
from phalanx.flower.deployment.control import ControlError, FlowerControl, SuperLinkConnection
from phalanx.flower.deployment.processes import free_port
from phalanx.flower.deployment.superlink import RunningSuperLink
from phalanx.store import RunStatus, runs
from tests.support.deployment import deployment_config

pytestmark = pytest.mark.slow


def _status(sessions: sessionmaker[Session], run_id: str) -> tuple[RunStatus, str | None]:
    with sessions() as session:
        run = runs.get_run(session, run_id)
        return run.status, run.error


def test_a_run_the_superlink_cannot_take_fails_with_the_reason(
    tmp_path: Path, sqlite_sessions: sessionmaker[Session], tls_ca: Path
) -> None:
    nobody = FlowerControl(
        SuperLinkConnection(f"127.0.0.1:{free_port()}", tls_ca), tmp_path / "home", timeout=120
    )
    run_id = create_deployed_run(sqlite_sessions, deployment_config(), "me")
    with pytest.raises(ControlError):
        run_on_superlink(
            deployment_config(),
            nobody,
            sessions=sqlite_sessions,
            claimer="me",
            run_id=run_id,
            log_dir=tmp_path,
        )
    status, error = _status(sqlite_sessions, run_id)
    assert status == RunStatus.FAILED and error is not None and "SuperLink refused" in error


def test_a_cancelled_run_still_waiting_for_clients_is_stopped_on_the_superlink(
    tmp_path: Path,
    sqlite_sessions: sessionmaker[Session],
    superlink: tuple[RunningSuperLink, FlowerControl],
) -> None:
    _, control = superlink
    # no SuperNode ever connects within the run's wait for clients: only the cancel can end it
    config = deployment_config(nodes_timeout_s=3600)
    run_id = create_deployed_run(sqlite_sessions, config, "me")
    with sqlite_sessions.begin() as session:
        runs.request_cancel(session, run_id)
    result = run_on_superlink(
        config,
        control,
        sessions=sqlite_sessions,
        claimer="me",
        run_id=run_id,
        log_dir=tmp_path / "logs",
        heartbeat=1,
        cancel_grace=0,
    )
    assert result.flower_status == "finished:stopped"
    assert result.status == RunStatus.CANCELLED
    assert _status(sqlite_sessions, run_id) == (RunStatus.CANCELLED, None)


def test_a_run_naming_another_superlink_gets_a_control_of_its_own(
    tmp_path: Path, sqlite_sessions: sessionmaker[Session], tls_ca: Path
) -> None:
    home = tmp_path / "flwr-home"
    control = FlowerControl(SuperLinkConnection("link-a:8000", tls_ca), home)
    backend = DeploymentBackend(sqlite_sessions, control, tmp_path / "logs")
    assert backend.control_for(None) is control
    assert backend.control_for("link-a:8000") is control
    other = backend.control_for("link-b:9000")
    assert other.connection == SuperLinkConnection("link-b:9000", tls_ca)
    assert other.home != home and other.home.parent == home.parent
    # the coordinator's own SuperLink stays the default of its own Flower home
    assert '"link-a:8000"' in (home / "config.toml").read_text()
