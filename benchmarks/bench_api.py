"""Latency of the control plane's listings under load, against ``/healthz`` on the same server.

A PostgreSQL database is filled in bulk (``COPY``) with 100,000 detection events
(20 finished runs of 100 rounds, 50 events a round, over 1,000 clients; each
event carries the evidence the coordinator stores for a flag in a 7-worker
round, about 2 kB of JSON). The app runs on loopback under ``phalanx serve``
(uvicorn; one process, or ``--workers N`` processes). An open-loop
load generator sends requests at a fixed rate, whatever the answers' speed (so
a slow server shows as queueing delay, not as a lower rate), from a pool of
keep-alive connections, bounded in count and time, to:

- ``GET /healthz``: no database, no authentication: the server's floor;
- ``GET /api/v1/events`` filtered (by run and status, client, kind, run and
  round) and paginated (first pages and deep ``before`` pages), 50 a page,
  each event with its evidence as a one-paragraph summary (one at a time also
  with ``evidence=full``, the whole evidence);
- ``GET /api/v1/runs/{id}/rounds``: the 100 rounds of a run.

First each endpoint is timed one request at a time, with the server's CPU time
per request (from ``/proc``: a figure that other work on the machine disturbs
far less than latency). Then each endpoint is loaded alone at the target rate,
then the three together, again with the server's CPU per request. Under load,
latency is measured from the moment a request was due (so a request that waits
for a busy server counts its wait), and also as the time on the wire. Reported:
throughput and p50 / p99 latency per endpoint, and each listing's latency as a
ratio to ``/healthz``'s under the same rate. The goal: the event list's p99
within 3x of ``/healthz``'s p99 at 200 requests per second.

PostgreSQL is ``--postgres-url`` if given, else a throwaway server started with
``.ci/postgres.sh`` (private state file) and stopped afterwards; the data go to
a schema of their own, dropped at the end. Writes ``benchmarks/results/api.json``
and ``api.md`` (``--quick``: a short smoke run, written to ``api_quick.*`` so that
it never overwrites the full results).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import torch
from sqlalchemy import create_engine, insert, text

from phalanx.assignment import bibd_assignment
from phalanx.detection import Replica, detect, payload_digest
from phalanx.store import Role, keys, make_engine, migrate, session_factory
from phalanx.store.models import Client, Round, Run

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PAGE = 50
GOAL_RATIO = 3.0


# ------------------------------------------------------------------ settings


@dataclass(frozen=True)
class Settings:
    events: int
    runs: int
    rounds_per_run: int
    clients: int
    rate: float
    duration_s: float
    warmup_s: float
    connections: int
    timeout_s: float
    workers: int = 1
    seed: int = 1

    @property
    def events_per_round(self) -> int:
        return max(1, self.events // (self.runs * self.rounds_per_run))


FULL = Settings(
    events=100_000,
    runs=20,
    rounds_per_run=100,
    clients=1000,
    rate=200.0,
    duration_s=20.0,
    warmup_s=3.0,
    connections=32,
    timeout_s=10.0,
)
QUICK = Settings(
    events=10_000,
    runs=10,
    rounds_per_run=20,
    clients=200,
    rate=100.0,
    duration_s=3.0,
    warmup_s=1.0,
    connections=16,
    timeout_s=10.0,
)


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


# ------------------------------------------------------------------- seeding


def flag_evidence() -> dict[str, Any]:
    """Evidence of one flag, as the coordinator stores it: a liar in a 7-worker STS round."""
    assignment = bibd_assignment(7, 3)
    replicas = []
    for f, workers in enumerate(assignment.files):
        honest = torch.randn(1000, generator=torch.Generator().manual_seed(f))
        for w in workers:
            value = (-honest if w == 4 else honest).to(torch.float32)
            replicas.append(Replica(w, f, value, payload_digest(value.numpy().tobytes())))
    evidence: dict[str, Any] = detect(assignment, replicas).evidence[4].to_dict()
    return evidence


#: Event kinds and how often each occurs.
KINDS = ("outside_max_clique", "majority_minority", "bad_signature", "stale_round")
KIND_WEIGHTS = (0.7, 0.1, 0.1, 0.1)
#: Review statuses and how often each occurs.
STATUSES = ("open", "confirmed", "dismissed")
STATUS_WEIGHTS = (0.7, 0.2, 0.1)


@dataclass(frozen=True)
class Seeded:
    run_ids: list[str]
    client_ids: list[str]
    max_event_id: int
    seconds: float
    evidence_bytes: int


def seed(url: str, settings: Settings) -> Seeded:
    """Fill the database: runs, rounds, clients in bulk inserts; events with ``COPY``."""
    started = time.perf_counter()
    rng = random.Random(settings.seed)
    engine = make_engine(url)
    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    run_ids = [str(uuid.uuid4()) for _ in range(settings.runs)]
    client_ids = [str(uuid.uuid4()) for _ in range(settings.clients)]
    config = {
        "name": "bench",
        "rounds": settings.rounds_per_run,
        "assignment": {"scheme": "random", "num_workers": settings.clients, "r": 3},
    }
    with engine.begin() as connection:
        connection.execute(
            insert(Client),
            [
                {
                    "id": cid,
                    "name": f"bench/worker-{i}",
                    "public_key": "-----BEGIN PUBLIC KEY-----\n...\n-----END PUBLIC KEY-----\n",
                    "fingerprint": f"SHA256:bench-{i}",
                    "status": "approved",
                    "created_at": t0,
                }
                for i, cid in enumerate(client_ids)
            ],
        )
        connection.execute(
            insert(Run),
            [
                {
                    "id": rid,
                    "name": f"bench-{i}",
                    "config": config,
                    "status": "succeeded",
                    "seed": i,
                    "created_at": t0 + timedelta(hours=i),
                    "attempts": 1,
                    "cancel_requested": False,
                    "current_round": settings.rounds_per_run,
                }
                for i, rid in enumerate(run_ids)
            ],
        )
        connection.execute(
            insert(Round),
            [
                {
                    "run_id": rid,
                    "number": n,
                    "started_at": t0 + timedelta(hours=i, minutes=n),
                    "finished_at": t0 + timedelta(hours=i, minutes=n, seconds=30),
                    "duration_s": 30.0,
                    "timings": {"assign": 0.001, "exchange": 25.0, "detect": 0.2},
                    "bytes_up": 4_271_226,
                    "bytes_down": 1_423_128,
                    "metrics": {"accuracy": min(0.99, 0.1 + 0.008 * n), "loss": 2.3 / n},
                    "num_flagged": settings.events_per_round,
                    "num_rejected": 0,
                    "assignment": config["assignment"],
                    "model_digest": "0" * 64,
                }
                for i, rid in enumerate(run_ids)
                for n in range(1, settings.rounds_per_run + 1)
            ],
        )
    evidence = flag_evidence()
    reason = json.dumps({"reason": "signature does not verify", "round": 1})
    columns = (
        "run_id, round, client_id, worker, kind, severity, evidence, review_status, created_at"
    )
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        with cursor.copy(f"COPY detection_events ({columns}) FROM STDIN") as copy:
            written = 0
            for i, rid in enumerate(run_ids):
                for n in range(1, settings.rounds_per_run + 1):
                    for _ in range(settings.events_per_round):
                        worker = rng.randrange(settings.clients)
                        kind = rng.choices(KINDS, KIND_WEIGHTS)[0]
                        if kind in ("outside_max_clique", "majority_minority"):
                            body = json.dumps({**evidence, "worker": worker})
                        else:
                            body = reason
                        copy.write_row(
                            (
                                rid,
                                n,
                                client_ids[worker],
                                worker,
                                kind,
                                "high",
                                body,
                                rng.choices(STATUSES, STATUS_WEIGHTS)[0],
                                t0 + timedelta(hours=i, minutes=n, microseconds=written),
                            )
                        )
                        written += 1
        raw.commit()
        cursor.execute("ANALYZE")
        raw.commit()
        cursor.execute("SELECT max(id) FROM detection_events")
        max_id = int(cursor.fetchone()[0])  # type: ignore[index]
    finally:
        raw.close()
        engine.dispose()
    return Seeded(
        run_ids=run_ids,
        client_ids=client_ids,
        max_event_id=max_id,
        seconds=time.perf_counter() - started,
        evidence_bytes=len(json.dumps(evidence)),
    )


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
    "phalanx.cli",
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
def uvicorn_server(url: str, workdir: Path, workers: int = 1) -> Iterator[Server]:
    """Run ``phalanx serve --workers N`` on loopback; stop it by its pid afterwards.

    ``phalanx serve`` migrates the database (already at head here), then runs the
    app in its own process (one worker) or under uvicorn's supervisor, whose
    worker processes are its children (several).
    """
    port = _free_port()
    env = {
        **os.environ,
        "PHALANX_DATABASE_URL": url,
        "PHALANX_DATA_DIR": str(workdir / "data"),
        "PHALANX_SECRET_KEY": "bench-secret-key",
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
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"phalanx serve exited; see {workdir / 'uvicorn.log'}")
            try:
                if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("phalanx serve did not become ready in 60 s")
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


def request_mix(seeded: Seeded, settings: Settings) -> dict[str, list[tuple[str, str]]]:
    """Endless-enough request lists per endpoint, varied and reproducible."""
    rng = random.Random(settings.seed + 1)
    count = int(settings.rate * (settings.duration_s + settings.warmup_s)) + 10

    def event_path() -> str:
        run = rng.choice(seeded.run_ids)
        shape = rng.randrange(6)
        if shape == 0:
            query = f"run_id={run}&review_status=open"
        elif shape == 1:
            query = f"client_id={rng.choice(seeded.client_ids)}"
        elif shape == 2:
            query = "kind=bad_signature"
        elif shape == 3:
            query = f"run_id={run}&round={rng.randint(1, settings.rounds_per_run)}"
        elif shape == 4:  # a deep page: everything older than a random event
            query = f"review_status=open&before={rng.randint(2, seeded.max_event_id)}"
        else:
            query = ""
        return f"/api/v1/events?{query}&limit={PAGE}".replace("?&", "?")

    events = [("events", event_path()) for _ in range(count)]
    full = [("events_full", f"{path}&evidence=full") for _, path in events]
    rounds = [("rounds", f"/api/v1/runs/{rng.choice(seeded.run_ids)}/rounds") for _ in range(count)]
    health = [("healthz", "/healthz")] * count
    mixed = [item for triple in zip(health, events, rounds, strict=True) for item in triple]
    return {
        "healthz": health,
        "events": events,
        "events_full": full,
        "rounds": rounds,
        "mixed": mixed[:count],
    }


def sequential(load: Load, requests: Sequence[tuple[str, str]], pid: int) -> dict[str, Any]:
    """Send requests one at a time; latency on the wire and the server's CPU per request."""
    client = load.client()
    for _, path in requests[:10]:  # warm-up
        client.get(path)
    before = cpu_seconds(pid)
    samples = []
    for endpoint, path in requests:
        sent = time.perf_counter()
        response = client.get(path)
        done = time.perf_counter()
        samples.append(
            Sample(endpoint, sent, sent, done, response.status_code, len(response.content))
        )
    after = cpu_seconds(pid)
    summary = summarize(samples)
    if before is not None and after is not None:
        summary["server_cpu_ms"] = 1000 * (after - before) / len(samples)
    return summary


