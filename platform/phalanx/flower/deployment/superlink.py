"""Starting and stopping Flower's SuperLink the way Phalanx deploys it.

Flower 1.42 serves the SuperLink's Fleet API (SuperNodes), Control API
(``flwr`` CLI) and Runtime API (the ServerApp) over HTTPS on one port
(``--host``/``--port``, default 8000). Phalanx always starts it with:

* TLS from :mod:`phalanx.flower.deployment.certificates`;
* ``--enable-supernode-auth``: only SuperNodes whose public key was registered
  through the Control API (:mod:`phalanx.flower.deployment.admission`) may connect;
* ``--database FILE``: registrations and runs survive a restart;
* ``--disable-runtime-dependency-installation``: the ServerApp runs in the
  SuperLink's own environment, where Phalanx is installed, and nothing is
  fetched with ``uv`` at run time.

Caution: the Control API shares the Fleet API's port and, in Flower's open
source edition, has no account authentication. Anyone who reaches the port can
register a SuperNode key or start a run; expose it only to networks you trust.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx

from phalanx.flower.deployment.certificates import TlsFiles
from phalanx.flower.deployment.ports import DEFAULT_SUPERLINK_PORT
from phalanx.flower.deployment.processes import (
    ManagedProcess,
    flower_environment,
    flower_executable,
    start_process,
    wait_until,
)

__all__ = [
    "RunningSuperLink",
    "SuperLinkOptions",
    "health_problem",
    "health_url",
    "host_port",
    "is_healthy",
    "start_superlink",
    "superlink_command",
]

_WILDCARD_TO_LOOPBACK = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}


@dataclass(frozen=True)
class SuperLinkOptions:
    """How to start a SuperLink.

    Parameters
    ----------
    tls : TlsFiles
        CA certificate, server certificate and key.
    database : Path
        Flower's state database file (node registrations, runs).
    host : str
        Address to bind; ``0.0.0.0`` to accept SuperNodes from other machines.
    port : int
        The one HTTPS port of the Fleet, Control and Runtime APIs.
    supernode_auth : bool
        Admit only SuperNodes whose public key was registered.
    flwr_home : Path, optional
        Flower's home (``FLWR_HOME``), where the SuperLink unpacks the apps it
        runs; Flower's default is ``~/.flwr``.
    """

    tls: TlsFiles
    database: Path
    host: str = "127.0.0.1"
    port: int = DEFAULT_SUPERLINK_PORT
    supernode_auth: bool = True
    flwr_home: Path | None = None


@dataclass
class RunningSuperLink:
    """A started SuperLink: its process and the address clients use."""

    process: ManagedProcess
    address: str
    tls: TlsFiles

    @property
    def pid(self) -> int:
        """The SuperLink's process id."""
        return self.process.pid

    def stop(self, timeout: float = 15.0) -> int:
        """Stop the SuperLink, its SuperExec and any ServerApp; return its exit status."""
        return self.process.stop(timeout)


def superlink_command(options: SuperLinkOptions) -> list[str]:
    """Build the ``flower-superlink`` command line for ``options``."""
    command = [
        flower_executable("flower-superlink"),
        "--ssl-ca-certfile",
        str(options.tls.ca_certificate),
        "--ssl-certfile",
        str(options.tls.server_certificate),
        "--ssl-keyfile",
        str(options.tls.server_key),
        "--database",
        str(options.database),
        "--disable-runtime-dependency-installation",
        "--host",
        options.host,
        "--port",
        str(options.port),
    ]
    if options.supernode_auth:
        command.append("--enable-supernode-auth")
    return command


def host_port(host: str, port: int) -> str:
    """Join ``host:port``, with an IPv6 host in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def health_url(address: str) -> str:
    """Return the SuperLink's health endpoint at ``address`` (``host:port``)."""
    return f"https://{address}/health"


def is_healthy(address: str, ca_certificate: Path, *, timeout: float = 2.0) -> bool:
    """Whether the SuperLink at ``address`` answers its health check over verified TLS."""
    return health_problem(address, ca_certificate, timeout=timeout) is None


def health_problem(address: str, ca_certificate: Path, *, timeout: float = 2.0) -> str | None:
    """Say in one line why the SuperLink at ``address`` fails its health check, if it does.

    Parameters
    ----------
    address : str
        ``host:port`` of the SuperLink.
    ca_certificate : Path
        The CA its TLS certificate must be signed by.
    timeout : float
        Seconds to wait for the answer.

    Returns
    -------
    str or None
        ``None`` when the SuperLink answers 200 over verified TLS; otherwise why
        not, e.g. ``[Errno 111] Connection refused`` or a certificate that does
        not verify.
    """
    context = ssl.create_default_context(cafile=str(ca_certificate))
    try:
        response = httpx.get(health_url(address), verify=context, timeout=timeout)
    except httpx.HTTPError as exc:
        lines = str(exc).strip().splitlines()
        return lines[0] if lines else type(exc).__name__
    if response.status_code != httpx.codes.OK:
        return f"its health check answered HTTP {response.status_code}"
    return None


def start_superlink(
    options: SuperLinkOptions,
    *,
    log_path: Path,
    env: Mapping[str, str] | None = None,
    ready_timeout: float = 60.0,
) -> RunningSuperLink:
    """Start ``flower-superlink`` and wait until its health check answers.

    Parameters
    ----------
    options : SuperLinkOptions
        TLS files, state database, address.
    log_path : Path
        The SuperLink's output (and that of the ServerApps it runs).
    env : mapping, optional
        Extra environment, e.g. ``PHALANX_DATABASE_URL`` for the ServerApp.
    ready_timeout : float
        Seconds to wait for the health check.

    Raises
    ------
    ProcessFailedError
        When the SuperLink exits or is not healthy in time; the message ends
        with its log.
    """
    options.database.parent.mkdir(parents=True, exist_ok=True)
    extra = dict(env or {})
    if options.flwr_home is not None:
        extra["FLWR_HOME"] = str(options.flwr_home)
    process = start_process(
        "superlink", superlink_command(options), log_path=log_path, env=flower_environment(extra)
    )
    address = host_port(_WILDCARD_TO_LOOPBACK.get(options.host, options.host), options.port)
    try:
        wait_until(
            lambda: is_healthy(address, options.tls.ca_certificate),
            timeout=ready_timeout,
            what="healthy",
            process=process,
            interval=0.5,
        )
    except BaseException:
        process.stop()
        raise
    return RunningSuperLink(process=process, address=address, tls=options.tls)
