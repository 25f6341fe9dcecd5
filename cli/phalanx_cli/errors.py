"""How the command line reports a failure: one line on stderr, the traceback only on request.

Any exception that escapes a ``phalanx`` command is printed as one line,
``error: <cause>``, on stderr, and the command exits non-zero: 2 when its input
was refused before anything started (:class:`RefusedError`: a bad config, bad or
missing data; and invalid stored configs), 1 for everything else (a run that
failed, an unreachable database, our own bugs). Ctrl-C ends a command with
``interrupted`` (a run says where it stopped) and status 130. ``phalanx --debug`` (or
``PHALANX_DEBUG=1``) lets the exception through, so its traceback is shown.
Click's usage errors (a missing argument, an unknown option) keep their form.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

import click
from typer.core import TyperGroup

DEBUG_ENV = "PHALANX_DEBUG"
"""Environment variable that, set to 1, shows tracebacks like ``--debug``."""

USAGE_EXIT = 2
"""Exit status of input refused before anything started (as click's usage errors)."""

FAILURE_EXIT = 1
"""Exit status of any other error."""

INTERRUPTED_EXIT = 130
"""Exit status of a command stopped by Ctrl-C (128 + SIGINT, as a shell reports it)."""

INTERRUPTED_GRACE_S = 10.0
"""Seconds an interrupted process waits at its exit for threads still running, then ends."""


SERVER_MODULES = frozenset(
    {
        "psycopg",
        "prometheus_client",
        "jinja2",
        "multipart",
        "python_multipart",
        "itsdangerous",
        "psutil",
        "ray",
    }
)
"""Modules of the ``server`` extra: a command that needs a missing one says how to install it."""


SETTINGS_MODELS = frozenset({"Settings", "ApiSettings"})
"""The models read from ``PHALANX_*`` environment variables (not from a config file)."""


def _setting(exc: Any) -> str:
    """Name the first bad setting of a settings ``ValidationError`` as its environment variable.

    Its value is not repeated: it may be a secret or a URL with a password.
    """
    error = exc.errors()[0]
    loc = error["loc"]  # a list setting's item adds its index: the variable is the first part
    name = f"PHALANX_{str(loc[0]).upper()}" if loc else "a PHALANX_* variable"
    return f"{name}: {error['msg']}"


class RefusedError(Exception):
    """A command's input refused before anything started: a bad config, bad or missing data."""


class FailedError(Exception):
    """A command that failed for a reason its message states in full (exit 1)."""


def cause(exc: BaseException) -> str:
    """Return the cause of ``exc`` as one line.

    The message of a :class:`RefusedError` or :class:`FailedError` stands alone; a
    module of the server extra that is not installed is named with the fix; other
    exceptions are named by their type, then the first line of their message (the
    rest of a database error, for instance, is its SQL).
    """
    from pydantic import ValidationError

    from phalanx.validation_messages import one_line

    if isinstance(exc, ValidationError):
        if exc.title in SETTINGS_MODELS:
            return f"invalid setting: {_setting(exc)}"
        return f"invalid config: {one_line(exc)}"
    missing = (exc.name or "").partition(".")[0] if isinstance(exc, ModuleNotFoundError) else ""
    if missing in SERVER_MODULES:
        return (
            f"this command needs Phalanx's server extra (module {missing!r} is missing): "
            "pip install 'phalanx[server]'"
        )
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    message = lines[0] if lines else ""
    if isinstance(exc, RefusedError | FailedError):
        return message or "failed"
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def exit_status(exc: BaseException) -> int:
    """Return 2 for input refused up front (:class:`RefusedError`, an invalid config), else 1."""
    from pydantic import ValidationError

    return USAGE_EXIT if isinstance(exc, RefusedError | ValidationError) else FAILURE_EXIT


class ReportingGroup(TyperGroup):
    """A Typer group whose commands' exceptions end in one line and a non-zero exit.

    The group's own ``debug`` parameter (``--debug``, ``PHALANX_DEBUG``) lets
    exceptions through instead.
    """

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; report an escaping exception in one line unless debugging."""
        try:
            return super().invoke(ctx)
        except click.exceptions.Exit as exit_:
            if exit_.exit_code == INTERRUPTED_EXIT:  # a run that said where it stopped
                end_even_if_threads_are_stuck()
            raise
        except (click.ClickException, click.Abort):
            raise  # click prints these itself, in their usual form
        except KeyboardInterrupt:
            if ctx.params.get("debug"):
                raise
            click.echo("interrupted", err=True)
            end_even_if_threads_are_stuck()
            raise click.exceptions.Exit(INTERRUPTED_EXIT) from None
        except Exception as exc:
            if ctx.params.get("debug"):
                raise
            click.echo(f"error: {cause(exc)}", err=True)
            raise click.exceptions.Exit(exit_status(exc)) from exc


def end_even_if_threads_are_stuck(grace: float = INTERRUPTED_GRACE_S) -> None:
    """Make sure a process stopped by Ctrl-C ends, with status 130, once it has said so.

    Ctrl-C reaches a run's own Ray as well: its actors die, and the simulation
    engine's worker threads wait for ever on tasks that can no longer answer. Python
    waits for such threads before it exits, so the process hung after its last line.
    At the process's exit (once, and not before), a watchdog gives the threads
    ``grace`` seconds, then ends the process with :data:`INTERRUPTED_EXIT`, its output
    flushed. A process whose threads end in time exits as usual.
    """
    global _GUARDED  # one watchdog per process
    if _GUARDED:
        return
    _GUARDED = True

    def watch() -> None:
        if any(t.is_alive() and not t.daemon for t in _other_threads()):
            timer = threading.Timer(grace, _end_now)
            timer.daemon = True
            timer.start()

    # Threading's own exit hooks run before it joins the threads (concurrent.futures
    # joins its workers there); atexit's would run only after, too late.
    register: Callable[[Callable[[], None]], None] | None = getattr(
        threading, "_register_atexit", None
    )
    if register is None:
        watch()
    else:
        register(watch)


_GUARDED = False


def _other_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t is not threading.current_thread()]


def _end_now() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed or broken stream
            stream.flush()
    os._exit(INTERRUPTED_EXIT)