def measure(server: Server, secret: str, seeded: Seeded, settings: Settings) -> dict[str, Any]:
    """Time each endpoint alone one request at a time, then under open-loop load."""
    auth = {"Authorization": f"Bearer {secret}"}
    load = Load(server.base, auth, settings.connections, settings.timeout_s)
    mixes = request_mix(seeded, settings)
    count = max(50, int(settings.rate * settings.duration_s / 10))
    one_by_one = {
        name: sequential(load, mixes[name][:count], server.pid)
        for name in ("healthz", "events", "events_full", "rounds")
    }
    phases: dict[str, Any] = {}
    for phase in ("healthz", "events", "rounds", "mixed"):
        requests = mixes[phase]
        warm = int(settings.rate * settings.warmup_s)
        load.run(requests[:warm], settings.rate, settings.warmup_s)  # connections, caches
        before, mine = cpu_seconds(server.pid), time.process_time()
        samples = load.run(requests[warm:], settings.rate, settings.duration_s)
        after, mine = cpu_seconds(server.pid), time.process_time() - mine
        by_endpoint: dict[str, list[Sample]] = {}
        for sample in samples:
            by_endpoint.setdefault(sample.endpoint, []).append(sample)
        server_cpu = after - before if before is not None and after is not None else None
        phases[phase] = {
            "offered_rps": settings.rate,
            "all": summarize(samples),
            "endpoints": {k: summarize(v) for k, v in sorted(by_endpoint.items())},
            "server_cpu_share": None if server_cpu is None else server_cpu / settings.duration_s,
            # Every request of the phase was answered (or timed out) before `after`.
            "server_cpu_ms_per_request": (
                None if server_cpu is None or not samples else 1000 * server_cpu / len(samples)
            ),
            "generator_cpu_share": mine / settings.duration_s,
        }
    return {"sequential": one_by_one, "load": phases}


