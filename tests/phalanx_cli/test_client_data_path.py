"""``phalanx client start --data-path``: the client's own data, named absolutely in its node config.

A path that is not there is refused in one line before Flower starts; one that is goes to
the SuperNode's node config as ``data-path``, made absolute (the ClientApp would read a
relative path inside its datasets directory instead).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from flwr.common.config import parse_config_args
from typer.testing import CliRunner

from phalanx.flower.deployment.certificates import ensure_tls_files
from phalanx_cli.main import app


def _start(tmp_path: Path, key: Path, *extra: str) -> tuple[int, str]:
    files = ensure_tls_files(tmp_path / "certs", ["localhost"])
    args = ["client", "start", "--superlink", "127.0.0.1:9", "--client-id", "c1"]
    args += ["--root-certificates", str(files.ca_certificate), "--key", str(key), *extra]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "500"})
    return result.exit_code, result.output


def _node_config(command: list[str]) -> dict[str, object]:
    return dict(parse_config_args([command[command.index("--node-config") + 1]]))


def test_a_relative_data_path_reaches_the_node_config_absolute(
    tmp_path: Path, client_key: Path, no_exec: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "data").mkdir()
    np.savez(tmp_path / "data" / "ours.npz", x_train=np.zeros((2, 8, 8)), y_train=np.zeros(2))
    monkeypatch.chdir(tmp_path)

    code, output = _start(tmp_path, client_key, "--data-path", os.path.join("data", "ours.npz"))

    assert code == 0, output
    assert _node_config(no_exec[0])["data-path"] == f"npz:{tmp_path.resolve()}/data/ours.npz"


def test_no_data_path_leaves_it_out_of_the_node_config(
    tmp_path: Path, client_key: Path, no_exec: list[list[str]]
) -> None:
    code, output = _start(tmp_path, client_key)

    assert code == 0, output
    assert "data-path" not in _node_config(no_exec[0])


@pytest.mark.parametrize("given", ["npz:{tmp}/gone.npz", "{tmp}/no-such-dir", "   ", "npz:"])
def test_a_data_path_that_is_not_there_is_refused_before_flower_starts(
    tmp_path: Path, client_key: Path, no_exec: list[list[str]], given: str
) -> None:
    code, output = _start(tmp_path, client_key, "--data-path", given.format(tmp=tmp_path))

    assert code == 2
    assert "--data-path" in output and "Traceback" not in output
    assert no_exec == []


def test_a_key_that_is_a_directory_is_called_so(tmp_path: Path, no_exec: list[list[str]]) -> None:
    code, output = _start(tmp_path, tmp_path)

    assert code == 2
    assert f"{tmp_path} is not a regular file" in output and "does not exist" not in output
    assert no_exec == []
