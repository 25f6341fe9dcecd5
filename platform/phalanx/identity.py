"""Client identity: EC key pairs, proof of possession and signed replies.

A client owns one NIST EC key pair (P-256 or P-384). The same key serves three
purposes, so each signed message is built to be unmistakable for the others:

* Flower SuperNode authentication: the private key in OpenSSH format is what
  ``flower-supernode --auth-supernode-private-key`` loads.
* Registration with the control plane: the client sends its public key (PEM or
  OpenSSH), receives a random challenge, and returns the DER ECDSA-SHA256
  signature over the challenge bytes (:func:`sign_challenge`).
* Replies to the coordinator: every reply carries a DER ECDSA-SHA256 signature
  over :func:`reply_message`, a domain-separated canonical encoding of
  (run, round, nonce, client, files and their digests, node, and in local data
  mode the sample count the client trained on).

Keys in memory are ``cryptography`` objects; text forms (PEM, OpenSSH) are
``str``. A bad key, key file or message field raises :class:`IdentityError`;
a bad signature only makes verification return ``False``.
"""

from __future__ import annotations

import hashlib
import json
import operator
import os
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Literal, NotRequired, SupportsIndex, TypeAlias, TypedDict, Unpack

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

__all__ = [
    "MIN_CHALLENGE_BYTES",
    "REPLY_DOMAIN",
    "Curve",
    "IdentityError",
    "PrivateKey",
    "PublicKey",
    "ReplyFields",
    "generate_private_key",
    "load_private_key",
    "load_private_key_file",
    "load_public_key",
    "new_challenge",
    "private_key_to_openssh",
    "private_key_to_pem",
    "public_key_fingerprint",
    "public_key_to_openssh",
    "public_key_to_pem",
    "reply_message",
    "save_private_key",
    "save_public_key",
    "sign_challenge",
    "sign_reply",
    "verify_challenge",
    "verify_reply",
]

Curve: TypeAlias = Literal["P-256", "P-384"]
PrivateKey: TypeAlias = ec.EllipticCurvePrivateKey
PublicKey: TypeAlias = ec.EllipticCurvePublicKey
StrPath: TypeAlias = str | os.PathLike[str]

_CURVES: dict[str, type[ec.EllipticCurve]] = {"P-256": ec.SECP256R1, "P-384": ec.SECP384R1}
_SUPPORTED_CURVE_NAMES = frozenset({"secp256r1", "secp384r1"})
_ECDSA_SHA256 = ec.ECDSA(hashes.SHA256())
_MAX_NODE_ID = 2**64 - 1
_MAX_COUNT = 2**64 - 1

MIN_CHALLENGE_BYTES = 16
"""Shortest challenge :func:`new_challenge` makes and :func:`sign_challenge` signs."""

REPLY_DOMAIN = b"phalanx-reply-v1\n"
"""Prefix of every :func:`reply_message`; bump the version if the encoding changes."""


class IdentityError(ValueError):
    """A key, signature input or key file that Phalanx cannot use."""


# --------------------------------------------------------------------------- keys


def generate_private_key(curve: Curve = "P-256") -> PrivateKey:
    """Generate a new EC private key.

    Parameters
    ----------
    curve : {"P-256", "P-384"}
        NIST curve of the key.

    Returns
    -------
    PrivateKey
        A fresh key from the operating system's random source.
    """
    if curve not in _CURVES:
        raise IdentityError(f"unsupported curve {curve!r}; use 'P-256' or 'P-384'")
    return ec.generate_private_key(_CURVES[curve]())


def private_key_to_pem(key: PrivateKey) -> str:
    """Unencrypted PKCS#8 PEM (``-----BEGIN PRIVATE KEY-----``) of ``key``."""
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode("ascii")


def private_key_to_openssh(key: PrivateKey) -> str:
    """Unencrypted OpenSSH private key (``-----BEGIN OPENSSH PRIVATE KEY-----``).

    This is the format Flower's ``--auth-supernode-private-key`` expects.
    """
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    ).decode("ascii")


def public_key_to_pem(key: PublicKey) -> str:
    """SubjectPublicKeyInfo PEM (``-----BEGIN PUBLIC KEY-----``) of ``key``."""
    return key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode("ascii")


def public_key_to_openssh(key: PublicKey) -> str:
    """One-line OpenSSH public key (``ecdsa-sha2-nistp256 AAAA...``), no comment."""
    return key.public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    ).decode("ascii")


