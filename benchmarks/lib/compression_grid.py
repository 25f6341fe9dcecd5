"""The grid of ``eval_compression.py``: the methods, the settings, and one run config per case.

A :class:`Method` is a compressor and its settings (a baseline of
:mod:`benchmarks.lib.compression_baselines` or the platform's codec through
``config.codec``); a :class:`Case` is a method at one replication ``r``, on one
transport, under one seed, and gives the plain run config it runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from benchmarks.lib.compression_baselines import (
    QSGD,
    Compressor,
    ScaledSign,
    TopK,
    Zstd,
    layer_sizes,
)
from phalanx.codec import CodecConfig, LayerSpec
from phalanx.config import RunConfig

K = 15
SEED = 2026
IN_PROCESS = "in-process (test double of Flower's runtime)"
FLOWER = "flower-simulation"
SERVER_LR = 0.004
"""Adam's step on the server: fp32's best of 0.002, 0.004 and 0.008 over seeds 2026 to 2028.

At r = 1 fp32 ended at 78.45, 80.26 and 77.75 % (means over the three seeds),
at r = 3 at 78.40, 80.01 and 77.97 %; reproduce one with ``--only fp32 --seeds 3
--server-lr LR --out DIR``.
"""
Kind = Literal["fp32", "zstd", "qsgd", "top-k + EF", "signsgd", "predictive coding"]


@dataclass(frozen=True)
class Method:
    """A compressor and its settings."""

    kind: Kind
    params: tuple[tuple[str, float | int | bool | str], ...] = ()
    r_one_only: bool = False

    @property
    def label(self) -> str:
        """Short name with the settings, for tables and logs."""
        settings = ", ".join(f"{k}={v}" for k, v in self.params)
        return f"{self.kind} ({settings})" if settings else self.kind

    @property
    def key(self) -> str:
        """File-name-safe identifier."""
        settings = "-".join(f"{k}{v}" for k, v in self.params)
        return "".join(c if c.isalnum() else "-" for c in f"{self.kind}-{settings}".lower())

    def setting(self, name: str) -> float | int | bool | str:
        """One of ``params``."""
        return dict(self.params)[name]

    def compressor(self, layers: LayerSpec) -> Compressor | None:
        """The baseline compressor, or ``None`` for the platform's own channels."""
        sizes = layer_sizes(layers)
        dim = sum(sizes)
        if self.kind == "zstd":
            return Zstd(dim, level=int(self.setting("level")))
        if self.kind == "qsgd":
            return QSGD(dim, levels=int(self.setting("s")), bucket=int(self.setting("bucket")))
        if self.kind == "top-k + EF":
            return TopK(dim, fraction=float(self.setting("fraction")))
        if self.kind == "signsgd":
            return ScaledSign(sizes)
        return None

    @property
    def error_feedback(self) -> bool:
        """Whether the worker carries its compression error (r = 1 only)."""
        return self.kind == "top-k + EF" or bool(dict(self.params).get("error_feedback", False))


def predictive(
    rd_lambda: float,
    *,
    error_feedback: bool = False,
    downlink_lambda: float | None = None,
    unbiased: bool = False,
    extra_step: float | None = None,
    layer_distortion: bool = False,
    correlated: bool = False,
    low_rank: int = 0,
) -> Method:
    """The platform's codec at ``rd_lambda``.

    ``downlink_lambda`` sets ``codec.downlink_rd_lambda``, the rate weight of
    the coordinator's broadcast; workers encode their uplink at ``rd_lambda``.
    ``unbiased`` sets ``codec.unbiased`` (stochastic rounding of the uplink).
    ``extra_step`` adds a coarser step (in units of the residual's RMS) to the
    default ``codec.step_sizes``. ``layer_distortion`` sets
    ``codec.rd_distortion = "layer"`` (each layer's error relative to its own
    energy, as Adam on the server sees it). ``correlated`` sets
    ``codec.rounding = "correlated"`` (the files of a round share their
    rounding draws, so the errors partly cancel in the mean). ``low_rank`` sets
    ``codec.low_rank`` (2-D layers may go as two quantized factors of that
    rank).
    """
    params: tuple[tuple[str, float | int | bool | str], ...] = (("lambda", rd_lambda),)
    if downlink_lambda is not None:
        params += (("downlink_lambda", downlink_lambda),)
    if unbiased:
        params += (("unbiased", True),)
    if extra_step is not None:
        params += (("extra_step", extra_step),)
    if layer_distortion:
        params += (("rd_distortion", "layer"),)
    if correlated:
        params += (("rounding", "correlated"),)
    if low_rank:
        params += (("low_rank", low_rank),)
    if error_feedback:
        params += (("error_feedback", True),)
    return Method("predictive coding", params, r_one_only=error_feedback)


