"""The deployment commands that containers run: certificates and health probes."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from phalanx.flower.deployment.processes import free_port
from phalanx.flower.deployment.superlink import RunningSuperLink
from phalanx_cli.client import client_app
from phalanx_cli.deploy import deploy_app

runner = CliRunner()


def test_certs_makes_a_certificate_for_the_public_name_and_keeps_the_ca(tmp_path: Path) -> None:
    first = runner.invoke(deploy_app, ["certs", "--dir", str(tmp_path), "--name", "link.example"])
    ca = (tmp_path / "ca.pem").read_bytes()
    again = runner.invoke(deploy_app, ["certs", "--dir", str(tmp_path), "--name", "other.example"])
    assert (first.exit_code, again.exit_code) == (0, 0)
    assert (tmp_path / "ca.pem").read_bytes() == ca
    assert "ca.pem" in first.output


@pytest.mark.parametrize("max_age", ["nan", "inf", "0", "-5"])
def test_probe_alive_refuses_a_max_age_that_is_no_positive_number(
    tmp_path: Path, max_age: str
) -> None:
    alive = tmp_path / "alive"
    alive.touch()  # fresh: a NaN bound once let any file pass for fresh
    result = runner.invoke(deploy_app, ["probe-alive", str(alive), "--max-age", max_age])
    assert result.exit_code == 2 and "--max-age" in result.output


def test_probe_alive_fails_for_a_missing_or_stale_file(tmp_path: Path) -> None:
    alive = tmp_path / "alive"
    assert runner.invoke(deploy_app, ["probe-alive", str(alive)]).exit_code == 1
    alive.touch()
    assert runner.invoke(deploy_app, ["probe-alive", str(alive)]).exit_code == 0
    old = time.time() - 600
    os.utime(alive, (old, old))
    assert runner.invoke(deploy_app, ["probe-alive", str(alive), "--max-age", "60"]).exit_code == 1


def test_probe_http_fails_when_nothing_answers() -> None:
    url = f"http://127.0.0.1:{free_port()}/healthz"
    assert runner.invoke(deploy_app, ["probe-http", url]).exit_code == 1


def test_probe_superlink_needs_the_right_ca(
    tmp_path: Path, superlink: tuple[RunningSuperLink, object]
) -> None:
    link, _ = superlink
    args = ["probe-superlink", "--superlink", link.address, "--root-certificates"]
    assert runner.invoke(deploy_app, [*args, str(link.tls.ca_certificate)]).exit_code == 0
    runner.invoke(deploy_app, ["certs", "--dir", str(tmp_path / "other")])
    assert runner.invoke(deploy_app, [*args, str(tmp_path / "other" / "ca.pem")]).exit_code == 1


def test_client_start_says_where_the_client_id_comes_from(tmp_path: Path) -> None:
    key = tmp_path / "client.key"
    key.write_text("not read before the id is known", encoding="ascii")
    args = ["start", "--superlink", "127.0.0.1:9", "--root-certificates", str(key)]
    refused = runner.invoke(
        client_app, [*args, "--key", str(key)], env={"PHALANX_CLIENT_ID": "", "COLUMNS": "500"}
    )
    assert refused.exit_code == 2
    assert "client.key.client-id" in refused.output


def test_client_start_needs_an_existing_key(tmp_path: Path) -> None:
    args = ["start", "--superlink", "127.0.0.1:9", "--client-id", "c"]
    args += ["--root-certificates", str(tmp_path), "--key", str(tmp_path / "missing.key")]
    refused = runner.invoke(client_app, args)
    assert refused.exit_code == 2 and "client keygen" in refused.output


def test_client_start_refuses_an_attack_the_host_does_not_allow_before_starting(
    tmp_path: Path, allow_attack_plugins: Callable[..., None]
) -> None:
    key = tmp_path / "client.key"
    key.write_text("not read: the attack is refused first", encoding="ascii")
    args = ["start", "--superlink", "127.0.0.1:9", "--client-id", "c"]
    args += ["--root-certificates", str(key), "--key", str(key)]
    refused = runner.invoke(
        client_app,
        args,
        env={"PHALANX_BYZANTINE": "subprocess:Popen", "COLUMNS": "500"},
    )
    assert refused.exit_code == 2
    assert "--byzantine" in refused.output and "not allowed on this host" in refused.output
