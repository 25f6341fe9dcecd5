"""Quantizers: residuals to integer symbols and back.

Two kinds, both reconstructed the same way, ``symbol * step``:

- uniform: mid-tread ``symbol = rint(residual / step)``, deterministic; or,
  in the codec's unbiased mode, stochastic rounding to one of the two
  neighbouring multiples of ``step`` (:func:`quantize_stochastic`), so that
  ``E[symbol * step] = residual`` for every value;
- ternary: symbols in ``{-1, 0, 1}`` with stochastic rounding, unbiased on
  ``[-scale, scale]`` (values beyond are clipped, as TernGrad clips gradients;
  the unbiased mode sets the scale to the peak, so nothing is clipped).

Random draws (:func:`rounding_draws`) come from a stream seeded by ``(run,
round, file, layer)``, or, correlated across the files of a round, from a
stream seeded by ``(run, round, layer)`` shifted by the file's index; either
way honest replicas of one file draw the same symbols. The decoder never
needs to know how a symbol was rounded.

A censored layer has no symbols at all: its reconstruction is the prediction.
A low-rank layer's symbols are those of its two factors, each rounded
mid-tread (:mod:`phalanx.codec.lowrank`).
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np

from .layers import FloatArray

MAX_SYMBOL = (1 << 15) - 1
"""Largest symbol magnitude a uniform quantizer emits; the step grows to fit."""

TERNARY_CLIP = 2.5
"""Ternary scale, in multiples of the residual's RMS (TernGrad's clipping at 2.5 sigma)."""

SEED_DOMAIN = 0x5048_5843
"""Mixed into every ternary seed so the codec's stream differs from other seeded streams."""

CORRELATED_DOMAIN = 0x5048_5844
"""Mixed into the seed of the draws a round's files share (correlated rounding)."""

KRONECKER_STEP = np.uint32(0x9E37_79B9)
"""``2**32`` over the golden ratio: consecutive files' draws are ``1 / phi`` apart (mod 1)."""


class Quantizer(IntEnum):
    """How a layer's residual is sent; the value is its bitstream id."""

    CENSORED = 0
    """Nothing but a flag: the reconstruction is the prediction."""
    UNIFORM = 1
    """Uniform quantizer: mid-tread, or stochastic rounding in the unbiased mode."""
    TERNARY = 2
    """``{-1, 0, +1}`` times a scale, stochastic rounding."""
    LOWRANK = 3
    """Two quantized factors whose product is the layer (:mod:`phalanx.codec.lowrank`)."""


def quantize_uniform(
    residual: FloatArray, step: np.float32, out: FloatArray | None = None
) -> FloatArray:
    """Compute mid-tread symbols ``rint(residual / step)`` as ``float32`` integers.

    Parameters
    ----------
    residual : numpy.ndarray
        ``float32``, finite.
    step : numpy.float32
        Positive; the caller keeps ``max|residual| / step`` within
        :data:`MAX_SYMBOL`.
    out : numpy.ndarray, optional
        Where to write the symbols (may be ``residual`` itself).

    Returns
    -------
    numpy.ndarray
        ``float32`` holding integers, with ``-0.0`` normalised to ``+0.0`` so
        that dequantizing it matches dequantizing the decoded integers bit for
        bit.
    """
    symbols = np.divide(residual, step, out=out, dtype=np.float32)
    np.rint(symbols, out=symbols)
    np.add(symbols, np.float32(0.0), out=symbols)
    return symbols


def quantize_stochastic(residual: FloatArray, step: np.float32, draws: FloatArray) -> FloatArray:
    """Uniform symbols with stochastic rounding, unbiased for every value.

    With ``y = residual / step`` (in ``float32``), ``symbol = floor(y) + 1``
    with probability ``y - floor(y)``, else ``floor(y)``: so
    ``E[symbol * step] = y * step`` and the error is at most one step, with
    variance ``step**2 * f * (1 - f)`` for the fractional part ``f``.

    Parameters
    ----------
    residual : numpy.ndarray
        ``float32``, finite.
    step : numpy.float32
        Positive; the caller keeps ``max|residual| / step`` at most
        ``MAX_SYMBOL - 1``, so symbols stay within :data:`MAX_SYMBOL`.
    draws : numpy.ndarray
        One ``float32`` in ``[0, 1)`` per coordinate (:func:`rounding_draws`).

    Returns
    -------
    numpy.ndarray
        ``float32`` holding integers (never ``-0.0``).
    """
    symbols = np.divide(residual, step, dtype=np.float32)
    floor = np.floor(symbols)
    np.subtract(symbols, floor, out=symbols)  # the fractional part, in [0, 1)
    np.less(draws, symbols, out=symbols, casting="unsafe")
    np.add(symbols, floor, out=symbols)
    np.add(symbols, np.float32(0.0), out=symbols)
    return symbols


