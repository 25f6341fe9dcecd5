"""The Flower app Phalanx submits: Flower's own build and config checks accept it."""

from __future__ import annotations

import zipfile
from io import BytesIO
from pathlib import Path

import pytest
from flwr.cli.build import build_fab_from_disk
from flwr.cli.config_utils import load_and_validate
from flwr.common.config import parse_config_args

from phalanx.flower.deployment.flower_app import (
    APP_NAME,
    CLIENT_APP,
    SERVER_APP,
    DeployedRunRequest,
    write_flower_app,
)


def test_flower_validates_the_app_and_finds_both_components(tmp_path: Path) -> None:
    app = write_flower_app(tmp_path / APP_NAME)
    config, _warnings = load_and_validate(app / "pyproject.toml", check_module=True)
    components = config["tool"]["flwr"]["app"]["components"]
    assert (components["serverapp"], components["clientapp"]) == (SERVER_APP, CLIENT_APP)


def test_the_bundle_holds_only_the_app_description(tmp_path: Path) -> None:
    fab = build_fab_from_disk(write_flower_app(tmp_path / APP_NAME))
    names = set(zipfile.ZipFile(BytesIO(fab)).namelist())
    assert names == {"pyproject.toml", ".info/CONTENT"}


def test_the_run_request_survives_flowers_run_config_parser(tmp_path: Path) -> None:
    request = DeployedRunRequest(
        run_id="0b5c6c1e-3b55-4d7e-9f35-5d7f3c1a2b3c", claimer='host-1:4242 "quoted"'
    )
    overrides = tmp_path / "run-config.toml"
    overrides.write_text(request.to_toml(), encoding="utf-8")
    parsed = parse_config_args([str(overrides)])
    assert DeployedRunRequest.names_a_run(parsed)
    assert DeployedRunRequest.from_run_config(parsed) == request


def test_an_app_started_by_hand_is_told_who_starts_deployed_runs() -> None:
    with pytest.raises(ValueError, match="phalanx coordinator"):
        DeployedRunRequest.from_run_config({"phalanx-run-id": "", "phalanx-claimer": ""})


def test_the_apps_own_config_names_a_run_and_a_config_file_does_not(tmp_path: Path) -> None:
    app = write_flower_app(tmp_path / APP_NAME)
    config, _warnings = load_and_validate(app / "pyproject.toml", check_module=False)
    assert DeployedRunRequest.names_a_run(config["tool"]["flwr"]["app"]["config"])
    assert not DeployedRunRequest.names_a_run({"run-config": "examples/demo.toml"})
