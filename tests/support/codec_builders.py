"""Builders shared by the codec tests: a small model, gradient-like updates, histories.

Imported as ``tests.support.codec_builders`` (pytest runs with ``pythonpath = ["."]``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from phalanx.codec import CodecConfig, DeltaHistory, LayerLayout

SPEC = [
    ("conv.weight", (8, 1, 3, 3)),
    ("conv.bias", (8,)),
    ("fc.weight", (10, 200)),
    ("fc.bias", (10,)),
]


def gradient_like(layout: LayerLayout, seed: int, scale: float = 1e-3) -> np.ndarray:
    """Heavy-tailed (Student-t, 4 dof), a different scale per layer, float32."""
    rng = np.random.default_rng(seed)
    parts = [rng.standard_t(4, size=size) * scale * (1 + i) for i, size in enumerate(layout.sizes)]
    return np.concatenate(parts).astype(np.float32)


def history_with(
    layout: LayerLayout, config: CodecConfig, deltas: Sequence[np.ndarray]
) -> DeltaHistory:
    history = DeltaHistory.from_config(layout, config)
    for delta in deltas:
        history.push(delta)
    return history


def correlated_rounds(
    layout: LayerLayout, seed: int, rounds: int, *, rho: float = 0.9
) -> list[np.ndarray]:
    """Global deltas that drift slowly (AR(1) across rounds), as training produces."""
    current = gradient_like(layout, seed)
    out = [current]
    for r in range(1, rounds):
        fresh = gradient_like(layout, seed + 1000 * r)
        current = (rho * current + np.sqrt(1 - rho**2) * fresh).astype(np.float32)
        out.append(current)
    return out


def skewed_symbols(seed: int, n: int, low: int, alphabet: int) -> np.ndarray:
    """``n`` float32 symbols from ``low .. low + alphabet - 1``, every one of a random, skewed law.

    The first and last symbols are the extremes, so the whole alphabet is used.
    """
    rng = np.random.default_rng(seed)
    weights = rng.random(alphabet) ** 3 + 1e-3
    draws = rng.choice(alphabet, size=n, p=weights / weights.sum())
    draws[0], draws[-1] = 0, alphabet - 1
    return (draws + low).astype(np.float32)


def peaked_symbols(seed: int, n: int, scale: float) -> np.ndarray:
    """Rounded Laplace draws: most symbols 0, a tail on both sides, as quantized updates are."""
    rng = np.random.default_rng(seed)
    return np.rint(rng.laplace(0.0, scale, n)).astype(np.float32)
