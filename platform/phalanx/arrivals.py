"""When a simulated round's replies arrive, by the systems model, as pieces to collect.

In simulation every worker replies at once (the in-process transport, Flower's
simulation engine); the systems model (:mod:`phalanx.systems`) says when each
reply *would* have arrived: download of the broadcast, compute of its files
sample by sample, upload of its payloads. The times come from the model and the
reply's payloads and digests alone (a DER signature's length varies from one signature
to the next, and the clock must replay), never from anything the worker claims; so is
each piece's digest, taken of the payload that arrived rather than of the digest the
reply states (a reply claiming the honest digest over another payload must not vote
with the honest ones).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from phalanx.collect.pieces import Piece
from phalanx.detection import payload_digest
from phalanx.replies import Reply
from phalanx.systems.clock import arrival_time
from phalanx.systems.config import SystemsConfig
from phalanx.systems.profiles import WorkerProfile


def simulated_pieces(
    replies: Sequence[Reply],
    *,
    profiles: Sequence[WorkerProfile],
    systems: SystemsConfig,
    seed: int,
    round_: int,
    bytes_down: int,
    samples_per_file: int,
) -> list[Piece]:
    """Time each reply of round ``round_`` and split it into one piece per file.

    A reply arrives whole (one message), so its files share its time. A worker the
    model has away this round never arrives: it has no piece. Workers outside the
    roster's profiles are left to the checks of the replies, which refuse them.

    Returns
    -------
    list of Piece
        One per file of every reply that arrived, digest of the payload as received.
    """
    pieces: list[Piece] = []
    for reply in replies:
        if not 0 <= reply.worker < len(profiles):
            continue
        time = arrival_time(
            systems,
            profiles[reply.worker],
            seed=seed,
            worker=reply.worker,
            round_=round_,
            bytes_down=bytes_down,
            work=[samples_per_file] * len(reply.files),
            bytes_up=reply.work_bytes,
        )
        if math.isfinite(time):
            pieces.extend(
                Piece(reply.worker, file, time, payload_digest(payload))
                for file, payload in zip(reply.files, reply.payloads, strict=False)
            )
    return pieces
