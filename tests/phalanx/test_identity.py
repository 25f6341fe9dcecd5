import base64
import hashlib
import json
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast, get_args

import numpy as np
import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from hypothesis import given, settings
from hypothesis import strategies as st

from phalanx.identity import (
    MAX_KEY_FILE_BYTES,
    MIN_CHALLENGE_BYTES,
    REPLY_DOMAIN,
    Curve,
    IdentityError,
    PrivateKey,
    ReplyFields,
    generate_private_key,
    load_private_key,
    load_private_key_file,
    load_public_key,
    new_challenge,
    private_key_to_openssh,
    private_key_to_pem,
    public_key_fingerprint,
    public_key_to_openssh,
    public_key_to_pem,
    reply_message,
    save_private_key,
    save_public_key,
    sign_challenge,
    sign_reply,
    verify_challenge,
    verify_reply,
)

CURVES: tuple[Curve, ...] = get_args(Curve)
CURVE_NAMES = {"P-256": "secp256r1", "P-384": "secp384r1"}
# Generated once so that hypothesis tests do not depend on function-scoped fixtures.
KEYS: dict[Curve, PrivateKey] = {curve: generate_private_key(curve) for curve in CURVES}
OTHER_KEYS: dict[Curve, PrivateKey] = {curve: generate_private_key(curve) for curve in CURVES}


@pytest.fixture(params=CURVES)
def curve(request: pytest.FixtureRequest) -> Curve:
    value: Curve = request.param
    return value


@pytest.fixture
def key(curve: Curve) -> PrivateKey:
    return KEYS[curve]


def same_private(a: PrivateKey, b: PrivateKey) -> bool:
    return a.private_numbers() == b.private_numbers()


def same_public(a: ec.EllipticCurvePublicKey, b: ec.EllipticCurvePublicKey) -> bool:
    return a.public_numbers() == b.public_numbers()


def pkcs8(key: Any) -> bytes:
    data: bytes = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return data


def openssh_private(key: Any) -> bytes:
    data: bytes = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )
    return data


def spki_pem(key: Any) -> bytes:
    data: bytes = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return data


def openssh_public(key: Any) -> bytes:
    data: bytes = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return data


# ------------------------------------------------------------------------ keys


def test_generate_private_key_uses_the_requested_curve(curve: Curve) -> None:
    assert generate_private_key(curve).curve.name == CURVE_NAMES[curve]


def test_generate_private_key_defaults_to_p256() -> None:
    assert generate_private_key().curve.name == "secp256r1"


def test_generate_private_key_makes_a_different_key_each_time(curve: Curve) -> None:
    assert not same_private(generate_private_key(curve), generate_private_key(curve))


def test_generate_private_key_refuses_other_curves() -> None:
    with pytest.raises(IdentityError, match="P-521"):
        generate_private_key("P-521")  # type: ignore[arg-type]


def test_private_key_round_trips_through_pem(key: PrivateKey) -> None:
    pem = private_key_to_pem(key)
    assert pem.startswith("-----BEGIN PRIVATE KEY-----")
    assert same_private(load_private_key(pem), key)


def test_private_key_round_trips_through_openssh(key: PrivateKey) -> None:
    text = private_key_to_openssh(key)
    assert text.startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    assert same_private(load_private_key(text), key)
    assert same_private(load_private_key(text.encode()), key)


def test_openssh_private_key_loads_the_way_flower_supernode_loads_it(key: PrivateKey) -> None:
    # flower-supernode: load_ssh_private_key(path.read_bytes(), None), then an EC check.
    loaded = serialization.load_ssh_private_key(private_key_to_openssh(key).encode(), None)
    assert isinstance(loaded, ec.EllipticCurvePrivateKey)
    assert same_private(loaded, key)


def test_pem_private_key_converts_to_openssh_and_back(key: PrivateKey) -> None:
    from_pem = load_private_key(private_key_to_pem(key))
    via_openssh = load_private_key(private_key_to_openssh(from_pem))
    assert private_key_to_pem(via_openssh) == private_key_to_pem(key)


