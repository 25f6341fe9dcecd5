"""Rate-distortion choice of the (predictor, quantizer) pair for one layer.

Every pair is scored by its share of ``J = D + lambda * R`` for the whole
update, with both the predictor and the quantizer chosen by that cost (the
paper's public code picks the predictor by prediction error alone, which
ignores that a residual with slightly more energy may code in far fewer bits,
and ignores side information):

- ``D``: squared reconstruction error per parameter over the update's mean
  square, ``||u - u_hat||**2 / ||u||**2`` (relative, so one ``lambda`` serves
  every model and gradient scale);
- ``R``: bits per parameter of the whole payload: the empirical entropy of the
  symbols plus the layer-table bytes each choice costs.

Both are sums over layers, so choosing each layer's pair by its own term
minimises ``J`` of the whole update exactly. Normalising by the whole update
(not each layer) spends bits where the squared error is (reverse
water-filling), and keeps error feedback working: a layer's carried error grows
relative to the rest until sending it pays.

The search runs on a fixed, well-spread sample of each layer (see
:func:`sample_size`; small layers are searched whole). Every predictor and step
size is evaluated at once, as a ``(predictors, steps, sample)`` array with one
``bincount`` for all the histograms; the ternary quantizer's expected
distortion and symbol probabilities have closed forms, so its random draws are
not needed to score it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from .bitstream import record_size
from .entropy import MAX_ALPHABET
from .layers import FloatArray
from .predictors import Predictor
from .quantizers import TERNARY_CLIP, Quantizer

_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0
MAX_GAIN = float(1 << 24)


@dataclass(frozen=True)
class Choice:
    """The pair chosen for a layer, with the estimates that chose it.

    Parameters
    ----------
    predictor : Predictor
    quantizer : Quantizer
    gain : numpy.float32
        Prediction gain.
    scale : numpy.float32
        Uniform step or ternary scale, absolute.
    multiplier : float
        ``scale`` in multiples of the residual's RMS.
    distortion : float
        Estimated squared error over the layer's own energy.
    rate : float
        Estimated bits per parameter of the layer, side information included.
    cost : float
        The layer's term of ``J`` for the whole update.
    """

    predictor: Predictor
    quantizer: Quantizer
    gain: np.float32
    scale: np.float32
    multiplier: float
    distortion: float
    rate: float
    cost: float


@dataclass(frozen=True)
class UniformScores:
    """Scores of the uniform quantizer, indexed ``[predictor, step]``."""

    steps: npt.NDArray[np.float32]
    """Absolute steps, ``float32`` (0 where a residual is all zero)."""
    distortion: npt.NDArray[np.float64]
    """Sum of squared errors over the sample; infinite where unusable."""
    entropy: npt.NDArray[np.float64]
    """Bits per symbol."""
    table_bytes: npt.NDArray[np.float64]
    """Estimated size of the frequency table."""
    alphabets: npt.NDArray[np.int64]
    """Alphabet size."""


@dataclass(frozen=True)
class TernaryScores:
    """Expected scores of the ternary quantizer, one per predictor."""

    scales: npt.NDArray[np.float32]
    """``s = min(max|r|, 2.5 * rms)``; 0 for an all-zero residual."""
    distortion: npt.NDArray[np.float64]
    """Expected sum of squared errors over the sample."""
    entropy: npt.NDArray[np.float64]
    """Bits per symbol of the expected symbol distribution."""


@dataclass(frozen=True)
class Candidates:
    """Every candidate predictor's residual on the layer's sample.

    Parameters
    ----------
    predictors : tuple of Predictor
        One per row.
    gains : numpy.ndarray
        ``float32`` prediction gains, one per row.
    residuals : numpy.ndarray
        ``float32``, shape ``(predictors, sample)``: ``u - gain * p``.
    """

    predictors: tuple[Predictor, ...]
    gains: npt.NDArray[np.float32]
    residuals: FloatArray

    def energies(self) -> npt.NDArray[np.float64]:
        """Sum of squares of each residual."""
        return _row_dots(self.residuals, self.residuals)


MIN_SAMPLE = 4096
"""Layers up to this size are searched whole."""


def sample_size(n: int, limit: int) -> int:
    """Coordinates the search samples from a layer of ``n``: ``0`` means the whole layer.

    At most ``limit`` (``rd_sample_size``) and at most a quarter of the layer,
    so the search (about 30 candidate passes over the sample) costs less than
    coding the layer; never fewer than :data:`MIN_SAMPLE`. A ``limit`` of 0
    searches every layer whole.
    """
    if limit <= 0:
        return 0
    size = max(MIN_SAMPLE, min(limit, n // 4))
    return 0 if size >= n else size


def sample_indices(n: int, size: int) -> npt.NDArray[np.intp] | None:
    """Pick fixed, well-spread coordinates of a layer of ``n`` parameters.

    The golden-ratio sequence ``floor(frac(i * phi) * n)``, sorted: it avoids
    the aliasing of a plain stride with kernel or channel periods, and it is
    the same on every party (float64 arithmetic, no random generator).

    Returns
    -------
    numpy.ndarray or None
        ``None`` when the whole layer should be used (``size == 0`` or
        ``size >= n``).
    """
    if size <= 0 or size >= n:
        return None
    return _sample_indices(n, size)


@lru_cache(maxsize=64)  # at most 64 x rd_sample_size indices kept
def _sample_indices(n: int, size: int) -> npt.NDArray[np.intp]:
    positions = np.mod(np.arange(size, dtype=np.float64) * _GOLDEN, 1.0)
    index = np.unique((positions * n).astype(np.intp))
    index.flags.writeable = False
    return index


def _row_dots(a: FloatArray, b: FloatArray) -> npt.NDArray[np.float64]:
    # einsum's own loop in float64, not BLAS: no dependence on a thread count.
    return np.asarray(np.einsum("ps,ps->p", a, b, dtype=np.float64), dtype=np.float64)


def fit_gain(update: FloatArray, prediction: FloatArray) -> np.float32:
    """Least-squares gain ``<u, p> / <p, p>`` in ``float32``, 1 when ``p`` is zero.

    Clipped to ``[-2**24, 2**24]``.
    """
    energy = float(np.einsum("i,i->", prediction, prediction, dtype=np.float64))
    if energy <= 0.0:
        return np.float32(1.0)
    gain = float(np.einsum("i,i->", update, prediction, dtype=np.float64)) / energy
    return np.float32(min(max(gain, -MAX_GAIN), MAX_GAIN))


def residual(update: FloatArray, prediction: FloatArray | None, gain: np.float32) -> FloatArray:
    """``update - gain * prediction`` in ``float32`` (a copy of ``update`` for no prediction)."""
    if prediction is None:
        return np.array(update, dtype=np.float32, copy=True)
    if gain == np.float32(1.0):
        return np.subtract(update, prediction, dtype=np.float32)
    out = np.multiply(prediction, gain, dtype=np.float32)
    np.subtract(update, out, out=out)
    return out


def candidates(
    update: FloatArray,
    predictions: Sequence[tuple[Predictor, FloatArray | None]],
    *,
    fit_gains: bool,
) -> Candidates:
    """Residuals of every predictor on a sample, gains fitted by least squares.

    Parameters
    ----------
    update : numpy.ndarray
        The update on the sample, ``(S,)``.
    predictions : sequence of (Predictor, numpy.ndarray or None)
        Each predictor's prediction on the same sample (``None`` for zero).
    fit_gains : bool
        Fit a gain per predictor (else all gains are 1).
    """
    stacked = np.zeros((len(predictions), update.size), dtype=np.float32)
    for row, (_, prediction) in enumerate(predictions):
        if prediction is not None:
            stacked[row] = prediction
    gains = np.ones(len(predictions), dtype=np.float32)
    if fit_gains:
        energy = _row_dots(stacked, stacked)
        cross = np.einsum("ps,s->p", stacked, update, dtype=np.float64)
        fitted = np.minimum(
            np.maximum(cross / np.where(energy > 0, energy, 1.0), -MAX_GAIN), MAX_GAIN
        )
        gains = np.where(energy > 0, fitted, 1.0).astype(np.float32)
    residuals = np.multiply(stacked, gains[:, None], out=stacked)
    np.subtract(update[None, :], residuals, out=residuals)
    return Candidates(tuple(p for p, _ in predictions), gains, residuals)


def _entropy_rows(
    index: npt.NDArray[np.int64],
    alphabets: npt.NDArray[np.int64],
    offsets: npt.NDArray[np.int64],
    count: int,
    fractions: FloatArray | None = None,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Per-row entropy (bits per symbol) and estimated frequency-table bytes.

    ``index`` holds every row's symbols, shifted to ``0 .. alphabet - 1`` and
    offset by the row's ``offsets`` (the alphabets before it), flattened. With
    ``fractions``, a coordinate is symbol ``index + 1`` with that probability
    and ``index`` otherwise (stochastic rounding): the histogram is the
    expected one.
    """
    total = int(alphabets.sum())
    h: npt.NDArray[np.float64]
    if fractions is None:
        h = np.bincount(index, minlength=total).astype(np.float64)
    else:
        up = fractions.reshape(-1).astype(np.float64)
        # A zero fraction at a row's last symbol adds a zero weight to the next row.
        down = np.bincount(index, weights=1.0 - up, minlength=total + 1)
        h = np.add(down, np.bincount(index + 1, weights=up, minlength=total + 1))[:total]
    logs = np.log2(h, where=h > 0, out=np.zeros_like(h))
    entropy = math.log2(count) - np.add.reduceat(h * logs, offsets) / count
    occupied = np.add.reduceat((h > 0).astype(np.float64), offsets)
    table_bytes = 2.0 * occupied + (alphabets - occupied)
    return np.maximum(entropy, 0.0), table_bytes


