"""Deployment commands, as a Typer app the ``phalanx`` CLI mounts (and ``python -m`` runs).

::

    from phalanx.flower.deployment.cli import client_start, deploy_app

    app.add_typer(deploy_app, name="deploy")        # phalanx deploy certs|superlink|admit|...
    client_app.command("start")(client_start)       # phalanx client start

``superlink`` and ``client-start`` replace this process with ``flower-superlink``
/ ``flower-supernode`` (``exec``), so a container's stop signal reaches Flower.
The ``probe-*`` commands exit 0 when healthy: container health checks.
"""

from __future__ import annotations

import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from phalanx.flower.deployment.certificates import DEFAULT_SERVER_NAMES, TlsFiles, ensure_tls_files
from phalanx.flower.deployment.node_config import NodeIdentity
from phalanx.flower.deployment.processes import flower_environment
from phalanx.flower.deployment.superlink import DEFAULT_PORT, SuperLinkOptions, superlink_command
from phalanx.flower.deployment.supernode import (
    DEFAULT_RUNTIME_PORT,
    SuperNodeOptions,
    supernode_command,
)

if TYPE_CHECKING:
    from phalanx.flower.deployment.backend import DeploymentBackend

__all__ = ["client_start", "deploy_app"]

deploy_app = typer.Typer(
    help="Deployment on Flower's SuperLink and SuperNodes.", no_args_is_help=True
)

SuperLinkAddress = Annotated[
    str, typer.Option(envvar="PHALANX_SUPERLINK", help="The SuperLink's HOST:PORT.")
]
RootCertificates = Annotated[
    Path,
    typer.Option(
        envvar="PHALANX_ROOT_CERTIFICATES",
        help="CA certificate that signed the SuperLink's TLS certificate.",
    ),
]


@deploy_app.command("certs")
def certs(
    directory: Annotated[Path, typer.Option("--dir", help="Where ca.pem, server.pem, ... go.")],
    name: Annotated[
        list[str] | None,
        typer.Option(
            help="A host name or IP of the SuperLink; repeat. Default: loopback, superlink."
        ),
    ] = None,
) -> None:
    """Create the local CA and the SuperLink's certificate, unless they are current already."""
    files = ensure_tls_files(directory, name or DEFAULT_SERVER_NAMES)
    typer.echo(f"CA certificate for clients: {files.ca_certificate}")


@deploy_app.command("superlink")
def superlink(
    tls_dir: Annotated[Path, typer.Option(help="Folder made by `certs`.")],
    database: Annotated[Path, typer.Option(help="Flower's state database file.")],
    host: Annotated[str, typer.Option(help="Address to bind.")] = "0.0.0.0",
    port: Annotated[int, typer.Option(help="The one HTTPS port of every API.")] = DEFAULT_PORT,
    flwr_home: Annotated[Path | None, typer.Option(help="FLWR_HOME of the SuperLink.")] = None,
) -> None:
    """Run flower-superlink with TLS and SuperNode authentication, dependencies never installed."""
    options = SuperLinkOptions(
        tls=TlsFiles(tls_dir), database=database, host=host, port=port, flwr_home=flwr_home
    )
    database.parent.mkdir(parents=True, exist_ok=True)
    extra = {"FLWR_HOME": str(flwr_home)} if flwr_home else {}
    _exec(superlink_command(options), extra)


def client_start(
    superlink: SuperLinkAddress,
    key: Annotated[
        Path,
        typer.Option(
            envvar="PHALANX_CLIENT_KEY",
            help="The client's private key (OpenSSH), the one registered over REST.",
        ),
    ],
    root_certificates: RootCertificates,
    client_id: Annotated[
        str | None,
        typer.Option(
            envvar="PHALANX_CLIENT_ID",
            help="The id the control plane gave; default: the file KEY.client-id.",
        ),
    ] = None,
    byzantine: Annotated[
        str | None,
        typer.Option(envvar="PHALANX_BYZANTINE", help="Red-team demo: lie with this attack."),
    ] = None,
    runtime_port: Annotated[
        int, typer.Option(help="Local port for this SuperNode's ClientApps.")
    ] = DEFAULT_RUNTIME_PORT,
    flwr_home: Annotated[Path | None, typer.Option(help="FLWR_HOME of the SuperNode.")] = None,
) -> None:
    """Start this machine's SuperNode with the Phalanx ClientApp; it connects once approved."""
    if not key.is_file():
        raise typer.BadParameter(
            f"{key} does not exist; run `phalanx client keygen`", param_hint="--key"
        )
    if byzantine:
        _check_byzantine(byzantine)
    identity = NodeIdentity(
        client_id=client_id or _saved_client_id(key),
        key_path=key.resolve(),
        byzantine=byzantine or None,
    )
    options = SuperNodeOptions(
        superlink=superlink,
        root_certificates=root_certificates,
        identity=identity,
        runtime_port=runtime_port,
        flwr_home=flwr_home,
    )
    extra = {"FLWR_HOME": str(flwr_home)} if flwr_home else {}
    _exec(supernode_command(options), extra)