def test_load_private_key_accepts_sec1_ec_private_key_pem(key: PrivateKey) -> None:
    sec1 = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    assert sec1.startswith(b"-----BEGIN EC PRIVATE KEY-----")
    assert same_private(load_private_key(sec1), key)


def test_load_private_key_decrypts_with_the_right_password(key: PrivateKey) -> None:
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"s3cret"),
    )
    assert same_private(load_private_key(encrypted, password=b"s3cret"), key)
    with pytest.raises(IdentityError, match="password"):
        load_private_key(encrypted, password=b"wrong")
    with pytest.raises(IdentityError, match=r"[Pp]assword"):
        load_private_key(encrypted)


def test_load_private_key_refuses_a_password_for_an_unencrypted_key(key: PrivateKey) -> None:
    with pytest.raises(IdentityError, match="not encrypted"):
        load_private_key(private_key_to_pem(key), password=b"s3cret")


def test_public_key_round_trips_through_pem(key: PrivateKey) -> None:
    pem = public_key_to_pem(key.public_key())
    assert pem.startswith("-----BEGIN PUBLIC KEY-----")
    assert same_public(load_public_key(pem), key.public_key())
    assert same_public(load_public_key(pem.encode()), key.public_key())


def test_public_key_round_trips_through_openssh(curve: Curve, key: PrivateKey) -> None:
    line = public_key_to_openssh(key.public_key())
    assert line.startswith("ecdsa-sha2-nistp" + curve[2:] + " AAAA")
    assert "\n" not in line
    assert same_public(load_public_key(line), key.public_key())


def test_public_key_converts_between_pem_and_openssh(key: PrivateKey) -> None:
    pem = public_key_to_pem(key.public_key())
    line = public_key_to_openssh(key.public_key())
    assert public_key_to_openssh(load_public_key(pem)) == line
    assert public_key_to_pem(load_public_key(line)) == pem


def test_load_public_key_ignores_whitespace_and_an_openssh_comment(key: PrivateKey) -> None:
    line = public_key_to_openssh(key.public_key())
    assert same_public(load_public_key(f"  {line} alice@laptop\n"), key.public_key())
    pem = public_key_to_pem(key.public_key())
    assert same_public(load_public_key(f"\n{pem}\n\n"), key.public_key())


def test_load_public_key_accepts_what_cryptography_writes(key: PrivateKey) -> None:
    assert same_public(load_public_key(spki_pem(key)), key.public_key())
    assert same_public(load_public_key(openssh_public(key)), key.public_key())


REFUSED_PUBLIC_KEYS: dict[str, tuple[Callable[[], bytes], str]] = {
    "rsa-pem": (lambda: spki_pem(rsa.generate_private_key(65537, 1024)), "RSA"),
    "rsa-openssh": (lambda: openssh_public(rsa.generate_private_key(65537, 1024)), "RSA"),
    "ed25519-pem": (lambda: spki_pem(ed25519.Ed25519PrivateKey.generate()), "Ed25519"),
    "ed25519-openssh": (lambda: openssh_public(ed25519.Ed25519PrivateKey.generate()), "Ed25519"),
    "secp256k1-pem": (lambda: spki_pem(ec.generate_private_key(ec.SECP256K1())), "secp256k1"),
    "p521-pem": (lambda: spki_pem(ec.generate_private_key(ec.SECP521R1())), "secp521r1"),
    "p521-openssh": (lambda: openssh_public(ec.generate_private_key(ec.SECP521R1())), "secp521r1"),
    "empty": (lambda: b"", "cannot load public key"),
    "garbage": (lambda: b"definitely not a key", "cannot load public key"),
    "truncated-pem": (
        lambda: b"-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQ==\n-----END PUBLIC KEY-----\n",
        "cannot load public key",
    ),
    "private-key-pem": (lambda: pkcs8(ec.generate_private_key(ec.SECP256R1())), "public key"),
}


