"""The local CA and the SuperLink certificate: real TLS handshakes on loopback."""

from __future__ import annotations

import datetime
import socket
import ssl
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509

from phalanx.flower.deployment.certificates import (
    DEFAULT_SERVER_NAMES,
    create_certificate_authority,
    ensure_tls_files,
    issue_server_certificate,
    server_names,
)


def _handshake(files_dir: Path, ca_file: Path, server_hostname: str) -> str:
    """Serve one TLS handshake with the SuperLink certificate; return the client's TLS version."""
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(files_dir / "server.pem", files_dir / "server.key")
    client_ctx = ssl.create_default_context(cafile=str(ca_file))
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def serve() -> None:
            conn, _ = listener.accept()
            try:
                with server_ctx.wrap_socket(conn, server_side=True) as tls:
                    tls.recv(1)
            except (ssl.SSLError, OSError):
                pass

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        try:
            with (
                socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
                client_ctx.wrap_socket(raw, server_hostname=server_hostname) as tls,
            ):
                version = tls.version() or ""
                tls.sendall(b"x")
                return version
        finally:
            thread.join(timeout=10)


@pytest.fixture
def tls_dir(tmp_path: Path) -> Iterator[Path]:
    ensure_tls_files(tmp_path / "tls")
    yield tmp_path / "tls"


@pytest.mark.parametrize("name", ["localhost", "127.0.0.1", "superlink"])
def test_clients_trusting_the_ca_verify_the_superlink_under_each_default_name(
    tls_dir: Path, name: str
) -> None:
    assert _handshake(tls_dir, tls_dir / "ca.pem", name).startswith("TLS")


def test_a_name_the_certificate_does_not_cover_fails_verification(tls_dir: Path) -> None:
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(tls_dir, tls_dir / "ca.pem", "elsewhere.example")


def test_a_client_trusting_another_ca_refuses_the_superlink(tls_dir: Path, tmp_path: Path) -> None:
    other = ensure_tls_files(tmp_path / "other")
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(tls_dir, other.ca_certificate, "localhost")


def test_private_keys_are_readable_by_their_owner_only(tls_dir: Path) -> None:
    for name in ("ca.key", "server.key"):
        assert stat.S_IMODE((tls_dir / name).stat().st_mode) == 0o600
    assert stat.S_IMODE((tls_dir / "ca.pem").stat().st_mode) == 0o644


def test_ensure_keeps_files_that_are_still_good(tmp_path: Path) -> None:
    first = ensure_tls_files(tmp_path / "tls")
    before = {p.name: p.read_bytes() for p in first.directory.iterdir()}
    ensure_tls_files(tmp_path / "tls")
    after = {p.name: p.read_bytes() for p in first.directory.iterdir()}
    assert after == before


def test_ensure_reissues_the_server_certificate_for_new_names_and_keeps_the_ca(
    tmp_path: Path,
) -> None:
    files = ensure_tls_files(tmp_path / "tls")
    ca_before = files.ca_certificate.read_bytes()
    ensure_tls_files(tmp_path / "tls", [*DEFAULT_SERVER_NAMES, "link.example.org", "10.0.0.7"])
    certificate = x509.load_pem_x509_certificate(files.server_certificate.read_bytes())
    assert {"link.example.org", "10.0.0.7", "localhost"} <= server_names(certificate)
    assert files.ca_certificate.read_bytes() == ca_before


def test_ensure_reissues_a_server_certificate_that_expires_soon(tmp_path: Path) -> None:
    long_ago = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=390)
    files = ensure_tls_files(tmp_path / "tls", now=long_ago)
    old = x509.load_pem_x509_certificate(files.server_certificate.read_bytes())
    ensure_tls_files(tmp_path / "tls")
    new = x509.load_pem_x509_certificate(files.server_certificate.read_bytes())
    assert new.serial_number != old.serial_number
    assert new.not_valid_after_utc > datetime.datetime.now(datetime.UTC)


def test_the_ca_may_sign_servers_but_the_server_certificate_may_not_sign() -> None:
    ca = create_certificate_authority()
    certificate, _ = issue_server_certificate(ca, ["localhost"])
    ca_basic = ca.certificate.extensions.get_extension_for_class(x509.BasicConstraints).value
    server_basic = certificate.extensions.get_extension_for_class(x509.BasicConstraints).value
    assert (ca_basic.ca, ca_basic.path_length) == (True, 0)
    assert server_basic.ca is False
    certificate.verify_directly_issued_by(ca.certificate)


def test_a_certificate_needs_a_name() -> None:
    with pytest.raises(ValueError, match="at least one"):
        issue_server_certificate(create_certificate_authority(), [" "])
