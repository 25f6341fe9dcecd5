"""``phalanx demo``: the dashboard served, the run queued through the API, Ctrl-C to stop."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.terminal import as_from_a_terminal

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_demo_serves_the_dashboard_with_the_run_it_queued_through_the_api(tmp_path: Path) -> None:
    port = _free_port()
    env = {
        **os.environ,
        "PHALANX_DATA_DIR": str(tmp_path),
        "PHALANX_API_PORT": str(port),
        "PYTHONUNBUFFERED": "1",
        "COLUMNS": "60",  # a narrow terminal's width: the admin key must not wrap all the same
    }
    # The demo starts as a terminal would start it, so that Ctrl-C reaches it.
    demo = [sys.executable, "-m", "phalanx_cli", "demo", "--config", "examples/quick-digits.toml"]
    proc = subprocess.Popen(
        as_from_a_terminal(demo),
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "stays up" in line:
                break
        output = "".join(lines)
        assert "stays up" in output, output
        # Output to a pipe: no colour codes, no notice of Flower's or Ray's to their
        # developers, and the admin key whole on the line after the one announcing it.
        assert "\x1b[" not in output
        for notice in ("DEPRECATED", "FutureWarning", "warnings.warn"):
            assert notice not in output, output
        shown = output.splitlines()
        secret = shown[shown.index("Log in with this admin key:") + 1]
        run_id = re.search(r"Run (\S+) queued through the API", output)
        assert run_id, output
        base = f"http://127.0.0.1:{port}"
        headers = {"Authorization": f"Bearer {secret}"}
        run = httpx.get(f"{base}/api/v1/runs/{run_id.group(1)}", headers=headers).json()
        assert run["status"] == "succeeded"
        rounds = httpx.get(f"{base}/api/v1/runs/{run_id.group(1)}/rounds", headers=headers).json()
        assert len(rounds["items"] if isinstance(rounds, dict) else rounds) == 10
        assert httpx.get(f"{base}/login").status_code == 200  # the dashboard is up
        os.killpg(proc.pid, signal.SIGINT)
        try:
            code = proc.wait(timeout=180)  # a hang guard: shutting Ray down is slow under load
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            rest = proc.stdout.read()
            pytest.fail(f"the demo did not stop within 180 s of Ctrl-C; it said:\n{rest[-4000:]}")
        assert code == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