@pytest.mark.parametrize("name", REFUSED_PUBLIC_KEYS)
def test_load_public_key_refuses_anything_but_ec_p256_or_p384(name: str) -> None:
    make, reason = REFUSED_PUBLIC_KEYS[name]
    with pytest.raises(IdentityError, match=reason):
        load_public_key(make())


def test_load_public_key_refuses_non_ascii_text() -> None:
    with pytest.raises(IdentityError, match="ASCII"):
        load_public_key("ecdsa-sha2-nistp256 AAAA\u00e9")


@given(st.binary() | st.text())
def test_load_public_key_raises_only_identity_error_on_arbitrary_input(data: bytes | str) -> None:
    with pytest.raises(IdentityError):
        load_public_key(data)


REFUSED_PRIVATE_KEYS: dict[str, tuple[Callable[[], bytes], str]] = {
    "rsa-pem": (lambda: pkcs8(rsa.generate_private_key(65537, 1024)), "RSA"),
    "rsa-openssh": (lambda: openssh_private(rsa.generate_private_key(65537, 1024)), "RSA"),
    "ed25519-openssh": (lambda: openssh_private(ed25519.Ed25519PrivateKey.generate()), "Ed25519"),
    "secp256k1-pem": (lambda: pkcs8(ec.generate_private_key(ec.SECP256K1())), "secp256k1"),
    "p521-openssh": (lambda: openssh_private(ec.generate_private_key(ec.SECP521R1())), "secp521r1"),
    "public-key": (lambda: spki_pem(ec.generate_private_key(ec.SECP256R1())), "private key"),
    "garbage": (lambda: b"definitely not a key", "-----BEGIN"),
}


@pytest.mark.parametrize("name", REFUSED_PRIVATE_KEYS)
def test_load_private_key_refuses_anything_but_ec_p256_or_p384(name: str) -> None:
    make, reason = REFUSED_PRIVATE_KEYS[name]
    with pytest.raises(IdentityError, match=reason):
        load_private_key(make())


@given(st.binary() | st.text())
def test_load_private_key_raises_only_identity_error_on_arbitrary_input(data: bytes | str) -> None:
    with pytest.raises(IdentityError):
        load_private_key(data)


def test_fingerprint_is_sha256_hex_of_der_subject_public_key_info(key: PrivateKey) -> None:
    der = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    fingerprint = public_key_fingerprint(key.public_key())
    assert re.fullmatch(r"SHA256:[0-9a-f]{64}", fingerprint)
    assert fingerprint == "SHA256:" + hashlib.sha256(der).hexdigest()


def test_fingerprint_does_not_depend_on_the_text_format(key: PrivateKey) -> None:
    from_pem = load_public_key(public_key_to_pem(key.public_key()))
    from_openssh = load_public_key(public_key_to_openssh(key.public_key()))
    assert public_key_fingerprint(from_pem) == public_key_fingerprint(from_openssh)


def test_fingerprint_differs_between_keys(curve: Curve) -> None:
    a, b = KEYS[curve].public_key(), OTHER_KEYS[curve].public_key()
    assert public_key_fingerprint(a) != public_key_fingerprint(b)


# ------------------------------------------------------------------- key files


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_save_private_key_writes_openssh_readable_by_owner_only(
    tmp_path: Path, key: PrivateKey
) -> None:
    path = tmp_path / "supernode.key"
    previous_umask = os.umask(0)  # the mode must not rely on a strict umask
    try:
        save_private_key(path, key)
    finally:
        os.umask(previous_umask)
    assert mode_of(path) == 0o600
    assert path.read_text().startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    assert same_private(load_private_key_file(path), key)
    assert same_private(load_private_key_file(str(path)), key)


