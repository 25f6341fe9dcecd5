"""``phalanx deploy``: Flower's SuperLink as Phalanx deploys it, and container health probes.

``phalanx deploy certs|superlink|admit|probe-*``. ``superlink`` replaces this
process with ``flower-superlink`` (``exec``), so a container's stop signal
reaches Flower. The ``probe-*`` commands exit 0 when healthy: container health
checks. A client's SuperNode is ``phalanx client start``
(:mod:`phalanx_cli.client`); queued runs are executed by ``phalanx coordinator``.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from phalanx.flower.deployment.ports import DEFAULT_SUPERLINK_PORT

if TYPE_CHECKING:
    from phalanx.flower.deployment.backend import DeploymentBackend

__all__ = ["RootCertificates", "SuperLinkAddress", "deploy_app", "exec_flower"]

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
    from phalanx.flower.deployment.certificates import DEFAULT_SERVER_NAMES, ensure_tls_files

    files = ensure_tls_files(directory, name or DEFAULT_SERVER_NAMES)
    typer.echo(f"CA certificate for clients: {files.ca_certificate}")


@deploy_app.command("superlink")
def superlink(
    tls_dir: Annotated[Path, typer.Option(help="The folder phalanx deploy certs wrote.")],
    database: Annotated[Path, typer.Option(help="Flower's state database file.")],
    host: Annotated[str, typer.Option(help="Address to bind.")] = "0.0.0.0",
    port: Annotated[
        int, typer.Option(help="The one HTTPS port of every API.")
    ] = DEFAULT_SUPERLINK_PORT,
    flwr_home: Annotated[Path | None, typer.Option(help="FLWR_HOME of the SuperLink.")] = None,
) -> None:
    """Run flower-superlink with TLS and SuperNode authentication, dependencies never installed."""
    from phalanx.flower.deployment.certificates import TlsFiles
    from phalanx.flower.deployment.superlink import SuperLinkOptions, superlink_command

    options = SuperLinkOptions(
        tls=TlsFiles(tls_dir), database=database, host=host, port=port, flwr_home=flwr_home
    )
    database.parent.mkdir(parents=True, exist_ok=True)
    extra = {"FLWR_HOME": str(flwr_home)} if flwr_home else {}
    exec_flower(superlink_command(options), extra)


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
    url: Annotated[str, typer.Argument(help="The URL to ask, e.g. http://127.0.0.1:8080/healthz.")],
) -> None:
    """Exit 0 when URL answers 200 (plain HTTP health endpoints inside a container)."""
    import urllib.error
    import urllib.request

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
    """Exit 0 when PATH was touched within --max-age seconds."""
    if not math.isfinite(max_age) or max_age <= 0:
        raise typer.BadParameter(
            f"takes a positive number of seconds, not {max_age}", param_hint="--max-age"
        )
    try:
        age = time.time() - path.stat().st_mtime
    except FileNotFoundError:
        raise typer.Exit(1) from None
    if not age <= max_age:  # written so that no NaN can pass for fresh
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


def exec_flower(command: list[str], extra_env: dict[str, str]) -> NoReturn:
    """Replace this process with ``command`` in Flower's environment."""
    from phalanx.flower.deployment.processes import flower_environment

    os.execvpe(command[0], command, flower_environment(extra_env))
