"""``flwr run .``: the Flower app metadata in pyproject.toml, end to end.

``flwr run`` with the ``:local:`` SuperLink connection starts a detached local
SuperLink (simulation runtime) that outlives the command. The test gives it a
private ``FLWR_HOME`` and private ports, and stops it, and everything it
started (SuperExec, the simulation process, Ray), by pid: every process whose
environment names that ``FLWR_HOME``, and their descendants.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from phalanx.config import load_run_config
from phalanx.plan import adversaries
from phalanx.store import EventFilter, RunStatus, events, make_engine, rounds, runs, session_factory

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
FLWR = Path(sys.executable).with_name("flwr")
ROUNDS = 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _proc_pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])  # fields after "(comm)": state, ppid


def _has_env(pid: int, entry: bytes) -> bool:
    try:
        return entry in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


def _processes_of(flwr_home: Path) -> set[int]:
    """Processes whose environment names ``flwr_home``, with all their descendants."""
    entry = f"FLWR_HOME={flwr_home}".encode()
    pids = _proc_pids()
    found = {pid for pid in pids if pid != os.getpid() and _has_env(pid, entry)}
    parents = {pid: _parent(pid) for pid in pids}
    grew = True
    while grew:
        children = {pid for pid, ppid in parents.items() if ppid in found} - found
        found |= children
        grew = bool(children)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _stop(pids: set[int], grace: float = 20.0) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
            time.sleep(0.2)
        pids = {pid for pid in pids if _alive(pid)}
        if not pids:
            return


def _env(tmp_path: Path, flwr_home: Path, database_url: str) -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{FLWR.parent}{os.pathsep}{os.environ.get('PATH', '')}",  # flower-superlink
        "FLWR_HOME": str(flwr_home),
        "FLWR_LOCAL_SUPERLINK_HTTP_API_PORT": str(_free_port()),
        "FLWR_LOCAL_CONTROL_API_PORT": str(_free_port()),
        # Run with the packages of this environment; never `uv sync` the app at run time.
        "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1",
        "FLWR_DISABLE_UPDATE_CHECK": "1",
        # A Ray of the simulation's own, never a cluster another test left behind.
        "RAY_ADDRESS": "local",
        "PHALANX_DATABASE_URL": database_url,
        "PHALANX_DATA_DIR": str(tmp_path / "data"),
    }


def _flwr(*args: str, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    proc = subprocess.Popen(
        [str(FLWR), *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_flwr_run_dot_records_the_run_and_flags_every_adversary(tmp_path: Path) -> None:
    text = (ROOT / "examples" / "quick-digits.toml").read_text()
    assert "rounds = 10" in text
    run_toml = tmp_path / "run.toml"
    run_toml.write_text(text.replace("rounds = 10", f"rounds = {ROUNDS}"))
    config = load_run_config(run_toml)
    flwr_home = tmp_path / "flwr-home"
    database_url = f"sqlite:///{tmp_path / 'phalanx.db'}"
    env = _env(tmp_path, flwr_home, database_url)
    try:
        started = time.monotonic()
        result = _flwr(
            "run",
            ".",
            "--federation-config",
            f"num-supernodes={config.assignment.num_workers}",
            "--run-config",
            f'run-config="{run_toml}"',
            "--stream",
            env=env,
            timeout=600,
        )
        elapsed = time.monotonic() - started
        log = f"{result.stdout}\n{result.stderr}"
        assert result.returncode == 0, log
        found = re.search(r"Successfully started run (\d+)", log)
        assert found, log
        flower_run_id = int(found.group(1))
        # `flwr run --stream` exits 0 even when the ServerApp raised; ask the SuperLink.
        listing = _flwr(
            "ls", "--run-id", str(flower_run_id), "--format", "json", env=env, timeout=60
        )
        assert listing.returncode == 0, f"{listing.stdout}\n{listing.stderr}"
        statuses = [r["status"] for r in json.loads(listing.stdout)["runs"]]
        assert statuses == ["finished:completed"], log
    finally:
        _stop(_processes_of(flwr_home))
    assert not _processes_of(flwr_home)

    truth = adversaries(config)
    assert len(truth) == 2
    engine = make_engine(database_url)
    try:
        with session_factory(engine)() as session:
            [run] = runs.list_runs(session)
            assert run.status == RunStatus.SUCCEEDED, run.error
            assert run.current_round == ROUNDS
            assert [r.number for r in rounds.list_rounds(session, run.id)] == [1, 2, 3]
            page = events.list_events(session, EventFilter(run_id=run.id), limit=500)
            flagged: dict[int, set[int | None]] = {}
            for event in page.items:
                flagged.setdefault(event.round, set()).add(event.worker)
            assert flagged == {n: set(truth) for n in range(1, ROUNDS + 1)}
            assert run.summary is not None
            assert (run.summary["precision"], run.summary["recall"]) == (1.0, 1.0)
            assert sorted(run.summary["flagged"]) == sorted(run.summary["adversaries"])
    finally:
        engine.dispose()
    print(f"flwr run: {ROUNDS} rounds in {elapsed:.0f} s")
