"""Codec settings, and the check that keeps honest replicas byte-identical."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from .predictors import Predictor


@dataclass(frozen=True)
class CodecConfig:
    """What the encoder may choose from, and how it trades rate for distortion.

    Encoder and decoder must use equal configs (the decoder refuses payloads
    that use a predictor or quantizer the config does not enable), except for
    the encoder-only settings ``unbiased``, ``rounding``, ``rd_lambda``, ``rd_distortion``,
    ``censor_threshold``, ``low_rank_step`` and ``rd_sample_size``, which the decoder never
    reads: a coordinator may code its broadcast at another ``rd_lambda`` than the workers'
    uplink.

    Parameters
    ----------
    predictors : tuple of Predictor
        Predictors the rate-distortion search considers per layer. The zero
        predictor is always the fallback while the history is empty.
    step_sizes : tuple of float
        Uniform quantizer steps, in multiples of the layer residual's RMS.
        Empty disables the uniform quantizer.
    ternary : bool
        Whether the ternary quantizer (stochastic rounding) is a candidate.
    unbiased : bool
        Quantize so that the reconstruction is an unbiased estimate of the
        update: the uniform quantizer rounds stochastically (to one of the two
        neighbouring multiples of its step) instead of to the nearest, and the
        ternary quantizer's scale is the residual's peak, so nothing is
        clipped. Each payload then carries more squared error at a given
        rate, but the errors of different workers' payloads are independent
        and zero-mean, so they average out in the aggregate; deterministic
        rounding instead sends every value within half a step of the
        prediction as the prediction, in every worker's payload alike. Meant
        for the uplink (many updates averaged), not for the broadcast (one
        payload, applied as it is, with ``downlink_error_feedback``). The
        rounding is drawn from the same seeded stream as the ternary
        quantizer's, so honest replicas still send identical bytes, and the
        decoder does not depend on this setting.
    rounding : {"independent", "correlated"}
        Where the stochastic rounding's draws (ternary, and uniform in the
        unbiased mode) come from. ``"independent"``: a stream per ``(run,
        round, file, layer)``. ``"correlated"``: one stream per ``(run, round,
        layer)`` that every file of the round shifts by its own index, so the
        draws of one coordinate spread evenly over the files and their
        rounding errors partly cancel in the mean
        (:func:`~phalanx.codec.quantizers.rounding_draws`). Each payload is
        exactly as unbiased and as costly either way, and replicas of one file
        still agree; only what the aggregate gains differs.
    rd_lambda : float
        ``lambda`` in ``J = D + lambda * R`` over the whole update: ``D`` the
        squared error per parameter divided by the update's mean square (so
        ``lambda`` does not depend on the gradient's scale), ``R`` bits per
        parameter, side information included. Larger means fewer bits.
    rd_distortion : {"update", "layer"}
        What ``D`` measures. ``"update"``: squared error over the whole
        update's energy, so bits go where the squared error is (reverse
        water-filling across layers); right when the update is applied as it
        is, e.g. by SGD. ``"layer"``: each layer's squared error over that
        layer's own energy, weighted by its share of the parameters; right
        when the server's optimiser normalises each coordinate by its own
        running scale (Adam, AMSGrad), under which a layer of small gradients
        moves as far as one of large gradients, so its relative error costs
        as much. Under ``"update"`` such a layer is sent coarsely or not at
        all.
    censor_threshold : float
        A layer whose residual norm is at most this fraction of the update's
        norm is sent as a flag: its reconstruction is the prediction.
    low_rank : int
        Rank of the low-rank quantizer (:mod:`phalanx.codec.lowrank`), a
        candidate for every 2-D layer at this rank (or the layer's largest, if
        smaller); 0 disables it. The search decides between it and the other
        quantizers by ``J`` but does not pick the rank: the truncation is
        biased, and meant with ``error_feedback``, which carries the
        directions left out into the next update, so one round's ``J``
        overstates what a lower rank saves. The decoder refuses a higher rank.
    low_rank_step : float
        The low-rank factors' rounding step, in multiples of each factor's RMS.
    error_feedback : bool
        Carry each worker's quantization error into its next update. Only for
        runs with replication 1 (see :func:`check_codec_compatible`). With
        ``unbiased``, only the error of layers sent without stochastic
        rounding (low-rank, censored) is carried: a stochastically rounded
        layer's error is zero-mean and fresh every round, so carrying it would
        only add variance (:class:`~phalanx.codec.feedback.ErrorFeedback`).
    downlink_error_feedback : bool
        Carry the broadcast's quantization error into the next broadcast. Safe
        with any replication: one sender, one payload for everyone.
    history_length : int
        ``K`` of the mean predictor.
    momentum : float
        ``beta`` of the momentum predictor.
    fit_gain : bool
        Scale each prediction by a least-squares gain (one ``float32`` per
        layer), so a predictor built from global deltas still fits an update
        on another scale or of opposite sign (a gradient against ``-lr * g``).
    rd_sample_size : int
        Most coordinates per layer on which the search estimates ``D`` and
        ``R`` (a fixed, well-spread subset; also at most a quarter of the
        layer, and layers up to 4096 are searched whole); ``0`` evaluates
        every layer whole (slow, exact).
    """

    predictors: tuple[Predictor, ...] = (
        Predictor.ZERO,
        Predictor.PREVIOUS,
        Predictor.MEAN,
        Predictor.MOMENTUM,
    )
    step_sizes: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
    ternary: bool = True
    unbiased: bool = False
    rounding: Literal["independent", "correlated"] = "independent"
    rd_lambda: float = 0.1
    rd_distortion: Literal["update", "layer"] = "update"
    censor_threshold: float = 0.05
    low_rank: int = 0
    low_rank_step: float = 0.25
    error_feedback: bool = False
    downlink_error_feedback: bool = True
    history_length: int = 3
    momentum: float = 0.9
    fit_gain: bool = True
    rd_sample_size: int = 16384

    def __post_init__(self) -> None:
        predictors = tuple(Predictor(p) for p in self.predictors)
        if not predictors or len(set(predictors)) != len(predictors):
            raise ValueError("predictors must name at least one predictor, each once")
        object.__setattr__(self, "predictors", predictors)
        steps = tuple(float(s) for s in self.step_sizes)
        if any(not (math.isfinite(s) and s > 0.0) for s in steps):
            raise ValueError(f"step_sizes must be finite and positive, got {steps}")
        if len(set(steps)) != len(steps):
            raise ValueError(f"step_sizes must be distinct, got {steps}")
        object.__setattr__(self, "step_sizes", steps)
        if not steps and not self.ternary:
            raise ValueError("enable at least one quantizer: give step_sizes or set ternary=True")
        if not (math.isfinite(self.rd_lambda) and self.rd_lambda >= 0.0):
            raise ValueError(f"rd_lambda must be finite and >= 0, got {self.rd_lambda}")
        if self.rd_distortion not in ("update", "layer"):
            raise ValueError(
                f"rd_distortion must be 'update' or 'layer', got {self.rd_distortion!r}"
            )
        if self.rounding not in ("independent", "correlated"):
            raise ValueError(
                f"rounding must be 'independent' or 'correlated', got {self.rounding!r}"
            )
        if self.low_rank < 0:
            raise ValueError(f"low_rank must be >= 0 (0 disables it), got {self.low_rank}")
        if not (math.isfinite(self.low_rank_step) and self.low_rank_step > 0.0):
            raise ValueError(f"low_rank_step must be finite and positive, got {self.low_rank_step}")
        if not 0.0 <= self.censor_threshold < 1.0:
            raise ValueError(f"censor_threshold must be in [0, 1), got {self.censor_threshold}")
        if self.history_length < 1:
            raise ValueError(f"history_length must be >= 1, got {self.history_length}")
        if not 0.0 <= self.momentum < 1.0:
            raise ValueError(f"momentum must be in [0, 1), got {self.momentum}")
        if self.rd_sample_size < 0:
            raise ValueError(f"rd_sample_size must be >= 0, got {self.rd_sample_size}")


def check_codec_compatible(config: CodecConfig, replication: int) -> None:
    """Refuse settings under which honest replicas of a file would send different bytes.

    Parameters
    ----------
    config : CodecConfig
        The run's codec settings.
    replication : int
        ``r``, the number of workers that compute each file.

    Raises
    ------
    ValueError
        When uplink error feedback is on with ``r > 1``: each worker's payload
        would then depend on its private error memory (which differs with the
        files it computed before), so honest replicas would disagree and be
        flagged.
    """
    if replication < 1:
        raise ValueError(f"replication must be >= 1, got {replication}")
    if config.error_feedback and replication > 1:
        raise ValueError(
            f"error_feedback=True needs replication 1, got r={replication}: each worker's "
            "error memory is private, so honest replicas would send different bytes and "
            "be flagged. Set error_feedback=False (downlink_error_feedback stays safe)."
        )
