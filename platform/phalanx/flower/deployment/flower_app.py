"""The Flower app Phalanx submits to a SuperLink, and the run config it carries.

``flwr run APP SUPERLINK`` bundles the folder ``APP`` into a FAB, and the
SuperLink's ServerApp and every SuperNode's ClientApp load the components its
``pyproject.toml`` names. Phalanx is installed wherever those run (the
SuperLink is started with ``--disable-runtime-dependency-installation``), so
the app folder holds nothing but that file: :func:`write_flower_app`.

Each Flower run carries, as Flower run config, which Phalanx run it executes
and under whose lease (:class:`DeployedRunRequest`); the run's own
configuration stays in the Phalanx database.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

__all__ = [
    "APP_NAME",
    "CLIENT_APP",
    "SERVER_APP",
    "DeployedRunRequest",
    "write_flower_app",
]

SERVER_APP = "phalanx.flower.server_app:app"
CLIENT_APP = "phalanx_clients.app:enrolled_app"
APP_NAME = "phalanx-deployment"

RUN_ID_KEY = "phalanx-run-id"
CLAIMER_KEY = "phalanx-claimer"


@dataclass(frozen=True)
class DeployedRunRequest:
    """What one Flower run asks the Phalanx ServerApp to do.

    The run's own configuration, its timeouts included, stays in the database.

    Parameters
    ----------
    run_id : str
        The Phalanx run, claimed already.
    claimer : str
        The lease the ServerApp works under.
    """

    run_id: str
    claimer: str

    def to_toml(self) -> str:
        """Render the run config overrides file for ``flwr run --run-config FILE``."""
        return "".join(
            f"{key} = {value}\n"
            for key, value in (
                (RUN_ID_KEY, json.dumps(self.run_id)),
                (CLAIMER_KEY, json.dumps(self.claimer)),
            )
        )

    @staticmethod
    def names_a_run(run_config: Mapping[str, object]) -> bool:
        """Whether a Flower run config carries a request (this app's config always does)."""
        return RUN_ID_KEY in run_config

    @classmethod
    def from_run_config(cls, run_config: Mapping[str, object]) -> DeployedRunRequest:
        """Read the request from the ServerApp's ``context.run_config``.

        Raises
        ------
        ValueError
            When the run id or the claimer is missing: the app was started by
            hand rather than by ``phalanx``'s deployment backend.
        """
        run_id = str(run_config.get(RUN_ID_KEY, "")).strip()
        claimer = str(run_config.get(CLAIMER_KEY, "")).strip()
        if not run_id or not claimer:
            raise ValueError(
                f"run config lacks {RUN_ID_KEY} or {CLAIMER_KEY}; deployed runs are started by "
                "`phalanx coordinator` (or phalanx.flower.deployment.backend.run_on_superlink)"
            )
        return cls(run_id=run_id, claimer=claimer)


def write_flower_app(folder: Path) -> Path:
    """Write Phalanx's Flower app (one ``pyproject.toml``) into ``folder``; return ``folder``.

    The folder's name must be a valid Flower app name (letters, digits and
    hyphens), as ``flwr run`` checks it.
    """
    folder.mkdir(parents=True, exist_ok=True)
    defaults = DeployedRunRequest(run_id="", claimer="")
    (folder / "pyproject.toml").write_text(
        f"""\
# Phalanx on a Flower SuperLink. Phalanx itself is installed where the apps run
# (the SuperLink runs with --disable-runtime-dependency-installation).
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "{APP_NAME}"
version = "{_version()}"
description = "Byzantine-robust federated learning with Phalanx"
license = "Apache-2.0"
dependencies = []

[tool.flwr.app]
publisher = "phalanx"

[tool.flwr.app.components]
serverapp = "{SERVER_APP}"
clientapp = "{CLIENT_APP}"

[tool.flwr.app.config]
{defaults.to_toml()}""",
        encoding="utf-8",
    )
    return folder


def _version() -> str:
    try:
        return metadata.version("phalanx")
    except metadata.PackageNotFoundError:
        return "0.0.0"