# -------------------------------------------------------------------- report


def ratios(measured: dict[str, Any]) -> dict[str, Any]:
    """Each listing's latency (and CPU) as a multiple of /healthz's, in each setting."""
    phases, alone = measured["load"], measured["sequential"]
    floor = phases["healthz"]["all"]
    mixed = phases["mixed"]["endpoints"]
    out: dict[str, Any] = {}
    for name in ("events", "rounds"):
        loaded = phases[name]["all"]
        out[name] = {
            "p50_one_at_a_time": alone[name]["p50_ms"] / alone["healthz"]["p50_ms"],
            "p99_one_at_a_time": alone[name]["p99_ms"] / alone["healthz"]["p99_ms"],
            "cpu_per_request": (
                alone[name]["server_cpu_ms"] / alone["healthz"]["server_cpu_ms"]
                if "server_cpu_ms" in alone[name] and alone["healthz"].get("server_cpu_ms")
                else None
            ),
            "p50_alone": loaded["p50_ms"] / floor["p50_ms"],
            "p99_alone": loaded["p99_ms"] / floor["p99_ms"],
            "p50_mixed": mixed[name]["p50_ms"] / mixed["healthz"]["p50_ms"],
            "p99_mixed": mixed[name]["p99_ms"] / mixed["healthz"]["p99_ms"],
        }
    return out


