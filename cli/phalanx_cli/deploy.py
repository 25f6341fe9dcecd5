"""``phalanx deploy``: Flower's SuperLink as Phalanx deploys it, and container health probes.

``phalanx deploy certs|superlink|admit|probe-*``. ``superlink`` replaces this
process with ``flower-superlink`` (``exec``), so a container's stop signal
reaches Flower. The ``probe-*`` commands exit 0 when healthy: container health
checks. A client's SuperNode is ``phalanx client start``
(:mod:`phalanx_cli.client`); queued runs are executed by ``phalanx coordinator``.

What each command is given is checked before anything starts or is written
(refused in one line that names the option: exit 2): addresses and ports,
seconds, certificate names, and the TLS files. A SuperLink that cannot be
reached ends ``admit`` and ``probe-superlink`` with a line naming it (exit 1).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from phalanx.flower.deployment.addresses import HostNameError, check_host_name, split_address
from phalanx.flower.deployment.ports import DEFAULT_SUPERLINK_PORT, MAX_PORT
from phalanx_cli.errors import FailedError, RefusedError
from phalanx_cli.inputs import interval

if TYPE_CHECKING:
    from phalanx.flower.deployment.backend import DeploymentBackend

__all__ = ["RootCertificates", "SuperLinkAddress", "deploy_app", "exec_flower"]

deploy_app = typer.Typer(
    help="Deployment on Flower's SuperLink and SuperNodes.", no_args_is_help=True
)


def _checked_by(rule: Callable[[str], object], option: str) -> Callable[[str], str]:
    """Return a Typer callback that refuses (exit 2) a value ``rule`` raises ValueError for."""

    def check(value: str) -> str:
        try:
            rule(value)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint=option) from exc
        return value

    return check


def _optional_seconds(option: str) -> Callable[[float | None], float | None]:
    """Return :func:`~phalanx_cli.inputs.interval`'s check for an option that may be left out."""
    check = interval(option)
    return lambda value: None if value is None else check(value)