def test_a_key_path_that_is_a_device_a_fifo_or_huge_is_refused_unread(tmp_path: Path) -> None:
    zero = tmp_path / "zero.key"
    zero.symlink_to("/dev/zero")  # read whole, it would fill the memory
    fifo = tmp_path / "fifo.key"
    os.mkfifo(fifo)  # read, it would wait for a writer for ever
    for path in (zero, fifo):
        with pytest.raises(IdentityError, match="not a regular file"):
            load_private_key_file(path)
    big = tmp_path / "big.key"
    big.write_bytes(b"x" * (MAX_KEY_FILE_BYTES + 1))
    with pytest.raises(IdentityError, match="larger than 65,536 bytes"):
        load_private_key_file(big)


def test_save_private_key_refuses_to_replace_an_existing_key(
    tmp_path: Path, key: PrivateKey
) -> None:
    path = tmp_path / "supernode.key"
    save_private_key(path, key)
    with pytest.raises(FileExistsError):
        save_private_key(path, generate_private_key())
    assert same_private(load_private_key_file(path), key)


def test_save_private_key_overwrite_replaces_the_key_and_tightens_the_mode(
    tmp_path: Path, key: PrivateKey
) -> None:
    path = tmp_path / "supernode.key"
    path.write_text("an older, longer file that must be truncated " * 40)
    path.chmod(0o644)
    save_private_key(path, key, overwrite=True)
    assert mode_of(path) == 0o600
    assert same_private(load_private_key_file(path), key)


def test_save_public_key_writes_one_openssh_line(tmp_path: Path, key: PrivateKey) -> None:
    path = tmp_path / "supernode.key.pub"
    save_public_key(path, key.public_key())
    assert mode_of(path) == 0o644
    text = path.read_text()
    assert text == public_key_to_openssh(key.public_key()) + "\n"
    loaded_by_ssh = serialization.load_ssh_public_key(text.encode())
    assert isinstance(loaded_by_ssh, ec.EllipticCurvePublicKey)
    assert same_public(loaded_by_ssh, key.public_key())
    assert same_public(load_public_key(text), key.public_key())
    with pytest.raises(FileExistsError):
        save_public_key(path, key.public_key())


def test_load_private_key_file_reports_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_private_key_file(tmp_path / "absent.key")


# --------------------------------------------------------- proof of possession


def test_new_challenge_has_the_requested_length() -> None:
    assert len(new_challenge()) == 32
    assert len(new_challenge(48)) == 48


def test_new_challenge_is_fresh_each_time() -> None:
    assert new_challenge() != new_challenge()


def test_new_challenge_refuses_too_few_bytes() -> None:
    with pytest.raises(ValueError, match=str(MIN_CHALLENGE_BYTES)):
        new_challenge(MIN_CHALLENGE_BYTES - 1)


def test_challenge_signature_verifies_with_the_signing_key(key: PrivateKey) -> None:
    challenge = new_challenge()
    assert verify_challenge(key.public_key(), challenge, sign_challenge(key, challenge))


def test_challenge_signature_is_der_ecdsa_sha256_over_the_raw_bytes(key: PrivateKey) -> None:
    challenge = new_challenge()
    signature = sign_challenge(key, challenge)
    decode_dss_signature(signature)  # raises unless DER
    key.public_key().verify(signature, challenge, ec.ECDSA(hashes.SHA256()))


def test_registration_wire_format_round_trips_through_base64(key: PrivateKey) -> None:
    # Server: base64 challenge. Client: decode, sign, base64. Server: decode, verify.
    sent = base64.b64encode(new_challenge()).decode()
    client_key = load_private_key(private_key_to_openssh(key))
    answer = base64.b64encode(sign_challenge(client_key, base64.b64decode(sent))).decode()
    registered = load_public_key(public_key_to_openssh(key.public_key()))
    assert verify_challenge(registered, base64.b64decode(sent), base64.b64decode(answer))


def test_verify_challenge_accepts_a_signature_made_by_another_ecdsa_implementation(
    key: PrivateKey,
) -> None:
    challenge = new_challenge()
    signature = key.sign(challenge, ec.ECDSA(hashes.SHA256()))
    assert verify_challenge(key.public_key(), challenge, signature)