def _check_byzantine(attack: str) -> None:
    """Refuse (exit 2) an attack this host does not allow, before the SuperNode starts."""
    from phalanx.attack_plugins import AttackPluginError
    from phalanx.attacks import load_attack

    try:
        load_attack(attack)
    except AttackPluginError as exc:
        raise typer.BadParameter(str(exc), param_hint="--byzantine") from exc


deploy_app.command("client-start")(client_start)


@deploy_app.command("admit")
def admit(
    superlink: SuperLinkAddress,
    root_certificates: RootCertificates,
    watch: Annotated[
        float | None, typer.Option(help="Repeat every this many seconds, for ever.")
    ] = None,
) -> None:
    """Register approved clients' keys with the SuperLink; unregister banned clients."""
    backend = _backend(superlink, root_certificates)
    while True:
        backend.admit()
        if watch is None:
            return
        time.sleep(watch)


@deploy_app.command("probe-superlink")
def probe_superlink(superlink: SuperLinkAddress, root_certificates: RootCertificates) -> None:
    """Exit 0 when the SuperLink answers its health check over verified TLS."""
    from phalanx.flower.deployment.superlink import is_healthy

    if not is_healthy(superlink, root_certificates):
        raise typer.Exit(1)


@deploy_app.command("probe-http")
def probe_http(
    url: Annotated[str, typer.Argument(help="e.g. http://127.0.0.1:8080/healthz")],
) -> None:
    """Exit 0 when ``url`` answers 200 (plain HTTP health endpoints inside a container)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            healthy = response.status == 200
    except (urllib.error.URLError, OSError):
        healthy = False
    if not healthy:
        raise typer.Exit(1)


@deploy_app.command("probe-alive")
def probe_alive(
    path: Annotated[Path, typer.Argument(help="The coordinator's --alive-file.")],
    max_age: Annotated[float, typer.Option(help="Seconds since the last touch.")] = 120.0,
) -> None:
    """Exit 0 when ``path`` was touched within ``max_age`` seconds."""
    try:
        age = time.time() - path.stat().st_mtime
    except FileNotFoundError:
        raise typer.Exit(1) from None
    if age > max_age:
        raise typer.Exit(1)


def _backend(superlink: str, root_certificates: Path) -> DeploymentBackend:
    from phalanx.flower.deployment.backend import DeploymentBackend
    from phalanx.flower.deployment.control import FlowerControl, SuperLinkConnection
    from phalanx.settings import get_settings
    from phalanx.store import make_engine, migrate, session_factory

    settings = get_settings()
    url = settings.resolved_database_url
    migrate.upgrade(url)
    control = FlowerControl(
        SuperLinkConnection(superlink, root_certificates), settings.data_dir / "flwr-home"
    )
    return DeploymentBackend(
        sessions=session_factory(make_engine(url)),
        control=control,
        log_dir=settings.data_dir / "flower-runs",
        report=lambda line: typer.echo(line, err=True),
    )


def _saved_client_id(key: Path) -> str:
    """Read the client id saved next to the key at registration (``KEY.client-id``)."""
    saved = key.with_name(key.name + ".client-id")
    try:
        client_id = saved.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        client_id = ""
    if not client_id:
        raise typer.BadParameter(
            f"give --client-id (the id `phalanx client register` printed), or save it in {saved}",
            param_hint="--client-id",
        )
    return client_id


def _exec(command: list[str], extra_env: dict[str, str]) -> NoReturn:
    """Replace this process with ``command`` in Flower's environment."""
    os.execvpe(command[0], command, flower_environment(extra_env))


if __name__ == "__main__":
    deploy_app()
