"""A local certificate authority and the SuperLink's TLS certificate.

Flower's SuperLink serves its Fleet, Control and Runtime APIs over one TLS
port; SuperNode authentication refuses to run without TLS. For a deployment
without a public CA, Phalanx makes its own: one EC P-256 CA key that signs the
SuperLink's server certificate. SuperNodes, the ``flwr`` CLI and the
SuperLink's own app runtime trust the CA certificate (``ca.pem``).

:func:`ensure_tls_files` is idempotent, so a one-shot service can run it on
every start: it keeps an existing CA and reissues the server certificate only
when it is missing, expired soon, not its key's, or does not cover the
requested names. It checks every name
(:func:`~phalanx.flower.deployment.addresses.check_host_name`) and every file
it will replace before it writes, and writes all its files or none.
:func:`check_tls_files` and :func:`read_certificates` check, before a process
is started with them, the files a SuperLink serves and a client trusts.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from phalanx.flower.deployment.addresses import (
    HOST_NAME_RULE,
    HostNameError,
    check_host_name,
    parse_ip,
)

__all__ = [
    "DEFAULT_SERVER_NAMES",
    "CertificateAuthority",
    "CertificateFileError",
    "TlsFiles",
    "check_tls_files",
    "create_certificate_authority",
    "ensure_tls_files",
    "issue_server_certificate",
    "load_certificate_authority",
    "read_certificates",
    "server_names",
]

DEFAULT_SERVER_NAMES = ("localhost", "127.0.0.1", "::1", "superlink")
"""Names a SuperLink certificate covers unless told otherwise: loopback and compose's service."""

CA_VALID_DAYS = 3650
SERVER_VALID_DAYS = 397
RENEW_BEFORE = datetime.timedelta(days=30)

MAX_PEM_BYTES = 1 << 20
"""The largest PEM file read; a system's whole CA bundle is about 200 kB."""

MAX_COMMON_NAME = 64
"""X.509's upper bound on a common name; a longer host name is in the certificate's SAN only."""


