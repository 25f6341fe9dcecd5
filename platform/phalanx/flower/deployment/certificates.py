"""A local certificate authority and the SuperLink's TLS certificate.

Flower's SuperLink serves its Fleet, Control and Runtime APIs over one TLS
port; SuperNode authentication refuses to run without TLS. For a deployment
without a public CA, Phalanx makes its own: one EC P-256 CA key that signs the
SuperLink's server certificate. SuperNodes, the ``flwr`` CLI and the
SuperLink's own app runtime trust the CA certificate (``ca.pem``).

:func:`ensure_tls_files` is idempotent, so a one-shot service can run it on
every start: it keeps an existing CA and reissues the server certificate only
when it is missing, expired soon, or does not cover the requested names.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = [
    "DEFAULT_SERVER_NAMES",
    "CertificateAuthority",
    "TlsFiles",
    "create_certificate_authority",
    "ensure_tls_files",
    "issue_server_certificate",
    "load_certificate_authority",
    "server_names",
]

DEFAULT_SERVER_NAMES = ("localhost", "127.0.0.1", "::1", "superlink")
"""Names a SuperLink certificate covers unless told otherwise: loopback and compose's service."""

CA_VALID_DAYS = 3650
SERVER_VALID_DAYS = 397
RENEW_BEFORE = datetime.timedelta(days=30)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class CertificateAuthority:
    """A CA certificate and its private key."""

    certificate: x509.Certificate
    private_key: ec.EllipticCurvePrivateKey


@dataclass(frozen=True)
class TlsFiles:
    """Where the TLS material of a deployment lives (all PEM).

    The names are those ``flower-superlink --ssl-ca-certfile --ssl-certfile
    --ssl-keyfile`` and ``flower-supernode --root-certificates`` take.
    """

    directory: Path

    @property
    def ca_certificate(self) -> Path:
        """The CA certificate every client trusts."""
        return self.directory / "ca.pem"

    @property
    def ca_key(self) -> Path:
        """The CA's private key (mode 0600); needed only to issue certificates."""
        return self.directory / "ca.key"

    @property
    def server_certificate(self) -> Path:
        """The SuperLink's certificate."""
        return self.directory / "server.pem"

    @property
    def server_key(self) -> Path:
        """The SuperLink's private key (mode 0600)."""
        return self.directory / "server.key"


def create_certificate_authority(
    common_name: str = "Phalanx local CA",
    *,
    valid_days: int = CA_VALID_DAYS,
    now: datetime.datetime | None = None,
) -> CertificateAuthority:
    """Create a self-signed EC P-256 CA that may sign server certificates only.

    Parameters
    ----------
    common_name : str
        Subject and issuer common name.
    valid_days : int
        Validity from ``now``.
    now : datetime, optional
        Start of validity; defaults to the current UTC time.
    """
    start = _start(now)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + datetime.timedelta(days=valid_days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return CertificateAuthority(certificate=certificate, private_key=key)


def issue_server_certificate(
    ca: CertificateAuthority,
    names: Sequence[str],
    *,
    valid_days: int = SERVER_VALID_DAYS,
    now: datetime.datetime | None = None,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """Issue a TLS server certificate for ``names`` with a fresh EC P-256 key.

    Parameters
    ----------
    ca : CertificateAuthority
        The issuer.
    names : sequence of str
        Host names and IP addresses the certificate covers (subject
        alternative names); the first one is also the common name.
    valid_days : int
        Validity from ``now``.
    now : datetime, optional
        Start of validity; defaults to the current UTC time.

    Raises
    ------
    ValueError
        When ``names`` is empty or a name is blank.
    """
    if not names or any(not n.strip() for n in names):
        raise ValueError("a server certificate needs at least one non-blank host name or IP")
    start = _start(now)
    key = ec.generate_private_key(ec.SECP256R1())
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca.certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + datetime.timedelta(days=valid_days))
        .add_extension(x509.SubjectAlternativeName(_general_names(names)), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.private_key.public_key()),
            critical=False,
        )
        .sign(ca.private_key, hashes.SHA256())
    )
    return certificate, key


