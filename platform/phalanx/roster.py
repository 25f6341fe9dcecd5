"""Simulated workers' identities: one real EC key per virtual client.

In simulation the coordinator and the virtual clients run from one config, so
each worker's key is derived from the run id and its index; a resumed run
gets the same keys and client ids back. Real deployments use keys that
clients generated themselves and registered over REST.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric import ec

# Order of the NIST P-256 group.
_P256_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551


@dataclass(frozen=True)
class SimulatedIdentity:
    """A virtual client's id and key pair."""

    worker: int
    client_id: str
    private_key: ec.EllipticCurvePrivateKey

    @property
    def public_key(self) -> ec.EllipticCurvePublicKey:
        """The public half."""
        return self.private_key.public_key()


def simulated_identity(run_id: str, worker: int) -> SimulatedIdentity:
    """Derive the identity of worker ``worker`` in simulated run ``run_id``."""
    digest = hashlib.sha256(f"phalanx-sim-key:{run_id}:{worker}".encode()).digest()
    scalar = int.from_bytes(digest, "big") % (_P256_ORDER - 1) + 1
    key = ec.derive_private_key(scalar, ec.SECP256R1())
    client_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"phalanx-sim:{run_id}:{worker}"))
    return SimulatedIdentity(worker=worker, client_id=client_id, private_key=key)


def simulated_roster(run_id: str, num_workers: int) -> list[SimulatedIdentity]:
    """Derive the identities of all ``num_workers`` virtual clients of a run."""
    return [simulated_identity(run_id, w) for w in range(num_workers)]
