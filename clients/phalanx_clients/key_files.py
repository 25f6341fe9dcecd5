"""A client's key pair on disk: what ``phalanx client keygen`` makes.

The private key is written in OpenSSH format with mode 0600, so the same file is
the Flower SuperNode's authentication key; the public key goes beside it
(``KEY.pub``). Its fingerprint is what an operator compares before approving
the client.
"""

from __future__ import annotations

import errno
import os
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

    Raises
    ------
    FileExistsError
        When a file exists already and ``overwrite`` is false (its ``filename``
        names it); a client's identity is never replaced by accident.
    """
    public_path = path.with_name(path.name + ".pub")
    for existing in (path, public_path):
        if existing.exists() and not overwrite:  # checked first: never half a new pair
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(existing))
    key = generate_private_key(curve)
    save_private_key(path, key, overwrite=overwrite)
    save_public_key(public_path, key.public_key(), overwrite=overwrite)
    return KeyFiles(path, public_path, public_key_fingerprint(key.public_key()))
