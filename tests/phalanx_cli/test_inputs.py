"""Runs refused before they start: bad data or a deployment config, in one line.

``phalanx run``, ``phalanx demo`` and ``phalanx coordinator`` check what they read
(:mod:`phalanx_cli.inputs`) before anything is recorded or started.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from phalanx.data import DATASETS_DIR_ENV
from phalanx.settings import get_settings
from phalanx_cli.main import app
from tests.support.configs import small_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A working directory whose data dir, database and datasets dir are all fresh."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PHALANX_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("PHALANX_DATABASE_URL", f"sqlite:///{tmp_path / 'phalanx.db'}")
    monkeypatch.setenv(DATASETS_DIR_ENV, str(tmp_path / "datasets"))
    get_settings.cache_clear()
    yield tmp_path
    get_settings.cache_clear()


def _one_based(path: Path) -> Path:
    """An archive whose labels run 1..10 (enough samples for the small config)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    images = np.zeros((200, 8, 8), dtype=np.uint8)
    labels = np.arange(200) % 10 + 1
    np.savez(path, x_train=images, y_train=labels, x_test=images[:20], y_test=labels[:20])
    return path


def _config_file(path: Path, dataset: str) -> Path:
    config = small_config(data={"dataset": "digits"}).model_dump(mode="json")
    config["data"]["dataset"] = dataset
    path.write_text(json.dumps(config))
    return path


def test_run_refuses_bad_data_in_one_line_before_recording_anything(workdir: Path) -> None:
    _one_based(workdir / "mine.npz")
    config = _config_file(workdir / "run.json", "npz:mine.npz")
    result = CliRunner().invoke(app, ["run", str(config)])
    assert result.exit_code == 2
    # relative to the working directory, as the user of a local config file expects
    assert result.stderr.splitlines() == [
        f"error: npz:{workdir / 'mine.npz'}[y_train]: labels run 1..10 with no 0; "
        "labels are 0..C-1: subtract 1, or state data.num_classes"
    ]
    assert not (workdir / "phalanx.db").exists()


def test_demo_without_fashion_mnist_is_one_line_naming_the_setting_and_the_package(
    workdir: Path,
) -> None:
    result = CliRunner().invoke(app, ["demo", "--no-serve"])
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: Fashion-MNIST is not in {workdir / 'datasets'} ")
    assert DATASETS_DIR_ENV in line and "dataset-fashion-mnist" in line
    assert not (workdir / "phalanx.db").exists()


def test_the_coordinator_fails_a_claimed_run_with_bad_data_before_starting_it(
    workdir: Path,
) -> None:
    from phalanx.store import RunStatus, make_engine, migrate, runs, session_factory

    _one_based(workdir / "datasets" / "mine.npz")
    url = f"sqlite:///{workdir / 'phalanx.db'}"
    migrate.upgrade(url)
    sessions = session_factory(make_engine(url))
    config = small_config(data={"dataset": "npz:mine.npz"}).model_dump(mode="json")
    with sessions.begin() as session:
        run_id = runs.create_run(session, name="bad", config=config, seed=1).id
    result = CliRunner().invoke(app, ["coordinator", "--once"])
    assert result.exit_code == 0, result.output
    with sessions() as session:
        run = runs.get_run(session, run_id)
        assert run.status == RunStatus.FAILED and run.attempts == 1
        assert run.error == (
            "data refused: npz:mine.npz[y_train]: labels run 1..10 with no 0; "
            "labels are 0..C-1: subtract 1, or state data.num_classes"
        )


def test_run_refuses_a_deployment_config_before_recording_anything(workdir: Path) -> None:
    config = small_config(attack={"name": None, "q": 0}, deployment={"backend": "deployment"})
    path = workdir / "deployed.json"
    path.write_text(config.model_dump_json())
    result = CliRunner().invoke(app, ["run", str(path)])
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: {path}: deployment.backend is 'deployment': queue it through")
    assert not (workdir / "phalanx.db").exists()


def test_a_misspelt_field_is_one_line_naming_the_field_it_likely_meant(tmp_path: Path) -> None:
    text = (ROOT / "examples" / "quick-digits.toml").read_text()
    config = tmp_path / "run.toml"
    config.write_text(text.replace("optimizer =", "optimiser ="))
    result = subprocess.run(
        [sys.executable, "-m", "phalanx_cli", "run", str(config)],
        env={**os.environ, "PHALANX_DATA_DIR": str(tmp_path / "data")},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"error: {config}: training.optimiser: unknown field; did you mean `optimizer`?"
    ]
    assert result.stdout == ""
    assert not (tmp_path / "data").exists()
