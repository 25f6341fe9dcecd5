"""When a simulated round's replies arrive, by the systems model, as pieces to collect.

In simulation every worker replies at once (the in-process transport, Flower's
simulation engine); the systems model (:mod:`phalanx.systems`) says when each
reply *would* have arrived: download of the broadcast, compute of its files
sample by sample, upload of its payloads. The times come from the model and the
reply's size alone, never from anything the worker claims.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from phalanx.collect.pieces import Piece
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
) -> tuple[list[Piece], dict[int, float]]:
    """Time each reply of round ``round_`` and split it into one piece per file.

    A reply arrives whole (one message), so its files share its time. A worker the
    model has away this round never arrives: it has no piece, and its time is
    ``math.inf``. Workers outside the roster's profiles are left to the checks of the
    replies, which refuse them.

    Returns
    -------
    pieces : list of Piece
        One per file of every reply that arrived.
    times : dict of int to float
        Each replying worker's arrival time, in seconds after the broadcast.
    """
    pieces: list[Piece] = []
    times: dict[int, float] = {}
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
            bytes_up=reply.num_bytes,
        )
        times[reply.worker] = time
        if math.isfinite(time):
            pieces.extend(
                Piece(reply.worker, file, time, digest)
                for file, digest in zip(reply.files, reply.digests, strict=False)
            )
    return pieces, times
