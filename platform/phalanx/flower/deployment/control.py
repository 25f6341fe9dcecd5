"""Flower's Control API, driven through Flower's own ``flwr`` CLI.

Everything Phalanx asks of a SuperLink — register or unregister a SuperNode's
public key, start a run, read its status, stop it — goes through the
documented ``flwr`` commands with ``--format json``, as an operator would type
them. The CLI reads its SuperLink connections from ``$FLWR_HOME/config.toml``;
:class:`FlowerControl` keeps a Flower home of its own (under Phalanx's data
directory) with one connection, so the operator's ``~/.flwr`` is never touched.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from phalanx.flower.deployment.processes import (
    ManagedProcess,
    flower_environment,
    flower_executable,
    start_process,
)
from phalanx.identity import PublicKey, public_key_to_openssh

__all__ = [
    "CONNECTION_NAME",
    "ControlError",
    "FlowerControl",
    "FlowerRun",
    "SuperLinkConnection",
    "SuperNodeInfo",
]

CONNECTION_NAME = "phalanx"
"""Name of the one SuperLink connection in Phalanx's Flower home."""

PUBLIC_KEY_IN_USE = "[code: 23]"
"""Flower's error code for a public key registered already (even if unregistered since)."""


class ControlError(RuntimeError):
    """A ``flwr`` command failed; the message is Flower's."""

    def __init__(self, command: Sequence[str], message: str) -> None:
        super().__init__(f"`flwr {' '.join(command)}` failed: {message}")
        self.flower_message = message

    @property
    def public_key_in_use(self) -> bool:
        """Whether Flower refused a registration because the key is known already."""
        return PUBLIC_KEY_IN_USE in self.flower_message


@dataclass(frozen=True)
class SuperLinkConnection:
    """Where the SuperLink's Control API is and which CA vouches for it.

    Parameters
    ----------
    address : str
        ``host:port`` of the SuperLink (Flower 1.42 serves every API on it).
    root_certificates : Path
        CA certificate that signed the SuperLink's TLS certificate.
    """

    address: str
    root_certificates: Path

    def config_toml(self) -> str:
        """Render the Flower configuration file that makes this connection the default."""
        return (
            f'[superlink]\ndefault = "{CONNECTION_NAME}"\n\n'
            f"[superlink.{CONNECTION_NAME}]\n"
            f"address = {json.dumps(self.address)}\n"
            f"root-certificates = {json.dumps(str(self.root_certificates.resolve()))}\n"
        )


@dataclass(frozen=True)
class SuperNodeInfo:
    """One SuperNode as ``flwr supernode list`` reports it."""

    node_id: int
    status: str  # registered, online, offline, unregistered


@dataclass(frozen=True)
class FlowerRun:
    """One Flower run as ``flwr list --run-id`` reports it."""

    run_id: int
    status: str  # pending, starting, running, finished:completed|failed|stopped
    details: str

    @property
    def finished(self) -> bool:
        """Whether the run is over, whatever the outcome."""
        return self.status.startswith("finished")

    @property
    def completed(self) -> bool:
        """Whether the ServerApp returned normally."""
        return self.status == "finished:completed"


class FlowerControl:
    """The ``flwr`` CLI, bound to one SuperLink.

    Parameters
    ----------
    connection : SuperLinkConnection
        The SuperLink.
    home : Path
        Flower home for the CLI (``FLWR_HOME``); its ``config.toml`` is written here.
    timeout : float
        Seconds one ``flwr`` command may take.
    """

    def __init__(
        self, connection: SuperLinkConnection, home: Path, *, timeout: float = 120.0
    ) -> None:
        self.connection = connection
        self.home = home
        self.timeout = timeout
        home.mkdir(parents=True, exist_ok=True)
        (home / "config.toml").write_text(connection.config_toml(), encoding="utf-8")

    def register_supernode(self, public_key: PublicKey, *, name: str | None = None) -> int:
        """Register a SuperNode's public key; return the node id Flower assigned.

        Raises
        ------
        ControlError
            When Flower refuses, e.g. the key was registered before
            (:attr:`ControlError.public_key_in_use`).
        """
        with tempfile.TemporaryDirectory(prefix="phalanx-key-") as folder:
            path = Path(folder) / "supernode.pub"
            path.write_text(public_key_to_openssh(public_key) + "\n", encoding="ascii")
            args = ["supernode", "register", str(path), CONNECTION_NAME]
            if name:
                args += ["--name", name]
            reply = self._flwr(args)
        return int(reply["node-id"])

    def unregister_supernode(self, node_id: int) -> None:
        """Unregister a SuperNode: it is disconnected and its key can never register again."""
        self._flwr(["supernode", "unregister", str(node_id), CONNECTION_NAME])

    def supernodes(self) -> list[SuperNodeInfo]:
        """Every SuperNode the SuperLink knows, with its status."""
        reply = self._flwr(["supernode", "list", CONNECTION_NAME])
        return [SuperNodeInfo(int(n["node-id"]), str(n["status"])) for n in reply["nodes"]]

    def start_run(self, app: Path, run_config: Path | None = None) -> int:
        """Start the Flower app in folder ``app`` (what ``flwr run APP SUPERLINK`` does).

        Parameters
        ----------
        app : Path
            A Flower app folder (its ``pyproject.toml`` names the components).
        run_config : Path, optional
            A TOML file of run config overrides.

        Returns
        -------
        int
            Flower's run id.
        """
        args = ["run", str(app), CONNECTION_NAME]
        if run_config is not None:
            args += ["--run-config", str(run_config)]
        return int(self._flwr(args)["run-id"])

    def run(self, run_id: int) -> FlowerRun:
        """Read the status of one run."""
        reply = self._flwr(["list", CONNECTION_NAME, "--run-id", str(run_id)])
        row = reply["runs"][0]
        return FlowerRun(int(row["run-id"]), str(row["status"]), str(row.get("status-details", "")))

    def stop_run(self, run_id: int) -> None:
        """Ask the SuperLink to stop a run."""
        self._flwr(["stop", str(run_id), CONNECTION_NAME])

    def stream_logs(self, run_id: int, log_path: Path) -> ManagedProcess:
        """Start ``flwr log RUN_ID --stream`` into ``log_path``; it exits when the run ends."""
        return start_process(
            f"flwr-log-{run_id}",
            [flower_executable("flwr"), "log", str(run_id), CONNECTION_NAME, "--stream"],
            log_path=log_path,
            env=self._env(),
        )

    def _env(self) -> dict[str, str]:
        return flower_environment({"FLWR_HOME": str(self.home)})

    def _flwr(self, args: Sequence[str]) -> Mapping[str, Any]:
        """Run ``flwr ARGS --format json`` and return its JSON reply.

        Raises
        ------
        ControlError
            When the command fails, times out, or answers ``"success": false``.
        """
        command = [flower_executable("flwr"), *args, "--format", "json"]
        try:
            done = subprocess.run(
                command,
                capture_output=True,
                text=True,
                env=self._env(),
                timeout=self.timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise ControlError(args, f"no answer within {self.timeout:.0f} s") from exc
        reply = _json_reply(done.stdout)
        if reply is None:
            message = (done.stderr or done.stdout).strip() or f"exit status {done.returncode}"
            raise ControlError(args, message)
        if not reply.get("success", False):
            raise ControlError(args, str(reply.get("error-message", reply)))
        return reply


def _json_reply(stdout: str) -> dict[str, Any] | None:
    """Parse the JSON object ``flwr --format json`` printed; ``None`` when there is none."""
    start = stdout.find("{")
    if start < 0:
        return None
    try:
        value = json.loads(stdout[start:])
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None
