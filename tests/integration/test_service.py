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

from phalanx.agreement_record import AgreementRecord
from phalanx.cli import app as cli_app
from phalanx.plan import adversaries
from phalanx.reports import RoundReport
from phalanx.runs.recorder import (
    StoreRecorder,
    claimer_name,
    create_simulated_run,
    load_checkpoint,
    stored_summary,
)
from phalanx.runs.service import run_recorded
from phalanx.store import (
    DetectionEvent,
    Run,
    make_engine,
    migrate,
    rounds,
    runs,
    session_factory,
)
from phalanx.store.retry import DatabaseUnavailableError
from tests.clock import FakeClock
from tests.configs import small_config
from tests.inprocess import inprocess_transport
from tests.integration.conftest import WriteLock
from tests.plugin_files import TOUCH_ON_IMPORT, PluginFiles
from tests.reports import round_report

#: Short enough that a write blocked by the test's lock fails at once.
SHORT_LOCK_TIMEOUT_S = 0.05

ROOT = Path(__file__).resolve().parents[2]


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
        transport=inprocess_transport(config, run_id),
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
        # Each round is stored with its agreement graph: the liars outside the clique.
        for number in (1, 2):
            graph = AgreementRecord.from_dict(rounds.get_agreement(session, run_id, number))
            assert graph.rule == "unique_clique"
            assert set(graph.flagged) == adversaries(config)
            assert graph.replied == tuple(range(config.assignment.num_workers))


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
        transport=inprocess_transport(config, run_id),
        on_round=cancel_after_round_two,
    )
    assert summary.rounds == 2
    with sessions() as session:
        run = session.get(Run, run_id)
        assert run is not None and run.status == "cancelled"


def test_a_round_is_recorded_once_the_lock_that_blocked_it_is_released(
    migrated_url: str, write_lock: WriteLock, tmp_path: Path
) -> None:
    sessions = session_factory(make_engine(migrated_url, lock_timeout_s=SHORT_LOCK_TIMEOUT_S))
    config = small_config(rounds=2)
    claimer = claimer_name()
    run_id = create_simulated_run(sessions, config, claimer)

    def lock_after_round_one(report: RoundReport) -> None:
        if report.round == 1:
            write_lock.hold()  # the heartbeat before round 2 and round 2 itself wait

    def release_after_three_pauses(clock: FakeClock) -> None:
        if len(clock.pauses) == 3:
            write_lock.release()

    clock = FakeClock(on_pause=release_after_three_pauses)
    summary = run_recorded(
        sessions,
        run_id,
        config,
        claimer=claimer,
        checkpoint_dir=tmp_path,
        transport=inprocess_transport(config, run_id),
        on_round=lock_after_round_one,
        retry=clock.policy(),
    )

    assert summary.rounds == 2 and len(clock.pauses) == 3
    with sessions() as session:
        run = session.get(Run, run_id)
        assert run is not None and (run.status, run.current_round) == ("succeeded", 2)


def test_a_run_whose_database_stays_locked_ends_failed_with_the_cause_in_one_line(
    migrated_url: str, write_lock: WriteLock, tmp_path: Path
) -> None:
    sessions = session_factory(make_engine(migrated_url, lock_timeout_s=SHORT_LOCK_TIMEOUT_S))
    config = small_config(rounds=3)
    claimer = claimer_name()
    run_id = create_simulated_run(sessions, config, claimer)

    def lock_after_round_one(report: RoundReport) -> None:
        if report.round == 1:
            write_lock.hold()

    def release_once_the_heartbeat_gave_up(clock: FakeClock) -> None:
        if clock.now > 60:  # past the heartbeat's budget: the run's end is being recorded
            write_lock.release()

    clock = FakeClock(on_pause=release_once_the_heartbeat_gave_up)
    with pytest.raises(DatabaseUnavailableError):
        run_recorded(
            sessions,
            run_id,
            config,
            claimer=claimer,
            checkpoint_dir=tmp_path,
            transport=inprocess_transport(config, run_id),
            on_round=lock_after_round_one,
            retry=clock.policy(),
        )

    with sessions() as session:
        run = session.get(Run, run_id)
        assert run is not None and (run.status, run.current_round) == ("failed", 1)
        assert run.error == (
            "the database stayed locked for 56 s while sending the heartbeat after round 1 "
            "(17 attempts)"
        )


def test_a_round_that_cannot_be_recorded_says_which_and_leaves_no_trace(
    migrated_url: str, write_lock: WriteLock, tmp_path: Path
) -> None:
    sessions = session_factory(make_engine(migrated_url, lock_timeout_s=SHORT_LOCK_TIMEOUT_S))
    claimer = claimer_name()
    run_id = create_simulated_run(sessions, small_config(rounds=3), claimer)
    clock = FakeClock()
    recorder = StoreRecorder(sessions, run_id, tmp_path, claimer, clock.policy(budget_s=10))
    write_lock.hold()

    with pytest.raises(DatabaseUnavailableError, match=r"while recording round 1 \("):
        recorder.round_finished(round_report(1), b"checkpoint")

    write_lock.release()
    assert load_checkpoint(sessions, run_id) == (0, None)
    recorder.round_finished(round_report(1), b"checkpoint")  # the same round, once free
    assert load_checkpoint(sessions, run_id) == (1, b"checkpoint")


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
