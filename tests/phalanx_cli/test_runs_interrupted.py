"""Ctrl-C during ``phalanx run`` or ``phalanx coordinator``: the process stops and says where.

Before, the simulation engine stopped while the coordinator, in the ServerApp's
thread, went on waiting for replies that could not come: the process hung until a
second Ctrl-C, which printed a traceback, and nothing said which run was left.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import select

from phalanx.runs.recorder import last_round
from phalanx.store import Round, Run, make_engine, migrate, runs, session_factory
from phalanx_cli.runs import coordinator_interrupted
from tests.support.configs import small_config
from tests.support.terminal import as_from_a_terminal

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def _interrupt_after_two_rounds(args: list[str], env: dict[str, str], url: str) -> tuple[int, str]:
    """Start ``phalanx ARGS``, press Ctrl-C once two rounds are recorded; return status, stderr."""
    command = [sys.executable, "-m", "phalanx_cli", *args]
    proc = subprocess.Popen(
        as_from_a_terminal(command),
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    sessions = session_factory(make_engine(url))
    try:
        deadline = time.monotonic() + 300
        done = 0
        while time.monotonic() < deadline and proc.poll() is None and done < 2:
            time.sleep(0.2)
            try:
                with sessions() as session:
                    done = len(session.scalars(select(Round)).all())
            except Exception:  # the database may not exist yet
                continue
        assert proc.poll() is None, "the run ended before it could be interrupted"
        os.killpg(proc.pid, signal.SIGINT)
        try:
            _, stderr = proc.communicate(timeout=120)  # a hang guard, not a timing
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail("the process did not stop after Ctrl-C")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, stderr


def test_ctrl_c_stops_a_run_at_once_and_says_how_to_resume_it(
    tmp_path: Path, ray_head: str
) -> None:
    config = tmp_path / "run.toml"
    text = (ROOT / "examples" / "quick-digits.toml").read_text()
    config.write_text(text.replace("rounds = 10", "rounds = 5000"))
    url = f"sqlite:///{tmp_path / 'data' / 'phalanx.db'}"
    env = {**os.environ, "PHALANX_DATA_DIR": str(tmp_path / "data")}

    status, stderr = _interrupt_after_two_rounds(
        ["run", str(config), "--ray-address", ray_head], env, url
    )

    assert status == 130, stderr
    assert "Traceback" not in stderr
    sessions = session_factory(make_engine(url))
    with sessions() as session:
        run = session.scalars(select(Run)).one()
        assert run.status == "running"  # left to resume, as a killed run is
    done = last_round(sessions, run.id)
    assert done >= 2
    assert stderr.splitlines()[-1] == (
        f"interrupted: run {run.id} stopped after round {done} of 5000; "
        f"resume it with `phalanx run --resume {run.id}`"
    )


def test_ctrl_c_stops_a_coordinator_mid_run_and_names_the_run_it_leaves(
    tmp_path: Path, ray_head: str
) -> None:
    url = f"sqlite:///{tmp_path / 'phalanx.db'}"
    migrate.upgrade(url)
    sessions = session_factory(make_engine(url))
    config = small_config(rounds=5000)
    with sessions.begin() as session:
        run_id = runs.create_run(
            session, name="long", config=config.model_dump(mode="json"), seed=config.seed
        ).id
    env = {**os.environ, "PHALANX_DATA_DIR": str(tmp_path), "PHALANX_RAY_ADDRESS": ray_head}

    status, stderr = _interrupt_after_two_rounds(["coordinator", "--once"], env, url)

    assert status == 130, stderr
    assert "Traceback" not in stderr
    with sessions() as session:
        assert session.get(Run, run_id).status == "running"  # type: ignore[union-attr]
    line = stderr.splitlines()[-1]
    assert re.fullmatch(
        rf"interrupted: the coordinator stopped during run {run_id}, after its round "
        rf"{last_round(sessions, run_id)}; the run stays running until a coordinator takes it "
        r"over, 5 min after its last heartbeat",
        line,
    ), line


def test_a_deployed_run_left_by_its_coordinator_is_said_to_go_on_on_its_superlink(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'phalanx.db'}"
    migrate.upgrade(url)
    sessions = session_factory(make_engine(url))
    config = small_config(attack={"name": None, "q": 0}, deployment={"backend": "deployment"})
    with sessions.begin() as session:
        run_id = runs.create_run(
            session, name="deployed", config=config.model_dump(mode="json"), seed=config.seed
        ).id

    line = coordinator_interrupted(sessions, run_id)

    assert line == (
        f"interrupted: the coordinator stopped following run {run_id} after its round 0; the "
        f"run goes on on its SuperLink (cancel it from the dashboard or "
        f"POST /api/v1/runs/{run_id}/cancel)"
    )
    assert coordinator_interrupted(sessions, None) == (
        "interrupted: the coordinator stopped between runs"
    )


def test_ctrl_c_stops_a_run_on_its_own_ray_whose_tasks_are_out(tmp_path: Path) -> None:
    # A terminal's Ctrl-C reaches the run's own Ray too: its actors die with tasks
    # out, and the engine's worker threads waited on them for ever, so the process
    # hung after saying it was interrupted (and its workers logged tracebacks).
    config = tmp_path / "run.toml"
    text = (ROOT / "examples" / "quick-digits.toml").read_text()
    config.write_text(text.replace("rounds = 10", "rounds = 5000"))
    url = f"sqlite:///{tmp_path / 'data' / 'phalanx.db'}"
    env = {**os.environ, "PHALANX_DATA_DIR": str(tmp_path / "data")}

    status, stderr = _interrupt_after_two_rounds(["run", str(config)], env, url)

    assert status == 130, stderr
    assert "Traceback" not in stderr
    assert stderr.splitlines()[-1].startswith("interrupted: run ")
