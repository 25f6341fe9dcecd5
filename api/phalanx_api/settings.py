"""Settings of the control plane: the project's settings plus the API's own.

Every field is read from a ``PHALANX_*`` environment variable, like the rest of
Phalanx, e.g. ``PHALANX_AUTO_APPROVE_CLIENTS=true``.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from phalanx.settings import Settings

#: Name of the file under ``data_dir`` holding the generated session secret.
SECRET_KEY_FILE = "secret_key"


class ApiSettings(Settings):
    """Project settings (database, data directory, host, port) and the API's policies."""

    model_config = SettingsConfigDict(env_prefix="PHALANX_", extra="ignore")

    auto_approve_clients: bool = Field(
        default=False,
        description="Approve a client as soon as it proves it holds its key.",
    )
    ban_on_confirm: bool = Field(
        default=True,
        description="Ban the client when an operator confirms one of its detection events.",
    )
    max_body_bytes: int = Field(
        default=1024 * 1024, ge=1024, description="Largest request body accepted (413 above)."
    )
    challenge_ttl_s: int = Field(
        default=600,
        ge=1,
        description="Seconds a registration challenge, and an unproven registration, stays valid.",
    )
    registration_per_minute: int = Field(
        default=30,
        ge=1,
        description="Client registrations one address may make per minute (429 beyond).",
    )
    pending_per_address: int = Field(
        default=10,
        ge=1,
        description=(
            "Client registrations one address may make per challenge lifetime "
            "(challenge_ttl_s), so that a few addresses cannot fill the waiting list of "
            "unproven registrations (429 beyond)."
        ),
    )
    max_pending_clients: int = Field(
        default=1000,
        ge=1,
        description="Most unproven registrations waiting for their proof at once (429 beyond).",
    )
    proof_per_minute: int = Field(
        default=30,
        ge=1,
        description=(
            "Proofs of possession and new challenges one address may ask per minute, and proofs "
            "that may come for one client from others than its registrant (429 beyond)."
        ),
    )
    login_per_minute: int = Field(
        default=10,
        ge=1,
        description="Failed dashboard logins per minute, per address and per key prefix.",
    )
    session_max_age_s: int = Field(
        default=8 * 3600, ge=60, description="Seconds a dashboard session lasts."
    )
    session_cookie: str = Field(default="phalanx_session", pattern=r"^[A-Za-z0-9_\-]+$")
    cookie_secure: bool = Field(
        default=False,
        description=(
            "Mark the dashboard's cookies Secure (sent over HTTPS only) whatever the request's "
            "scheme; they are Secure anyway on requests that arrive over HTTPS."
        ),
    )
    api_allow_attacks: bool = Field(
        default=False,
        description="Let a launch simulate adversaries (attack.q > 0): a research feature that "
        "runs attack code on the coordinator's host. Built-in attacks, installed plug-ins and "
        "PHALANX_ATTACK_PLUGINS only.",
    )


@lru_cache(maxsize=1)
def get_api_settings() -> ApiSettings:
    """Return the settings of this process, read once from the environment."""
    return ApiSettings()


def resolve_secret_key(settings: Settings) -> str:
    """Return the key that signs session cookies.

    ``PHALANX_SECRET_KEY`` when set; otherwise a random key generated once and
    kept in ``data_dir/secret_key`` (mode ``0600``), so sessions survive a restart.

    Parameters
    ----------
    settings : Settings
        Where the data directory is and whether a key was configured.

    Returns
    -------
    str
        The secret key.
    """
    if settings.secret_key:
        return settings.secret_key
    path = Path(settings.data_dir) / SECRET_KEY_FILE
    try:
        return _read_secret(path)
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".secret_key.")  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="ascii") as file:
            file.write(secrets.token_urlsafe(48) + "\n")
        os.link(tmp, path)  # atomic, and fails if another process got there first
    except FileExistsError:
        pass
    finally:
        os.unlink(tmp)
    return _read_secret(path)


def _read_secret(path: Path) -> str:
    secret = path.read_text(encoding="ascii").strip()
    if not secret:
        raise RuntimeError(f"{path} is empty: delete it or set PHALANX_SECRET_KEY")
    return secret