def _rms(values: FloatArray) -> npt.NDArray[np.float64]:
    return np.asarray(np.sqrt(_row_dots(values, values) / values.shape[1]), dtype=np.float64)


def score_uniform(
    values: FloatArray,
    multipliers: Sequence[float],
    *,
    stochastic: bool = False,
    rms: npt.NDArray[np.float64] | None = None,
) -> UniformScores:
    """Score uniform quantizers at several steps on several residual samples at once.

    Parameters
    ----------
    values : numpy.ndarray
        Residual samples, ``float32``, shape ``(P, S)``.
    multipliers : sequence of float
        Steps in multiples of each row's RMS.
    stochastic : bool
        Score stochastic rounding (:func:`~phalanx.codec.quantizers.quantize_stochastic`)
        in expectation instead of mid-tread rounding: with ``f`` the fractional
        part of ``r / step``, a coordinate's expected squared error is
        ``step**2 * f * (1 - f)`` and it becomes ``floor(r / step) + 1`` with
        probability ``f``.
    rms : numpy.ndarray, optional
        Each row's RMS, if the caller has it already.

    Returns
    -------
    UniformScores
        Arrays of shape ``(P, len(multipliers))``; a step whose residual is
        all zero, or whose alphabet would exceed the format's limit, has
        infinite distortion.
    """
    rows, count = values.shape
    rms = _rms(values) if rms is None else rms
    steps = (rms[:, None] * np.asarray(multipliers, dtype=np.float64)).astype(np.float32)
    usable = steps > 0
    safe = np.where(usable, steps, np.float32(1.0))
    symbols = np.divide(values[:, None, :], safe[:, :, None], dtype=np.float32)
    fractions: FloatArray | None = None
    if stochastic:
        fractions = symbols.copy()
        np.floor(symbols, out=symbols)
        np.subtract(fractions, symbols, out=fractions)
        distortion = np.einsum("pjs,pjs->pj", fractions, 1.0 - fractions, dtype=np.float64)
        distortion *= np.square(safe.astype(np.float64))
        high = (symbols + (fractions > 0)).max(axis=2)
    else:
        np.rint(symbols, out=symbols)
        error = np.multiply(symbols, safe[:, :, None], dtype=np.float32)
        np.subtract(values[:, None, :], error, out=error)
        distortion = np.einsum("pjs,pjs->pj", error, error, dtype=np.float64)
        high = symbols.max(axis=2)
    low = symbols.min(axis=2)
    alphabets = (high - low).astype(np.int64) + 1
    usable &= alphabets <= MAX_ALPHABET
    alphabets[~usable] = 1
    offsets = (np.cumsum(alphabets) - alphabets.ravel()).reshape(alphabets.shape)  # row-major
    # One pass: shift each row to 0 .. alphabet - 1 and offset it (exact: all below 2**24).
    index = np.empty(symbols.shape, dtype=np.int64)
    np.subtract(symbols, (low - offsets)[:, :, None], out=index, casting="unsafe")
    index[~usable] = offsets[~usable][:, None]
    flat_alphabets = alphabets.reshape(-1)
    if fractions is not None:
        fractions[~usable] = 0.0
        fractions = fractions.reshape(flat_alphabets.size, count)
    entropy, table_bytes = _entropy_rows(
        index.reshape(-1), flat_alphabets, offsets.reshape(-1), count, fractions
    )
    distortion[~usable] = np.inf
    shape = (rows, len(multipliers))
    return UniformScores(
        steps, distortion, entropy.reshape(shape), table_bytes.reshape(shape), alphabets
    )


