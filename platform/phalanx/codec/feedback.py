"""Error feedback for one worker: the quantization error rejoins the next update.

Only for runs with replication 1: the memory is private to the worker, so with
``r > 1`` honest replicas of a file would send different bytes (see
:func:`~phalanx.codec.config.check_codec_compatible`).

What is carried is the error of the layers coded with a bias: deterministic
rounding, censoring, the low-rank quantizer's truncation. In the codec's
unbiased mode a stochastically rounded layer's error is zero-mean and drawn
afresh every round; carried, it would only add its variance to the next
update, round after round (the memory grows instead of shrinking), so those
layers carry nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .config import CodecConfig
from .encoder import EncodedUpdate, SeedContext, encode_update
from .layers import FloatArray, LayerLayout, LayerSpec, flatten_update, layer_layout
from .predictors import DeltaHistory
from .quantizers import Quantizer

STOCHASTIC = frozenset({Quantizer.UNIFORM, Quantizer.TERNARY})
"""Quantizers that round stochastically in the codec's unbiased mode."""


def compensate(update: FloatArray, memory: FloatArray) -> FloatArray:
    """``update + memory`` in ``float32``: what the worker encodes this round."""
    return np.add(update, memory, dtype=np.float32)


def carried_error(compensated: FloatArray, reconstruction: FloatArray) -> FloatArray:
    """``compensated - reconstruction``: the error carried into the next round."""
    return np.subtract(compensated, reconstruction, dtype=np.float32)


class ErrorFeedback:
    """The residual memory of one worker (``r = 1`` only).

    Parameters
    ----------
    layers_spec : sequence of (str, sequence of int), or LayerLayout
        The model's layers.
    """

    def __init__(self, layers_spec: LayerSpec | LayerLayout) -> None:
        self.layout = layer_layout(layers_spec)
        self._memory = np.zeros(self.layout.total, dtype=np.float32)

    @property
    def memory(self) -> FloatArray:
        """The error carried into the next update (read-only view)."""
        view = self._memory.view()
        view.flags.writeable = False
        return view

    def restore(self, memory: Any) -> None:
        """Load a memory saved from :attr:`memory` (a worker's state between rounds)."""
        self._memory = np.array(flatten_update(memory, self.layout), dtype=np.float32, copy=True)

    def reset(self) -> None:
        """Forget the carried error."""
        self._memory.fill(0.0)

    def encode(
        self,
        update: Any,
        *,
        history: DeltaHistory,
        config: CodecConfig,
        seed_context: SeedContext,
    ) -> EncodedUpdate:
        """Encode ``update + memory`` and keep the new quantization error.

        Parameters are those of :func:`~phalanx.codec.encoder.encode_update`.
        With ``config.unbiased`` the layers rounded stochastically keep no
        error (see the module docstring).

        Raises
        ------
        ValueError
            If ``config.error_feedback`` is off.
        """
        if not config.error_feedback:
            raise ValueError("ErrorFeedback.encode needs config.error_feedback=True")
        corrected = compensate(flatten_update(update, self.layout), self._memory)
        encoded = encode_update(
            corrected,
            layers_spec=self.layout,
            history=history,
            config=config,
            seed_context=seed_context,
        )
        memory = carried_error(corrected, encoded.flat)
        if config.unbiased:
            for layer, stats in enumerate(encoded.stats.layers):
                if stats.quantizer in STOCHASTIC:
                    memory[self.layout.slice(layer)] = 0.0
        self._memory = memory
        return encoded
