"""Each simulated worker's device: how fast it computes and communicates, drawn once per run."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from phalanx.systems import streams
from phalanx.systems.config import SystemsConfig
from phalanx.systems.trace import TraceRow, load_trace


@dataclass(frozen=True)
class WorkerProfile:
    """One worker's device for a whole run.

    Parameters
    ----------
    seconds_per_sample : float
        Compute time per training sample, the straggler slowdown included
        (the per-round factor of :func:`phalanx.systems.clock.round_factor`
        is not).
    up_bytes_per_s, down_bytes_per_s : float
        Uplink and downlink bandwidth, in bytes per second.
    latency_s : float
        One-way latency, paid by the download and again by the upload.
    straggler : bool
        Whether the worker is one of the persistent stragglers: the truth a
        test or a report may compare against (slow is not lying).
    """

    seconds_per_sample: float
    up_bytes_per_s: float
    down_bytes_per_s: float
    latency_s: float
    straggler: bool


def straggler_count(fraction: float, num_workers: int) -> int:
    """Return how many of ``num_workers`` workers are persistent stragglers.

    ``fraction * num_workers`` rounded to the nearest integer, halves up
    (``0.1`` of 15 workers is 2).
    """
    return math.floor(fraction * num_workers + 0.5)


def choose_stragglers(fraction: float, num_workers: int, seed: int) -> frozenset[int]:
    """Return the persistent stragglers among workers ``0 .. num_workers-1``, chosen by ``seed``."""
    _check_count(num_workers)
    count = straggler_count(fraction, num_workers)
    rng = streams.stream(streams.STRAGGLERS, seed=seed)
    return frozenset(int(w) for w in rng.choice(num_workers, size=count, replace=False))


def base_seconds_per_sample(config: SystemsConfig, seed: int, worker: int) -> float:
    """Return ``worker``'s compute speed drawn from the config's distribution, no slowdown.

    The draw depends on ``(config, seed, worker)`` only: not on the number of
    workers, nor on any other worker's draw.
    """
    rng = streams.stream(streams.SPEED, seed=seed, worker=worker)
    if config.speed_distribution == "constant":
        z = 1.0
    elif config.speed_distribution == "shifted_exponential":
        z = float(rng.standard_exponential())
    elif config.speed_distribution == "lognormal":
        assert config.speed_sigma is not None  # the config refuses lognormal without it
        z = math.exp(config.speed_sigma * float(rng.standard_normal()))
    else:
        assert config.speed_alpha is not None  # the config refuses pareto without it
        # numpy's pareto is the Lomax distribution: 1 + Lomax is Pareto of minimum 1.
        z = 1.0 + float(rng.pareto(config.speed_alpha))
    return config.speed_shift_s + config.speed_scale_s * z


def draw_profiles(config: SystemsConfig, num_workers: int, seed: int) -> tuple[WorkerProfile, ...]:
    """Return the devices of workers ``0 .. num_workers-1``, deterministic in the arguments.

    Without a trace, each worker's speed comes from
    :func:`base_seconds_per_sample` and the links from the config. With one
    (``config.trace``), the file is read with
    :func:`~phalanx.systems.trace.load_trace` and the profiles come from
    :func:`profiles_from_trace`. Either way the persistent stragglers, chosen
    by :func:`choose_stragglers`, compute ``config.straggler_slowdown`` times
    slower.

    Raises
    ------
    ValueError
        When ``num_workers < 1`` or ``seed < 0``, or the trace cannot be used
        (:class:`~phalanx.systems.trace.TraceError`) or has fewer workers than
        the run.
    """
    if config.trace is not None:
        return profiles_from_trace(config, load_trace(config.trace), num_workers, seed)
    stragglers = choose_stragglers(config.straggler_fraction, num_workers, seed)
    return tuple(
        WorkerProfile(
            seconds_per_sample=_slowed(
                base_seconds_per_sample(config, seed, worker), worker in stragglers, config
            ),
            up_bytes_per_s=config.up_bytes_per_s,
            down_bytes_per_s=config.down_bytes_per_s,
            latency_s=config.latency_s,
            straggler=worker in stragglers,
        )
        for worker in range(num_workers)
    )


def profiles_from_trace(
    config: SystemsConfig, rows: Sequence[TraceRow], num_workers: int, seed: int
) -> tuple[WorkerProfile, ...]:
    """Return the devices of workers ``0 .. num_workers-1`` as the trace's rows state them.

    Worker ``i`` gets row ``i``; rows beyond ``num_workers`` are unused. A
    trace with fewer rows than the run has workers is refused rather than
    cycled: repeating devices would simulate a federation the trace does not
    describe. A row without latency takes the config's ``latency_s``.

    Raises
    ------
    ValueError
        When the rows are fewer than ``num_workers`` or not numbered ``0 .. N-1``.
    """
    _check_count(num_workers)
    if len(rows) < num_workers:
        raise ValueError(
            f"the trace has {len(rows)} workers but the run has {num_workers}: give a trace "
            f"with a row for each of the workers 0..{num_workers - 1}"
        )
    if [row.worker for row in rows] != list(range(len(rows))):
        raise ValueError("the trace's rows must be the workers 0..N-1, in order")
    stragglers = choose_stragglers(config.straggler_fraction, num_workers, seed)
    return tuple(
        WorkerProfile(
            seconds_per_sample=_slowed(row.seconds_per_sample, row.worker in stragglers, config),
            up_bytes_per_s=row.up_bytes_per_s,
            down_bytes_per_s=row.down_bytes_per_s,
            latency_s=config.latency_s if row.latency_s is None else row.latency_s,
            straggler=row.worker in stragglers,
        )
        for row in rows[:num_workers]
    )


def _slowed(seconds_per_sample: float, straggler: bool, config: SystemsConfig) -> float:
    return seconds_per_sample * config.straggler_slowdown if straggler else seconds_per_sample


def _check_count(num_workers: int) -> None:
    if num_workers < 1:
        raise ValueError(f"num_workers must be >= 1, got {num_workers}")
