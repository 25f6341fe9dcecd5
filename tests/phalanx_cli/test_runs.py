"""``phalanx run`` end to end: Flower simulation, the database, the summary, resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from phalanx.store import DetectionEvent, Round, Run, make_engine, session_factory

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PHALANX_DATA_DIR": str(tmp_path / "data")}


def _phalanx(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "phalanx_cli", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _config(tmp_path: Path, rounds: int) -> Path:
    text = (ROOT / "examples" / "quick-digits.toml").read_text()
    path = tmp_path / "run.toml"
    path.write_text(text.replace("rounds = 10", f"rounds = {rounds}"))
    return path


@pytest.fixture
def ray_tmpdir() -> Iterator[Path]:
    """Where Ray makes its folders: short, for a Unix socket's path holds about 100 characters."""
    with tempfile.TemporaryDirectory(prefix="ray-") as path:
        yield Path(path)


def _sessions(tmp_path: Path):  # type: ignore[no-untyped-def]
    return session_factory(make_engine(f"sqlite:///{tmp_path / 'data' / 'phalanx.db'}"))


def test_run_prints_a_json_summary_that_matches_the_database(
    tmp_path: Path, ray_tmpdir: Path
) -> None:
    env = {**_env(tmp_path), "RAY_TMPDIR": str(ray_tmpdir)}
    result = _phalanx("run", str(_config(tmp_path, 3)), "--format", "json", env=env)
    assert result.returncode == 0, result.stderr
    # Output to a pipe: no colour codes, no notice of Flower's or Ray's to their developers,
    # and the run's Ray session folder is gone with it.
    assert "\x1b[" not in result.stderr
    for notice in ("DEPRECATED", "FutureWarning", "warnings.warn"):
        assert notice not in result.stderr, result.stderr
    assert list(ray_tmpdir.iterdir()) == []
    summary = json.loads(result.stdout)
    assert set(summary) >= {
        "run_id",
        "rounds",
        "final_accuracy",
        "flagged",
        "adversaries",
        "precision",
        "recall",
        "bytes_up",
        "bytes_down",
    }
    assert summary["rounds"] == 3
    assert sorted(summary["flagged"]) == sorted(summary["adversaries"])
    assert len(summary["adversaries"]) == 2
    assert (summary["precision"], summary["recall"]) == (1.0, 1.0)
    with _sessions(tmp_path)() as session:
        run = session.get(Run, summary["run_id"])
        assert run is not None and run.status == "succeeded"
        rows = session.scalars(select(Round).where(Round.run_id == run.id)).all()
        assert [r.number for r in rows] == [1, 2, 3]
        assert sum(r.bytes_up for r in rows) == summary["bytes_up"]
        assert sum(r.bytes_down for r in rows) == summary["bytes_down"]
        assert rows[-1].metrics["accuracy"] == pytest.approx(summary["final_accuracy"])
        events = session.scalars(
            select(DetectionEvent).where(DetectionEvent.run_id == run.id)
        ).all()
        assert {e.client_id for e in events} == set(summary["flagged"])
        assert len(events) == 3 * 2  # both adversaries, every round
        assert run.summary == summary | {"model_digest": run.final_model_digest}


def test_a_run_killed_mid_way_resumes_to_the_same_model(tmp_path: Path, ray_head: str) -> None:
    rounds = 6
    # The run left alone, for its model, and the resumed run: on the test process's Ray
    # head, which spares each the start of a Ray of its own (Ray does not enter the
    # model). The run killed is on a Ray of its own, as by default, so that kill -9
    # takes everything it started.
    straight = _phalanx(
        "run",
        str(_config(tmp_path, rounds)),
        "--ray-address",
        ray_head,
        "--format",
        "json",
        env=_env(tmp_path / "a"),
    )
    assert straight.returncode == 0, straight.stderr
    expected = json.loads(straight.stdout)["model_digest"]

    env = _env(tmp_path / "b")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "phalanx_cli",
            "run",
            str(_config(tmp_path, rounds)),
            "--format",
            "json",
        ],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    sessions = _sessions(tmp_path / "b")
    try:
        deadline = time.monotonic() + 300
        done = 0
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
            try:
                with sessions() as session:
                    done = len(session.scalars(select(Round)).all())
            except Exception:  # the database may not exist yet
                continue
            if done >= 2:
                break
        assert proc.poll() is None, "the run finished before it could be killed"
        assert 2 <= done < rounds
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # kill -9 the coordinator and everything it started
        proc.wait()
    with sessions() as session:
        run = session.scalars(select(Run)).one()
        assert run.status == "running"
        run_id = run.id

    resumed = _phalanx(
        "run", "--resume", run_id, "--ray-address", ray_head, "--format", "json", env=env
    )
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert summary["rounds"] == rounds
    assert summary["model_digest"] == expected


def test_a_run_whose_workers_all_fail_exits_non_zero_with_one_line(
    tmp_path: Path, ray_head: str
) -> None:
    config = _config(tmp_path, 3)
    config.write_text(
        config.read_text().replace("[training]", "[training]\nlocal_lr = 1e30\nlocal_steps = 2")
    )
    # On the test process's Ray head: what is under test is what the run says, and a
    # Ray of the run's own would only add its start (the JSON summary test covers it).
    result = _phalanx(
        "run", str(config), "--ray-address", ray_head, "--format", "json", env=_env(tmp_path)
    )
    assert result.returncode == 1, result.stderr
    assert result.stdout == ""
    (line,) = [s for s in result.stderr.splitlines() if "failed" in s and "run " in s]
    assert "round 1: 7 of 7 workers failed with the same error: NonFiniteUpdateError" in line
    assert "Traceback" not in result.stderr
    with _sessions(tmp_path)() as session:
        (run,) = session.scalars(select(Run)).all()
        assert run.status == "failed"
        assert run.error is not None and run.error.startswith("round 1: 7 of 7 workers failed")
        assert session.scalars(select(DetectionEvent)).all() == []  # nobody blamed