DOWNLINK_LAMBDA = 0.03


def adam_coded(rd_lambda: float, *, correlated: bool = True, low_rank: int = 0) -> Method:
    """The codec as set for Adam on the server: unbiased, per-layer distortion, a 16x step.

    ``correlated``: correlated rounding draws across the round's files.
    ``low_rank``: fully connected weights may go as rank-``low_rank`` factors,
    their truncation carried by error feedback (so ``r = 1`` only).
    """
    return predictive(
        rd_lambda,
        downlink_lambda=DOWNLINK_LAMBDA,
        unbiased=True,
        extra_step=16.0,
        layer_distortion=True,
        correlated=correlated,
        low_rank=low_rank,
        error_feedback=low_rank > 0,
    )


FP32 = Method("fp32")
ZSTD = Method("zstd", (("level", 3),))
LAMBDAS = (0.03, 0.1, 0.3, 1.0)
LOW_RANK = 8
"""Rank of the r = 1 candidate's fully connected weights (with error feedback)."""
GOAL_METHODS = (
    *(adam_coded(lam, correlated=c) for lam in (20.0, 30.0) for c in (True, False)),
    adam_coded(20.0, low_rank=LOW_RANK),
)
"""Run under every seed: the goal's candidates, with and without correlated rounding, and,
for r = 1, with low-rank fully connected weights and error feedback."""
METHODS = (
    FP32,
    ZSTD,
    Method("qsgd", (("s", 4), ("bucket", 512))),
    Method("qsgd", (("s", 16), ("bucket", 512))),
    Method("top-k + EF", (("fraction", 0.005),), r_one_only=True),
    Method("signsgd"),
    *(predictive(lam) for lam in LAMBDAS),
    predictive(0.3, error_feedback=True),
    *(predictive(lam, downlink_lambda=DOWNLINK_LAMBDA) for lam in (0.3, 1.0)),
    *GOAL_METHODS,
)
EXTRA_METHODS = (
    # Unbiased (stochastically rounded) uplink at about the rate of lambda=0.3: left out of
    # the full grid, run with --only.
    predictive(10.0, downlink_lambda=DOWNLINK_LAMBDA, unbiased=True),
    predictive(3.0, downlink_lambda=DOWNLINK_LAMBDA, unbiased=True),
    # The same with a 16x-RMS step on offer, to go below 0.32 bits per parameter.
    predictive(3.0, downlink_lambda=DOWNLINK_LAMBDA, unbiased=True, extra_step=16.0),
    predictive(10.0, downlink_lambda=DOWNLINK_LAMBDA, unbiased=True, extra_step=16.0),
    adam_coded(10.0, correlated=False),
    adam_coded(10.0),
)
QUICK_METHODS = (
    FP32,
    Method("qsgd", (("s", 16), ("bucket", 512))),
    Method("top-k + EF", (("fraction", 0.005),), r_one_only=True),
    predictive(0.1),
    predictive(0.3),
    predictive(1.0, downlink_lambda=DOWNLINK_LAMBDA),
)