def ternary_rng(seed_context: tuple[int, int, int], layer: int) -> np.random.Generator:
    """Build the random stream of one layer's stochastic rounding (ternary or uniform).

    Parameters
    ----------
    seed_context : tuple of int
        ``(run_seed, round, file)``, each non-negative.
    layer : int
        Layer index in the model.

    Returns
    -------
    numpy.random.Generator
        PCG64 seeded by ``SeedSequence([domain, run_seed, round, file, layer])``.
    """
    return np.random.Generator(
        np.random.PCG64(np.random.SeedSequence([SEED_DOMAIN, *seed_context, layer]))
    )


def rounding_draws(
    seed_context: tuple[int, int, int], layer: int, size: int, *, correlated: bool = False
) -> FloatArray:
    """Draw the uniform numbers of one layer's stochastic rounding.

    Independent draws (the default) are :func:`ternary_rng`'s stream. With
    ``correlated``, file ``f`` of a round draws ``u_i = frac(b_i + f / phi)``
    for coordinate ``i``, where ``b_i`` is one uniform stream per ``(run,
    round, layer)`` that every file shares and ``phi`` the golden ratio (a
    Kronecker sequence, in 32-bit fixed point). Each file's draws are still
    uniform, so each payload stays unbiased and replicas of one file agree;
    but across the files of a round the draws of one coordinate are spread
    evenly over ``[0, 1)`` instead of falling at random, so about as many
    files round up as the values call for and the rounding errors partly
    cancel in the mean (correlated quantization, Suresh et al., ICML 2022).

    Parameters
    ----------
    seed_context : tuple of int
        ``(run_seed, round, file)``, each non-negative.
    layer : int
        Layer index in the model.
    size : int
        Number of draws (the layer's parameters).
    correlated : bool
        Share the draws across the round's files as above.

    Returns
    -------
    numpy.ndarray
        ``float32`` multiples of ``2**-24`` in ``[0, 1)``.
    """
    if not correlated:
        return ternary_rng(seed_context, layer).random(size, dtype=np.float32)
    run_seed, round_, file = seed_context
    shared = np.random.Generator(
        np.random.PCG64(np.random.SeedSequence([CORRELATED_DOMAIN, run_seed, round_, layer]))
    )
    words = shared.integers(0, 1 << 32, size, dtype=np.uint32)
    # uint32 arithmetic wraps: this is frac(b + file / phi) in 32-bit fixed point.
    np.add(words, np.uint32((file * int(KRONECKER_STEP)) & 0xFFFF_FFFF), out=words)
    np.right_shift(words, np.uint32(8), out=words)
    draws = words.astype(np.float32)
    np.multiply(draws, np.float32(2.0**-24), out=draws)
    return draws


def quantize_ternary(
    residual: FloatArray, scale: np.float32, draws: FloatArray, *, mirrored: bool = False
) -> FloatArray:
    """Ternary symbols with stochastic rounding.

    ``symbol = sign(r)`` with probability ``min(|r| / scale, 1)``, else ``0``,
    so ``E[symbol * scale] = r`` wherever ``|r| <= scale``. A value keeps
    its sign when its draw is below that probability; ``mirrored``, a
    negative value keeps it when its draw is above one minus it instead. That
    is :func:`quantize_stochastic`'s rule on ``[-scale, scale]``: one dithered
    grid for both signs, which correlated draws need to cancel the errors of
    files whose values straddle zero (unmirrored, the two signs round
    independently of each other).

    Parameters
    ----------
    residual : numpy.ndarray
        ``float32``, finite.
    scale : numpy.float32
        Positive.
    draws : numpy.ndarray
        One ``float32`` in ``[0, 1)`` per coordinate (:func:`rounding_draws`).
    mirrored : bool
        Use ``1 - u`` as the draw of negative values.

    Returns
    -------
    numpy.ndarray
        ``float32`` values in ``{-1, 0, 1}`` (never ``-0.0``).
    """
    probability = np.abs(residual)
    np.divide(probability, scale, out=probability)
    if mirrored:
        draws = np.where(residual < 0, np.float32(1.0) - draws, draws)
    keep = draws < probability
    symbols = np.sign(residual)
    np.multiply(symbols, keep, out=symbols)
    np.add(symbols, np.float32(0.0), out=symbols)
    return symbols


def dequantize_into(symbols: FloatArray, step: np.float32, out: FloatArray) -> None:
    """Write the dequantized residual ``symbols * step`` into ``out`` (``float32``)."""
    np.multiply(symbols, step, out=out)


def add_prediction(
    out: FloatArray,
    prediction: FloatArray | None,
    gain: np.float32,
    scratch: FloatArray | None = None,
) -> None:
    """Add ``gain * prediction`` to ``out`` in place.

    The one reconstruction step shared by encoder and decoder, so both produce
    the same bits: ``out + (gain * prediction)``, each operation rounded to
    ``float32``. ``None`` stands for a zero prediction; a gain of exactly 1
    skips the multiplication (which would not change the value). ``scratch``,
    if given, holds ``gain * prediction`` instead of a new array.
    """
    if prediction is None:
        return
    if gain == np.float32(1.0):
        np.add(out, prediction, out=out)
    else:
        np.add(out, np.multiply(prediction, gain, out=scratch, dtype=np.float32), out=out)