def score_ternary(
    values: FloatArray,
    *,
    clip: float | None = TERNARY_CLIP,
    rms: npt.NDArray[np.float64] | None = None,
) -> TernaryScores:
    """Score ternary stochastic rounding on several residual samples, in expectation.

    With ``a = min(|r|, s)``, a coordinate's expected squared error is
    ``a * s - a**2 + (|r| - a)**2`` (rounding noise, plus clipping beyond
    ``s``) and it becomes ``sign(r)`` with probability ``a / s``.

    Parameters
    ----------
    values : numpy.ndarray
        Residual samples, ``float32``, shape ``(P, S)``.
    clip : float or None
        The scale ``s`` is ``min(max|r|, clip * rms)``; ``None`` makes it
        ``max|r|``, so nothing is clipped and the quantizer is unbiased.
    rms : numpy.ndarray, optional
        Each row's RMS, if the caller has it already.
    """
    count = values.shape[1]
    magnitude = np.abs(values)
    peak = magnitude.max(axis=1, initial=0.0).astype(np.float64)
    if clip is not None:
        peak = np.minimum(peak, clip * (_rms(values) if rms is None else rms))
    scales = peak.astype(np.float32)
    safe = np.where(scales > 0, scales, np.float32(1.0))
    clipped = np.minimum(magnitude, safe[:, None])
    beyond = np.subtract(magnitude, clipped)
    distortion = np.einsum("ps,p->p", clipped, safe, dtype=np.float64)
    distortion -= _row_dots(clipped, clipped)
    distortion += _row_dots(beyond, beyond)
    probability = np.divide(clipped, safe[:, None], out=clipped)
    positive = np.einsum("ps,ps->p", probability, values > 0, dtype=np.float64) / count
    negative = np.einsum("ps,ps->p", probability, values < 0, dtype=np.float64) / count
    masses = np.empty((values.shape[0], 3))
    masses[:, 0], masses[:, 2] = negative, positive
    np.maximum(1.0 - positive - negative, 0.0, out=masses[:, 1])
    logs = np.log2(masses, where=masses > 0, out=np.zeros_like(masses))
    entropy = -(masses * logs).sum(axis=1)
    distortion[scales <= 0] = np.inf
    return TernaryScores(scales, distortion, entropy)