def load_private_key(data: bytes | str, password: bytes | None = None) -> PrivateKey:
    """Parse an EC P-256 / P-384 private key from PEM or OpenSSH text.

    Parameters
    ----------
    data : bytes or str
        OpenSSH (``BEGIN OPENSSH PRIVATE KEY``), PKCS#8 (``BEGIN PRIVATE KEY``,
        ``BEGIN ENCRYPTED PRIVATE KEY``) or SEC 1 (``BEGIN EC PRIVATE KEY``).
    password : bytes, optional
        Passphrase of an encrypted key. Encrypted OpenSSH keys also need the
        ``bcrypt`` package.

    Raises
    ------
    IdentityError
        If the text is not such a key, the password is missing or wrong, or the
        key is not EC on P-256 or P-384.
    """
    text = _key_bytes(data)
    key: PrivateKeyTypes
    try:
        if text.startswith(b"-----BEGIN OPENSSH PRIVATE KEY-----"):
            key = serialization.load_ssh_private_key(text, password)
        elif text.startswith(b"-----BEGIN"):
            key = serialization.load_pem_private_key(text, password)
        else:
            raise ValueError("expected a PEM or OpenSSH block starting with '-----BEGIN'")
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        if password is not None and text.startswith(b"-----BEGIN ENCRYPTED PRIVATE KEY-----"):
            # A wrong password decrypts to garbage whose padding still checks about one
            # time in 256; the parser then reports bad ASN.1 rather than a bad password.
            raise IdentityError(
                f"cannot decrypt private key: wrong password, or the key is damaged ({exc})"
            ) from exc
        raise IdentityError(f"cannot load private key: {exc}") from exc
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise IdentityError(f"expected an EC private key, got {type(key).__name__}")
    _check_curve(key.curve)
    return key


def load_public_key(data: bytes | str) -> PublicKey:
    """Parse an EC P-256 / P-384 public key from PEM or OpenSSH text.

    Parameters
    ----------
    data : bytes or str
        PEM SubjectPublicKeyInfo (``-----BEGIN PUBLIC KEY-----``) or one OpenSSH
        line (``ecdsa-sha2-nistp256 AAAA... [comment]``). Surrounding whitespace
        is ignored.

    Raises
    ------
    IdentityError
        If the text is not a public key, or the key is RSA, Ed25519, or EC on
        any curve other than P-256 and P-384.
    """
    text = _key_bytes(data)
    try:
        if text.startswith(b"-----BEGIN"):
            key = serialization.load_pem_public_key(text)
        else:
            key = serialization.load_ssh_public_key(text)
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise IdentityError(
            f"cannot load public key (expected PEM 'BEGIN PUBLIC KEY' or an OpenSSH "
            f"'ecdsa-sha2-nistp256 ...' line): {exc}"
        ) from exc
    if not isinstance(key, ec.EllipticCurvePublicKey):
        raise IdentityError(f"expected an EC public key, got {type(key).__name__}")
    _check_curve(key.curve)
    return key


def public_key_fingerprint(key: PublicKey) -> str:
    """Stable identifier of a public key.

    ``"SHA256:"`` followed by the 64 lowercase hex digits of the SHA-256 of the
    key's DER SubjectPublicKeyInfo. It is the same whether the key arrived as
    PEM or OpenSSH. It is *not* the ``ssh-keygen -l`` fingerprint, which hashes
    the SSH wire encoding and prints base64.
    """
    der = key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return "SHA256:" + hashlib.sha256(der).hexdigest()


def save_private_key(path: StrPath, key: PrivateKey, *, overwrite: bool = False) -> None:
    """Write ``key`` unencrypted in OpenSSH format, readable by its owner only.

    The file is created with mode ``0600`` (and reset to ``0600`` when
    overwritten), ready for ``flower-supernode --auth-supernode-private-key``.

    Raises
    ------
    FileExistsError
        If ``path`` exists and ``overwrite`` is false: losing a registered key
        loses the client's identity.
    """
    _write_text(path, private_key_to_openssh(key), mode=0o600, overwrite=overwrite)


def save_public_key(path: StrPath, key: PublicKey, *, overwrite: bool = False) -> None:
    """Write ``key`` as one OpenSSH line (a ``.pub`` file), mode ``0644``.

    Raises
    ------
    FileExistsError
        If ``path`` exists and ``overwrite`` is false.
    """
    _write_text(path, public_key_to_openssh(key) + "\n", mode=0o644, overwrite=overwrite)


