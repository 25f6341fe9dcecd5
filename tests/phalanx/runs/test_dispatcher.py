"""``phalanx coordinator``: queued runs claimed, checked and executed one at a time."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker
from typer.testing import CliRunner

from phalanx.config import RunConfig
from phalanx.runs.dispatcher import Dispatcher, RunRefusedError
from phalanx.store import Run, RunStatus, make_engine, migrate, runs, session_factory
from phalanx_cli.main import app as cli_app
from tests.support.configs import small_config
from tests.support.plugin_files import TOUCH_ON_IMPORT, PluginFiles
from tests.support.ray_heads import joined_head

ROOT = Path(__file__).resolve().parents[3]


class FakeBackend:
    """A dispatcher backend that records what it was asked and finishes runs as told."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        *,
        refuse: str | None = None,
        crash: bool = False,
        interrupt: bool = False,
    ) -> None:
        self.sessions = sessions
        self.refuse = refuse
        self.crash = crash
        self.interrupt = interrupt
        self.polls = 0
        self.executed: list[str] = []

    def poll(self) -> None:
        self.polls += 1

    def check(self, config: RunConfig) -> None:
        if self.refuse:
            raise RunRefusedError(f"data refused: {self.refuse}", self.refuse)

    def execute(
        self, run_id: str, config: RunConfig, *, claimer: str, alive: Callable[[], None]
    ) -> str:
        self.executed.append(run_id)
        alive()
        if self.crash:
            raise RuntimeError("the backend broke")
        if self.interrupt:
            raise KeyboardInterrupt
        with self.sessions.begin() as session:
            runs.finish_run(session, run_id, RunStatus.SUCCEEDED, claimer=claimer)
        return f"run {run_id} done"


def _queue(sessions: sessionmaker[Session], config: object) -> str:
    stored = config.model_dump(mode="json") if isinstance(config, RunConfig) else config
    with sessions.begin() as session:
        return runs.create_run(session, name="queued", config=stored, seed=0).id  # type: ignore[arg-type]


def _ended(sessions: sessionmaker[Session], run_id: str) -> tuple[RunStatus, str | None]:
    with sessions() as session:
        run = runs.get_run(session, run_id)
        return run.status, run.error


def test_a_stored_config_that_no_longer_validates_is_refused_without_reaching_a_backend(
    sqlite_sessions: sessionmaker[Session],
) -> None:
    bad = _queue(sqlite_sessions, {"rounds": 0})
    lines: list[str] = []
    backend = FakeBackend(sqlite_sessions)
    dispatcher = Dispatcher(sqlite_sessions, "me", {"simulation": backend}, report=lines.append)
    assert dispatcher.turn()
    status, error = _ended(sqlite_sessions, bad)
    assert status == RunStatus.FAILED and error is not None and error.startswith("invalid config")
    assert lines == [f"run {bad} refused: invalid config"]
    assert backend.executed == [] and not dispatcher.turn()


def test_a_run_of_a_backend_this_coordinator_lacks_fails_saying_how_to_serve_it(
    sqlite_sessions: sessionmaker[Session],
) -> None:
    config = small_config(attack={"name": None, "q": 0}, deployment={"backend": "deployment"})
    run_id = _queue(sqlite_sessions, config)
    why = "deployment runs need `phalanx coordinator --superlink HOST:PORT`"
    dispatcher = Dispatcher(
        sqlite_sessions,
        "me",
        {"simulation": FakeBackend(sqlite_sessions)},
        {"deployment": why},
        report=print,
    )
    dispatcher.turn()
    assert _ended(sqlite_sessions, run_id) == (RunStatus.FAILED, why)


def test_a_run_its_backend_refuses_fails_with_the_backends_reason_and_never_starts(
    sqlite_sessions: sessionmaker[Session],
) -> None:
    run_id = _queue(sqlite_sessions, small_config())
    lines: list[str] = []
    backend = FakeBackend(sqlite_sessions, refuse="labels run 1..10 with no 0")
    Dispatcher(sqlite_sessions, "me", {"simulation": backend}, report=lines.append).turn()
    assert _ended(sqlite_sessions, run_id) == (
        RunStatus.FAILED,
        "data refused: labels run 1..10 with no 0",
    )
    assert lines == [f"run {run_id} refused: labels run 1..10 with no 0"]
    assert backend.executed == []


