"""The CLI pieces: keys create/list, client keygen, and client register against `serve`.

``serve`` runs as a real process (uvicorn on a free loopback port, migrating the
database first); ``client register`` talks to it over HTTP.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from phalanx import identity
from phalanx.store import keys, make_engine, session_factory
from phalanx_api.settings import get_api_settings
from phalanx_cli.client import client_app
from phalanx_cli.keys import keys_app
from phalanx_cli.main import app
from phalanx_clients import key_files
from tests.support.factories import bearer

runner = CliRunner()

#: Seconds `serve` may take to answer /healthz (imports and migrations).
STARTUP_TIMEOUT_S = 60.0


@pytest.fixture
def env(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, str]]:
    """PHALANX_* variables of a fresh database and data directory, for this process and children."""
    values = {
        "PHALANX_DATABASE_URL": database_url,
        "PHALANX_DATA_DIR": str(tmp_path / "data"),
        "PHALANX_SECRET_KEY": "cli-test-secret",
        "PHALANX_AUTO_APPROVE_CLIENTS": "false",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    get_api_settings.cache_clear()
    yield values
    get_api_settings.cache_clear()


def test_keys_create_prints_a_working_secret_once_and_list_shows_it(
    env: dict[str, str], database_url: str
) -> None:
    created = runner.invoke(keys_app, ["create", "--role", "admin", "--name", "root"])
    assert created.exit_code == 0, created.output
    secret = created.stdout.strip().splitlines()[-1]
    engine = make_engine(database_url)
    try:
        with session_factory(engine).begin() as session:
            key = keys.verify_key(session, secret)
            assert key is not None
            assert (key.name, key.role.value) == ("root", "admin")
    finally:
        engine.dispose()

    listed = runner.invoke(keys_app, ["list", "--format", "json"])
    assert listed.exit_code == 0, listed.output
    (row,) = json.loads(listed.stdout)
    assert row["name"] == "root"
    assert secret not in listed.stdout


def test_keys_revoke_revokes_and_reports_an_unknown_id(env: dict[str, str]) -> None:
    created = runner.invoke(keys_app, ["create", "--name", "temp", "--format", "json"])
    key = json.loads(created.stdout)
    assert key["role"] == "viewer"
    assert runner.invoke(keys_app, ["revoke", key["id"]]).exit_code == 0
    listed = runner.invoke(keys_app, ["list", "--all", "--format", "json"])
    (row,) = json.loads(listed.stdout)
    assert row["revoked_at"] is not None
    assert json.loads(runner.invoke(keys_app, ["list", "--format", "json"]).stdout) == []
    unknown = runner.invoke(keys_app, ["revoke", "no-such-key"])
    assert unknown.exit_code == 1


def test_key_names_that_look_like_markup_are_printed_as_given(env: dict[str, str]) -> None:
    # Rich markup in a name once crashed create after the key was stored, its secret unshown.
    created = runner.invoke(keys_app, ["create", "--name", "[/foo]"])
    assert created.exit_code == 0, created.output
    assert "key [/foo]" in created.output
    secret = created.stdout.strip().splitlines()[-1]
    assert len(secret) > 20 and "[" not in secret
    listed = runner.invoke(keys_app, ["list"])
    assert listed.exit_code == 0, listed.output
    assert "[/foo]" in listed.output
    (key,) = json.loads(runner.invoke(keys_app, ["list", "--format", "json"]).stdout)
    revoked = runner.invoke(keys_app, ["revoke", key["id"]])
    assert revoked.exit_code == 0, revoked.output
    assert f"revoked key [/foo] ({key['id']})" in revoked.output
    unknown = runner.invoke(keys_app, ["revoke", "[/x]"])
    assert unknown.exit_code == 1 and "[/x]" in unknown.output


def test_keys_create_refuses_an_unknown_role(env: dict[str, str]) -> None:
    result = runner.invoke(keys_app, ["create", "--role", "root"])
    assert result.exit_code != 0


def test_keys_create_refuses_an_empty_name_rather_than_naming_the_key_after_the_user(
    tmp_path: Path,
) -> None:
    env = {"PHALANX_DATABASE_URL": f"sqlite:///{tmp_path}/p.db", "COLUMNS": "500"}
    result = runner.invoke(app, ["keys", "create", "--name", ""], env=env)
    assert result.exit_code == 2
    assert "give a name of 1 to 200 characters" in result.output
    assert "phx_" not in result.output


def test_client_keygen_writes_an_owner_only_key_and_a_pub_file(tmp_path: Path) -> None:
    out = tmp_path / "client_key"
    result = runner.invoke(client_app, ["keygen", "--out", str(out), "--curve", "P-384"])
    assert result.exit_code == 0, result.output
    key = identity.load_private_key_file(out)
    assert key.curve.name == "secp384r1"
    assert out.stat().st_mode & 0o777 == 0o600
    public = identity.load_public_key((tmp_path / "client_key.pub").read_text())
    assert result.stdout.strip() == identity.public_key_fingerprint(public)
    again = runner.invoke(app, ["client", "keygen", "--out", str(out)])
    assert again.exit_code == 2  # never overwrite an identity without --force
    assert again.stderr == f"error: {out} exists; pass --force to overwrite it\n"


def test_client_keygen_writes_nothing_when_only_the_public_half_exists(tmp_path: Path) -> None:
    out = tmp_path / "client_key"
    (tmp_path / "client_key.pub").write_text("someone else's key\n")
    result = runner.invoke(app, ["client", "keygen", "--out", str(out)])
    assert result.exit_code == 2 and "client_key.pub exists" in result.stderr
    assert not out.exists()  # never a private key whose public half is another's


def test_client_keygen_force_keeps_the_old_pair_when_the_new_one_cannot_be_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "client_key"
    assert runner.invoke(client_app, ["keygen", "--out", str(out)]).exit_code == 0
    before = out.read_bytes(), (tmp_path / "client_key.pub").read_bytes()

    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    # A fault injected where the public half is written, after the private half.
    monkeypatch.setattr(key_files, "save_public_key", disk_full)
    result = runner.invoke(app, ["client", "keygen", "--out", str(out), "--force"])

    assert result.exit_code == 2
    assert result.stderr == (
        f"error: cannot write {out}: No space left on device; no key file was changed\n"
    )
    assert (out.read_bytes(), (tmp_path / "client_key.pub").read_bytes()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["client_key", "client_key.pub"]


@pytest.mark.parametrize("where", ["", "{tmp}", "{tmp}/client_key"])
def test_client_keygen_refuses_a_directory_where_a_key_file_goes(
    tmp_path: Path, where: str
) -> None:
    out = tmp_path / "client_key"
    out.write_text("the old key\n")
    (tmp_path / "client_key.pub").mkdir()
    given = where.format(tmp=tmp_path)

    result = runner.invoke(
        app, ["client", "keygen", "--out", given, "--force"], env={"COLUMNS": "500"}
    )

    assert result.exit_code == 2, result.output
    assert "is a directory, not a key file" in result.output and "Traceback" not in result.output
    assert out.read_text() == "the old key\n"


@pytest.mark.parametrize("api", ["http://[::1", "ftp://host", "localhost:8000", "http://"])
def test_client_register_refuses_an_api_that_is_not_an_http_url(tmp_path: Path, api: str) -> None:
    key_path = tmp_path / "client_key"
    runner.invoke(client_app, ["keygen", "--out", str(key_path)])

    result = runner.invoke(
        app, ["client", "register", "--api", api, "--key", str(key_path)], env={"COLUMNS": "500"}
    )

    assert result.exit_code == 2
    assert "Invalid value for --api" in result.output and "Traceback" not in result.output


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def served(env: dict[str, str], tmp_path: Path) -> Iterator[str]:
    """`serve` in a child process on a free loopback port; its base URL."""
    port = _free_port()
    command = [
        sys.executable,
        "-m",
        "phalanx_cli",
        "serve",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    log = (tmp_path / "serve.log").open("w")
    process = subprocess.Popen(
        command, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            assert process.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                if httpx.get(f"{base}/readyz", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "serve did not become ready"
            time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def test_client_register_against_a_served_api(served: str, tmp_path: Path) -> None:
    key_path = tmp_path / "client_key"
    assert runner.invoke(client_app, ["keygen", "--out", str(key_path)]).exit_code == 0
    result = runner.invoke(
        client_app,
        [
            "register",
            "--api",
            served,
            "--key",
            str(key_path),
            "--name",
            "edge-7",
            "--format",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    enrolled = json.loads(result.stdout)
    assert enrolled["status"] == "pending"

    admin = runner.invoke(keys_app, ["create", "--role", "operator", "--name", "ops"])
    secret = admin.stdout.strip().splitlines()[-1]
    approved = httpx.post(
        f"{served}/api/v1/clients/{enrolled['id']}/approve", headers=bearer(secret), timeout=10
    )
    assert approved.status_code == 200
    assert approved.json()["name"] == "edge-7"
    assert approved.json()["status"] == "approved"

    twice = runner.invoke(app, ["client", "register", "--api", served, "--key", str(key_path)])
    assert twice.exit_code == 1
    assert twice.stderr.startswith("error: registration failed:") and "409" in twice.stderr


def test_client_register_reports_an_unreachable_api(tmp_path: Path) -> None:
    key_path = tmp_path / "client_key"
    runner.invoke(client_app, ["keygen", "--out", str(key_path)])
    result = runner.invoke(
        app,
        ["client", "register", "--api", f"http://127.0.0.1:{_free_port()}", "--key", str(key_path)],
    )
    assert result.exit_code == 1
    assert result.stderr.startswith("error: registration failed:")
    assert "cannot reach" in result.stderr and len(result.stderr.splitlines()) == 1


def test_client_keygen_takes_the_longest_file_name_its_public_half_allows(
    tmp_path: Path,
) -> None:
    out = tmp_path / ("k" * 251)  # OUT.pub is 255 characters, the most a name may have

    result = runner.invoke(app, ["client", "keygen", "--out", str(out)])

    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name, out.name + ".pub"]


def test_client_keygen_leaves_no_public_half_beside_a_private_key_that_won_a_race(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "client_key"
    generate = identity.generate_private_key

    def another_keygen_writes_out_meanwhile(curve: key_files.Curve) -> object:
        out.write_text("another process's key\n")
        return generate(curve)

    monkeypatch.setattr(key_files, "generate_private_key", another_keygen_writes_out_meanwhile)
    result = runner.invoke(app, ["client", "keygen", "--out", str(out)])

    assert result.exit_code == 2
    assert result.stderr == f"error: {out} exists; pass --force to overwrite it\n"
    assert out.read_text() == "another process's key\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["client_key"]  # no stray .pub
