"""A client's key pair on disk: what ``phalanx client keygen`` makes.

The private key is written in OpenSSH format with mode 0600, so the same file is
the Flower SuperNode's authentication key; the public key goes beside it
(``KEY.pub``). Its fingerprint is what an operator compares before approving
the client.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from phalanx.identity import (
    generate_private_key,
    public_key_fingerprint,
    save_private_key,
    save_public_key,
)

__all__ = ["Curve", "KeyFiles", "create_key_files"]

Curve = Literal["P-256", "P-384"]
"""The NIST curves a client key can be on."""


@dataclass(frozen=True)
class KeyFiles:
    """A key pair written to disk."""

    private_key: Path
    public_key: Path
    fingerprint: str


def create_key_files(path: Path, curve: Curve = "P-256", *, overwrite: bool = False) -> KeyFiles:
    """Generate a key pair; write the private key to ``path`` and the public key to ``path.pub``.

    Both files are written beside their targets first and put in place only once
    both are whole, so a failure (a target that is a directory, a full disk) leaves
    the pair that was there before.

    Raises
    ------
    FileExistsError
        When a file exists already and ``overwrite`` is false (its ``filename``
        names it); a client's identity is never replaced by accident.
    IsADirectoryError
        When ``path`` or ``path.pub`` is a directory (or ``path`` has no file name).
    OSError
        When the files cannot be written (their ``filename`` names the target).
    """
    if not path.name or path.name in (".", ".."):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    public_path = path.with_name(path.name + ".pub")
    for target in (path, public_path):  # checked first: never half a new pair
        if target.is_dir():
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(target))
        if target.exists() and not overwrite:
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(target))
    key = generate_private_key(curve)
    try:  # a name of its own: OUT's may be as long as a name can be
        staging = Path(tempfile.mkdtemp(prefix=".keygen-", dir=path.parent))
    except OSError as exc:
        raise _naming(exc, path) from exc
    try:
        staged_private, staged_public = staging / "key", staging / "key.pub"
        try:
            save_private_key(staged_private, key)
            save_public_key(staged_public, key.public_key())
        except OSError as exc:
            raise _naming(exc, path) from exc
        old_public = _kept(public_path, staging / "old.pub") if overwrite else None
        _place(staged_public, public_path, overwrite=overwrite)
        try:
            _place(staged_private, path, overwrite=overwrite)
        except OSError:
            _take_back(public_path, staged_public, old_public)
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return KeyFiles(path, public_path, public_key_fingerprint(key.public_key()))


def _place(staged: Path, target: Path, *, overwrite: bool) -> None:
    """Put ``staged`` at ``target``: replacing what is there, or only where nothing is."""
    try:
        if overwrite:
            os.replace(staged, target)
        else:  # fails, as O_EXCL would, should the target have appeared meanwhile
            os.link(staged, target)
    except OSError as exc:
        raise _naming(exc, target) from exc


def _kept(target: Path, backup: Path) -> Path | None:
    """Link what is at ``target`` (a symlink as itself) to ``backup``; ``None`` if nothing is."""
    try:
        os.link(target, backup, follow_symlinks=False)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _naming(exc, target) from exc
    return backup


def _take_back(public_path: Path, staged_public: Path, old_public: Path | None) -> None:
    """Undo the public half's placement when the private half could not follow it.

    Never a new public key beside an old (or another process's) private key: the old
    public key goes back, or, where there was none, the new one goes.
    """
    try:
        if old_public is not None:
            os.replace(old_public, public_path)
        elif not staged_public.exists() or os.path.samefile(staged_public, public_path):
            public_path.unlink()
    except OSError:
        pass  # the error that made us undo it is the one to report


def _naming(exc: OSError, target: Path) -> OSError:
    """Return ``exc`` again, of its own type, naming ``target`` rather than a staged file."""
    return type(exc)(exc.errno, exc.strerror, str(target))