def _x(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}x"


def write_markdown(path: Path, result: dict[str, Any]) -> None:
    s, seeded, r = result["settings"], result["seeded"], result["ratios"]
    phases, alone = result["measured"]["load"], result["measured"]["sequential"]
    goal = r["events"]["p99_alone"]
    met = "met" if goal <= GOAL_RATIO else "not met"
    lines = [
        "# Control plane under load: listings against /healthz",
        "",
        f"Written by `benchmarks/bench_api.py{' --quick' if result['quick'] else ''}`. "
        f"{s['events']:,} detection events in PostgreSQL {result['postgres']} ({s['runs']} runs "
        f"of {s['rounds_per_run']} rounds, {s['events_per_round']} events a round, "
        f"{s['clients']:,} clients; flag evidence {seeded['evidence_bytes']:,} bytes of JSON), "
        f"loaded with COPY in {seeded['seconds']:.1f} s. The app under `phalanx serve` "
        f"({s['workers']} process{'es' if s['workers'] > 1 else ''}) on loopback, the load "
        "generator (httpx, threads) and PostgreSQL on the same machine: "
        f"{result['machine']}.",
        "",
        "Endpoints: `/healthz` (no database, no key); `/api/v1/events` filtered by run and "
        f"status, client, kind, or run and round, first pages and deep `before=` pages, {PAGE} "
        "a page, each event with its evidence as a one-paragraph summary (*events_full*: the "
        "same requests with `evidence=full`, the whole evidence; one at a time only); "
        f"`/api/v1/runs/{{id}}/rounds` (all {s['rounds_per_run']} rounds of a run). "
        "Listings are authenticated with an API key.",
        "",
        "## One request at a time",
        "",
        "| endpoint | requests | p50 (ms) | p99 (ms) | mean body | server CPU per request (ms) "
        "| one core saturates at |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, m in alone.items():
        cpu = m.get("server_cpu_ms")
        capacity = f"~{1000 / cpu:.0f} req/s" if cpu else "–"
        lines.append(
            f"| {name} | {m['requests']} | {m['p50_ms']:.2f} | {m['p99_ms']:.2f} | "
            f"{m['mean_bytes'] / 1000:.1f} kB | {'–' if cpu is None else f'{cpu:.2f}'} "
            f"| {capacity} |"
        )
    lines += [
        "",
        f"## Open-loop load at {s['rate']:.0f} requests/s",
        "",
        f"{s['duration_s']:.0f} s per phase after {s['warmup_s']:.0f} s of warm-up, "
        f"{s['connections']} keep-alive connections. Latency counts from the moment a request "
        "was due, so time spent waiting for a busy server counts; *wire* is from sending to "
        "the answer. *Server CPU* is the server processes' CPU time over the phase, as a "
        "share of one core, and per request of the phase (all its endpoints); *generator "
        "CPU* the same share for the load generator.",
        "",
        "| phase | endpoint | requests | errors | throughput (req/s) | p50 (ms) | p99 (ms) "
        "| max (ms) | wire p99 (ms) | mean body | server CPU | server CPU per request (ms) "
        "| generator CPU |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for phase, data in phases.items():
        share, client = data["server_cpu_share"], data.get("generator_cpu_share")
        per_request = data.get("server_cpu_ms_per_request")
        for endpoint, m in data["endpoints"].items():
            lines.append(
                f"| {phase} | {endpoint} | {m['requests']} | {m['errors']} | "
                f"{m['throughput_rps']:.1f} | {m['p50_ms']:.2f} | {m['p99_ms']:.2f} | "
                f"{m['max_ms']:.1f} | {m['wire_p99_ms']:.2f} | {m['mean_bytes'] / 1000:.1f} kB "
                f"| {'–' if share is None else f'{100 * share:.0f} %'} "
                f"| {'–' if per_request is None else f'{per_request:.2f}'} "
                f"| {'–' if client is None else f'{100 * client:.0f} %'} |"
            )
    lines += [
        "",
        "## Ratios to /healthz",
        "",
        "One at a time: sequential requests. Alone: each endpoint loaded alone at the rate. "
        "Mixed: the three interleaved at the same total rate, measured side by side.",
        "",
        "| listing | p50 one at a time | p99 one at a time | CPU per request | p50 alone "
        "| p99 alone | p50 mixed | p99 mixed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, v in r.items():
        lines.append(
            f"| {name} | {_x(v['p50_one_at_a_time'])} | {_x(v['p99_one_at_a_time'])} | "
            f"{_x(v['cpu_per_request'])} | {_x(v['p50_alone'])} | {_x(v['p99_alone'])} | "
            f"{_x(v['p50_mixed'])} | {_x(v['p99_mixed'])} |"
        )
    lines += [
        "",
        f"**Event list p99 / healthz p99 at {s['rate']:.0f} req/s: {goal:.2f}x** "
        f"(goal at most {GOAL_RATIO:.0f}x: {met}).",
        "",
    ]
    behind = [
        f"{name} ({phases[name]['all']['throughput_rps']:.0f} req/s)"
        for name in ("healthz", "events", "rounds", "mixed")
        if phases[name]["all"]["throughput_rps"] < 0.95 * s["rate"]
    ]
    if behind:
        lines += [
            f"The server did not keep up with {s['rate']:.0f} req/s in: {', '.join(behind)}. "
            "Requests queued for the whole phase, so the latencies under load measure that "
            "queue more than the service; the one-at-a-time figures and the CPU per request "
            "are the service's cost.",
            "",
        ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small, short smoke run")
    parser.add_argument("--postgres-url", help="use this server instead of a throwaway one")
    parser.add_argument("--events", type=int, help="detection events to insert")
    parser.add_argument("--rate", type=float, help="requests per second")
    parser.add_argument("--duration", type=float, help="seconds of load per phase")
    parser.add_argument(
        "--workers", type=int, help="uvicorn processes (default 1, as `phalanx serve` runs)"
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="results folder")
    args = parser.parse_args(argv)
    settings = QUICK if args.quick else FULL
    overrides = {
        k: v
        for k, v in {
            "events": args.events,
            "rate": args.rate,
            "duration_s": args.duration,
            "workers": args.workers,
        }.items()
        if v is not None
    }
    settings = Settings(**{**asdict(settings), **overrides})

    with tempfile.TemporaryDirectory(prefix="bench-api-") as tmp:
        workdir = Path(tmp)
        (workdir / "data").mkdir()
        postgres: AbstractContextManager[str] = (
            nullcontext(args.postgres_url) if args.postgres_url else throwaway_postgres(workdir)
        )
        with postgres as server_url, private_schema(server_url) as url:
            migrate.upgrade(url)
            print(f"seeding {settings.events:,} events ...", flush=True)
            seeded = seed(url, settings)
            print(f"seeded in {seeded.seconds:.1f} s", flush=True)
            engine = make_engine(url)
            with session_factory(engine).begin() as session:
                secret = keys.create_key(session, name="bench", role=Role.VIEWER).secret
                version = session.execute(text("SHOW server_version")).scalar_one()
            engine.dispose()
            load_before = os.getloadavg()[0]
            with uvicorn_server(url, workdir, settings.workers) as server:
                measured = measure(server, secret, seeded, settings)
            load_after = os.getloadavg()[0]

    result = {
        "benchmark": "api",
        "quick": args.quick,
        "settings": {**asdict(settings), "events_per_round": settings.events_per_round},
        "seeded": {
            "events": settings.events_per_round * settings.runs * settings.rounds_per_run,
            "seconds": seeded.seconds,
            "evidence_bytes": seeded.evidence_bytes,
        },
        "postgres": version,
        "machine": (
            f"{platform.machine()}, {os.cpu_count()} CPUs (shared), Python "
            f"{platform.python_version()}; load average {load_before:.1f} before the load "
            f"and {load_after:.1f} after (other work shares the machine)"
        ),
        "measured": measured,
    }
    result["ratios"] = ratios(measured)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "api_quick" if args.quick else "api"
    (args.out / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    write_markdown(args.out / f"{stem}.md", result)
    print((args.out / f"{stem}.md").read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
