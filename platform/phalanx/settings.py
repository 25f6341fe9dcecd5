"""Process-wide settings, read from ``PHALANX_*`` environment variables."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from phalanx.attack_plugins import is_reference


class Settings(BaseSettings):
    """Where Phalanx keeps its data and how it is reached.

    Every field can be set by an environment variable with the ``PHALANX_``
    prefix, e.g. ``PHALANX_DATABASE_URL``.
    """

    model_config = SettingsConfigDict(env_prefix="PHALANX_", extra="ignore")

    data_dir: Path = Field(
        default=Path(".phalanx"),
        description="Checkpoints, keys and the default SQLite database live here.",
    )
    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL; defaults to SQLite in the data directory.",
    )
    datasets_dir: Path = Field(
        default=Path("/usr/share/datasets/fashion-mnist"),
        description="Fashion-MNIST IDX files (Debian's dataset-fashion-mnist puts them here).",
    )
    secret_key: str = Field(default="", description="Signs dashboard session cookies.")
    api_host: str = "127.0.0.1"
    api_port: int = Field(default=8080, ge=1, le=65535, description="Port the API binds.")
    attack_plugins: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(),
        description="Attack classes this host allows a run config to name, as a comma-separated "
        "list of 'package.module:Name' (installed entry points of the 'phalanx.attacks' group "
        "are allowed without it).",
    )

    @field_validator("attack_plugins", mode="before")
    @classmethod
    def _split_references(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("attack_plugins")
    @classmethod
    def _well_formed(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [reference for reference in value if not is_reference(reference)]
        if bad:
            raise ValueError(f"{bad} must each look like 'package.module:Name'")
        return value

    @property
    def resolved_database_url(self) -> str:
        """The database URL, with the SQLite default filled in."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'phalanx.db').resolve()}"

    @property
    def checkpoint_dir(self) -> Path:
        """Folder for model checkpoints."""
        return self.data_dir / "checkpoints"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Return the settings of this process, read once."""
    return Settings()
