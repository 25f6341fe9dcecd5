"""Red team: ``--root-certificates`` that is not a CA certificate is refused before Flower starts.

``phalanx client start`` replaces itself with ``flower-supernode``. Given a file that is
not a PEM certificate (a key, a typo'd path's leftovers, an empty file), the SuperNode
printed a 20-line Python traceback (``ssl.SSLError: no start line: cadata does not contain
a certificate``) and then kept running without connecting, until killed. The CLI promises
one line and a non-zero exit for input it can check up front. Before the fix these tests
fail: the command goes on to exec Flower (stubbed here so the test process survives).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from phalanx_cli.main import app


@pytest.mark.parametrize(
    "content",
    [b"garbage\n", b"", b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"],
    ids=["text", "empty", "broken-pem"],
)
def test_a_root_certificates_file_without_a_certificate_is_refused_in_one_line(
    tmp_path: Path, client_key: Path, content: bytes, no_exec: list[list[str]]
) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_bytes(content)
    result = CliRunner().invoke(
        app,
        [
            "client",
            "start",
            "--superlink",
            "127.0.0.1:9",
            "--root-certificates",
            str(ca),
            "--key",
            str(client_key),
            "--client-id",
            "c1",
        ],
    )
    assert no_exec == []
    assert result.exit_code == 2
    assert "--root-certificates" in result.output and "certificate" in result.output
    assert "Traceback" not in result.output


def test_a_private_key_given_as_root_certificates_is_refused(
    client_key: Path, no_exec: list[list[str]]
) -> None:
    result = CliRunner().invoke(
        app,
        [
            "client",
            "start",
            "--superlink",
            "127.0.0.1:9",
            "--root-certificates",
            str(client_key),
            "--key",
            str(client_key),
            "--client-id",
            "c1",
        ],
    )
    assert no_exec == []
    assert result.exit_code == 2


def test_a_real_ca_certificate_goes_through_to_flower(
    tmp_path: Path, client_key: Path, no_exec: list[list[str]]
) -> None:
    # The attack must be able to fail: a good CA file reaches the exec (stubbed).
    from phalanx.flower.deployment.certificates import ensure_tls_files

    files = ensure_tls_files(tmp_path / "certs", ["localhost"])
    result = CliRunner().invoke(
        app,
        [
            "client",
            "start",
            "--superlink",
            "127.0.0.1:9",
            "--root-certificates",
            str(files.ca_certificate),
            "--key",
            str(client_key),
            "--client-id",
            "c1",
        ],
    )
    assert result.exit_code == 0, result.output
    assert no_exec and Path(no_exec[0][0]).name == "flower-supernode"


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_root_certificates_path_that_is_no_regular_file_is_refused_unread(
    tmp_path: Path, client_key: Path, kind: str, no_exec: list[list[str]]
) -> None:
    ca = tmp_path / "ca.pem"
    if kind == "fifo":
        os.mkfifo(ca)  # read, it would wait for a writer for ever
    else:
        ca.mkdir()
    args = ["client", "start", "--superlink", "127.0.0.1:9", "--client-id", "c1"]
    args += ["--root-certificates", str(ca), "--key", str(client_key)]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "500"})
    assert no_exec == []
    assert result.exit_code == 2
    assert result.output.startswith(f"error: --root-certificates: {ca} ")
    assert len(result.output.splitlines()) == 1 and "Traceback" not in result.output
