"""A burst of client registrations against ``phalanx serve``, and what it does to the readers.

Issue 15: 45 concurrent ``POST /api/v1/clients`` on SQLite made ``/healthz`` and
a viewer's ``GET /api/v1/runs`` time out for 25 s; 120 gave 500s. This phase
sends ``registrations`` of them at once (valid bodies, EC keys generated
beforehand, one connection each) while two pollers, 20 times a second each,
time ``/healthz`` and a viewer's run list. Each burst is paired with a rest
period of the same polling just before it, so that what the burst costs the
readers is a ratio measured minutes apart on the same server (the engine as it
was before is not available to run beside it). Reported per database, over the
repeated pairs: registrations per second with the count of 5xx answers, each
reader's p99 at rest and during the burst, and their ratio, with the spread.
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from benchmarks.lib.api_harness import cpu_seconds, percentile, uvicorn_server
from phalanx.identity import generate_private_key, public_key_to_openssh
from phalanx.store import Role, keys, make_engine, migrate, session_factory

#: Settings another change may add (registration rate limit, pending-client cap), set out of reach.
UNLIMITED = {
    "PHALANX_REGISTRATION_PER_MINUTE": "1000000",
    "PHALANX_MAX_PENDING_CLIENTS": "1000000",
}
READERS = {"healthz": "/healthz", "runs": "/api/v1/runs"}


@dataclass(frozen=True)
class BurstSettings:
    registrations: int = 200
    pairs: int = 5
    rest_s: float = 3.0
    poll_every_s: float = 0.05
    reader_timeout_s: float = 30.0
    registration_timeout_s: float = 120.0


QUICK_BURST = BurstSettings(registrations=100, pairs=2, rest_s=1.0)


@dataclass
class Poller:
    """Times one reader's requests, one after another, until stopped."""

    base: str
    path: str
    headers: dict[str, str]
    timeout_s: float
    every_s: float
    latencies_ms: list[float] = field(default_factory=list)
    failures: Counter[str] = field(default_factory=Counter)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        with httpx.Client(base_url=self.base, headers=self.headers, timeout=self.timeout_s) as c:
            while not self.stop.wait(self.every_s):
                sent = time.perf_counter()
                try:
                    status = c.get(self.path).status_code
                except httpx.HTTPError as exc:
                    self.failures[type(exc).__name__] += 1
                    continue
                if status == 200:
                    self.latencies_ms.append(1000 * (time.perf_counter() - sent))
                else:
                    self.failures[str(status)] += 1


class Readers:
    """The two pollers, started and stopped together."""

    def __init__(self, base: str, viewer: str, settings: BurstSettings) -> None:
        auth = {"Authorization": f"Bearer {viewer}"}
        self.pollers = {
            name: Poller(
                base,
                path,
                auth if name == "runs" else {},
                settings.reader_timeout_s,
                settings.poll_every_s,
            )
            for name, path in READERS.items()
        }
        self.threads = [threading.Thread(target=p.run) for p in self.pollers.values()]

    def __enter__(self) -> Readers:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        for poller in self.pollers.values():
            poller.stop.set()
        for thread in self.threads:
            thread.join()

    def summary(self) -> dict[str, Any]:
        return {
            name: {
                "requests": len(p.latencies_ms) + sum(p.failures.values()),
                "failures": dict(p.failures),
                "p50_ms": percentile(p.latencies_ms, 50),
                "p99_ms": percentile(p.latencies_ms, 99),
                "max_ms": max(p.latencies_ms, default=float("nan")),
            }
            for name, p in self.pollers.items()
        }


async def _register_all(base: str, public_keys: Sequence[str], timeout_s: float) -> list[str]:
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=base, timeout=timeout_s, limits=limits) as http:

        async def register(i: int, key: str) -> str:
            try:
                body = {"name": f"burst-{i}", "public_key": key}
                return str((await http.post("/api/v1/clients", json=body)).status_code)
            except httpx.HTTPError as exc:
                return type(exc).__name__

        return list(await asyncio.gather(*(register(i, k) for i, k in enumerate(public_keys))))


def _public_keys(count: int) -> list[str]:
    return [public_key_to_openssh(generate_private_key("P-256").public_key()) for _ in range(count)]


def one_pair(base: str, pid: int, viewer: str, settings: BurstSettings) -> dict[str, Any]:
    """Poll at rest, then poll through a burst; return both and the burst's outcome."""
    public_keys = _public_keys(settings.registrations)
    with Readers(base, viewer, settings) as rest:
        time.sleep(settings.rest_s)
    with Readers(base, viewer, settings) as during:
        time.sleep(settings.poll_every_s)  # the pollers are in flight when the burst lands
        cpu_before, started = cpu_seconds(pid), time.perf_counter()
        outcomes = asyncio.run(_register_all(base, public_keys, settings.registration_timeout_s))
        seconds, cpu_after = time.perf_counter() - started, cpu_seconds(pid)
    answers = Counter(outcomes)
    server_cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    return {
        "seconds": seconds,
        "answers": dict(answers),
        "server_errors": sum(n for k, n in answers.items() if k.isdigit() and int(k) >= 500),
        "not_answered": sum(n for k, n in answers.items() if not k.isdigit()),
        "registrations_per_s": answers.get("201", 0) / seconds,
        "server_cpu_ms_per_registration": (
            None if server_cpu is None else 1000 * server_cpu / len(outcomes)
        ),
        "rest": rest.summary(),
        "burst": during.summary(),
    }