class CertificateFileError(ValueError):
    """A TLS file that is missing, unreadable, or not what it should be; the message names it."""


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
    HostNameError
        When a name is neither an IP address nor a host name (:data:`HOST_NAME_RULE`).
    """
    if not names or any(not n.strip() for n in names):
        raise ValueError("a server certificate needs at least one non-blank host name or IP")
    for name in names:
        check_host_name(name.strip())
    first = names[0].strip()
    common_name = first if len(first) <= MAX_COMMON_NAME else "Phalanx SuperLink"
    start = _start(now)
    key = ec.generate_private_key(ec.SECP256R1())
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
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


def read_certificates(path: Path) -> list[x509.Certificate]:
    """Read the PEM certificates in ``path``, e.g. the CA file a client trusts.

    Raises
    ------
    CertificateFileError
        When ``path`` does not exist, is not a readable regular file (a FIFO is
        not waited on), or holds no PEM certificate.
    """
    data = _read_pem_file(path)
    try:
        return x509.load_pem_x509_certificates(data)
    except ValueError as exc:
        raise CertificateFileError(
            f"{path} holds no PEM certificate ('-----BEGIN CERTIFICATE-----')"
        ) from exc


def check_tls_files(files: TlsFiles) -> None:
    """Check the files a SuperLink serves TLS with before it is started with them.

    Raises
    ------
    CertificateFileError
        When the directory or a file in it is missing (all missing files are
        named), a file holds no PEM certificate or private key, or the server
        key does not belong to the server certificate.
    """
    directory = files.directory
    if not directory.is_dir():
        raise CertificateFileError(
            f"{directory} {'is not a directory' if directory.exists() else 'does not exist'}"
        )
    needed = (files.ca_certificate, files.server_certificate, files.server_key)
    missing = [path.name for path in needed if not path.exists()]
    if missing:
        raise CertificateFileError(f"{directory} has no {', '.join(missing)}")
    read_certificates(files.ca_certificate)
    server = read_certificates(files.server_certificate)[0]
    if _read_private_key(files.server_key).public_key() != server.public_key():
        raise CertificateFileError(
            f"{files.server_key} is not the key of {files.server_certificate}"
        )


def load_certificate_authority(files: TlsFiles) -> CertificateAuthority:
    """Read the CA written by :func:`ensure_tls_files`.

    Raises
    ------
    CertificateFileError
        When a file is unreadable or holds no PEM, the key is not an EC key, or
        it does not belong to the certificate.
    """
    certificate = read_certificates(files.ca_certificate)[0]
    key = _read_private_key(files.ca_key)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise CertificateFileError(f"{files.ca_key} is not an EC private key")
    if key.public_key() != certificate.public_key():
        raise CertificateFileError(f"{files.ca_key} does not belong to {files.ca_certificate}")
    return CertificateAuthority(certificate=certificate, private_key=key)


def ensure_tls_files(
    directory: Path,
    names: Iterable[str] = DEFAULT_SERVER_NAMES,
    *,
    now: datetime.datetime | None = None,
) -> TlsFiles:
    """Create the CA and the SuperLink certificate in ``directory`` unless they are fine already.

    The CA is created once and kept. The server certificate is (re)issued when
    it is missing or unreadable, expires within 30 days, was not signed by this
    CA, is not its key's, or does not cover every name in ``names``. Nothing is
    written until every name and every file to replace has been checked, and
    then the new files are written beside the old ones and renamed into place:
    a failure leaves the directory as it was (and does not create it).

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

    Raises
    ------
    HostNameError
        When a name is neither an IP address nor a host name, or none is given.
    CertificateFileError
        When ``directory`` is not a directory, a file to replace is a directory,
        or the CA there cannot be read.
    OSError
        When a file cannot be written.
    """
    wanted = list(dict.fromkeys(check_host_name(n.strip()) for n in names))
    if not wanted:
        raise HostNameError(f"a server certificate needs a name: {HOST_NAME_RULE}")
    files = TlsFiles(directory)
    if directory.exists() and not directory.is_dir():
        raise CertificateFileError(f"{directory} is not a directory")
    writes: dict[Path, tuple[bytes, int]] = {}
    if files.ca_certificate.is_file() and files.ca_key.is_file():
        ca = load_certificate_authority(files)
    else:
        ca = create_certificate_authority(now=now)
        writes[files.ca_key] = (_private_pem(ca.private_key), 0o600)
        writes[files.ca_certificate] = (_certificate_pem(ca.certificate), 0o644)
    if writes or not _server_certificate_is_current(files, ca, wanted, _start(now)):
        certificate, key = issue_server_certificate(ca, wanted, now=now)
        writes[files.server_key] = (_private_pem(key), 0o600)
        writes[files.server_certificate] = (_certificate_pem(certificate), 0o644)
    _write_all(directory, writes)
    return files


def _server_certificate_is_current(
    files: TlsFiles, ca: CertificateAuthority, names: Sequence[str], now: datetime.datetime
) -> bool:
    if not (files.server_certificate.is_file() and files.server_key.is_file()):
        return False
    try:
        certificate = read_certificates(files.server_certificate)[0]
        key = _read_private_key(files.server_key)
    except CertificateFileError:
        return False  # derived from the CA: reissued rather than refused
    if key.public_key() != certificate.public_key():
        return False
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
        ip = parse_ip(name)
        out.append(x509.IPAddress(ip) if ip is not None else x509.DNSName(name))
    return out


def _canonical(name: str) -> str:
    ip = parse_ip(name)
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


def _certificate_pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


def _read_pem_file(path: Path) -> bytes:
    """Return the bytes of ``path`` if it is a readable regular file of PEM size."""
    try:
        # Non-blocking, so that opening a FIFO does not wait for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError as exc:
        raise CertificateFileError(f"{path} does not exist") from exc
    except OSError as exc:
        raise CertificateFileError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise CertificateFileError(f"{path} is a directory, not a PEM file")
        if not stat.S_ISREG(info.st_mode):
            raise CertificateFileError(f"{path} is not a regular file")
        if info.st_size > MAX_PEM_BYTES:
            raise CertificateFileError(
                f"{path} has {info.st_size} bytes, more than a PEM file ({MAX_PEM_BYTES})"
            )
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(MAX_PEM_BYTES + 1)
    except OSError as exc:
        raise CertificateFileError(f"cannot read {path}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)


def _read_private_key(path: Path) -> PrivateKeyTypes:
    data = _read_pem_file(path)
    try:
        return serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise CertificateFileError(f"{path} holds no unencrypted PEM private key") from exc


def _write_all(directory: Path, writes: Mapping[Path, tuple[bytes, int]]) -> None:
    """Write every file of ``writes`` (path -> data, mode) into ``directory``, or none.

    Each file is first written in full beside its target (``.NAME.tmp``), then
    all are renamed into place; a failure before the renames removes what was
    staged, and the directory too when it was created here. The targets are
    checked first so that the renames do not fail on a directory in the way.
    A crash between two renames leaves what the next run replaces: a CA with
    one of its two files, or a server certificate not of this CA or its key.
    """
    for path in writes:
        if path.is_dir():
            raise CertificateFileError(f"{path} is a directory, not a file it can replace")
    created = not directory.exists()
    directory.mkdir(parents=True, exist_ok=True)
    staged: list[tuple[Path, Path]] = []
    try:
        for path, (data, mode) in writes.items():
            tmp = path.with_name(f".{path.name}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
            staged.append((tmp, path))
            with os.fdopen(fd, "wb") as handle:
                os.fchmod(handle.fileno(), mode)
                handle.write(data)
    except BaseException:
        for tmp, _ in staged:
            with contextlib.suppress(OSError):
                tmp.unlink()
        if created:
            with contextlib.suppress(OSError):
                directory.rmdir()
        raise
    for tmp, path in staged:
        tmp.replace(path)