def choose(
    candidates: Candidates,
    *,
    layer_size: int,
    sample_energy: float,
    update_energy: float,
    parameters: int,
    step_sizes: Sequence[float],
    ternary: bool,
    rd_lambda: float,
    unbiased: bool = False,
) -> Choice | None:
    """Pick the pair with the lowest cost, the layer's term of ``J = D + lambda * R``.

    The layer's term is ``SSE / ||u||**2 + lambda * bits / N``, with ``SSE``
    the layer's squared error (estimated from the sample), ``||u||**2`` the
    energy of the whole update, ``bits`` the layer's estimated bits (symbols
    and table row) and ``N`` the parameters of the whole model.

    Parameters
    ----------
    candidates : Candidates
        Every predictor's residual on the layer's sample.
    layer_size : int
        Parameters in the layer.
    sample_energy : float
        Sum of squares of the update on the sample (positive).
    update_energy : float
        Sum of squares of the whole update, every layer (positive).
    parameters : int
        Parameters in the whole model.
    step_sizes : sequence of float
        Uniform steps in multiples of the residual RMS.
    ternary : bool
        Whether to score the ternary quantizer.
    rd_lambda : float
        ``lambda``.
    unbiased : bool
        Score the unbiased quantizers: stochastic rounding for the uniform
        one, no clipping for the ternary one (see
        :attr:`~phalanx.codec.CodecConfig.unbiased`).

    Returns
    -------
    Choice or None
        ``None`` if no candidate is usable (every residual is zero on the
        sample). Its ``distortion`` is relative to the layer's own energy and
        its ``rate`` in bits per parameter of the layer, for reporting.
    """
    count = candidates.residuals.shape[1]
    to_layer = layer_size / count
    has_gain = np.array(
        [
            p is not Predictor.ZERO and g != np.float32(1.0)
            for p, g in zip(candidates.predictors, candidates.gains, strict=True)
        ]
    )
    # Columns: the uniform quantizer at each step, then the ternary one; a row per predictor.
    sse: list[npt.NDArray[np.float64]] = []
    bits: list[npt.NDArray[np.float64]] = []
    rms = _rms(candidates.residuals)
    if step_sizes:
        uniform = score_uniform(candidates.residuals, step_sizes, stochastic=unbiased, rms=rms)
        side = (
            record_size(Quantizer.UNIFORM, False, 1, 0.0)
            + np.where(uniform.alphabets >= 2, uniform.table_bytes, 0.0)
            + 4.0 * has_gain[:, None]
        )
        sse.append(uniform.distortion)
        bits.append(uniform.entropy * layer_size + 8.0 * side)
    if ternary:
        scored = score_ternary(
            candidates.residuals, clip=None if unbiased else TERNARY_CLIP, rms=rms
        )
        side = record_size(Quantizer.TERNARY, False, 3, 5.0) + 4.0 * has_gain
        sse.append(scored.distortion[:, None])
        bits.append((scored.entropy * layer_size + 8.0 * side)[:, None])
    all_sse = np.concatenate(sse, axis=1)
    all_bits = np.concatenate(bits, axis=1)
    cost = all_sse * to_layer / update_energy + rd_lambda * all_bits / parameters
    cost = np.where(np.isfinite(cost), cost, np.inf)  # also drops NaN from overflowed residuals
    if not np.isfinite(cost).any():
        return None
    row, column = (int(i) for i in np.unravel_index(int(np.argmin(cost)), cost.shape))
    if column < len(step_sizes):
        quantizer, scale, multiplier = (
            Quantizer.UNIFORM,
            uniform.steps[row, column],
            step_sizes[column],
        )
    else:
        quantizer, scale = Quantizer.TERNARY, scored.scales[row]
        multiplier = float(scale) / (float(rms[row]) if rms[row] > 0 else 1.0)
    return Choice(
        candidates.predictors[row],
        quantizer,
        candidates.gains[row],
        scale,
        float(multiplier),
        float(all_sse[row, column]) / sample_energy,
        float(all_bits[row, column]) / layer_size,
        float(cost[row, column]),
    )
