"""The settings of simulated system heterogeneity: compute speed, network, availability.

One frozen model, meant to be a run config's ``systems`` section as it is
(``systems: SystemsConfig = SystemsConfig()``). It describes a federation's
devices; :mod:`phalanx.systems.profiles` draws each worker's device from it and
:mod:`phalanx.systems.clock` turns a device and a round's work into a simulated
arrival time.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, StrictBool, field_validator, model_validator

from phalanx.strict_numbers import NumbersNotBooleans

SpeedDistribution = Literal["constant", "shifted_exponential", "lognormal", "pareto"]
Availability = Literal["always", "dropout", "on_off"]

MAX_SECONDS_PER_SAMPLE = 3600.0
"""Slowest compute speed a config or a trace may state, in seconds per sample."""
MIN_BYTES_PER_S = 1.0
"""Slowest link a config or a trace may state, in bytes per second."""
MAX_BYTES_PER_S = 1e12
"""Fastest link a config or a trace may state, in bytes per second (8 Tbit/s)."""
MAX_LATENCY_S = 3600.0
"""Longest one-way latency a config or a trace may state, in seconds."""
MAX_TRACE_PATH = 4096
"""Longest trace path a config may name, in characters."""


class SystemsConfig(NumbersNotBooleans):
    """How fast each simulated worker computes and communicates, and when it is there at all.

    A worker's compute speed, in seconds per sample, is
    ``speed_shift_s + speed_scale_s * Z`` with ``Z`` drawn once per worker:

    - ``constant``: ``Z = 1``;
    - ``shifted_exponential``: ``Z ~ Exp(1)``, so the speed's minimum is the
      shift and its mean ``shift + scale``;
    - ``lognormal``: ``Z = exp(speed_sigma * N(0, 1))``, median 1;
    - ``pareto``: ``Z ~ Pareto(speed_alpha)`` with minimum 1 (heavy-tailed).

    A ``straggler_fraction`` of the workers (chosen by the seed) are persistent
    stragglers, ``straggler_slowdown`` times slower. In every round each worker's
    compute time is further multiplied by a log-normal factor of mean 1 and
    log-deviation ``round_sigma`` (none at ``0``).

    With a ``trace``, each worker's speed, bandwidths and (if the trace has the
    column) latency come from the trace instead of the distribution and the
    network fields; stragglers, the per-round factor and availability still
    apply on top.

    ``enabled`` is for the code that runs rounds (whether it simulates arrival
    times at all); the functions of this package model whatever the config says.
    """

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        allow_inf_nan=False,
        json_schema_extra={
            "description": "Simulated system heterogeneity: per-worker compute speed, "
            "bandwidth, latency and availability, for simulated arrival times."
        },
    )

    enabled: StrictBool = Field(
        default=False,
        description="Simulate each reply's arrival time from this model (simulation only).",
    )
    speed_distribution: SpeedDistribution = Field(
        default="constant",
        description="Distribution of Z in seconds per sample = speed_shift_s + speed_scale_s * Z, "
        "drawn once per worker: constant (Z = 1), shifted_exponential (Z ~ Exp(1)), lognormal "
        "(Z = exp(speed_sigma N(0, 1))), pareto (Z ~ Pareto(speed_alpha), Z >= 1).",
    )
    speed_scale_s: float = Field(
        default=0.001,
        gt=0.0,
        le=MAX_SECONDS_PER_SAMPLE,
        description="Scale of the compute speed, in seconds per sample: the constant speed "
        "(above the shift), the exponential's mean, the log-normal's median, the Pareto's "
        "minimum.",
    )
    speed_shift_s: float = Field(
        default=0.0,
        ge=0.0,
        le=MAX_SECONDS_PER_SAMPLE,
        description="Seconds per sample added to every worker's draw: the fastest any worker "
        "computes.",
    )
    speed_sigma: float | None = Field(
        default=None,
        gt=0.0,
        le=4.0,
        description="Log-deviation of the log-normal speed; required by lognormal, refused by "
        "the other distributions.",
    )
    speed_alpha: float | None = Field(
        default=None,
        gt=1.0,
        le=100.0,
        description="Tail index of the Pareto speed (> 1, so the mean is finite; smaller is "
        "heavier); required by pareto, refused by the other distributions.",
    )
    round_sigma: float = Field(
        default=0.0,
        ge=0.0,
        le=2.0,
        description="Log-deviation of each worker's per-round compute factor, a log-normal of "
        "mean 1 drawn per worker and round; 0: no per-round variation.",
    )
    straggler_fraction: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Fraction of the workers that are persistent stragglers: "
        "floor(fraction * K + 1/2) of them, chosen by the seed.",
    )
    straggler_slowdown: float = Field(
        default=5.0,
        ge=1.0,
        le=1000.0,
        description="How many times slower a persistent straggler computes.",
    )
    up_bytes_per_s: float = Field(
        default=1.25e6,
        ge=MIN_BYTES_PER_S,
        le=MAX_BYTES_PER_S,
        description="Uplink bandwidth of every worker, in bytes (not bits) per second.",
    )
    down_bytes_per_s: float = Field(
        default=1.25e7,
        ge=MIN_BYTES_PER_S,
        le=MAX_BYTES_PER_S,
        description="Downlink bandwidth of every worker, in bytes (not bits) per second.",
    )
    latency_s: float = Field(
        default=0.05,
        ge=0.0,
        le=MAX_LATENCY_S,
        description="One-way latency, paid once by the download and once by the upload.",
    )
    availability: Availability = Field(
        default="always",
        description="always; dropout (each worker misses each round with probability "
        "dropout_probability, independently); on_off (each worker alternates between periods "
        "on and off whose lengths in rounds are geometric with means mean_rounds_on and "
        "mean_rounds_off).",
    )
    dropout_probability: float | None = Field(
        default=None,
        ge=0.0,
        lt=1.0,
        description="Probability that a worker misses a round; required by dropout, refused "
        "otherwise.",
    )
    mean_rounds_on: float | None = Field(
        default=None,
        ge=1.0,
        le=1e6,
        description="Mean length in rounds of a period in which a worker is there; required by "
        "on_off, refused otherwise.",
    )
    mean_rounds_off: float | None = Field(
        default=None,
        ge=1.0,
        le=1e6,
        description="Mean length in rounds of a period in which a worker is away; required by "
        "on_off, refused otherwise.",
    )
    trace: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_TRACE_PATH,
        description="Path of a device-capacity CSV (phalanx.systems.trace) whose rows give each "
        "worker's speed, bandwidths and optionally latency, instead of the distribution and "
        "the network fields.",
    )

    @field_validator("trace")
    @classmethod
    def _a_path(cls, path: str | None) -> str | None:
        if path is not None and "\x00" in path:
            raise ValueError("trace must be a path, without NUL characters")
        return path

    @model_validator(mode="after")
    def _parameters_of_the_chosen_modes(self) -> SystemsConfig:
        _one_mode_parameters(
            "speed_distribution",
            self.speed_distribution,
            {"lognormal": ("speed_sigma",), "pareto": ("speed_alpha",)},
            {"speed_sigma": self.speed_sigma, "speed_alpha": self.speed_alpha},
        )
        _one_mode_parameters(
            "availability",
            self.availability,
            {"dropout": ("dropout_probability",), "on_off": ("mean_rounds_on", "mean_rounds_off")},
            {
                "dropout_probability": self.dropout_probability,
                "mean_rounds_on": self.mean_rounds_on,
                "mean_rounds_off": self.mean_rounds_off,
            },
        )
        return self


def _one_mode_parameters(
    setting: str,
    mode: str,
    needs: dict[str, tuple[str, ...]],
    given: dict[str, float | None],
) -> None:
    """Refuse a missing parameter of ``mode``, or a given one that only another mode reads."""
    wanted = needs.get(mode, ())
    for name, value in given.items():
        if name in wanted and value is None:
            raise ValueError(f"{setting} {mode!r} needs {name}")
        if name not in wanted and value is not None:
            owner = next(m for m, names in needs.items() if name in names)
            raise ValueError(f"{name} applies only to {setting} {owner!r}, not {mode!r}; remove it")
