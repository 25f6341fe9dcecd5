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

Then a burst phase (``benchmarks.lib.api_burst``): hundreds of client registrations at once,
on SQLite and on PostgreSQL, while ``/healthz`` and a viewer's run list are
polled; registrations per second, 5xx answers, and each reader's p99 during the
burst against its p99 at rest, over repeated bursts. ``--burst-only`` re-runs
just that phase (PostgreSQL then only at ``--postgres-url`` or
``PHALANX_TEST_POSTGRES_URL``) and updates its part of the results.

PostgreSQL is ``--postgres-url`` if given, else a throwaway server started with
``.ci/postgres.sh`` (private state file) and stopped afterwards; the data go to
a schema of their own, dropped at the end. Writes ``benchmarks/results/api.json``
and ``api.md`` (``--quick``: a short smoke run, written to ``api_quick.*`` so that
it never overwrites the full results). Helpers in ``benchmarks.lib``: ``api_harness``
(server, load, statistics), ``api_seed`` (the data).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import text

from phalanx.store import Role, keys, make_engine, migrate, session_factory

if not __package__:  # run as `python benchmarks/NAME.py`: import `benchmarks` from this checkout
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.lib.api_burst import QUICK_BURST, BurstSettings, burst_markdown, run_burst
from benchmarks.lib.api_harness import (
    Load,
    Sample,
    Server,
    cpu_seconds,
    private_schema,
    summarize,
    throwaway_postgres,
    uvicorn_server,
)
from benchmarks.lib.api_seed import Seeded, seed
from benchmarks.lib.results import (
    RESULTS,
    load_average,
    machine,
    read_json,
    report_path,
    write_json,
    write_markdown,
)

PAGE = 50
POSTGRES_ENV = "PHALANX_TEST_POSTGRES_URL"
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


def markdown(result: dict[str, Any]) -> str:
    """api.md: the listings one at a time, under load, their ratios to /healthz, the burst."""
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
    if "burst" in result:
        lines += burst_markdown(result["burst"], result["burst"]["machine"])
    return "\n".join(lines) + "\n"


def measure_listings(
    server_url: str, workdir: Path, settings: Settings, quick: bool
) -> dict[str, Any]:
    """Seed a schema of its own with events, then time the listings; return the result."""
    with private_schema(server_url) as url:
        migrate.upgrade(url)
        print(f"seeding {settings.events:,} events ...", flush=True)
        seeded = seed(url, settings)
        print(f"seeded in {seeded.seconds:.1f} s", flush=True)
        engine = make_engine(url)
        with session_factory(engine).begin() as session:
            secret = keys.create_key(session, name="bench", role=Role.VIEWER).secret
            version = session.execute(text("SHOW server_version")).scalar_one()
        engine.dispose()
        load_before = load_average()
        with uvicorn_server(url, workdir, settings.workers) as server:
            measured = measure(server, secret, seeded, settings)
        load_after = load_average()
    return {
        "benchmark": "api",
        "quick": quick,
        "settings": {**asdict(settings), "events_per_round": settings.events_per_round},
        "seeded": {
            "events": settings.events_per_round * settings.runs * settings.rounds_per_run,
            "seconds": seeded.seconds,
            "evidence_bytes": seeded.evidence_bytes,
        },
        "postgres": version,
        "machine": machine_note(load_before, load_after),
        "measured": measured,
        "ratios": ratios(measured),
    }


def machine_note(load_before: float, load_after: float) -> str:
    """The machine the figures come from, with its load average around the measurement."""
    host = machine()
    return (
        f"{host.architecture}, {host.cores} CPUs (shared), Python "
        f"{host.python}; load average {load_before:.1f} before the load "
        f"and {load_after:.1f} after (other work shares the machine)"
    )


def measure_burst(workdir: Path, settings: BurstSettings, postgres_url: str | None) -> Any:
    """The burst phase (``api_burst``) on SQLite, and on PostgreSQL at ``postgres_url``."""
    load_before = load_average()
    burst = run_burst(workdir, settings, postgres_url)
    burst["machine"] = machine_note(load_before, load_average())
    return burst


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
    parser.add_argument(
        "--burst-only",
        action="store_true",
        help="re-run only the registration burst (SQLite; PostgreSQL at --postgres-url or "
        f"{POSTGRES_ENV}) and update its part of the results",
    )
    parser.add_argument("--bursts", type=int, help="bursts per database")
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
    burst_settings = QUICK_BURST if args.quick else BurstSettings()
    if args.bursts is not None:
        burst_settings = dataclasses.replace(burst_settings, pairs=args.bursts)
    results = report_path(args.out, "api", ".json", quick=args.quick)

    with tempfile.TemporaryDirectory(prefix="bench-api-") as tmp:
        workdir = Path(tmp)
        (workdir / "data").mkdir()
        if args.burst_only:
            if not results.is_file():
                parser.error(f"{results} does not exist: run the whole benchmark first")
            result = read_json(results)
            server_url = args.postgres_url or os.environ.get(POSTGRES_ENV)
            schema: AbstractContextManager[str | None] = (
                private_schema(server_url) if server_url else nullcontext(None)
            )
            with schema as burst_url:
                result["burst"] = measure_burst(workdir, burst_settings, burst_url)
            result["burst"]["alone"] = True  # the listing figures are an earlier run's
        else:
            postgres: AbstractContextManager[str] = (
                nullcontext(args.postgres_url) if args.postgres_url else throwaway_postgres(workdir)
            )
            with postgres as server_url:
                result = measure_listings(server_url, workdir, settings, args.quick)
                with private_schema(server_url) as burst_url:
                    result["burst"] = measure_burst(workdir, burst_settings, burst_url)

    write_json(results, result)
    write_markdown(report_path(args.out, "api", ".md", quick=args.quick), markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
