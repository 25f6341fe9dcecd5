"""Predictors over the shared history of global model deltas.

Every party (the coordinator and each worker) pushes the same decoded global
delta into its :class:`DeltaHistory` after each broadcast, so every party holds
the same history bit for bit and computes the same predictions. A worker then
sends only the residual between its update and a prediction.

The predictions are elementwise ``float32`` arithmetic in a fixed order (no
reductions, no fused multiply-add), so they are bit-identical on every IEEE 754
platform, not only on one software stack.
"""

from __future__ import annotations

import hashlib
import struct
from collections import deque
from collections.abc import Sequence
from enum import IntEnum
from typing import Any, Protocol

import numpy as np

from .layers import FloatArray, LayerLayout, LayerSpec, flatten_update, layer_layout


class HistorySettings(Protocol):
    """The settings a history is sized by; :class:`~phalanx.codec.config.CodecConfig` has them.

    A protocol, so that this module need not import the config (which imports
    :class:`Predictor` from here).
    """

    @property
    def history_length(self) -> int:
        """``K``, how many deltas the mean predictor averages."""
        ...

    @property
    def momentum(self) -> float:
        """``beta`` of the momentum predictor."""
        ...


class Predictor(IntEnum):
    """What a layer's update is predicted from; the value is its bitstream id."""

    ZERO = 0
    """No prediction: the residual is the plain update."""
    PREVIOUS = 1
    """The last global delta."""
    MEAN = 2
    """Mean of the last ``K`` global deltas (fewer while the history fills)."""
    MOMENTUM = 3
    """Adam-style first moment of the global deltas, without bias correction."""


def mean_of_deltas(deltas: Sequence[FloatArray]) -> FloatArray:
    """Elementwise mean of ``deltas``, summed in the given order.

    Parameters
    ----------
    deltas : sequence of numpy.ndarray
        At least one ``float32`` array, all of one shape.

    Returns
    -------
    numpy.ndarray
        ``(d_1 + d_2 + ... + d_k) / k`` in ``float32``; bit-identical on every
        IEEE 754 platform because the additions happen in a fixed order.
    """
    if not deltas:
        raise ValueError("mean_of_deltas needs at least one delta")
    total = np.array(deltas[0], dtype=np.float32, copy=True)
    for delta in deltas[1:]:
        np.add(total, delta, out=total)
    if len(deltas) > 1:
        np.divide(total, np.float32(len(deltas)), out=total)
    return total


def momentum_step(momentum: FloatArray, delta: FloatArray, beta: float) -> FloatArray:
    """Next first moment ``beta * m + (1 - beta) * delta``, without bias correction.

    Parameters
    ----------
    momentum : numpy.ndarray
        Current moment ``m`` (zeros before the first delta).
    delta : numpy.ndarray
        The newest global delta.
    beta : float
        Decay in ``[0, 1)``; rounded to ``float32`` before use.

    Returns
    -------
    numpy.ndarray
        A new ``float32`` array.
    """
    b = np.float32(beta)
    one_minus_b = np.float32(1.0) - b
    out = np.multiply(momentum, b, dtype=np.float32)
    np.add(out, np.multiply(delta, one_minus_b, dtype=np.float32), out=out)
    return out