def test_challenge_signature_does_not_verify_for_another_challenge(key: PrivateKey) -> None:
    signature = sign_challenge(key, new_challenge())
    assert not verify_challenge(key.public_key(), new_challenge(), signature)


def test_challenge_signature_does_not_verify_with_another_key(curve: Curve) -> None:
    challenge = new_challenge()
    signature = sign_challenge(KEYS[curve], challenge)
    for other in (*OTHER_KEYS.values(), KEYS["P-384" if curve == "P-256" else "P-256"]):
        assert not verify_challenge(other.public_key(), challenge, signature)


def raw_r_s(signature: bytes, curve: Curve) -> bytes:
    r, s = decode_dss_signature(signature)
    size = 32 if curve == "P-256" else 48
    return r.to_bytes(size, "big") + s.to_bytes(size, "big")


MALFORMED: dict[str, Callable[[bytes, Curve], bytes]] = {
    "empty": lambda sig, curve: b"",
    "truncated": lambda sig, curve: sig[:-1],
    "trailing-byte": lambda sig, curve: sig + b"\x00",
    "last-byte-flipped": lambda sig, curve: sig[:-1] + bytes([sig[-1] ^ 0x01]),
    "raw-r-s": raw_r_s,
    "base64-text": lambda sig, curve: base64.b64encode(sig),
    "zero-der": lambda sig, curve: b"\x30\x06\x02\x01\x00\x02\x01\x00",
}


@pytest.mark.parametrize("damage", MALFORMED)
def test_verify_challenge_returns_false_for_a_malformed_signature(
    curve: Curve, damage: str
) -> None:
    challenge = new_challenge()
    signature = sign_challenge(KEYS[curve], challenge)
    bad = MALFORMED[damage](signature, curve)
    assert not verify_challenge(KEYS[curve].public_key(), challenge, bad)


@pytest.mark.parametrize("signature", [None, "MEUCIQ==", 0], ids=["none", "str", "int"])
def test_verify_returns_false_for_a_signature_that_is_not_bytes(
    key: PrivateKey, signature: object
) -> None:
    challenge = new_challenge()
    assert not verify_challenge(key.public_key(), challenge, signature)  # type: ignore[arg-type]
    assert not verify_reply(key.public_key(), signature, **EXAMPLE)  # type: ignore[arg-type]


@given(curve=st.sampled_from(CURVES), signature=st.binary(max_size=120))
def test_verify_challenge_never_raises_for_arbitrary_signature_bytes(
    curve: Curve, signature: bytes
) -> None:
    assert not verify_challenge(KEYS[curve].public_key(), bytes(32), signature)


def test_sign_challenge_refuses_a_short_challenge(key: PrivateKey) -> None:
    with pytest.raises(IdentityError, match="at least"):
        sign_challenge(key, os.urandom(MIN_CHALLENGE_BYTES - 1))


@pytest.mark.parametrize(
    "text",
    [
        b"2025-06-01T12:00:00.123456+00:00",  # what Flower's node auth signs
        b"please sign this harmless challenge",
    ],
)
def test_sign_challenge_refuses_a_challenge_that_reads_as_text(
    key: PrivateKey, text: bytes
) -> None:
    with pytest.raises(IdentityError, match="text"):
        sign_challenge(key, text)


def test_sign_challenge_refuses_a_reply_message_so_replies_cannot_be_forged(
    key: PrivateKey,
) -> None:
    message = reply_message(
        run_id="r", round=1, nonce="n", client_id="c", file_ids=[0], digests=["d"]
    )
    with pytest.raises(IdentityError):
        sign_challenge(key, message)


# -------------------------------------------------------------------- replies


EXAMPLE: ReplyFields = {
    "run_id": "run-1",
    "round": 4,
    "nonce": "n-41",
    "client_id": "c7",
    "file_ids": [3, 9],
    "digests": ["ab12", "cd34"],
    "node_id": 2**64 - 1,
}