@dataclass(frozen=True)
class Settings:
    """What every run of one invocation shares."""

    rounds: int
    flower_rounds: int
    eval_samples: int
    samples_per_file: dict[int, int]
    optimizer: Literal["sgd", "adam", "amsgrad"] = "adam"
    server_lr: float = SERVER_LR
    seed: int = SEED
    seeds: int = 1


@dataclass(frozen=True)
class Case:
    """One run: a method at one replication, on one transport."""

    method: Method
    r: int
    transport: str = IN_PROCESS
    rounds: int | None = None
    seed: int | None = None

    @property
    def run_id(self) -> str:
        """Run id (it also derives the simulated workers' keys)."""
        suffix = "" if self.seed is None else f"-s{self.seed}"
        return f"compression-r{self.r}-{self.method.key}{suffix}"

    def config(self, settings: Settings) -> RunConfig:
        """The run configuration of this case."""
        codec: dict[str, Any] = {"enabled": False}
        if self.method.kind == "predictive coding":
            codec = {
                "enabled": True,
                "rd_lambda": self.method.setting("lambda"),
                "downlink_rd_lambda": dict(self.method.params).get("downlink_lambda"),
                "unbiased": bool(dict(self.method.params).get("unbiased", False)),
                "rd_distortion": dict(self.method.params).get("rd_distortion", "update"),
                "rounding": dict(self.method.params).get("rounding", "independent"),
                "low_rank": int(dict(self.method.params).get("low_rank", 0)),
                "error_feedback": self.method.error_feedback,
            }
            extra = dict(self.method.params).get("extra_step")
            if extra is not None:
                codec["step_sizes"] = (*CodecConfig().step_sizes, float(extra))
        return RunConfig.model_validate(
            {
                "name": self.run_id,
                "seed": settings.seed if self.seed is None else self.seed,
                "rounds": self.rounds or settings.rounds,
                "data": {
                    "dataset": "fashion-mnist",
                    "model": "cnn",
                    "samples_per_file": settings.samples_per_file[self.r],
                    "eval_samples": settings.eval_samples,
                },
                "assignment": {
                    "scheme": "none" if self.r == 1 else "bibd",
                    "num_workers": K,
                    "r": self.r,
                },
                "aggregation": {"rule": "mean", "f": 0},
                "training": {"optimizer": settings.optimizer, "server_lr": settings.server_lr},
                "codec": codec,
            }
        )


def grid(methods: Sequence[Method], rs: Sequence[int]) -> list[Case]:
    """Every method at every r it supports."""
    return [Case(m, r) for r in rs for m in methods if r == 1 or not m.r_one_only]


def seed_grid(methods: Sequence[Method], rs: Sequence[int], seeds: int) -> list[Case]:
    """fp32 and the goal's candidates among ``methods`` again under ``seeds - 1`` more seeds.

    Seeds ``SEED + 1`` to ``SEED + seeds - 1``; the main grid ran ``SEED``.
    """
    repeated = [m for m in methods if m == FP32 or m in GOAL_METHODS]
    return [replace(case, seed=SEED + i) for i in range(1, seeds) for case in grid(repeated, rs)]


def select(
    methods: Sequence[Method], only: Sequence[str], extra: Sequence[Method] = ()
) -> list[Method]:
    """The methods ``--only`` names, by label or key, in grid order (all if none named).

    ``extra`` methods are left out unless named.

    Raises
    ------
    ValueError
        For a name that is no method's label or key; the message lists the labels.
    """
    if not only:
        return list(methods)
    pool = [*methods, *(m for m in extra if m not in methods)]
    known = {m.label: m for m in pool} | {m.key: m for m in pool}
    unknown = [name for name in only if name not in known]
    if unknown:
        raise ValueError(
            f"unknown method {', '.join(map(repr, unknown))}; choose from: "
            + "; ".join(m.label for m in pool)
        )
    wanted = {known[name] for name in only}
    return [m for m in pool if m in wanted]
