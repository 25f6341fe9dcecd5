"""Phalanx's ClientApp with a :class:`~benchmarks.lib.scale_probes.WorkClock` installed.

Flower's simulation engine loads it by reference (``benchmarks.lib.scale_client_app:app``).
Its handlers are this module's functions, which Ray pickles by reference, so each
actor imports this module; when :data:`~benchmarks.lib.scale_probes.CLOCK_DIR` names
a folder, every task's times are appended there; when
:data:`~benchmarks.lib.scale_probes.PROFILE_DIR` names one, each actor profiles its
tasks (``cProfile``) and writes ``<pid>.prof`` there every :data:`PROFILE_EVERY`
tasks (``bench_scale.py --profile-actors DIR``). Each message goes on to
``phalanx_clients.app:app`` unchanged.
"""

from __future__ import annotations

import cProfile
import os
from pathlib import Path

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from benchmarks.lib.scale_probes import CLOCK_DIR, PROFILE_DIR, WorkClock, file_sink
from phalanx_clients.app import BATCH_ACTION
from phalanx_clients.app import app as phalanx_app

__all__ = ["app"]

PROFILE_EVERY = 100

_INSTALLED = None
if os.environ.get(CLOCK_DIR):
    # Installed for the life of the process (an actor exists only to run the app); the
    # context is kept, since collecting it would close it and restore the worker.
    _INSTALLED = WorkClock(file_sink(Path(os.environ[CLOCK_DIR]))).installed()
    _INSTALLED.__enter__()


_PROFILE = cProfile.Profile() if os.environ.get(PROFILE_DIR) else None
_PROFILED = [0]


def _train(message: Message, context: Context) -> Message:
    if _PROFILE is None:
        return phalanx_app(message, context)
    _PROFILE.enable()
    try:
        return phalanx_app(message, context)
    finally:
        _PROFILE.disable()
        _PROFILED[0] += 1
        if _PROFILED[0] % PROFILE_EVERY == 0:  # an actor is killed, never told to finish
            _PROFILE.dump_stats(Path(os.environ[PROFILE_DIR]) / f"{os.getpid()}.prof")


def _evaluate(message: Message, context: Context) -> Message:
    return phalanx_app(message, context)


app = ClientApp()
app.train()(_train)
app.train(BATCH_ACTION)(_train)  # a virtual node's tasks of a round, in one message
app.evaluate()(_evaluate)