def test_reply_message_has_a_fixed_canonical_encoding() -> None:
    assert reply_message(**EXAMPLE) == (
        b"phalanx-reply-v1\n"
        b'{"client_id":"c7","files":[[3,"ab12"],[9,"cd34"]],"node_id":"18446744073709551615",'
        b'"nonce":"n-41","round":4,"run_id":"run-1"}'
    )


def test_reply_message_encodes_a_missing_node_id_as_null() -> None:
    fields: ReplyFields = {**EXAMPLE, "node_id": None}
    without = EXAMPLE.copy()
    del without["node_id"]
    assert reply_message(**fields) == reply_message(**without)
    assert b'"node_id":null' in reply_message(**fields)


def test_a_sample_count_is_a_key_of_its_own_and_replies_without_one_keep_their_bytes() -> None:
    counted: ReplyFields = {**EXAMPLE, "num_samples": 180}

    assert reply_message(**{**EXAMPLE, "num_samples": None}) == reply_message(**EXAMPLE)
    assert reply_message(**counted) == (
        b"phalanx-reply-v1\n"
        b'{"client_id":"c7","files":[[3,"ab12"],[9,"cd34"]],"node_id":"18446744073709551615",'
        b'"nonce":"n-41","num_samples":"180","round":4,"run_id":"run-1"}'
    )


@pytest.mark.parametrize("claimed", [None, 179, 181, 0, 2**53])
def test_a_signed_sample_count_cannot_be_changed_added_or_removed(
    key: PrivateKey, claimed: int | None
) -> None:
    signature = sign_reply(key, **{**EXAMPLE, "num_samples": 180})

    assert verify_reply(key.public_key(), signature, **{**EXAMPLE, "num_samples": 180})
    assert not verify_reply(key.public_key(), signature, **{**EXAMPLE, "num_samples": claimed})
    assert not verify_reply(key.public_key(), sign_reply(key, **EXAMPLE), num_samples=1, **EXAMPLE)


@pytest.mark.parametrize("claimed", [None, "e3b0", "5" * 64])
def test_the_signed_digest_of_the_task_s_samples_cannot_be_changed_added_or_removed(
    key: PrivateKey, claimed: str | None
) -> None:
    asked = "a" * 64
    signature = sign_reply(key, **{**EXAMPLE, "samples": asked})

    assert b'"samples":"' + asked.encode() + b'"' in reply_message(**{**EXAMPLE, "samples": asked})
    assert reply_message(**{**EXAMPLE, "samples": None}) == reply_message(**EXAMPLE)
    assert verify_reply(key.public_key(), signature, **{**EXAMPLE, "samples": asked})
    assert not verify_reply(key.public_key(), signature, **{**EXAMPLE, "samples": claimed})
    assert not verify_reply(key.public_key(), sign_reply(key, **EXAMPLE), samples=asked, **EXAMPLE)


def test_reply_message_accepts_numpy_integers() -> None:
    fields: ReplyFields = {
        **EXAMPLE,
        "round": np.int64(4),  # type: ignore[typeddict-item]
        "file_ids": np.array([3, 9], dtype=np.int64),  # type: ignore[typeddict-item]
        "node_id": np.uint64(2**64 - 1),  # type: ignore[typeddict-item]
    }
    assert reply_message(**fields) == reply_message(**EXAMPLE)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"digests": ["ab12"]}, "2 file ids but 1 digests"),
        ({"round": -1}, "round must be >= 0"),
        ({"round": True}, "round must be an integer"),
        ({"round": 4.0}, "round must be an integer"),
        ({"file_ids": [3, -9]}, "file id must be >= 0"),
        ({"file_ids": [3, "9"]}, "file id must be an integer"),
        ({"digests": ["ab12", b"cd34"]}, "digest must be a str"),
        ({"nonce": 41}, "nonce must be a str"),
        ({"node_id": 2**64}, "node_id must be >= 0 and <= 18446744073709551615"),
        ({"node_id": -1}, "node_id must be >= 0"),
        ({"num_samples": -1}, "num_samples must be >= 0"),
        ({"num_samples": 2**64}, "num_samples must be >= 0 and <= 18446744073709551615"),
        ({"num_samples": True}, "num_samples must be an integer"),
        ({"num_samples": 1.0}, "num_samples must be an integer"),
    ],
)
def test_reply_message_refuses_malformed_fields(change: dict[str, Any], reason: str) -> None:
    with pytest.raises(IdentityError, match=re.escape(reason)):
        reply_message(**{**EXAMPLE, **change})


