"""``phalanx run`` and ``phalanx coordinator`` refuse what they cannot honour, before any start."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from phalanx_cli.main import app


@pytest.mark.parametrize("poll", ["-1", "0", "nan", "inf", "1e308"])
def test_the_coordinator_refuses_a_poll_that_is_no_wait_or_never_ends(
    tmp_path: Path, poll: str
) -> None:
    env = {"PHALANX_DATA_DIR": str(tmp_path), "COLUMNS": "500"}
    result = CliRunner().invoke(app, ["coordinator", "--once", f"--poll={poll}"], env=env)

    assert result.exit_code == 2
    assert "Invalid value for --poll: takes a number of seconds above 0 and at most 86400" in (
        result.output
    )
    assert not (tmp_path / "phalanx.db").exists()  # refused before the database


def test_a_resumed_run_refuses_a_config_it_would_ignore(tmp_path: Path) -> None:
    config = tmp_path / "other.toml"
    config.write_text("rounds = 3\n")
    env = {"PHALANX_DATA_DIR": str(tmp_path), "COLUMNS": "500"}

    result = CliRunner().invoke(app, ["run", "--resume", "some-run", str(config)], env=env)

    assert result.exit_code == 2
    assert "a resumed run keeps the config stored with it" in result.output
    assert not (tmp_path / "phalanx.db").exists()
