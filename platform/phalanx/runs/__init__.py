"""Runs: executing a federation, recording it, and summarising it."""

from phalanx.runs.execute import build_coordinator, execute_run, load_client_app
from phalanx.runs.summary import RunSummary, precision_recall, summarize

__all__ = [
    "RunSummary",
    "build_coordinator",
    "execute_run",
    "load_client_app",
    "precision_recall",
    "summarize",
]
