"""When a simulated round's replies arrive, by the systems model.

In simulation every worker replies at once (the in-process transport, Flower's
simulation engine); the systems model (:mod:`phalanx.systems`) says when each
reply *would* have arrived: download of the broadcast, compute of its files
sample by sample, upload of its payloads. The times come from the model and the
reply's payloads and digests alone (a DER signature's length varies from one signature
to the next, and the clock must replay), never from anything the worker claims.
The coordinator's :class:`~phalanx.intake.Intake` takes the replies in that order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from phalanx.replies import Reply
from phalanx.systems.clock import arrival_time
from phalanx.systems.config import SystemsConfig
from phalanx.systems.profiles import WorkerProfile


def simulated_arrivals(
    replies: Sequence[Reply],
    *,
    profiles: Sequence[WorkerProfile],
    systems: SystemsConfig,
    seed: int,
    round_: int,
    bytes_down: int,
    samples_per_file: int,
) -> list[tuple[float, Reply]]:
    """Time each reply of round ``round_``.

    A reply arrives whole (one message). A worker the model has away this round
    never arrives: it has no entry. Workers outside the roster's profiles arrive at
    once, for the checks to refuse them on the record.

    Returns
    -------
    list of (float, Reply)
        Seconds since the round began, and the reply, for every reply that arrived.
    """
    timed: list[tuple[float, Reply]] = []
    for reply in replies:
        if not 0 <= reply.worker < len(profiles):
            timed.append((0.0, reply))
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
            timed.append((time, reply))
    return timed