def test_verify_reply_raises_on_malformed_fields_instead_of_calling_them_forged(
    key: PrivateKey,
) -> None:
    signature = sign_reply(key, **EXAMPLE)
    malformed: ReplyFields = {**EXAMPLE, "digests": ["ab12"]}
    with pytest.raises(IdentityError, match="digests"):
        verify_reply(key.public_key(), signature, **malformed)


def test_reply_signature_verifies_with_the_signing_key(key: PrivateKey) -> None:
    signature = sign_reply(key, **EXAMPLE)
    assert verify_reply(key.public_key(), signature, **EXAMPLE)
    key.public_key().verify(signature, reply_message(**EXAMPLE), ec.ECDSA(hashes.SHA256()))


def test_reply_signature_does_not_verify_with_another_key(curve: Curve) -> None:
    signature = sign_reply(KEYS[curve], **EXAMPLE)
    assert not verify_reply(OTHER_KEYS[curve].public_key(), signature, **EXAMPLE)


def test_challenge_signature_over_the_same_bytes_is_not_a_reply_signature(
    key: PrivateKey,
) -> None:
    challenge = new_challenge()
    signature = sign_challenge(key, challenge)
    assert not verify_reply(key.public_key(), signature, **EXAMPLE)


@pytest.mark.parametrize("damage", MALFORMED)
def test_verify_reply_returns_false_for_a_malformed_signature(curve: Curve, damage: str) -> None:
    signature = sign_reply(KEYS[curve], **EXAMPLE)
    bad = MALFORMED[damage](signature, curve)
    assert not verify_reply(KEYS[curve].public_key(), bad, **EXAMPLE)


@st.composite
def reply_fields(draw: st.DrawFn, min_files: int = 0) -> ReplyFields:
    pair = st.tuples(st.integers(0, 2**40), st.text(max_size=8))
    files = draw(st.lists(pair, min_size=min_files, max_size=5, unique=True))
    return {
        "run_id": draw(st.text(max_size=8)),
        "round": draw(st.integers(0, 2**31)),
        "nonce": draw(st.text(max_size=8)),
        "client_id": draw(st.text(max_size=8)),
        "file_ids": [file_id for file_id, _ in files],
        "digests": [digest for _, digest in files],
        "node_id": draw(st.none() | st.integers(0, 2**64 - 1)),
    }


def other_text(draw: st.DrawFn, old: str) -> str:
    new = draw(st.text(max_size=8))
    return new if new != old else old + "x"


def other_integer(draw: st.DrawFn, old: int, maximum: int) -> int:
    new = draw(st.integers(0, maximum))
    return new if new != old else (old + 1) % (maximum + 1)


