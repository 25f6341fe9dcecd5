"""Prometheus metrics of the control plane, in a registry of each app's own.

- ``phalanx_http_request_duration_seconds{method, route, status}``: request
  latency, labelled by route template (``/api/v1/runs/{run_id}``), never by raw
  path, so ids do not explode the label set.
- ``phalanx_runs{status}``, ``phalanx_clients{status}``: gauges read from the
  database at scrape time.
- ``phalanx_rounds_total``, ``phalanx_detection_events_total{kind}``: counters
  read from the database at scrape time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from phalanx.store import counts

logger = logging.getLogger(__name__)

#: Label of requests that matched no route (404s, static files).
UNMATCHED_ROUTE = "<unmatched>"
#: Methods labelled as themselves; any other is labelled ``OTHER``.
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class StoreCollector(Collector):
    """Reads the runs, rounds, clients and detection events counts at each scrape.

    Parameters
    ----------
    sessions : sessionmaker[Session]
        The app's session factory.
    """

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    def describe(self) -> Iterator[Metric]:
        """Yield the families without samples, so registering reads nothing."""
        yield GaugeMetricFamily("phalanx_runs", "Runs by status.", labels=["status"])
        yield GaugeMetricFamily(
            "phalanx_clients", "Registered clients by status.", labels=["status"]
        )
        yield CounterMetricFamily("phalanx_rounds", "Rounds recorded, all runs.")
        yield CounterMetricFamily(
            "phalanx_detection_events", "Detection events by kind.", labels=["kind"]
        )

    def collect(self) -> Iterator[Metric]:
        """Yield the metric families; nothing when the database cannot be read."""
        try:
            with self._sessions() as session:
                runs = counts.runs_by_status(session)
                clients = counts.clients_by_status(session)
                events = counts.events_by_kind(session)
                rounds = counts.rounds_total(session)
        except SQLAlchemyError as exc:
            logger.warning("metrics: cannot read the database: %s", exc)
            return
        runs_family = GaugeMetricFamily("phalanx_runs", "Runs by status.", labels=["status"])
        for status, count in runs.items():
            runs_family.add_metric([status.value], count)
        yield runs_family
        clients_family = GaugeMetricFamily(
            "phalanx_clients", "Registered clients by status.", labels=["status"]
        )
        for client_status, count in clients.items():
            clients_family.add_metric([client_status.value], count)
        yield clients_family
        yield CounterMetricFamily("phalanx_rounds", "Rounds recorded, all runs.", value=rounds)
        events_family = CounterMetricFamily(
            "phalanx_detection_events", "Detection events by kind.", labels=["kind"]
        )
        for kind, count in sorted(events.items()):
            events_family.add_metric([kind], count)
        yield events_family


class ApiMetrics:
    """The registry of one app and its request latency histogram.

    Parameters
    ----------
    sessions : sessionmaker[Session]
        Where the store counts are read from.
    """

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.request_duration = Histogram(
            "phalanx_http_request_duration_seconds",
            "Time to answer an HTTP request, by route template.",
            labelnames=("method", "route", "status"),
            registry=self.registry,
        )
        self.registry.register(StoreCollector(sessions))

    def exposition(self) -> bytes:
        """Return every metric in the Prometheus text format."""
        return generate_latest(self.registry)


def route_template(scope: Scope) -> str:
    """Return the template of the route that handled a request, e.g. ``/api/v1/runs/{run_id}``."""
    route = scope.get("route")
    path = getattr(route, "path_format", None) or getattr(route, "path", None)
    return path if isinstance(path, str) else UNMATCHED_ROUTE


class MetricsMiddleware:
    """Times every HTTP request into :attr:`ApiMetrics.request_duration`.

    Parameters
    ----------
    app : ASGIApp
        The wrapped application.
    metrics : ApiMetrics
        Where to record.
    """

    def __init__(self, app: ASGIApp, metrics: ApiMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Call the app and record how long it took and the status it answered."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500
        start = time.perf_counter()

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            method = scope["method"] if scope["method"] in KNOWN_METHODS else "OTHER"
            self.metrics.request_duration.labels(
                method, route_template(scope), str(status)
            ).observe(time.perf_counter() - start)