def measure_database(url: str, workdir: Path, settings: BurstSettings) -> dict[str, Any]:
    """Run the pairs against a server on ``url`` (migrated here, a viewer key made)."""
    migrate.upgrade(url)
    engine = make_engine(url)
    with session_factory(engine).begin() as session:
        viewer = keys.create_key(session, name="burst-viewer", role=Role.VIEWER).secret
    engine.dispose()
    with uvicorn_server(url, workdir, extra_env=UNLIMITED) as server:
        pairs = [one_pair(server.base, server.pid, viewer, settings) for _ in range(settings.pairs)]
    return {"pairs": pairs, "aggregate": aggregate(pairs)}


def _spread(values: Sequence[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def aggregate(pairs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Median and range over the pairs; answers and 5xx summed."""
    out: dict[str, Any] = {
        "registrations": sum(sum(p["answers"].values()) for p in pairs),
        "server_errors": sum(p["server_errors"] for p in pairs),
        "not_answered": sum(p["not_answered"] for p in pairs),
        "registrations_per_s": _spread([p["registrations_per_s"] for p in pairs]),
    }
    for reader in READERS:
        rest = [p["rest"][reader]["p99_ms"] for p in pairs]
        burst = [p["burst"][reader]["p99_ms"] for p in pairs]
        out[reader] = {
            "p99_rest_ms": _spread(rest),
            "p99_burst_ms": _spread(burst),
            "ratio": _spread([b / r for b, r in zip(burst, rest, strict=True)]),
            "failures": sum(
                sum(p[phase][reader]["failures"].values())
                for p in pairs
                for phase in ("rest", "burst")
            ),
        }
    return out


def run_burst(workdir: Path, settings: BurstSettings, postgres_url: str | None) -> dict[str, Any]:
    """The burst on SQLite, and on PostgreSQL when a database URL is given."""
    databases: dict[str, Any] = {}
    sqlite_dir = workdir / "burst-sqlite"
    sqlite_dir.mkdir()
    (sqlite_dir / "data").mkdir()
    print("burst on SQLite ...", flush=True)
    databases["sqlite"] = measure_database(
        f"sqlite:///{sqlite_dir / 'burst.db'}", sqlite_dir, settings
    )
    if postgres_url is not None:
        postgres_dir = workdir / "burst-postgres"
        postgres_dir.mkdir()
        (postgres_dir / "data").mkdir()
        print("burst on PostgreSQL ...", flush=True)
        databases["postgres"] = measure_database(postgres_url, postgres_dir, settings)
    return {"settings": asdict(settings), "databases": databases}


def _range(spread: dict[str, float], unit: str = "", digits: int = 0) -> str:
    return (
        f"{spread['median']:.{digits}f}{unit} ({spread['min']:.{digits}f}–"
        f"{spread['max']:.{digits}f})"
    )


def burst_markdown(burst: dict[str, Any], machine: str) -> list[str]:
    """The section of ``api.md`` on the burst."""
    s = burst["settings"]
    lines = [
        "## A burst of registrations",
        "",
        f"Written by `benchmarks/bench_api.py` (`--burst-only` re-runs just this part). "
        f"{s['registrations']} `POST /api/v1/clients` at once (valid bodies, P-256 keys made "
        f"beforehand, one connection each) against `phalanx serve` (one process), {s['pairs']} "
        f"times per database; before each burst, {s['rest_s']:.0f} s at rest. Throughout, "
        f"`/healthz` and a viewer's `GET /api/v1/runs` are each polled every "
        f"{1000 * s['poll_every_s']:.0f} ms (one request at a time). Medians over the bursts, "
        "with the range in parentheses; the p99 of a reader during a burst of a few seconds "
        "is close to its slowest answer. "
        f"Machine: {machine}."
        + (
            " This section was re-run on its own (`--burst-only`); the tables above come "
            "from the last full run, on the code before the request session became "
            "read-only with queued admission."
            if burst.get("alone")
            else ""
        ),
        "",
        "| database | registrations | 5xx | unanswered | registrations/s "
        "| healthz p99 at rest (ms) | healthz p99 in burst (ms) | ratio "
        "| runs p99 at rest (ms) | runs p99 in burst (ms) | ratio | reader failures |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, data in burst["databases"].items():
        a = data["aggregate"]
        h, r = a["healthz"], a["runs"]
        lines.append(
            f"| {name} | {a['registrations']} | {a['server_errors']} | {a['not_answered']} "
            f"| {_range(a['registrations_per_s'])} | {_range(h['p99_rest_ms'], digits=1)} "
            f"| {_range(h['p99_burst_ms'], digits=1)} | {_range(h['ratio'], 'x', 1)} "
            f"| {_range(r['p99_rest_ms'], digits=1)} | {_range(r['p99_burst_ms'], digits=1)} "
            f"| {_range(r['ratio'], 'x', 1)} | {h['failures'] + r['failures']} |"
        )
    moves = [
        f"{name}: registrations/s {_fold(d['aggregate']['registrations_per_s'])}, healthz p99 "
        f"in a burst {_fold(d['aggregate']['healthz']['p99_burst_ms'])}"
        for name, d in burst["databases"].items()
    ]
    lines += [
        "",
        "How much the figures move from one burst to the next on this shared host (largest "
        f"over smallest): {'; '.join(moves)}. Read the medians; a single burst can land on "
        "a moment when other work has the CPUs.",
        "",
    ]
    return lines


def _fold(spread: dict[str, float]) -> str:
    return f"{spread['max'] / spread['min']:.1f}x" if spread["min"] > 0 else "–"
