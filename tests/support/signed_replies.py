"""Well-signed bad replies: a reply changed on its way back and signed again with the worker's key.

Only the check under test can then refuse it: the signature verifies.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Set
from typing import Any

import torch

from phalanx.detection import payload_digest
from phalanx.identity import sign_reply
from phalanx.replies import Reply
from phalanx.roster import simulated_identity
from tests.support.coordinator_runs import RUN_ID


def resigned(reply: Reply, **changes: object) -> Reply:
    """Change fields and sign again with the worker's real key (a well-signed bad reply)."""
    reply = dataclasses.replace(reply, **changes)  # type: ignore[arg-type]
    digests = tuple(hashlib.sha256(p).hexdigest() for p in reply.payloads)
    key = simulated_identity(RUN_ID, reply.worker).private_key
    signature = sign_reply(
        key,
        run_id=reply.run_id,
        round=reply.round,
        nonce=reply.nonce,
        client_id=reply.client_id,
        file_ids=reply.files,
        digests=digests,
        node_id=reply.node_id,
        num_samples=reply.num_samples,
        samples=reply.samples,
    )
    return dataclasses.replace(reply, digests=digests, signature=signature)


def signed_reply(
    run_id: str, nonce: str, worker: int, files: tuple[int, ...], payloads: tuple[bytes, ...]
) -> Reply:
    """``worker``'s round-1 reply of ``payloads`` for ``files``, signed with its simulated key."""
    digests = tuple(payload_digest(p) for p in payloads)
    identity = simulated_identity(run_id, worker)
    signature = sign_reply(
        identity.private_key,
        run_id=run_id,
        round=1,
        nonce=nonce,
        client_id=identity.client_id,
        file_ids=files,
        digests=digests,
        node_id=None,
    )
    return Reply(worker, identity.client_id, run_id, 1, nonce, files, payloads, digests, signature)


def overflowing(workers: Set[int]) -> Callable[[Reply], Reply]:
    """A tamper: ``workers`` send 3e38 in every update, well signed (two overflow a mean)."""

    def tamper(reply: Reply) -> Reply:
        if reply.worker not in workers:
            return reply
        huge = torch.full((len(reply.payloads[0]) // 4,), 3.0e38).numpy().tobytes()
        return resigned(reply, payloads=tuple(huge for _ in reply.payloads))

    return tamper


def unsigned_reply(
    worker: int,
    payloads: tuple[Any, ...],
    *,
    files: tuple[int, ...] | None = None,
    round_: int = 1,
) -> Reply:
    """A reply of ``worker`` with ``payloads`` for ``files`` (0, 1, ...), signed by nobody."""
    return Reply(
        worker=worker,
        client_id=f"c{worker}",
        run_id="run",
        round=round_,
        nonce="nonce",
        files=tuple(range(len(payloads))) if files is None else files,
        payloads=payloads,
        digests=("d",) * len(payloads),
        signature=b"s",
    )
