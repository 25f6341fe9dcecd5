"""The simulated clock of one round: when each worker is there, computes, and replies.

A reply's arrival time, in seconds after the round's broadcast, is::

    download   bytes_down / down_bytes_per_s + latency_s
  + compute    samples x seconds_per_sample x round_factor, piece by piece
  + upload     bytes_up / up_bytes_per_s + latency_s

A worker that is not there in a round (:func:`is_available`) never replies:
its times are :data:`NEVER`, ``math.inf``, which is later than any deadline and
sorts after every real arrival. The per-round factor and the availability are
pure functions of ``(config, seed, worker, round)``, so a worker's draws never
depend on other workers or on the order in which they are asked for.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence

import numpy as np

from phalanx.systems import streams
from phalanx.systems.config import SystemsConfig
from phalanx.systems.profiles import WorkerProfile

NEVER = math.inf
"""The arrival time of a reply that never comes (the worker is not there this round)."""

_PERIODS_PER_DRAW = 256
"""On/off periods drawn at a time: the stream is consumed in fixed chunks, so it is reproducible."""


def round_factor(config: SystemsConfig, seed: int, worker: int, round_: int) -> float:
    """Return the factor on ``worker``'s compute time in round ``round_``.

    ``exp(sigma z - sigma^2 / 2)`` with ``z ~ N(0, 1)`` and ``sigma =
    config.round_sigma``: log-normal with mean 1, so the profile's speed stays
    the worker's mean speed. Exactly 1 when ``round_sigma`` is 0.
    """
    streams.check_key(seed=seed, worker=worker, round_=round_)
    sigma = config.round_sigma
    if sigma == 0.0:
        return 1.0
    rng = streams.stream(streams.ROUND_FACTOR, seed=seed, worker=worker, round_=round_)
    return math.exp(sigma * float(rng.standard_normal()) - sigma * sigma / 2.0)


def is_available(config: SystemsConfig, seed: int, worker: int, round_: int) -> bool:
    """Return whether ``worker`` is there in round ``round_`` (rounds count from 0).

    - ``always``: always.
    - ``dropout``: away with probability ``dropout_probability``, independently
      in each round.
    - ``on_off``: the worker alternates between periods on and off whose lengths
      in rounds are geometric with means ``mean_rounds_on`` and
      ``mean_rounds_off``; in round 0 it is on with the long-run probability
      ``on / (on + off)``. The periods are one stream per worker, drawn
      from round 0 on, so asking for round ``t`` costs time in proportion
      to ``t / (on + off)``.
    """
    streams.check_key(seed=seed, worker=worker, round_=round_)
    if config.availability == "dropout":
        assert config.dropout_probability is not None  # the config refuses dropout without it
        rng = streams.stream(streams.DROPOUT, seed=seed, worker=worker, round_=round_)
        return bool(rng.random() >= config.dropout_probability)
    if config.availability == "on_off":
        assert config.mean_rounds_on is not None and config.mean_rounds_off is not None
        return _on_in_round(config.mean_rounds_on, config.mean_rounds_off, seed, worker, round_)
    return True


def _on_in_round(on: float, off: float, seed: int, worker: int, round_: int) -> bool:
    """Whether the worker's alternating on/off periods have it on in ``round_``."""
    rng = streams.stream(streams.ON_OFF, seed=seed, worker=worker)
    first_on = bool(rng.random() < on / (on + off))
    means = (on, off) if first_on else (off, on)
    start = 0
    while True:
        # Periods alternate, starting with the first state's: lengths[0], lengths[1], ...
        firsts = rng.geometric(1.0 / means[0], _PERIODS_PER_DRAW)
        seconds = rng.geometric(1.0 / means[1], _PERIODS_PER_DRAW)
        ends = start + np.cumsum(np.column_stack((firsts, seconds)).ravel())
        if ends[-1] > round_:
            period = int(np.searchsorted(ends, round_, side="right"))
            return first_on == (period % 2 == 0)
        start = int(ends[-1])


def download_time(profile: WorkerProfile, bytes_down: int) -> float:
    """Return the seconds ``profile``'s worker takes to receive ``bytes_down`` bytes."""
    if bytes_down < 0:
        raise ValueError(f"bytes_down must be >= 0, got {bytes_down}")
    return bytes_down / profile.down_bytes_per_s + profile.latency_s


def upload_time(profile: WorkerProfile, bytes_up: int) -> float:
    """Return the seconds ``profile``'s worker takes to send ``bytes_up`` bytes."""
    if bytes_up < 0:
        raise ValueError(f"bytes_up must be >= 0, got {bytes_up}")
    return bytes_up / profile.up_bytes_per_s + profile.latency_s


def finish_times(
    config: SystemsConfig,
    profile: WorkerProfile,
    *,
    seed: int,
    worker: int,
    round_: int,
    bytes_down: int,
    work: Sequence[int],
) -> tuple[float, ...]:
    """Return when the worker has finished each piece of its work, after the broadcast.

    Parameters
    ----------
    config : SystemsConfig
        The systems model (per-round factor and availability).
    profile : WorkerProfile
        The worker's device.
    seed, worker, round_ : int
        Key of the worker's draws in this round.
    bytes_down : int
        Size of what the worker downloads before it starts.
    work : sequence of int
        Samples in each consecutive piece of work, in the order computed: one
        entry per micro-batch, or per file.

    Returns
    -------
    tuple of float
        ``times[i]``: seconds from the broadcast until piece ``i`` is computed,
        i.e. the download plus the compute time of pieces ``0..i``, accumulated
        piece by piece; all :data:`NEVER` when the worker is not there.
    """
    if any(samples < 0 for samples in work):
        raise ValueError(f"every piece of work needs >= 0 samples, got {list(work)}")
    start = download_time(profile, bytes_down)
    if not is_available(config, seed, worker, round_):
        return (NEVER,) * len(work)
    per_sample = profile.seconds_per_sample * round_factor(config, seed, worker, round_)
    return tuple(itertools.accumulate((samples * per_sample for samples in work), initial=start))[
        1:
    ]


def arrival_time(
    config: SystemsConfig,
    profile: WorkerProfile,
    *,
    seed: int,
    worker: int,
    round_: int,
    bytes_down: int,
    work: Sequence[int],
    bytes_up: int,
) -> float:
    """Return when the worker's whole reply arrives, in seconds after the broadcast.

    The last of :func:`finish_times` (or the download alone, without work) plus
    :func:`upload_time` of ``bytes_up``; :data:`NEVER` when the worker is not there.
    """
    upload = upload_time(profile, bytes_up)
    # A last empty piece finishes with the work, or with the download when there is no work.
    times = finish_times(
        config,
        profile,
        seed=seed,
        worker=worker,
        round_=round_,
        bytes_down=bytes_down,
        work=[*work, 0],
    )
    return times[-1] + upload


def pieces_done_by(times: Sequence[float], cutoff: float) -> int:
    """Return how many pieces of work are finished at ``cutoff``, given :func:`finish_times`.

    A piece finished exactly at the cut-off counts. The times are
    non-decreasing, so the finished pieces are a prefix: a cut at this count
    keeps the work that replicas of the same pieces share.
    """
    return bisect.bisect_right(times, cutoff)
