"""Long-running Flower processes that Phalanx starts, and stops by pid.

Flower's ``flower-superlink`` and ``flower-supernode`` start helpers of their own
(``flower-superexec``, which starts ``flwr-serverapp`` and ``flwr-clientapp``),
some in a session of their own. :meth:`ManagedProcess.stop` therefore notes the
whole process tree first (with ``psutil``), then signals the process and each
noted descendant by its pid, checking each pid's start time so that a pid the
kernel reused for an unrelated process is never signalled.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

__all__ = [
    "FLOWER_QUIET_ENV",
    "ManagedProcess",
    "ProcessFailedError",
    "ProcessId",
    "flower_environment",
    "free_port",
    "start_process",
    "stop_all",
    "wait_until",
]

FLOWER_QUIET_ENV = {"FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1"}
"""Flower reports telemetry and checks for updates over the network by default; not here."""


class ProcessFailedError(RuntimeError):
    """A process exited, or never became ready; the message ends with its log."""


_GONE = frozenset({psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD})
_KILLED_WITHIN_S = 10.0
"""How long :func:`stop_all` waits for processes it sent SIGKILL to be gone."""


@dataclass(frozen=True)
class ProcessId:
    """A process as the kernel knows it: its pid and its start time (pids get reused)."""

    pid: int
    started: float  # psutil's create_time(): seconds since the epoch

    def alive(self) -> bool:
        """Whether this very process still runs (a zombie does not)."""
        return self.process() is not None

    def process(self) -> psutil.Process | None:
        """Return this very process; ``None`` once it is gone (never one that took its pid)."""
        try:
            process = psutil.Process(self.pid)
            if process.create_time() != self.started or process.status() in _GONE:
                return None
        except psutil.Error:  # gone, or not ours to look at
            return None
        return process


@dataclass
class ManagedProcess:
    """A process started by :func:`start_process`, with its log file.

    Parameters
    ----------
    name : str
        What it is, for messages (``"superlink"``, ``"supernode-2"``).
    popen : subprocess.Popen
        The process.
    log_path : Path
        Its standard output and error.
    """

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        """The process id."""
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        """The exit status, or ``None`` while it runs."""
        return self.popen.poll()

    def running(self) -> bool:
        """Whether the process has not exited."""
        return self.popen.poll() is None

    def log_text(self) -> str:
        """Everything the process wrote so far."""
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def failure(self, what: str) -> ProcessFailedError:
        """Build an error saying ``what`` went wrong, with the tail of the log."""
        tail = "\n".join(self.log_text().splitlines()[-40:])
        return ProcessFailedError(f"{self.name} (pid {self.pid}): {what}\n--- log tail ---\n{tail}")

    def descendants(self) -> list[ProcessId]:
        """Every live process this one started, directly or not."""
        return _descendants(self.pid)

    def stop(self, timeout: float = 15.0) -> int:
        """Stop the process and every descendant it started; return its exit status.

        Sends SIGTERM to the process and to every descendant noted before it
        (each by its pid), waits up to ``timeout`` seconds, then SIGKILL
        (:func:`stop_all`). Calling it again returns the same status.
        """
        (status,) = stop_all([self], timeout)
        return status


def stop_all(processes: Sequence[ManagedProcess], timeout: float = 15.0) -> list[int]:
    """Stop every process and each one's descendants at once; return their exit statuses.

    Every process still running, and every descendant noted before the signals,
    gets SIGTERM (a descendant by its pid) before any is waited for, so stopping
    several costs the slowest shutdown, not the sum of them all, and a Flower
    helper is told to stop with its parent, not once the parent is gone.
    Whatever outlives ``timeout`` seconds gets SIGKILL, and so does anything a
    descendant started meanwhile that is still there by then.
    """
    running = [p for p in processes if p.running()]
    tree = [d for p in running for d in p.descendants()]
    for process in running:
        with contextlib.suppress(ProcessLookupError):
            process.popen.terminate()
    _terminate(tree)
    deadline = time.monotonic() + timeout
    for process in running:
        try:
            process.popen.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                process.popen.kill()
            process.popen.wait()
    late = [p for t in tree for p in _descendants(t.pid) if p not in tree]
    _terminate(late)
    _kill_after([*tree, *late], deadline)
    return [p.popen.wait() for p in processes]


def flower_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Copy this process's environment for a Flower command, this interpreter's ``bin`` first.

    Flower starts ``flower-superexec``, ``flwr-serverapp`` and ``flwr-clientapp``
    by name, so they must be found on ``PATH`` in the same environment.
    """
    env = dict(os.environ)
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(
        [bin_dir, *[p for p in env.get("PATH", "").split(os.pathsep) if p]]
    )
    env.update(FLOWER_QUIET_ENV)
    env.update(extra or {})
    return env