@st.composite
def changed_once(draw: st.DrawFn, fields: ReplyFields, kind: str) -> ReplyFields:
    """``fields`` with exactly one thing of the given kind changed."""
    new: dict[str, Any] = {**fields}
    ids, digests = list(fields["file_ids"]), list(fields["digests"])
    if kind in ("run_id", "nonce", "client_id"):
        new[kind] = other_text(draw, new[kind])
    elif kind == "round":
        new["round"] = other_integer(draw, new["round"], 2**31)
    elif kind == "node_id":
        old = new.get("node_id")
        if old is not None and draw(st.booleans()):
            new["node_id"] = None
        else:
            new["node_id"] = other_integer(draw, -1 if old is None else old, 2**64 - 1)
    elif kind == "file id":
        at = draw(st.integers(0, len(ids) - 1))
        ids[at] = other_integer(draw, ids[at], 2**40)
    elif kind == "digest":
        at = draw(st.integers(0, len(ids) - 1))
        digests[at] = other_text(draw, digests[at])
    elif kind == "file order":  # files are distinct pairs, so any swap changes the order
        i, j = draw(st.lists(st.integers(0, len(ids) - 1), min_size=2, max_size=2, unique=True))
        ids[i], ids[j], digests[i], digests[j] = ids[j], ids[i], digests[j], digests[i]
    elif kind == "added file":
        at = draw(st.integers(0, len(ids)))
        ids.insert(at, draw(st.integers(0, 2**40)))
        digests.insert(at, draw(st.text(max_size=8)))
    elif kind == "dropped file":
        at = draw(st.integers(0, len(ids) - 1))
        del ids[at], digests[at]
    new["file_ids"], new["digests"] = ids, digests
    assert new != fields, kind
    return cast(ReplyFields, new)


FILES_NEEDED = {
    "run_id": 0,
    "round": 0,
    "nonce": 0,
    "client_id": 0,
    "node_id": 0,
    "added file": 0,
    "file id": 1,
    "digest": 1,
    "dropped file": 1,
    "file order": 2,
}


@pytest.mark.parametrize("kind", FILES_NEEDED)
@settings(max_examples=40)
@given(curve=st.sampled_from(CURVES), data=st.data())
def test_reply_signature_fails_if_any_field_changes(
    kind: str, curve: Curve, data: st.DataObject
) -> None:
    fields = data.draw(reply_fields(min_files=FILES_NEEDED[kind]), label="signed")
    changed = data.draw(changed_once(fields, kind), label="changed")
    key = KEYS[curve]
    signature = sign_reply(key, **fields)
    assert verify_reply(key.public_key(), signature, **fields)
    assert not verify_reply(key.public_key(), signature, **changed)


@given(reply_fields())
def test_reply_message_decodes_back_to_exactly_its_fields(fields: ReplyFields) -> None:
    # Decodable implies unambiguous: two different field sets never share a message.
    message = reply_message(**fields)
    assert message.startswith(REPLY_DOMAIN)
    decoded = json.loads(message[len(REPLY_DOMAIN) :])
    node_id = fields.get("node_id")
    assert decoded == {
        "run_id": fields["run_id"],
        "round": fields["round"],
        "nonce": fields["nonce"],
        "client_id": fields["client_id"],
        "files": [list(pair) for pair in zip(fields["file_ids"], fields["digests"], strict=True)],
        "node_id": None if node_id is None else str(node_id),
    }


@given(reply_fields())
def test_reply_message_is_printable_ascii_so_it_never_passes_as_a_challenge(
    fields: ReplyFields,
) -> None:
    message = reply_message(**fields)
    assert message.isascii()
    with pytest.raises(IdentityError):
        sign_challenge(KEYS["P-256"], message)


def test_reply_fields_shifted_across_a_boundary_give_different_messages() -> None:
    a = reply_message(run_id="ab", round=1, nonce="c", client_id="", file_ids=[], digests=[])
    b = reply_message(run_id="a", round=1, nonce="bc", client_id="", file_ids=[], digests=[])
    c = reply_message(run_id="a", round=1, nonce="b", client_id="c", file_ids=[], digests=[])
    assert len({a, b, c}) == 3


def test_a_wrong_password_is_named_even_when_the_garbage_it_decrypts_to_has_valid_padding(
    key: PrivateKey,
) -> None:
    # With a random salt and IV, about one wrong password in 256 decrypts to bytes whose
    # padding checks, and the ASN.1 parser fails instead of the decryption; 1,000 tries
    # hit that case with probability 1 - (255/256)**1000 > 0.98.
    for _ in range(1000):
        encrypted = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"s3cret"),
        )
        with pytest.raises(IdentityError, match="wrong password"):
            load_private_key(encrypted, password=b"wrong")
