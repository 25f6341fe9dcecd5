"""The codec's settings, one model for run configs and the codec, and the replica check."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, StrictBool, ValidationInfo, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema

from phalanx.strict_numbers import NumbersNotBooleans

from .predictors import Predictor

StepSize = Annotated[float, Field(gt=0.0, allow_inf_nan=False)]
"""A uniform quantizer step, in multiples of the layer residual's RMS: finite and positive."""


class CodecConfig(NumbersNotBooleans):
    """What the encoder may choose from, and how it trades rate for distortion.

    Encoder and decoder must use equal configs (the decoder refuses payloads
    that use a predictor or quantizer the config does not enable), except for
    the encoder-only settings ``unbiased``, ``rounding``, ``rd_lambda``, ``rd_distortion``,
    ``censor_threshold``, ``low_rank_step`` and ``rd_sample_size``, which the decoder never
    reads: a coordinator may code its broadcast at another ``rd_lambda`` than the workers'
    uplink.

    One model for the run config and the codec alike: a run config's ``codec``
    section is this model, and the coordinator and every worker hand it to the codec
    as it is. A run config sets the fields up to ``error_feedback`` (its JSON keeps
    exactly those keys); the others are the codec's own (:data:`CODEC_ONLY`), which
    runs leave at their defaults and tests and benchmarks vary.

    Parameters
    ----------
    enabled : bool
        Whether a run compresses its traffic at all (read by
        :func:`phalanx.channel.make_channel`; the codec itself ignores it).
    downlink_rd_lambda : float or None
        ``rd_lambda`` of the coordinator's broadcast
        (:func:`phalanx.channel.broadcast_config`); ``None``: ``rd_lambda``.
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
        Positive: at ``0`` rate would cost nothing, so candidates of equal
        distortion would no longer be told apart by their bits (to send full
        precision, turn the codec off).
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

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        json_schema_extra={
            "description": "Predictive-coding compression of uplink updates and downlink "
            "broadcasts."
        },
    )

    enabled: StrictBool = False
    rd_lambda: float = Field(
        default=0.1,
        gt=0.0,
        allow_inf_nan=False,
        description="Rate weight in J = D + lambda R of the workers' uplink updates (and of the "
        "broadcast unless downlink_rd_lambda is set).",
    )
    downlink_rd_lambda: float | None = Field(
        default=None,
        gt=0.0,
        allow_inf_nan=False,
        description="Rate weight of the coordinator's broadcast of the global delta; None: the "
        "same as rd_lambda. The broadcast is one payload for all workers and every worker "
        "applies it, so it often deserves a smaller lambda (more bits) than the uplink. "
        "Workers decode it without knowing lambda.",
    )
    step_sizes: tuple[StepSize, ...] = Field(
        default=(0.25, 0.5, 1.0, 2.0, 4.0, 8.0),
        description="Relative to scale; distinct. Empty disables the uniform quantizer "
        "(then ternary must be on).",
    )
    ternary: StrictBool = True
    unbiased: StrictBool = Field(
        default=False,
        description="Uplink only: round the workers' updates stochastically (seeded, so "
        "replicas agree) so that each decoded update is an unbiased estimate and the errors "
        "average out in the aggregate, instead of rounding every value within half a step of "
        "the prediction to the prediction in every update alike. More bits at a given "
        "rd_lambda. The broadcast keeps deterministic rounding.",
    )
    rounding: Literal["independent", "correlated"] = Field(
        default="independent",
        description="Where stochastic rounding (of the uplink, and of the broadcast's ternary "
        "layers) draws its random numbers. "
        "'independent': a stream per file. 'correlated': one stream per round and layer "
        "that each file shifts by its index, so the draws of a coordinate spread evenly "
        "over the round's files and their rounding errors partly cancel in the mean. "
        "Replicas of a file agree either way; each payload costs the same.",
    )
    rd_distortion: Literal["update", "layer"] = Field(
        default="update",
        description="What D in J = D + lambda R measures, for the uplink and the broadcast. "
        "'update': squared "
        "error over the whole update's energy (bits go where the squared error is; suits SGD "
        "on the server). 'layer': each layer's error over its own energy, weighted by its "
        "share of parameters (suits Adam and AMSGrad, which move every coordinate by its own "
        "scale, so a layer of small gradients matters as much as one of large gradients).",
    )
    censor_threshold: float = Field(default=0.05, ge=0.0, lt=1.0)
    history_length: int = Field(default=3, ge=1, le=64)
    low_rank: int = Field(
        default=0,
        ge=0,
        le=256,
        description="Uplink only: the rank at which a 2-D layer (a fully connected weight) "
        "may be sent as two quantized factors, when that costs less in J; 0 disables it. The "
        "truncation is biased: meant with error_feedback (r = 1), which carries the directions "
        "left out into the next update.",
    )
    low_rank_step: float = Field(
        default=0.25,
        gt=0.0,
        le=16.0,
        description="Rounding step of the low-rank factors, in multiples of each factor's RMS.",
    )
    error_feedback: StrictBool = Field(
        default=False,
        description="Carry quantization error (r = 1 runs only). With unbiased, only the "
        "error of layers sent without stochastic rounding (low-rank, censored) is carried.",
    )

    # The codec's own settings: never in a run config's JSON (nor its schema); runs use
    # the defaults (see phalanx.config.RunConfig).
    predictors: SkipJsonSchema[tuple[Predictor, ...]] = Field(
        default=(Predictor.ZERO, Predictor.PREVIOUS, Predictor.MEAN, Predictor.MOMENTUM),
        min_length=1,
        exclude=True,
    )
    downlink_error_feedback: SkipJsonSchema[StrictBool] = Field(default=True, exclude=True)
    momentum: SkipJsonSchema[float] = Field(default=0.9, ge=0.0, lt=1.0, exclude=True)
    fit_gain: SkipJsonSchema[StrictBool] = Field(default=True, exclude=True)
    rd_sample_size: SkipJsonSchema[int] = Field(default=16384, ge=0, exclude=True)

    @field_validator("predictors", "step_sizes")
    @classmethod
    def _distinct(cls, values: tuple[Any, ...], info: ValidationInfo) -> tuple[Any, ...]:
        if len(set(values)) != len(values):
            raise ValueError(f"{info.field_name} must be distinct, got {values}")
        return values

    @model_validator(mode="after")
    def _some_quantizer(self) -> CodecConfig:
        if not self.step_sizes and not self.ternary:
            raise ValueError("enable at least one quantizer: give step_sizes or set ternary=True")
        return self


CODEC_ONLY = frozenset(name for name, info in CodecConfig.model_fields.items() if info.exclude)
"""The codec's own settings, which a run config neither sets nor stores (runs use the defaults)."""


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
