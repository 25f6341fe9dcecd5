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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from phalanx.replies import Reply
from phalanx.systems.clock import download_time, finish_times, pieces_done_by, upload_time
from phalanx.systems.config import SystemsConfig
from phalanx.systems.profiles import WorkerProfile


@dataclass(frozen=True)
class TimedReply:
    """A reply and when, by the systems model, each of its files arrived.

    Parameters
    ----------
    reply : Reply
        The reply as the worker sent it.
    seconds : float
        When its first message arrived, in seconds since the round began.
    files_at : Mapping[int, float]
        File -> arrival, in seconds since the round began; a file the compute budget
        cut (the worker stopped before it) is absent.
    compute_s : tuple of float
        Compute time at which each of the reply's files was finished, in order,
        budget or not: what a worker measures for DropCompute's budget.
    overhead_s : float
        The reply's seconds outside compute (download and upload).
    """

    reply: Reply
    seconds: float
    files_at: Mapping[int, float]
    compute_s: tuple[float, ...] = ()
    overhead_s: float = 0.0


def simulated_arrivals(
    replies: Sequence[Reply],
    *,
    profiles: Sequence[WorkerProfile],
    systems: SystemsConfig,
    seed: int,
    round_: int,
    bytes_down: int,
    samples_per_file: int,
    per_file: bool = False,
    budget_s: float | None = None,
) -> list[TimedReply]:
    """Time each reply of round ``round_``.

    A worker computes its files in order. With ``per_file`` each file goes out
    as soon as it is computed, one message after the other on the worker's link;
    otherwise the files go out together once the last is computed. With a
    compute ``budget_s`` (DropCompute) the worker stops at the first file it
    would finish past the budget and sends only the files before it; one whose
    budget cut every file sends nothing (its entry has no file). A worker the
    model has away this round never arrives: it has no entry. Workers outside the
    roster's profiles arrive at once, for the checks to refuse them on the record.
    """
    timed: list[TimedReply] = []
    for reply in replies:
        if not 0 <= reply.worker < len(profiles):
            timed.append(TimedReply(reply, 0.0, dict.fromkeys(reply.files, 0.0)))
            continue
        profile = profiles[reply.worker]
        finished = finish_times(
            systems,
            profile,
            seed=seed,
            worker=reply.worker,
            round_=round_,
            bytes_down=bytes_down,
            work=[samples_per_file] * len(reply.files),
        )
        if not all(math.isfinite(t) for t in finished):
            continue
        start = download_time(profile, bytes_down)
        compute = tuple(t - start for t in finished)
        sent = len(finished) if budget_s is None else pieces_done_by(compute, budget_s)
        sizes = [len(p) + len(d) for p, d in zip(reply.payloads, reply.digests, strict=False)]
        files_at = _file_arrivals(
            profile, reply.files[:sent], finished[:sent], sizes[:sent], start, per_file
        )
        first = min(files_at.values(), default=start + upload_time(profile, 0))
        overhead = start + upload_time(profile, sum(sizes[:sent]))
        timed.append(TimedReply(reply, first, files_at, compute, overhead))
    return timed


def _file_arrivals(
    profile: WorkerProfile,
    files: Sequence[int],
    finished: Sequence[float],
    sizes: Sequence[int],
    start: float,
    per_file: bool,
) -> dict[int, float]:
    """Arrival of each file sent: together after the last, or each after its own compute."""
    if not per_file:
        done = max(finished, default=start)
        return dict.fromkeys(files, done + upload_time(profile, sum(sizes)))
    arrivals: dict[int, float] = {}
    link_free = start
    for file, ready, size in zip(files, finished, sizes, strict=True):
        link_free = max(link_free, ready) + upload_time(profile, size)
        arrivals[file] = link_free
    return arrivals