def test_a_backend_that_breaks_does_not_stop_the_loop(
    sqlite_sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    first, second = _queue(sqlite_sessions, small_config()), _queue(sqlite_sessions, small_config())
    lines: list[str] = []
    backend = FakeBackend(sqlite_sessions, crash=True)
    alive = tmp_path / "alive"
    dispatcher = Dispatcher(
        sqlite_sessions, "me", {"simulation": backend}, report=lines.append, alive_file=alive
    )
    dispatcher.serve(poll=0, once=True)
    assert backend.executed == [first, second] and backend.polls == 3
    assert f"run {first} failed: RuntimeError: the backend broke" in lines
    assert alive.exists()


def test_the_run_being_executed_is_named_when_ctrl_c_stops_it_and_only_then(
    sqlite_sessions: sessionmaker[Session],
) -> None:
    _queue(sqlite_sessions, small_config()), _queue(sqlite_sessions, small_config())
    dispatcher = Dispatcher(
        sqlite_sessions, "me", {"simulation": FakeBackend(sqlite_sessions)}, report=print
    )
    assert dispatcher.turn() and dispatcher.executing is None
    dispatcher.backends = {"simulation": FakeBackend(sqlite_sessions, crash=True)}
    assert dispatcher.turn() and dispatcher.executing is None
    interrupted = _queue(sqlite_sessions, small_config())
    dispatcher.backends = {"simulation": FakeBackend(sqlite_sessions, interrupt=True)}
    with pytest.raises(KeyboardInterrupt):
        dispatcher.turn()
    assert dispatcher.executing == interrupted


def test_every_turn_polls_every_backend_even_with_nothing_queued(
    sqlite_sessions: sessionmaker[Session],
) -> None:
    simulation, deployment = FakeBackend(sqlite_sessions), FakeBackend(sqlite_sessions)
    backends = {"simulation": simulation, "deployment": deployment}
    assert not Dispatcher(sqlite_sessions, "me", backends, report=print).turn()
    assert (simulation.polls, deployment.polls) == (1, 1)


@pytest.mark.slow
def test_coordinator_service_claims_a_queued_run_and_runs_it(tmp_path: Path, ray_head: str) -> None:
    url = f"sqlite:///{tmp_path / 'phalanx.db'}"
    migrate.upgrade(url)
    sessions = session_factory(make_engine(url))
    config = small_config(rounds=2)
    with sessions.begin() as session:
        good = runs.create_run(
            session, name="good", config=config.model_dump(mode="json"), seed=config.seed
        ).id
        bad = runs.create_run(
            session, name="bad", config={"assignment": {"scheme": "bibd", "num_workers": 8}}, seed=0
        ).id
    # On the test process's Ray head (PHALANX_RAY_ADDRESS), not a Ray of the run's own.
    env = {**os.environ, "PHALANX_DATA_DIR": str(tmp_path), "PHALANX_RAY_ADDRESS": ray_head}
    service = subprocess.Popen(
        [sys.executable, "-m", "phalanx_cli", "coordinator", "--once"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _, stderr = service.communicate(timeout=600)
    finally:
        service.kill()
    assert service.returncode == 0, stderr
    assert joined_head(ray_head, service.pid)
    with sessions() as session:
        assert session.get(Run, good).status == "succeeded"  # type: ignore[union-attr]
        failed = session.get(Run, bad)
        assert failed is not None and failed.status == "failed"
        assert "invalid config" in (failed.error or "")


def test_coordinator_fails_a_claimed_run_whose_attack_the_host_does_not_allow(
    tmp_path: Path, plugin_files: PluginFiles, allow_attack_plugins: Callable[..., None]
) -> None:
    url = f"sqlite:///{tmp_path / 'phalanx.db'}"
    migrate.upgrade(url)
    sessions = session_factory(make_engine(url))
    module = plugin_files.module(TOUCH_ON_IMPORT)
    command = {"args": f"touch {plugin_files.marker}", "shell": True}
    attacks = [  # queued by an older API, or written into the database by hand
        {"name": "subprocess:Popen", "q": 1, "params": command},
        {"name": f"{module}:Attack", "q": 1},
    ]
    with sessions.begin() as session:
        ids = [
            runs.create_run(
                session,
                name="refused",
                config=small_config(rounds=1, attack=attack).model_dump(mode="json"),
                seed=0,
            ).id
            for attack in attacks
        ]
    env = {"PHALANX_DATA_DIR": str(tmp_path)}
    result = CliRunner().invoke(cli_app, ["coordinator", "--once"], env=env)
    assert result.exit_code == 0, result.output
    with sessions() as session:
        for run_id in ids:
            run = session.get(Run, run_id)
            assert run is not None and run.status == "failed"
            assert "invalid config: attack.name" in (run.error or "")
            assert "not allowed on this host" in (run.error or "")
    assert not plugin_files.marker.exists() and module not in sys.modules
