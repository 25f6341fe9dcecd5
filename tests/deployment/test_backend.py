"""The deployment backend when things go wrong: refused, cancelled, invalid."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from phalanx.flower.deployment.backend import create_deployed_run, run_on_superlink
from phalanx.flower.deployment.control import ControlError, FlowerControl, SuperLinkConnection
from phalanx.flower.deployment.processes import free_port
from phalanx.flower.deployment.service import DeploymentService
from phalanx.flower.deployment.superlink import RunningSuperLink
from phalanx.store import RunStatus, runs
from tests.deployment.conftest import deployment_config

pytestmark = pytest.mark.slow


def _status(sessions: sessionmaker[Session], run_id: str) -> tuple[RunStatus, str | None]:
    with sessions() as session:
        run = runs.get_run(session, run_id)
        return run.status, run.error


def test_a_run_the_superlink_cannot_take_fails_with_the_reason(
    tmp_path: Path, sessions: sessionmaker[Session], tls_ca: Path
) -> None:
    nobody = FlowerControl(
        SuperLinkConnection(f"127.0.0.1:{free_port()}", tls_ca), tmp_path / "home", timeout=120
    )
    run_id = create_deployed_run(sessions, deployment_config(), "me")
    with pytest.raises(ControlError):
        run_on_superlink(
            deployment_config(),
            nobody,
            sessions=sessions,
            claimer="me",
            run_id=run_id,
            log_dir=tmp_path,
        )
    status, error = _status(sessions, run_id)
    assert status == RunStatus.FAILED and error is not None and "SuperLink refused" in error


def test_a_cancelled_run_still_waiting_for_clients_is_stopped_on_the_superlink(
    tmp_path: Path,
    sessions: sessionmaker[Session],
    superlink: tuple[RunningSuperLink, FlowerControl],
) -> None:
    _, control = superlink
    config = deployment_config()
    run_id = create_deployed_run(sessions, config, "me")
    with sessions.begin() as session:
        runs.request_cancel(session, run_id)
    result = run_on_superlink(
        config,
        control,
        sessions=sessions,
        claimer="me",
        run_id=run_id,
        log_dir=tmp_path / "logs",
        nodes_timeout=3600,  # no SuperNode ever connects: only the cancel can end it
        heartbeat=1,
        cancel_grace=0,
    )
    assert result.flower_status == "finished:stopped"
    assert result.status == RunStatus.CANCELLED
    assert _status(sessions, run_id) == (RunStatus.CANCELLED, None)


def test_the_service_refuses_a_stored_config_that_no_longer_validates(
    tmp_path: Path, sessions: sessionmaker[Session], tls_ca: Path
) -> None:
    with sessions.begin() as session:
        bad = runs.create_run(session, name="bad", config={"rounds": 0}, seed=0).id
    lines: list[str] = []
    control = FlowerControl(SuperLinkConnection("127.0.0.1:9", tls_ca), tmp_path / "home")
    service = DeploymentService(sessions, control, "me", tmp_path, report=lines.append)
    assert service.run_next() is None
    status, error = _status(sessions, bad)
    assert status == RunStatus.FAILED and error is not None and error.startswith("invalid config")
    assert lines == [f"run {bad} refused: invalid config"]
