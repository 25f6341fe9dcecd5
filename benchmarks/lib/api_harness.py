"""What the API benchmarks share: PostgreSQL to load, the server, an open-loop load, statistics.

Used by ``bench_api.py`` (listings under load) and ``api_burst.py`` (a burst of
registrations).
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine, text

ROOT = Path(__file__).resolve().parents[2]
#: Seconds ``phalanx serve`` gets to answer ``/readyz`` (its imports are slow on a busy host).
START_TIMEOUT_S = 180


# ---------------------------------------------------------------- PostgreSQL


@contextmanager
def throwaway_postgres(workdir: Path) -> Iterator[str]:
    """Start PostgreSQL with ``.ci/postgres.sh`` (its own state file); stop it afterwards."""
    env = {**os.environ, "PHALANX_PG_STATE": str(workdir / "postgres.state")}
    script = str(ROOT / ".ci" / "postgres.sh")
    subprocess.run(["bash", script, "start"], check=True, env=env)
    try:
        url = subprocess.run(
            ["bash", script, "url"], check=True, env=env, capture_output=True, text=True
        ).stdout.strip()
        yield url
    finally:
        subprocess.run(["bash", script, "stop"], check=False, env=env)


@contextmanager
def private_schema(server_url: str) -> Iterator[str]:
    """Yield a URL whose ``search_path`` is a fresh schema; drop the schema afterwards."""
    admin = create_engine(server_url.replace("postgresql://", "postgresql+psycopg://", 1))
    admin = admin.execution_options(isolation_level="AUTOCOMMIT")
    schema = f"bench_api_{uuid.uuid4().hex[:12]}"
    with admin.connect() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        url = admin.url.update_query_dict({"options": f"-csearch_path={schema}"})
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


# --------------------------------------------------------------------- server


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


#: The app as operators run it: ``phalanx serve`` (uvicorn) on loopback; warnings only.
SERVE = [
    sys.executable,
    "-m",
    "phalanx_cli",
    "serve",
    "--host",
    "127.0.0.1",
    "--log-level",
    "warning",
]


@dataclass(frozen=True)
class Server:
    base: str
    pid: int


def _stat(pid: int) -> list[str] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()  # fields from the 3rd (state) on


def cpu_seconds(pid: int) -> float | None:
    """Return the CPU time (user + system, all threads) of a process and its children (Linux).

    The children are uvicorn's worker processes under ``phalanx serve --workers N``.
    """
    own = _stat(pid)
    if own is None:
        return None
    total = int(own[11]) + int(own[12])
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and entry.name != str(pid):
            fields = _stat(int(entry.name))
            if fields is not None and fields[1] == str(pid):
                total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


@contextmanager
def uvicorn_server(
    url: str, workdir: Path, workers: int = 1, extra_env: dict[str, str] | None = None
) -> Iterator[Server]:
    """Run ``phalanx serve --workers N`` on loopback; stop it by its pid afterwards.

    ``phalanx serve`` migrates the database (already at head here), then runs the
    app in its own process (one worker) or under uvicorn's supervisor, whose
    worker processes are its children (several). ``extra_env`` adds ``PHALANX_*``
    settings.
    """
    port = _free_port()
    env = {
        **os.environ,
        "PHALANX_DATABASE_URL": url,
        "PHALANX_DATA_DIR": str(workdir / "data"),
        "PHALANX_SECRET_KEY": "bench-secret-key",
        **(extra_env or {}),
    }
    log = (workdir / "uvicorn.log").open("ab")
    process = subprocess.Popen(
        [*SERVE, "--port", str(port), "--workers", str(workers)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"phalanx serve exited; see {workdir / 'uvicorn.log'}")
            try:
                if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"phalanx serve was not ready in {START_TIMEOUT_S:.0f} s")
            time.sleep(0.1)
        yield Server(base, process.pid)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)
        log.close()


# ---------------------------------------------------------------------- load


@dataclass
class Sample:
    endpoint: str
    due: float
    sent: float
    done: float
    status: int
    size: int


@dataclass
class Load:
    """An open-loop load: request ``i`` is due at ``start + i / rate``."""

    base: str
    headers: dict[str, str]
    connections: int
    timeout_s: float
    local: threading.local = field(default_factory=threading.local)

    def client(self) -> httpx.Client:
        client = getattr(self.local, "client", None)
        if client is None:
            client = httpx.Client(base_url=self.base, headers=self.headers, timeout=self.timeout_s)
            self.local.client = client
        return client

    def _one(self, endpoint: str, path: str, due: float) -> Sample:
        sent = time.perf_counter()
        try:
            response = self.client().get(path)
            status, size = response.status_code, len(response.content)
        except httpx.HTTPError:
            status, size = 0, 0
        return Sample(endpoint, due, sent, time.perf_counter(), status, size)

    def run(
        self, requests: Sequence[tuple[str, str]], rate: float, deadline_s: float
    ) -> list[Sample]:
        """Send ``requests`` at ``rate`` per second; stop sending after ``deadline_s``."""
        samples: list[Sample] = []
        with ThreadPoolExecutor(self.connections) as pool:
            futures = []
            start = time.perf_counter() + 0.05
            for i, (endpoint, path) in enumerate(requests):
                due = start + i / rate
                if due - start > deadline_s:
                    break
                pause = due - time.perf_counter()
                if pause > 0:
                    time.sleep(pause)
                futures.append(pool.submit(self._one, endpoint, path, due))
            for future in futures:
                samples.append(future.result(timeout=self.timeout_s + deadline_s))
        return samples


def percentile(values: Sequence[float], q: float) -> float:
    """Return the ``q``-th percentile (0-100), linear between ranks."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = (len(ordered) - 1) * q / 100
    low, high = int(rank), min(int(rank) + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summarize(samples: Sequence[Sample]) -> dict[str, Any]:
    """Throughput, errors, latency percentiles (ms) from due time and on the wire."""
    ok = [s for s in samples if 200 <= s.status < 300]
    if not samples:
        return {"requests": 0}
    span = max(s.done for s in samples) - min(s.due for s in samples)
    due = [1000 * (s.done - s.due) for s in ok]
    wire = [1000 * (s.done - s.sent) for s in ok]
    return {
        "requests": len(samples),
        "errors": len(samples) - len(ok),
        "throughput_rps": len(ok) / span if span > 0 else float("nan"),
        "p50_ms": percentile(due, 50),
        "p90_ms": percentile(due, 90),
        "p99_ms": percentile(due, 99),
        "max_ms": max(due, default=float("nan")),
        "wire_p50_ms": percentile(wire, 50),
        "wire_p99_ms": percentile(wire, 99),
        "mean_bytes": statistics.fmean(s.size for s in ok) if ok else 0,
    }