class DeltaHistory:
    """The recent global deltas and the predictions derived from them.

    Parameters
    ----------
    layers_spec : sequence of (str, sequence of int), or LayerLayout
        The model's layers.
    depth : int
        ``K``, how many deltas the mean predictor averages.
    momentum : float
        ``beta`` of the momentum predictor.

    Notes
    -----
    :attr:`fingerprint` chains a SHA-256 over the layout, ``K``, ``beta`` and
    every pushed delta. Two parties with equal fingerprints make equal
    predictions; the bitstream carries 8 bytes of it so a decoder whose
    history is out of step refuses the payload instead of decoding it wrongly.
    """

    def __init__(
        self, layers_spec: LayerSpec | LayerLayout, *, depth: int = 3, momentum: float = 0.9
    ) -> None:
        if depth < 1:
            raise ValueError(f"history depth must be >= 1, got {depth}")
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"momentum must be in [0, 1), got {momentum}")
        self.layout = layer_layout(layers_spec)
        self.depth = int(depth)
        self.momentum = float(momentum)
        self._deltas: deque[FloatArray] = deque(maxlen=self.depth)
        self._mean: FloatArray | None = None
        self._moment: FloatArray | None = None
        self._peaks: dict[Predictor, tuple[float, ...]] = {}
        self._rounds = 0
        self._fingerprint = hashlib.sha256(
            b"phalanx.codec.history"
            + self.layout.fingerprint
            + struct.pack("<Id", self.depth, self.momentum)
        ).digest()

    @classmethod
    def from_config(
        cls, layers_spec: LayerSpec | LayerLayout, config: HistorySettings
    ) -> DeltaHistory:
        """History sized by a :class:`~phalanx.codec.config.CodecConfig`."""
        return cls(layers_spec, depth=config.history_length, momentum=config.momentum)

    @property
    def rounds(self) -> int:
        """How many deltas have been pushed."""
        return self._rounds

    @property
    def fingerprint(self) -> bytes:
        """32-byte digest of everything the predictions depend on."""
        return self._fingerprint

    def push(self, delta: Any) -> None:
        """Record the decoded global delta of the round that just ended.

        Parameters
        ----------
        delta : array_like or sequence of array_like
            Flat or per-layer; it is copied. Must be finite.
        """
        flat = np.array(flatten_update(delta, self.layout), dtype=np.float32, copy=True)
        if not np.isfinite(flat).all():
            raise ValueError("a global delta pushed into the history must be finite")
        flat.flags.writeable = False
        self._deltas.append(flat)
        self._mean = mean_of_deltas(list(self._deltas))
        moment = np.zeros_like(flat) if self._moment is None else self._moment
        self._moment = momentum_step(moment, flat, self.momentum)
        for array in (self._mean, self._moment):
            array.flags.writeable = False
        self._peaks = {
            predictor: self._layer_peaks(self._array(predictor))
            for predictor in (Predictor.PREVIOUS, Predictor.MEAN, Predictor.MOMENTUM)
        }
        self._rounds += 1
        digest = hashlib.sha256(self._fingerprint)
        digest.update(flat.astype("<f4", copy=False).data)  # little-endian on every machine
        self._fingerprint = digest.digest()

    def _layer_peaks(self, flat: FloatArray | None) -> tuple[float, ...]:
        if flat is None:
            return (0.0,) * len(self.layout)
        peaks = []
        for i in range(len(self.layout)):
            view = flat[self.layout.slice(i)]
            peaks.append(float(max(-view.min(), view.max())) if view.size else 0.0)
        return tuple(peaks)

    def _array(self, predictor: Predictor) -> FloatArray | None:
        if predictor is Predictor.ZERO or not self._deltas:
            return None
        if predictor is Predictor.PREVIOUS:
            return self._deltas[-1]
        if predictor is Predictor.MEAN:
            return self._mean
        return self._moment

    def prediction(self, predictor: Predictor) -> FloatArray | None:
        """Flat prediction of the next update, or ``None`` where it is all zero.

        ``None`` for :attr:`Predictor.ZERO` and for every predictor before the
        first push. The array is read-only; a later push replaces it rather
        than changing it.
        """
        return self._array(Predictor(predictor))

    def layer_prediction(self, predictor: Predictor, layer: int) -> FloatArray | None:
        """Flat prediction of one layer, or ``None`` where it is all zero."""
        flat = self._array(Predictor(predictor))
        if flat is None or self.peak(predictor, layer) == 0.0:
            return None
        return flat[self.layout.slice(layer)]

    def peak(self, predictor: Predictor, layer: int) -> float:
        """Largest absolute value of ``predictor``'s prediction for ``layer``."""
        if predictor is Predictor.ZERO or not self._deltas:
            return 0.0
        return self._peaks[Predictor(predictor)][layer]

    def state(self) -> dict[str, np.ndarray]:
        """Arrays from which :meth:`restore` rebuilds this history exactly (for checkpoints)."""
        deltas = (
            np.stack(list(self._deltas))
            if self._deltas
            else np.zeros((0, self.layout.total), dtype=np.float32)
        )
        moment = self._moment if self._moment is not None else np.zeros(0, dtype=np.float32)
        return {
            "deltas": deltas,
            "moment": np.array(moment, copy=True),
            "rounds": np.array(self._rounds, dtype=np.int64),
            "fingerprint": np.frombuffer(self._fingerprint, dtype=np.uint8).copy(),
        }

    def restore(self, state: dict[str, np.ndarray]) -> None:
        """Load what :meth:`state` saved into a history built with the same settings."""
        deltas = np.asarray(state["deltas"], dtype=np.float32)
        moment = np.asarray(state["moment"], dtype=np.float32)
        if deltas.ndim != 2 or deltas.shape[1] != self.layout.total:
            raise ValueError(
                f"saved deltas have shape {deltas.shape}, model has {self.layout.total}"
            )
        if deltas.shape[0] > self.depth:
            raise ValueError(f"saved {deltas.shape[0]} deltas, history depth is {self.depth}")
        if len(deltas) and moment.shape != (self.layout.total,):
            raise ValueError(f"saved moment has shape {moment.shape}")
        fingerprint = bytes(np.asarray(state["fingerprint"], dtype=np.uint8))
        if len(fingerprint) != 32:
            raise ValueError("saved fingerprint must be 32 bytes")
        self._deltas.clear()
        for row in deltas:
            copy = np.array(row, dtype=np.float32, copy=True)
            copy.flags.writeable = False
            self._deltas.append(copy)
        if self._deltas:
            self._mean = mean_of_deltas(list(self._deltas))
            self._moment = np.array(moment, dtype=np.float32, copy=True)
            for array in (self._mean, self._moment):
                array.flags.writeable = False
        else:
            self._mean = self._moment = None
        self._peaks = {
            predictor: self._layer_peaks(self._array(predictor))
            for predictor in (Predictor.PREVIOUS, Predictor.MEAN, Predictor.MOMENTUM)
        }
        self._rounds = int(state["rounds"])
        self._fingerprint = fingerprint


def check_history(history: DeltaHistory, layout: LayerLayout, config: HistorySettings) -> None:
    """Refuse a history built for another model, or sized otherwise than ``config``."""
    if history.layout.fingerprint != layout.fingerprint:
        raise ValueError("history was built for a different model than layers_spec")
    if history.depth != config.history_length or history.momentum != config.momentum:
        raise ValueError(
            "history settings differ from the config: build it with "
            "DeltaHistory.from_config(layers_spec, config)"
        )
