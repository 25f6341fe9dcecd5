"""Exact bounds on the values a layer reconstructs to, from its layer-table row alone.

The decoder computes every value in ``float32``, one rounded operation at a
time, in a fixed order: a symbol's value is ``fl(s * step)``; a low-rank
layer's is ``fl(...fl(fl(l_0 r_0) + fl(l_1 r_1))... + fl(l_{k-1} r_{k-1}))``;
then the prediction is added, ``fl(v + p)`` with gain 1, else
``fl(v + fl(g * p))``.

Rounding to nearest is odd (``|fl(x)| = fl(|x|)``) and monotone (``x <= y``
gives ``fl(x) <= fl(y)``, overflow to ``inf`` included). So
``|fl(a * b)| = fl(|a| |b|) <= fl(A * B)`` and
``|fl(a + b)| = fl(|a + b|) <= fl(A + B)`` whenever ``|a| <= A`` and
``|b| <= B``. The functions here run the decoder's operations on such
magnitude bounds, rounded to ``float32`` after each one, so what they return
bounds every intermediate and final value exactly, with no slack for
rounding: the rounding is the decoder's own. The bound is reached when the
largest symbols meet the prediction's peak with the same sign. When it is
finite, no operation of the decoder can overflow, and none can make a NaN
(that takes an infinite operand); when it is not, the payload is refused
before anything is decoded.

The operations run on Python floats (``float64``) and are rounded to
``float32`` one by one: a product of two ``float32`` values is exact in
``float64``, and a sum rounded to ``float64`` then to ``float32`` is the
correctly rounded ``float32`` sum (``53 >= 2 * 24 + 2``), so this is the
``float32`` arithmetic itself, without overflow warnings to silence.
"""

from __future__ import annotations

import math

import numpy as np

OVERFLOW = 2.0**128 - 2.0**103
"""Smallest magnitude that rounds to ``inf`` in ``float32``: the largest value plus half an ulp.

A tie, which rounds to the even neighbour, ``2**128``: an overflow.
"""


def round32(value: float) -> float:
    """Round ``value`` to the nearest ``float32`` (ties to even; ``inf`` past the largest)."""
    if abs(value) >= OVERFLOW:
        return math.copysign(math.inf, value)
    return float(np.float32(value))


def table_peak(step: float, sym_min: int, alphabet: int) -> float:
    """Largest magnitude among a table's symbol values ``fl(s * step)``.

    Parameters
    ----------
    step : float
        The table's step, rounded to ``float32`` as the decoder rounds it.
    sym_min : int
        Its smallest symbol; symbols run to ``sym_min + alphabet - 1``. Every
        symbol is an integer below ``2**24``, so ``float32`` holds it exactly.
    alphabet : int
        Number of symbols, at least 1.

    Returns
    -------
    float
        ``fl(max(|sym_min|, |sym_max|) * step)``, a ``float32`` value or ``inf``.
    """
    return round32(max(abs(sym_min), abs(sym_min + alphabet - 1)) * round32(step))


def low_rank_peak(left: float, right: float, rank: int) -> float:
    """Largest magnitude of ``sum_j outer(left[j], right[j])``, summed as the decoder sums it.

    Parameters
    ----------
    left, right : float
        Peaks of the two factors' values (:func:`table_peak`).
    rank : int
        Components, at least 1.

    Returns
    -------
    float
        ``B_k`` with ``B_1 = fl(left * right)`` and ``B_j = fl(B_{j-1} + B_1)``;
        ``inf`` when it overflows, or when either factor's own values do (an
        infinite value times a zero is a NaN, whatever the product's bound).
    """
    if not (math.isfinite(left) and math.isfinite(right)):
        return math.inf
    term = round32(left * right)
    total = term
    for _ in range(rank - 1):
        total = round32(total + term)
        if math.isinf(total):
            break
    return total


def reconstruction_peak(residual: float, gain: float, prediction: float) -> float:
    """Largest magnitude of ``residual + gain * prediction``, added as the decoder adds it.

    Parameters
    ----------
    residual : float
        Peak of the dequantized residual (0 for a censored layer), a
        ``float32`` value or ``inf``.
    gain : float
        The prediction's gain, rounded to ``float32`` as the decoder rounds it.
    prediction : float
        Peak of the prediction's values (0 when there is none), a ``float32``
        value (rounded to one if not).

    Returns
    -------
    float
        ``fl(residual + P)`` with ``P = prediction`` for a gain of 1 (the
        decoder adds the prediction as it is), else ``fl(|gain| * prediction)``;
        a ``float32`` value or ``inf``.
    """
    gain, prediction = round32(gain), round32(prediction)
    scaled = prediction if gain == 1.0 else round32(abs(gain) * prediction)
    return round32(residual + scaled)
