"""``phalanx run --ray-address``: Flower's simulation engine on an existing Ray cluster."""

from __future__ import annotations

import json
import os
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
