"""Downlink: the global model delta goes out through the same codec.

The coordinator encodes the round's global delta, applies the *reconstructed*
delta to its own weights and pushes it into its history; every worker decodes
the payload and does the same. The reconstruction, not the exact delta, is the
truth, so the coordinator and every worker hold identical weights and
identical histories, bit for bit, on every IEEE 754 platform.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from .config import CodecConfig
from .decoder import decode_update_flat
from .encoder import BROADCAST_FILE, EncodedUpdate, encode_update
from .layers import FloatArray, LayerLayout, LayerSpec, flatten_update, layer_layout, split_flat
from .predictors import DeltaHistory


class GlobalModel:
    """Weights and delta history that the coordinator and every worker hold identically.

    Parameters
    ----------
    layers_spec : sequence of (str, sequence of int), or LayerLayout
        The model's layers.
    weights : array_like or sequence of array_like
        The initial global weights, identical everywhere (sent uncompressed
        once, before the first round).
    config : CodecConfig
        The run's codec settings.
    """

    def __init__(
        self, layers_spec: LayerSpec | LayerLayout, weights: Any, *, config: CodecConfig
    ) -> None:
        self.layout = layer_layout(layers_spec)
        self.config = config
        self.history = DeltaHistory.from_config(self.layout, config)
        self._weights = np.array(flatten_update(weights, self.layout), dtype=np.float32, copy=True)
        if not np.isfinite(self._weights).all():
            raise ValueError("initial weights must be finite")
        self._carry = np.zeros(self.layout.total, dtype=np.float32)

    @property
    def weights(self) -> FloatArray:
        """Current weights, flat (read-only view)."""
        view = self._weights.view()
        view.flags.writeable = False
        return view

    def layers(self) -> list[FloatArray]:
        """Return the current weights per layer (read-only views)."""
        return split_flat(self.weights, self.layout)

    def digest(self) -> str:
        """SHA-256 over the weights and the history fingerprint: equal everywhere, each round."""
        return hashlib.sha256(self._weights.tobytes() + self.history.fingerprint).hexdigest()

    def broadcast(self, delta: Any, *, run_seed: int, round: int) -> EncodedUpdate:
        """Coordinator side: encode this round's global delta and apply its reconstruction.

        With ``config.downlink_error_feedback`` the part of earlier deltas that
        quantization lost is added to ``delta`` before encoding.

        Parameters
        ----------
        delta : array_like or sequence of array_like
            The intended change of the global weights (after the server
            optimiser).
        run_seed : int
            The run's seed.
        round : int
            The round number.

        Returns
        -------
        EncodedUpdate
            The payload to send to every worker.
        """
        target = flatten_update(delta, self.layout)
        if self.config.downlink_error_feedback:
            target = np.add(target, self._carry, dtype=np.float32)
        encoded = encode_update(
            target,
            layers_spec=self.layout,
            history=self.history,
            config=self.config,
            seed_context=(run_seed, round, BROADCAST_FILE),
        )
        if self.config.downlink_error_feedback:
            self._carry = np.subtract(target, encoded.flat, dtype=np.float32)
        self._apply(encoded.flat)
        return encoded

    def receive(self, payload: bytes) -> FloatArray:
        """Worker side: decode a broadcast and apply it.

        Returns
        -------
        numpy.ndarray
            The decoded global delta, flat.

        Raises
        ------
        CodecError
            If the payload does not decode against this model and history;
            the weights and history are then left unchanged.
        """
        delta = decode_update_flat(
            payload, layers_spec=self.layout, history=self.history, config=self.config
        )
        self._apply(delta)
        return delta

    def state(self) -> dict[str, np.ndarray]:
        """Arrays from which :meth:`restore` rebuilds this state exactly (for checkpoints)."""
        saved = {f"history.{key}": value for key, value in self.history.state().items()}
        saved["weights"] = self._weights.copy()
        saved["carry"] = self._carry.copy()
        return saved

    def restore(self, state: dict[str, np.ndarray]) -> None:
        """Load what :meth:`state` saved, into a model built with the same spec and config."""
        weights = np.asarray(state["weights"], dtype=np.float32)
        carry = np.asarray(state["carry"], dtype=np.float32)
        if weights.shape != (self.layout.total,) or carry.shape != (self.layout.total,):
            raise ValueError("saved weights do not match the model's size")
        self.history.restore(
            {
                key.removeprefix("history."): v
                for key, v in state.items()
                if key.startswith("history.")
            }
        )
        self._weights = weights.copy()
        self._carry = carry.copy()

    def _apply(self, delta: FloatArray) -> None:
        np.add(self._weights, delta, out=self._weights)
        self.history.push(delta)
