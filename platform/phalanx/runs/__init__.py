"""Runs: executing a federation, recording it, and summarising it.

- :mod:`~phalanx.runs.executor`: the one executor (:func:`execute`) and the
  transports it drives the coordinator over.
- :mod:`~phalanx.runs.recorder`: rounds, checkpoints and the run's end in the database.
- :mod:`~phalanx.runs.enrolled`: the workers of a deployed run, from the database.
- :mod:`~phalanx.runs.summary`: the one summary of a finished run.
"""

from phalanx.runs.executor import (
    Connected,
    Federation,
    build_coordinator,
    execute,
    execute_run,
    simulated_partition,
)
from phalanx.runs.summary import RunSummary, precision_recall, summarize

__all__ = [
    "Connected",
    "Federation",
    "RunSummary",
    "build_coordinator",
    "execute",
    "execute_run",
    "precision_recall",
    "simulated_partition",
    "summarize",
]