SuperLinkAddress = Annotated[
    str,
    typer.Option(
        envvar="PHALANX_SUPERLINK",
        help="The SuperLink's HOST:PORT ([IPv6]:PORT).",
        callback=_checked_by(split_address, "--superlink"),
    ),
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
    """Create the local CA and the SuperLink's certificate, unless they are current already.

    Every name is checked and every file to replace is looked at before anything
    is written; then all files are written, or none.
    """
    from phalanx.flower.deployment.certificates import (
        DEFAULT_SERVER_NAMES,
        CertificateFileError,
        ensure_tls_files,
    )

    try:
        files = ensure_tls_files(directory, name or DEFAULT_SERVER_NAMES)
    except HostNameError as exc:
        raise typer.BadParameter(str(exc), param_hint="--name") from exc
    except CertificateFileError as exc:
        raise RefusedError(f"--dir: {exc}") from exc
    except OSError as exc:
        raise RefusedError(
            f"--dir: cannot write {exc.filename or directory}: {exc.strerror or exc}"
        ) from exc
    typer.echo(f"CA certificate for clients: {files.ca_certificate}")


@deploy_app.command("superlink")
def superlink(
    tls_dir: Annotated[Path, typer.Option(help="The folder phalanx deploy certs wrote.")],
    database: Annotated[Path, typer.Option(help="Flower's state database file.")],
    host: Annotated[
        str,
        typer.Option(
            help="Address to bind: an IP (0.0.0.0: every one) or host name.",
            callback=_checked_by(check_host_name, "--host"),
        ),
    ] = "0.0.0.0",
    port: Annotated[
        int, typer.Option(help="The one HTTPS port of every API.", min=1, max=MAX_PORT)
    ] = DEFAULT_SUPERLINK_PORT,
    flwr_home: Annotated[Path | None, typer.Option(help="FLWR_HOME of the SuperLink.")] = None,
) -> None:
    """Run flower-superlink with TLS and SuperNode authentication, dependencies never installed.

    The TLS files and the database's folder are checked first, so that a mistake is
    named by this command's options rather than by Flower's.
    """
    from phalanx.flower.deployment.certificates import (
        CertificateFileError,
        TlsFiles,
        check_tls_files,
    )
    from phalanx.flower.deployment.superlink import SuperLinkOptions, superlink_command

    tls = TlsFiles(tls_dir)
    try:
        check_tls_files(tls)
    except CertificateFileError as exc:
        raise RefusedError(
            f"--tls-dir: {exc}; `phalanx deploy certs --dir {tls_dir}` writes the TLS files"
        ) from exc
    _check_database(database)
    options = SuperLinkOptions(
        tls=tls, database=database, host=host, port=port, flwr_home=flwr_home
    )
    extra = {"FLWR_HOME": str(flwr_home)} if flwr_home else {}
    exec_flower(superlink_command(options), extra)


@deploy_app.command("admit")
def admit(
    superlink: SuperLinkAddress,
    root_certificates: RootCertificates,
    watch: Annotated[
        float | None,
        typer.Option(
            help="Repeat every this many seconds, for ever.",
            callback=_optional_seconds("--watch"),
        ),
    ] = None,
) -> None:
    """Register approved clients' keys with the SuperLink; unregister banned clients.

    Without --watch, a SuperLink that cannot be reached, or a client it refuses, is an
    error (exit 1); with it, that is reported when it starts and when it ends, and the
    polling goes on.
    """
    from phalanx.flower.deployment.superlink import health_problem

    check_root_certificates(root_certificates)
    if watch is None:
        _reach(superlink, root_certificates)
        if not _backend(superlink, root_certificates).admit():
            raise FailedError("not every client could be brought in line (each is named above)")
        return
    backend = _backend(superlink, root_certificates)
    unreachable = False
    while True:
        problem = health_problem(superlink, root_certificates)
        if problem is None:
            backend.admit()
        if (problem is not None) != unreachable:
            typer.echo(
                f"cannot reach the SuperLink at {superlink}: {problem}; trying every {watch:g} s"
                if problem
                else f"the SuperLink at {superlink} answers again",
                err=True,
            )
        unreachable = problem is not None
        time.sleep(watch)


@deploy_app.command("probe-superlink")
def probe_superlink(superlink: SuperLinkAddress, root_certificates: RootCertificates) -> None:
    """Exit 0 when the SuperLink answers its health check over verified TLS, else say why."""
    check_root_certificates(root_certificates)
    _reach(superlink, root_certificates)


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
    max_age: Annotated[
        float, typer.Option(help="Seconds since the last touch.", callback=interval("--max-age"))
    ] = 120.0,
) -> None:
    """Exit 0 when PATH was touched within --max-age seconds."""
    try:
        age = time.time() - path.stat().st_mtime
    except FileNotFoundError:
        raise typer.Exit(1) from None
    if not age <= max_age:  # written so that no NaN can pass for fresh
        raise typer.Exit(1)


def _check_database(database: Path) -> None:
    """Refuse (exit 2) a ``--database`` Flower could not open; create its folder."""
    if database.is_dir():
        raise RefusedError(f"--database: {database} is a directory, not a database file")
    try:
        database.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RefusedError(
            f"--database: cannot create {database.parent}: {exc.strerror or exc}"
        ) from exc


def check_root_certificates(path: Path) -> None:
    """Refuse (exit 2) a ``--root-certificates`` that is not a PEM certificate file."""
    from phalanx.flower.deployment.certificates import CertificateFileError, read_certificates

    try:
        read_certificates(path)
    except CertificateFileError as exc:
        raise RefusedError(
            f"--root-certificates: {exc}; give the CA certificate that signed the "
            "SuperLink's (ca.pem of `phalanx deploy certs`)"
        ) from exc


def _reach(superlink: str, root_certificates: Path) -> None:
    """Fail (exit 1) in one line naming the SuperLink when its health check does not pass."""
    from phalanx.flower.deployment.superlink import health_problem

    problem = health_problem(superlink, root_certificates)
    if problem is not None:
        raise FailedError(f"cannot reach the SuperLink at {superlink}: {problem}")


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
