"""``phalanx client``: this machine as a client: its key pair, its registration, its SuperNode.

``keygen`` writes the key pair (:mod:`phalanx_clients.key_files`), ``register``
registers it with the control plane over REST and proves possession
(:mod:`phalanx_clients.enrollment`), and ``start`` replaces this process with the
client's ``flower-supernode`` (``exec``), which connects once an operator approved
the client.
"""

from __future__ import annotations

import socket
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from phalanx.flower.deployment.ports import DEFAULT_RUNTIME_PORT
from phalanx_cli.deploy import (
    RootCertificates,
    SuperLinkAddress,
    check_root_certificates,
    exec_flower,
)
from phalanx_cli.errors import FailedError, RefusedError
from phalanx_cli.output import Format, FormatOption, console, print_json, say

client_app = typer.Typer(
    help="This machine as a Phalanx client: its key pair, its registration, its SuperNode.",
    no_args_is_help=True,
)


class CurveChoice(StrEnum):
    """EC curves a client key can be on."""

    P256 = "P-256"
    P384 = "P-384"


@client_app.command("keygen")
def client_keygen(
    out: Annotated[Path, typer.Option(help="Private key file; the public key goes to OUT.pub.")],
    curve: Annotated[
        CurveChoice, typer.Option(help="The NIST curve of the key pair.")
    ] = CurveChoice.P256,
    force: Annotated[bool, typer.Option(help="Overwrite existing files.")] = False,
) -> None:
    """Generate the client's key pair (OpenSSH format, usable as the Flower SuperNode key)."""
    from phalanx_clients.key_files import create_key_files

    try:
        files = create_key_files(out, curve.value, overwrite=force)
    except FileExistsError as exc:
        raise RefusedError(f"{exc.filename} exists; pass --force to overwrite it") from exc
    except IsADirectoryError as exc:
        raise typer.BadParameter(
            f"{exc.filename} is a directory, not a key file; remove it or give another --out",
            param_hint="--out",
        ) from exc
    except OSError as exc:
        raise RefusedError(
            f"cannot write {exc.filename}: {exc.strerror or exc}; no key file was changed"
        ) from exc
    say(f"private key {files.private_key} (mode 0600), public key {files.public_key}")
    sys.stdout.write(files.fingerprint + "\n")


@client_app.command("register")
def client_register(
    key: Annotated[Path, typer.Option(help="The private key file phalanx client keygen wrote.")],
    api: Annotated[
        str | None, typer.Option(help="Control plane URL; default http://API_HOST:API_PORT.")
    ] = None,
    name: Annotated[str | None, typer.Option(help="The client's name; default the host.")] = None,
    output: FormatOption = Format.TABLE,
) -> None:
    """Register this client's key with the control plane and prove possession of it."""
    from phalanx.identity import IdentityError, load_private_key_file
    from phalanx.settings import get_settings
    from phalanx_clients.enrollment import EnrollmentError, register

    settings = get_settings()
    api_url = _checked_api(api) if api else f"http://{settings.api_host}:{settings.api_port}"
    try:
        private_key = load_private_key_file(key)
    except (IdentityError, OSError) as exc:
        raise typer.BadParameter(str(exc), param_hint="--key") from exc
    try:
        enrollment = register(api_url, private_key, name or socket.gethostname())
    except EnrollmentError as exc:
        raise FailedError(f"registration failed: {exc}") from exc
    if output == Format.JSON:
        print_json({"id": enrollment.client_id, "status": enrollment.status})
        return
    sys.stdout.write(f"{enrollment.client_id} {enrollment.status}\n")
    if enrollment.status == "pending":
        console.print("registered; an operator must approve this client before it gets work")


@client_app.command("start")
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
    data_path: Annotated[
        str | None,
        typer.Option(
            envvar="PHALANX_DATA_PATH",
            help="This client's own data, for runs with data.mode = 'local': npz:PATH or "
            "idx:DIR (or a bare .npz file or IDX directory). It never leaves this machine.",
        ),
    ] = None,
) -> None:
    """Start this machine's SuperNode with the Phalanx ClientApp; it connects once approved."""
    from phalanx.flower.deployment.node_config import NodeIdentity
    from phalanx.flower.deployment.supernode import SuperNodeOptions, supernode_command

    if not key.is_file():
        why = "is not a regular file" if key.exists() else "does not exist"
        raise typer.BadParameter(
            f"{key} {why}; give the key file `phalanx client keygen` wrote", param_hint="--key"
        )
    if byzantine:
        _check_byzantine(byzantine)
    identity = NodeIdentity(
        client_id=client_id or _saved_client_id(key),
        key_path=key.resolve(),
        byzantine=byzantine or None,
        data_path=_absolute_data_path(data_path) if data_path else None,
    )
    options = SuperNodeOptions(
        superlink=superlink,
        root_certificates=root_certificates,
        identity=identity,
        runtime_port=runtime_port,
        flwr_home=flwr_home,
    )
    check_root_certificates(root_certificates)  # flower-supernode would fail in a traceback
    extra = {"FLWR_HOME": str(flwr_home)} if flwr_home else {}
    exec_flower(supernode_command(options), extra)


def _checked_api(api: str) -> str:
    """Return ``api`` if it is an http(s) URL with a host; refuse it (exit 2) otherwise."""
    import httpx

    try:
        url = httpx.URL(api)
    except httpx.InvalidURL as exc:
        raise typer.BadParameter(f"{api!r} is not a URL: {exc}", param_hint="--api") from exc
    if url.scheme not in ("http", "https") or not url.host:
        raise typer.BadParameter(
            f"{api!r} is not an http or https URL with a host, e.g. http://controlplane:8000",
            param_hint="--api",
        )
    return api


def _absolute_data_path(data_path: str) -> str:
    """Name ``data_path`` with an absolute path (relative to here), refusing one not there.

    The ClientApp would take a relative path inside its datasets directory instead.
    """
    from phalanx.node_data import NodeDataError, data_spec

    try:
        spec = data_spec(data_path)
    except NodeDataError as exc:
        raise typer.BadParameter(str(exc), param_hint="--data-path") from exc
    prefix, _, path = spec.partition(":")
    if not path:  # a built-in dataset's name
        return spec
    target = Path(path).expanduser().resolve()
    if not target.exists():
        raise typer.BadParameter(f"{target} does not exist", param_hint="--data-path")
    return f"{prefix}:{target}"


def _check_byzantine(attack: str) -> None:
    """Refuse (exit 2) an attack this host does not allow, before the SuperNode starts."""
    from phalanx.attack_plugins import AttackPluginError
    from phalanx.attacks import load_attack

    try:
        load_attack(attack)
    except AttackPluginError as exc:
        raise typer.BadParameter(str(exc), param_hint="--byzantine") from exc


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
