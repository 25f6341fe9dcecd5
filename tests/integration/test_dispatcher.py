"""``phalanx coordinator``: queued runs claimed, checked and executed one at a time."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from phalanx.cli import app as cli_app
from phalanx.store import Run, make_engine, migrate, runs, session_factory
from tests.configs import small_config
from tests.plugin_files import TOUCH_ON_IMPORT, PluginFiles

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_coordinator_service_claims_a_queued_run_and_runs_it(tmp_path: Path) -> None:
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
    env = {**os.environ, "PHALANX_DATA_DIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-m", "phalanx.cli", "coordinator", "--once"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr
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
