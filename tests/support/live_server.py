"""The control plane as operators run it: uvicorn in a process of its own, on a loopback port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx

#: Seconds the server gets to answer ``/readyz`` after it starts (imports included).
START_TIMEOUT_S = 120.0


def free_port() -> int:
    """A TCP port nobody listens on now, on 127.0.0.1."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def live_server(
    database_url: str, data_dir: Path, env: Mapping[str, str] | None = None
) -> Iterator[str]:
    """Run ``uvicorn --factory phalanx_api.main:create_app`` until the block ends; yield its URL.

    The database must be migrated. The server is stopped through its process
    handle (terminate, then kill), and its output is in ``data_dir/uvicorn.log``.

    Parameters
    ----------
    database_url : str
        ``PHALANX_DATABASE_URL`` of the server.
    data_dir : Path
        ``PHALANX_DATA_DIR`` of the server.
    env : Mapping[str, str], optional
        More environment variables, e.g. ``PHALANX_*`` settings.
    """
    port = free_port()
    data_dir.mkdir(parents=True, exist_ok=True)
    environment = {
        **os.environ,
        "PHALANX_DATABASE_URL": database_url,
        "PHALANX_DATA_DIR": str(data_dir),
        "PHALANX_SECRET_KEY": "live-server-secret",
        **(env or {}),
    }
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        "--factory",
        "phalanx_api.main:create_app",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    log_path = data_dir / "uvicorn.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(command, env=environment, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_until_ready(process, base, log_path)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)


def _wait_until_ready(process: subprocess.Popen[bytes], base: str, log_path: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}; see {log_path}")
        try:
            if httpx.get(f"{base}/readyz", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"the server was not ready within {START_TIMEOUT_S:.0f} s")
        time.sleep(0.1)