def load_private_key_file(path: StrPath, password: bytes | None = None) -> PrivateKey:
    """Read a key file written by :func:`save_private_key` (or any PEM / OpenSSH key).

    Raises
    ------
    IdentityError
        As :func:`load_private_key`, and when ``path`` is not a regular file (a device or
        a FIFO would be read for ever) or is larger than any key (`MAX_KEY_FILE_BYTES`);
        ``OSError`` if the file cannot be read.
    """
    file = Path(path)
    if file.exists() and not file.is_file():
        raise IdentityError(f"{file} is not a regular file, so not a key file")
    with file.open("rb") as handle:
        raw = handle.read(MAX_KEY_FILE_BYTES + 1)
    if len(raw) > MAX_KEY_FILE_BYTES:
        raise IdentityError(f"{file} is larger than {MAX_KEY_FILE_BYTES:,} bytes: not a key file")
    return load_private_key(raw, password)


MAX_KEY_FILE_BYTES = 65_536
"""Largest key file read: an EC or Ed25519 key in PEM or OpenSSH form is under 1 kB."""


def _key_bytes(data: bytes | str) -> bytes:
    if isinstance(data, str):
        if not data.isascii():
            raise IdentityError("key text must be ASCII (PEM or OpenSSH)")
        data = data.encode("ascii")
    return data.strip()


def _check_curve(curve: ec.EllipticCurve) -> None:
    if curve.name not in _SUPPORTED_CURVE_NAMES:
        raise IdentityError(f"EC curve {curve.name} is not supported; use P-256 or P-384")


def _write_text(path: StrPath, text: str, *, mode: int, overwrite: bool) -> None:
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if overwrite else os.O_EXCL)
    fd = os.open(path, flags, mode)
    with os.fdopen(fd, "w", encoding="ascii") as file:
        os.fchmod(file.fileno(), mode)
        file.write(text)


# ------------------------------------------------------- proof of possession


def new_challenge(nbytes: int = 32) -> bytes:
    """Random challenge for proof of possession, from :mod:`secrets`.

    Raises
    ------
    ValueError
        If ``nbytes`` is below :data:`MIN_CHALLENGE_BYTES`.
    """
    if nbytes < MIN_CHALLENGE_BYTES:
        raise ValueError(f"a challenge needs at least {MIN_CHALLENGE_BYTES} bytes, got {nbytes}")
    return secrets.token_bytes(nbytes)


def sign_challenge(key: PrivateKey, challenge: bytes) -> bytes:
    """Prove possession of ``key``: DER ECDSA-SHA256 signature over ``challenge``.

    The key also signs Flower authentication timestamps and Phalanx replies,
    both printable text. So that a malicious registration server cannot pass
    such a message off as a challenge and harvest a usable signature, this
    refuses challenges that are short or read as text; a random challenge from
    :func:`new_challenge` (32 bytes) reads as text with probability ``5e-14``.

    Raises
    ------
    IdentityError
        If ``challenge`` is shorter than :data:`MIN_CHALLENGE_BYTES` or is
        printable ASCII (as every :func:`reply_message` is).
    """
    if len(challenge) < MIN_CHALLENGE_BYTES:
        raise IdentityError(
            f"refusing to sign a {len(challenge)}-byte challenge; "
            f"need at least {MIN_CHALLENGE_BYTES} random bytes"
        )
    if _is_text(challenge):
        raise IdentityError(
            "refusing to sign a challenge that reads as text; expected random bytes"
        )
    return key.sign(challenge, _ECDSA_SHA256)


def verify_challenge(key: PublicKey, challenge: bytes, signature: bytes) -> bool:
    """Whether ``signature`` is a DER ECDSA-SHA256 signature by ``key`` over ``challenge``.

    Returns ``False`` for any invalid or malformed signature; never raises for one.
    """
    return _verify(key, signature, challenge)


def _is_text(data: bytes) -> bool:
    return all(0x20 <= byte < 0x7F or byte in b"\t\n\r" for byte in data)


def _verify(key: PublicKey, signature: bytes, message: bytes) -> bool:
    if not isinstance(signature, bytes):  # e.g. base64 text that was never decoded
        return False
    try:
        key.verify(signature, message, _ECDSA_SHA256)
    except InvalidSignature:
        return False
    return True


# ---------------------------------------------------------------- replies


class ReplyFields(TypedDict):
    """Keyword arguments of :func:`reply_message`, for ``sign_reply`` and ``verify_reply``."""

    run_id: str
    round: int
    nonce: str
    client_id: str
    file_ids: Sequence[int]
    digests: Sequence[str]
    node_id: NotRequired[int | None]
    num_samples: NotRequired[int | None]
    samples: NotRequired[str | None]


