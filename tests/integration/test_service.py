"""A run that lives in the database: recorded, cancelled between rounds, claimed by a service."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from phalanx.cli import app as cli_app
from phalanx.config import RunConfig
from phalanx.data import load_dataset
from phalanx.roster import simulated_roster
from phalanx.runs.recorder import (
    claimer_name,
    create_simulated_run,
    load_checkpoint,
    stored_summary,
)
from phalanx.runs.service import run_recorded
from phalanx.store import DetectionEvent, Run, make_engine, migrate, runs, session_factory
from phalanx_clients.behaviour import RedTeam
from phalanx_clients.inprocess import InProcessTransport
from phalanx_clients.worker import Worker
from tests.configs import small_config
from tests.plugin_files import TOUCH_ON_IMPORT, PluginFiles

ROOT = Path(__file__).resolve().parents[2]


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


def test_recorded_run_writes_rounds_events_and_checkpoint(
    database_url: str, tmp_path: Path
) -> None:
    migrate.upgrade(database_url)
    sessions = session_factory(make_engine(database_url))
    config = small_config(rounds=2)
    claimer = claimer_name()
    run_id = create_simulated_run(sessions, config, claimer)
    summary = run_recorded(
        sessions,
        run_id,
        config,
        claimer=claimer,
        checkpoint_dir=tmp_path,
        transport=_transport(config, run_id),
    )
    assert summary.rounds == 2 and (summary.precision, summary.recall) == (1.0, 1.0)
    assert stored_summary(sessions, run_id) == summary
    done, checkpoint = load_checkpoint(sessions, run_id)
    assert done == 2 and checkpoint
    assert len(list(tmp_path.glob(f"{run_id}/round-*.pt"))) == 1  # older files are pruned
    with sessions() as session:
        run = session.get(Run, run_id)
        assert run is not None and run.status == "succeeded" and run.current_round == 2
        events = session.scalars(select(DetectionEvent)).all()
        assert len(events) == 4 and all(e.evidence.get("summary") for e in events)


def test_cancel_takes_effect_between_rounds(sqlite_url: str, tmp_path: Path) -> None:
    migrate.upgrade(sqlite_url)
    sessions = session_factory(make_engine(sqlite_url))
    config = small_config(rounds=5)
    claimer = claimer_name()
    run_id = create_simulated_run(sessions, config, claimer)

    def cancel_after_round_two(report: object) -> None:
        if report.round == 2:
            with sessions.begin() as session:
                runs.request_cancel(session, run_id)

    summary = run_recorded(
        sessions,
        run_id,
        config,
        claimer=claimer,
        checkpoint_dir=tmp_path,
        transport=_transport(config, run_id),
        on_round=cancel_after_round_two,
    )
    assert summary.rounds == 2
    with sessions() as session:
        run = session.get(Run, run_id)
        assert run is not None and run.status == "cancelled"


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
