"""What commands read before anything starts: run configs, their data, the database.

A config, an attack or a dataset that cannot be used is refused here
(:class:`~phalanx_cli.errors.RefusedError`: one line, exit 2), before a run is
recorded or a worker started.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from phalanx_cli.errors import RefusedError
from phalanx_cli.output import console

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker

    from phalanx.config import RunConfig
    from phalanx.data_checks import DatasetFacts


DAY_S = 86_400.0
"""The longest interval a command waits between two looks at something."""


def interval(option: str, most: float = DAY_S) -> Callable[[float], float]:
    """Return a Typer callback that takes a number of seconds above 0 and at most ``most``.

    Without it ``nan`` or ``inf`` fails late and in Python's words, and 0 turns a
    polling loop into a busy one.
    """

    def check(value: float) -> float:
        if not (math.isfinite(value) and 0 < value <= most):
            raise typer.BadParameter(
                f"takes a number of seconds above 0 and at most {most:g}, not {value}",
                param_hint=option,
            )
        return value

    return check


@contextmanager
def migrated_sessions(url: str) -> Iterator[sessionmaker[Session]]:
    """Migrate the database at ``url`` to head, then yield its session factory."""
    from phalanx.store import make_engine, migrate, session_factory

    migrate.upgrade(url)
    engine = make_engine(url)
    try:
        yield session_factory(engine)
    finally:
        engine.dispose()


def load_config(path: Path) -> RunConfig:
    """Read a local run config; relative dataset paths are taken from the working directory."""
    from pydantic import ValidationError

    from phalanx.config import RunConfig, load_run_config
    from phalanx.validation_messages import one_line

    try:
        config = load_run_config(path)
    except ValidationError as exc:
        raise RefusedError(f"{path}: {one_line(exc, RunConfig)}") from exc
    except (OSError, ValueError) as exc:
        raise RefusedError(f"{path}: {exc}") from exc
    prefix, _, given = config.data.dataset.partition(":")
    if prefix in ("idx", "npz") and not Path(given).is_absolute():
        data = config.data.model_copy(update={"dataset": f"{prefix}:{Path(given).absolute()}"})
        config = config.model_copy(update={"data": data})
    check_attack(config, source=str(path))
    return config


def check_attack(config: RunConfig, *, source: str) -> None:
    """Refuse (exit 2) a run whose attack does not load, before anything starts."""
    from phalanx.attack_plugins import AttackPluginError
    from phalanx.attacks import check_attack as check

    try:
        check(config.attack)
    except AttackPluginError as exc:
        raise RefusedError(f"{source}: attack.{exc.field}: {exc}") from exc


def check_simulated(config: RunConfig, *, source: str) -> None:
    """Refuse (exit 2) a deployment run: this process simulates, a coordinator deploys."""
    if config.deployment.backend != "simulation":
        raise RefusedError(
            f"{source}: deployment.backend is {config.deployment.backend!r}: queue it through "
            "the API (POST /api/v1/runs) for `phalanx coordinator --superlink HOST:PORT`"
        )


def checked_data(config: RunConfig, root: Path | None = None) -> DatasetFacts:
    """Check the run's data before anything is recorded or started (refused: exit 2)."""
    from phalanx.data_checks import DataError
    from phalanx.data_files import DatasetNotFoundError
    from phalanx.preflight import check_run_data

    try:
        facts = check_run_data(config, root)
    except (DataError, DatasetNotFoundError) as exc:
        raise RefusedError(str(exc)) from exc
    console.print(f"data {escape(facts.describe())}")
    return facts