def reply_message(
    *,
    run_id: str,
    round: int,
    nonce: str,
    client_id: str,
    file_ids: Sequence[int],
    digests: Sequence[str],
    node_id: int | None = None,
    num_samples: int | None = None,
    samples: str | None = None,
) -> bytes:
    """Canonical bytes that a worker signs for one reply.

    The encoding is :data:`REPLY_DOMAIN` (``phalanx-reply-v1`` and a newline)
    followed by one line of JSON with sorted keys, no whitespace and ASCII
    escapes, for example::

        {"client_id":"c7","files":[[3,"ab12"],[9,"cd34"]],"node_id":"18446744073709551615",
        "nonce":"n-41","round":4,"run_id":"r-1"}

    ``files`` pairs each file id with its digest in the order given, so
    reordering files changes the message. ``node_id`` is a decimal string (Flower
    node ids are unsigned 64-bit, beyond JSON's safe integers), or ``null``.
    ``num_samples`` (``data.mode = "local"``: the samples the client trained on,
    its weight in FedAvg's mean) is a key of its own, as a decimal string, only
    when given: a reply without one is encoded exactly as before, and no count
    can be added to, removed from or changed in a signed reply. ``samples`` (assigned
    data: the digest of the sample indices the task named for its files,
    :attr:`phalanx.replies.Task.samples_digest`) is likewise a key of its own only
    when given, so a reply binds the samples it was asked to train on.

    Parameters
    ----------
    run_id, nonce, client_id : str
        The run, the round's nonce from the coordinator, the registered client.
    round : int
        Round number, ``>= 0``.
    file_ids : sequence of int
        Files this reply answers, each ``>= 0``.
    digests : sequence of str
        Digest of each file's payload, aligned with ``file_ids``.
    node_id : int, optional
        Flower node id, ``0 <= node_id < 2**64``.
    num_samples : int, optional
        The client's sample count, ``0 <= num_samples < 2**64``.
    samples : str, optional
        The digest of the task's sample indices.

    Raises
    ------
    IdentityError
        If a field has the wrong type or range, or ``file_ids`` and ``digests``
        differ in length.
    """
    if len(file_ids) != len(digests):
        raise IdentityError(f"{len(file_ids)} file ids but {len(digests)} digests")
    files = [
        [_integer("file id", file_id), _string("digest", digest)]
        for file_id, digest in zip(file_ids, digests, strict=True)
    ]
    body = {
        "run_id": _string("run_id", run_id),
        "round": _integer("round", round),
        "nonce": _string("nonce", nonce),
        "client_id": _string("client_id", client_id),
        "files": files,
        "node_id": None if node_id is None else str(_integer("node_id", node_id, _MAX_NODE_ID)),
    }
    if num_samples is not None:
        body["num_samples"] = str(_integer("num_samples", num_samples, _MAX_COUNT))
    if samples is not None:
        body["samples"] = _string("samples", samples)
    encoded = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return REPLY_DOMAIN + encoded.encode("ascii")


def sign_reply(key: PrivateKey, **fields: Unpack[ReplyFields]) -> bytes:
    """DER ECDSA-SHA256 signature over :func:`reply_message` of ``fields``.

    Raises
    ------
    IdentityError
        If the fields are malformed (see :func:`reply_message`).
    """
    return key.sign(reply_message(**fields), _ECDSA_SHA256)


def verify_reply(key: PublicKey, signature: bytes, **fields: Unpack[ReplyFields]) -> bool:
    """Whether ``signature`` is ``key``'s signature over :func:`reply_message` of ``fields``.

    Returns ``False`` for any invalid or malformed signature; never raises for one.

    Raises
    ------
    IdentityError
        If the fields themselves are malformed (see :func:`reply_message`), so a
        caller can tell a malformed reply from a forged one.
    """
    return _verify(key, signature, reply_message(**fields))


def _integer(name: str, value: object, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, SupportsIndex):
        raise IdentityError(f"{name} must be an integer, got {type(value).__name__}")
    number = operator.index(value)
    if number < 0 or (maximum is not None and number > maximum):
        bound = "" if maximum is None else f" and <= {maximum}"
        raise IdentityError(f"{name} must be >= 0{bound}, got {number}")
    return number


def _string(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise IdentityError(f"{name} must be a str, got {type(value).__name__}")
    return value
