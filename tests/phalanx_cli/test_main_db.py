"""``phalanx db upgrade`` refuses a revision Alembic would fail on with a bare AssertionError."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from phalanx_cli.main import app


@pytest.mark.parametrize("revision", ["", "head+1"])
def test_db_upgrade_refuses_an_unknown_revision_naming_the_known_ones(
    tmp_path: Path, revision: str
) -> None:
    env = {"PHALANX_DATABASE_URL": f"sqlite:///{tmp_path}/p.db", "COLUMNS": "1000"}
    result = CliRunner().invoke(app, ["db", "upgrade", revision], env=env)
    assert result.exit_code == 2
    assert f"no revision {revision!r}: give head or one of 0001" in result.output
    assert "AssertionError" not in result.output


def test_db_upgrade_reaches_a_named_revision(tmp_path: Path) -> None:
    env = {"PHALANX_DATABASE_URL": f"sqlite:///{tmp_path}/p.db"}
    result = CliRunner().invoke(app, ["db", "upgrade", "0002_event_indexes"], env=env)
    assert result.exit_code == 0, result.output
    assert "database at 0002_event_indexes" in result.stderr
