"""Phalanx's ClientApp with a :class:`~benchmarks.lib.scale_probes.WorkClock` installed.

Flower's simulation engine loads it by reference (``benchmarks.lib.scale_client_app:app``).
Its handlers are this module's functions, which Ray pickles by reference, so each
actor imports this module; when :data:`~benchmarks.lib.scale_probes.CLOCK_DIR` names
a folder, every task's times are appended there. Each message goes on to
``phalanx_clients.app:app`` unchanged.
"""

from __future__ import annotations

import os
from pathlib import Path

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from benchmarks.lib.scale_probes import CLOCK_DIR, WorkClock, file_sink
from phalanx_clients.app import app as phalanx_app

__all__ = ["app"]

_INSTALLED = None
if os.environ.get(CLOCK_DIR):
    # Installed for the life of the process (an actor exists only to run the app); the
    # context is kept, since collecting it would close it and restore the worker.
    _INSTALLED = WorkClock(file_sink(Path(os.environ[CLOCK_DIR]))).installed()
    _INSTALLED.__enter__()


def _train(message: Message, context: Context) -> Message:
    return phalanx_app(message, context)


def _evaluate(message: Message, context: Context) -> Message:
    return phalanx_app(message, context)


app = ClientApp()
app.train()(_train)
app.evaluate()(_evaluate)
