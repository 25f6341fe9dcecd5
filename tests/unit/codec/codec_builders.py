"""Builders shared by the codec tests: a small model, gradient-like updates, histories.

Imported as ``tests.unit.codec.codec_builders`` (pytest runs with ``pythonpath = ["."]``).
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
