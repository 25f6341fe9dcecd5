"""The ``flower-supernode`` command of a Phalanx client.

A client's SuperNode connects to the SuperLink over TLS (trusting the
deployment's CA), authenticates with the client's EC key in OpenSSH format, and
tells its ClientApp who it is through the node config
(:class:`~phalanx.flower.deployment.node_config.NodeIdentity`). The SuperLink admits
it only once an operator approved the client and Phalanx registered its
public key (:mod:`phalanx.flower.deployment.admission`); before that, ``flower-supernode``
exits with Flower's exit code 305 (``Failed to activate SuperNode``).

Each SuperNode also serves a local Runtime API (default ``127.0.0.1:9094``) for
its ClientApp processes: SuperNodes sharing one machine need distinct ports.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from phalanx.flower.deployment.node_config import NodeIdentity
from phalanx.flower.deployment.ports import DEFAULT_RUNTIME_PORT
from phalanx.flower.deployment.processes import (
    ManagedProcess,
    flower_environment,
    flower_executable,
    start_process,
)

__all__ = [
    "SuperNodeOptions",
    "start_supernode",
    "supernode_command",
]


@dataclass(frozen=True)
class SuperNodeOptions:
    """How to start one client's SuperNode.

    Parameters
    ----------
    superlink : str
        The SuperLink's ``host:port``.
    root_certificates : Path
        The deployment's CA certificate (``ca.pem``).
    identity : NodeIdentity
        The client id, its private key file, and the optional Byzantine switch.
    runtime_port : int
        Port of the SuperNode's local Runtime API.
    max_wait_time : float, optional
        Seconds to keep retrying an unreachable SuperLink before giving up;
        ``None`` retries for ever.
    flwr_home : Path, optional
        Flower's home (``FLWR_HOME``), where the SuperNode unpacks the apps it
        runs; Flower's default is ``~/.flwr``.
    """

    superlink: str
    root_certificates: Path
    identity: NodeIdentity
    runtime_port: int = DEFAULT_RUNTIME_PORT
    max_wait_time: float | None = None
    flwr_home: Path | None = None


def supernode_command(options: SuperNodeOptions) -> list[str]:
    """Build the ``flower-supernode`` command line for ``options``."""
    command = [
        flower_executable("flower-supernode"),
        "--superlink",
        options.superlink,
        "--root-certificates",
        str(options.root_certificates),
        "--auth-supernode-private-key",
        str(options.identity.key_path),
        "--node-config",
        options.identity.to_node_config(),
        "--host",
        "127.0.0.1",
        "--port",
        str(options.runtime_port),
    ]
    if options.max_wait_time is not None:
        command += ["--max-wait-time", str(options.max_wait_time)]
    return command


def start_supernode(
    name: str,
    options: SuperNodeOptions,
    *,
    log_path: Path,
    env: Mapping[str, str] | None = None,
) -> ManagedProcess:
    """Start a client's ``flower-supernode``; it runs until stopped or refused.

    Parameters
    ----------
    name : str
        What it is, for messages.
    options : SuperNodeOptions
        SuperLink, CA, identity.
    log_path : Path
        The SuperNode's output (and that of its ClientApps).
    env : mapping, optional
        Extra environment for the SuperNode and its ClientApps.
    """
    extra = dict(env or {})
    if options.flwr_home is not None:
        extra["FLWR_HOME"] = str(options.flwr_home)
    return start_process(
        name, supernode_command(options), log_path=log_path, env=flower_environment(extra)
    )