def server_names(certificate: x509.Certificate) -> frozenset[str]:
    """Return the host names and IP addresses a certificate covers, as text."""
    try:
        san = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return frozenset()
    dns = san.get_values_for_type(x509.DNSName)
    ips = san.get_values_for_type(x509.IPAddress)
    return frozenset([*dns, *(str(ip) for ip in ips)])


def load_certificate_authority(files: TlsFiles) -> CertificateAuthority:
    """Read the CA written by :func:`ensure_tls_files`.

    Raises
    ------
    ValueError
        When the key is not an EC key or does not belong to the certificate.
    """
    certificate = x509.load_pem_x509_certificate(files.ca_certificate.read_bytes())
    key = serialization.load_pem_private_key(files.ca_key.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{files.ca_key} is not an EC private key")
    if key.public_key() != certificate.public_key():
        raise ValueError(f"{files.ca_key} does not belong to {files.ca_certificate}")
    return CertificateAuthority(certificate=certificate, private_key=key)


def ensure_tls_files(
    directory: Path,
    names: Iterable[str] = DEFAULT_SERVER_NAMES,
    *,
    now: datetime.datetime | None = None,
) -> TlsFiles:
    """Create the CA and the SuperLink certificate in ``directory`` unless they are fine already.

    The CA is created once and kept. The server certificate is (re)issued when
    it is missing, expires within 30 days, was not signed by this CA, or does
    not cover every name in ``names``.

    Parameters
    ----------
    directory : Path
        Created when missing; private keys in it are mode 0600.
    names : iterable of str
        Host names and IP addresses clients use to reach the SuperLink.
    now : datetime, optional
        The current time; defaults to UTC now.

    Returns
    -------
    TlsFiles
        The paths of the four files.
    """
    wanted = list(dict.fromkeys(n.strip() for n in names))
    files = TlsFiles(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if files.ca_certificate.is_file() and files.ca_key.is_file():
        ca = load_certificate_authority(files)
    else:
        ca = create_certificate_authority(now=now)
        _write(files.ca_key, _private_pem(ca.private_key), mode=0o600)
        _write(files.ca_certificate, ca.certificate.public_bytes(serialization.Encoding.PEM))
    if _server_certificate_is_current(files, ca, wanted, _start(now)):
        return files
    certificate, key = issue_server_certificate(ca, wanted, now=now)
    _write(files.server_key, _private_pem(key), mode=0o600)
    _write(files.server_certificate, certificate.public_bytes(serialization.Encoding.PEM))
    return files


def _server_certificate_is_current(
    files: TlsFiles, ca: CertificateAuthority, names: Sequence[str], now: datetime.datetime
) -> bool:
    if not (files.server_certificate.is_file() and files.server_key.is_file()):
        return False
    certificate = x509.load_pem_x509_certificate(files.server_certificate.read_bytes())
    if certificate.issuer != ca.certificate.subject:
        return False
    try:
        certificate.verify_directly_issued_by(ca.certificate)
    except (ValueError, TypeError):
        return False
    if certificate.not_valid_after_utc - RENEW_BEFORE < now:
        return False
    return {_canonical(n) for n in names} <= server_names(certificate)


def _general_names(names: Sequence[str]) -> list[x509.GeneralName]:
    out: list[x509.GeneralName] = []
    for name in dict.fromkeys(n.strip() for n in names):
        ip = _ip(name)
        out.append(x509.IPAddress(ip) if ip is not None else x509.DNSName(name))
    return out


def _ip(name: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


def _canonical(name: str) -> str:
    ip = _ip(name)
    return str(ip) if ip is not None else name


def _start(now: datetime.datetime | None) -> datetime.datetime:
    # Back-date by a minute so that a peer whose clock runs slightly behind accepts it.
    return (now or datetime.datetime.now(datetime.UTC)) - datetime.timedelta(minutes=1)


def _private_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Write ``data`` atomically with ``mode`` (a half-written key never appears)."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as handle:
        os.fchmod(handle.fileno(), mode)
        handle.write(data)
    tmp.replace(path)
