"""``phalanx run --ray-address``: Flower's simulation engine on an existing Ray cluster."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.ray_heads import joined_head

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def test_run_uses_a_ray_head_started_beside_it(tmp_path: Path, ray_head: str) -> None:
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "phalanx_cli",
            "run",
            "examples/quick-digits.toml",
            "--ray-address",
            ray_head,
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
    finally:
        run.kill()
    assert run.returncode == 0, stderr
    summary = json.loads(stdout)
    assert summary["rounds"] == 10
    assert summary["flagged"] == summary["adversaries"] and len(summary["flagged"]) == 2
    # The run was a driver on the head, not on a Ray of its own.
    assert joined_head(ray_head, run.pid)


def test_a_ray_address_nobody_answers_at_fails_the_run_in_one_line(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port bound, then released: nothing listens there
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    command = ["run", "examples/quick-digits.toml", "--ray-address", address]
    run = subprocess.run(
        [sys.executable, "-m", "phalanx_cli", *command],
        env={**os.environ, "PHALANX_DATA_DIR": str(tmp_path)},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode != 0
    (error,) = [line for line in run.stderr.splitlines() if line.startswith("error:")]
    assert f"no Ray cluster answers at {address}" in error
    assert "Traceback" not in run.stderr