def flower_executable(name: str) -> str:
    """Find a Flower console script beside this interpreter; ``name`` when there is none."""
    candidate = Path(sys.executable).parent / name
    return str(candidate) if candidate.is_file() else name


def start_process(
    name: str,
    command: Sequence[str],
    *,
    log_path: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> ManagedProcess:
    """Start ``command`` in a session of its own, its output appended to ``log_path``.

    Parameters
    ----------
    name : str
        What it is, for messages.
    command : sequence of str
        The program and its arguments.
    log_path : Path
        Standard output and error go here; the folder is created.
    env : mapping, optional
        The environment; :func:`flower_environment` when omitted.
    cwd : Path, optional
        The working directory.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        popen = subprocess.Popen(
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else flower_environment(),
            cwd=cwd,
            start_new_session=True,
        )
    return ManagedProcess(name=name, popen=popen, log_path=log_path)


def wait_until(
    ready: Callable[[], bool],
    *,
    timeout: float,
    what: str,
    process: ManagedProcess | None = None,
    interval: float = 0.2,
) -> None:
    """Poll ``ready()`` until it is true.

    Raises
    ------
    ProcessFailedError
        When ``process`` exits first, or ``timeout`` seconds pass.
    """
    deadline = time.monotonic() + timeout
    while not ready():
        if process is not None and not process.running():
            raise process.failure(f"exited with status {process.returncode} before {what}")
        if time.monotonic() > deadline:
            if process is not None:
                raise process.failure(f"not {what} after {timeout:.0f} s")
            raise ProcessFailedError(f"not {what} after {timeout:.0f} s")
        time.sleep(interval)


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port on ``host`` that nothing listens on right now."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


def _descendants(root: int) -> list[ProcessId]:
    """Every live descendant of ``root``, with its start time."""
    try:
        children = psutil.Process(root).children(recursive=True)
    except psutil.Error:
        return []
    found: list[ProcessId] = []
    for child in children:
        try:
            if child.status() not in _GONE:
                found.append(ProcessId(child.pid, child.create_time()))
        except psutil.Error:  # it ended meanwhile
            continue
    return found


def _terminate(processes: Sequence[ProcessId]) -> None:
    """SIGTERM each process that is still the one noted."""
    for noted in processes:
        if (process := noted.process()) is not None:
            with contextlib.suppress(psutil.Error):
                process.terminate()


def _kill_after(processes: Sequence[ProcessId], deadline: float) -> None:
    """Wait until every process is gone or ``deadline`` (monotonic) passes; SIGKILL the rest.

    Returns once the killed ones are gone too (SIGKILL takes effect in a moment, not
    at once), or after :data:`_KILLED_WITHIN_S` seconds.
    """
    while any(p.alive() for p in processes) and time.monotonic() < deadline:
        time.sleep(0.1)
    killed = []
    for noted in processes:
        if (process := noted.process()) is not None:
            with contextlib.suppress(psutil.Error):
                process.kill()
                killed.append(noted)
    gone_by = time.monotonic() + _KILLED_WITHIN_S
    while any(p.alive() for p in killed) and time.monotonic() < gone_by:
        time.sleep(0.05)
