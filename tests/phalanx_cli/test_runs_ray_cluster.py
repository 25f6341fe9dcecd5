"""``phalanx run --ray-address``: Flower's simulation engine on an existing Ray cluster."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
RAY = Path(sys.executable).with_name("ray")
RAY_TEMP = Path("/tmp/ray")
CURRENT_CLUSTER = Path("/tmp/ray/ray_current_cluster")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_run_uses_a_ray_head_started_beside_it(tmp_path: Path) -> None:
    port = _free_port()
    head = subprocess.Popen(
        [
            str(RAY),
            "start",
            "--head",
            "--block",
            "--port",
            str(port),
            "--num-cpus",
            "2",
            "--include-dashboard",
            "false",
            "--node-ip-address",
            "127.0.0.1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            status = subprocess.run(
                [str(RAY), "status", "--address", f"127.0.0.1:{port}"],
                capture_output=True,
                check=False,
            )
            if status.returncode == 0:
                break
            assert head.poll() is None, "the Ray head exited"
            time.sleep(1)
        run = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "phalanx_cli",
                "run",
                "examples/quick-digits.toml",
                "--ray-address",
                f"127.0.0.1:{port}",
                "--format",
                "json",
            ],
            env={**os.environ, "PHALANX_DATA_DIR": str(tmp_path)},
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            stdout, stderr = run.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            run.kill()
            run.communicate()
            raise
        assert run.returncode == 0, stderr
        summary = json.loads(stdout)
        assert summary["rounds"] == 10
        assert summary["flagged"] == summary["adversaries"] and len(summary["flagged"]) == 2
        # A local Ray would have started a session of its own, named with the run's pid
        # (Ray's `session_<date>_<pid>`); the run joined the head's instead. Other Ray
        # sessions on the machine (tests running beside this one) do not matter.
        assert list(RAY_TEMP.glob(f"session_*_{run.pid}")) == []
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        # The head leaves its address behind for `ray.init()`; it is gone now.
        if CURRENT_CLUSTER.exists() and CURRENT_CLUSTER.read_text().strip().endswith(f":{port}"):
            CURRENT_CLUSTER.unlink()
