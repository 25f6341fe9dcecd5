"""The model channel: how every worker comes to hold the coordinator's global model.

Without the codec, each task carries the full weights. With it, the
coordinator broadcasts the compressed global delta of the previous round and
workers apply its reconstruction, so both sides keep identical weights and an
identical delta history (which the uplink predictors use). A worker whose
state does not match the broadcast's base asks for a sync: the full weights
and history, once.

The two directions have their own rate weight: workers code their updates at
``codec.rd_lambda``, the coordinator codes its broadcast at
``codec.downlink_rd_lambda`` (``rd_lambda`` when unset); ``codec.unbiased``
(stochastic rounding) applies to the uplink only. Both only steer the encoder,
so nobody needs the other side's to decode.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from phalanx.codec import CodecConfig, GlobalModel, LayerSpec, decode_update_flat
from phalanx.replies import Decoder, make_float32_decoder

HISTORY_PREFIX = "history."


def downlink_lambda(config: CodecConfig) -> float:
    """Return the rate weight of the coordinator's broadcast.

    ``config.downlink_rd_lambda``, or ``config.rd_lambda`` when that is
    ``None``.
    """
    if config.downlink_rd_lambda is None:
        return config.rd_lambda
    return config.downlink_rd_lambda


def broadcast_config(config: CodecConfig) -> CodecConfig:
    """Derive the broadcast's codec settings from the run's.

    Equal to ``config`` but for ``rd_lambda``, which is :func:`downlink_lambda`;
    ``unbiased``, which is off: the broadcast is one payload applied to the
    weights as it is (its error carried into the next broadcast), not one of
    many estimates averaged by the aggregate; and ``low_rank``, which is off:
    the global delta of an adaptive optimiser is no low-rank matrix, and
    workers refuse a low-rank broadcast. The coordinator encodes its broadcast
    and every worker decodes it with this config. ``rd_distortion`` and
    ``rounding`` are the uplink's: the broadcast's bits are spread by the same
    measure, and its ternary layers draw their rounding as the uplink's do.
    """
    return config.model_copy(
        update={"rd_lambda": downlink_lambda(config), "unbiased": False, "low_rank": 0}
    )


@dataclass(frozen=True)
class Downlink:
    """The model part of a task message.

    ``full`` carries the weights (and, with the codec, the delta history);
    ``delta`` carries the encoded global delta that turns the state with digest
    ``base`` into the state with digest ``target``.
    """

    kind: Literal["full", "delta"]
    target: str
    weights: np.ndarray | None = None
    history: dict[str, np.ndarray] = field(default_factory=dict)
    delta: bytes = b""
    base: str = ""

    @property
    def num_bytes(self) -> int:
        """Bytes this downlink puts on the wire."""
        arrays = [self.weights, *self.history.values()] if self.weights is not None else []
        return len(self.delta) + sum(int(a.nbytes) for a in arrays)


class PlainChannel:
    """Full float32 weights down, raw float32 updates up."""

    def __init__(self, params: Tensor) -> None:
        self.dim = int(params.numel())
        self._weights = params.detach().to(torch.float32).numpy().copy()

    def downlink(self) -> Downlink:
        """Return what every task of the coming round carries."""
        return Downlink(kind="full", target="", weights=self._weights)

    def sync(self) -> Downlink:
        """Return the full state for a worker that lost track (the same as every downlink)."""
        return self.downlink()

    @property
    def decoder(self) -> Decoder:
        """Turn an uplink payload into an update."""
        return make_float32_decoder(self.dim)

    def commit(self, params: Tensor, round: int) -> Tensor:
        """Adopt the new global weights; return them as the truth."""
        self._weights = params.detach().to(torch.float32).numpy().copy()
        return params

    def state(self) -> dict[str, np.ndarray]:
        """Return arrays for a checkpoint (none: the weights live in the optimiser)."""
        return {}

    def restore(self, state: dict[str, np.ndarray], params: Tensor) -> None:
        """Reload after a restart."""
        self._weights = params.detach().to(torch.float32).numpy().copy()


class CodecChannel:
    """Compressed global deltas down, predictive-coded residuals up.

    Parameters
    ----------
    layers : LayerSpec
        The model's layers, in parameter order.
    params : Tensor
        The initial global weights (sent in full in the first round).
    config : CodecConfig
        The run's codec settings: the workers' uplink payloads decode with it.
        The broadcast is coded with :func:`broadcast_config` of it, as the
        workers decode it.
    run_seed : int
        Seeds the quantizers' random streams.
    """

    def __init__(self, layers: LayerSpec, params: Tensor, config: CodecConfig, run_seed: int):
        self.config = config
        self.downlink_config = broadcast_config(config)
        self.run_seed = run_seed
        self.model = GlobalModel(layers, params.detach().numpy(), config=self.downlink_config)
        self._pending = b""
        self._base = ""

    def downlink(self) -> Downlink:
        """Return the last broadcast, or the full state before any."""
        if not self._pending:
            return self.sync()
        return Downlink(
            kind="delta", target=self.model.digest(), delta=self._pending, base=self._base
        )

    def sync(self) -> Downlink:
        """Return the full weights and delta history."""
        return Downlink(
            kind="full",
            target=self.model.digest(),
            weights=np.array(self.model.weights),
            history=self.model.history.state(),
        )

    @property
    def decoder(self) -> Decoder:
        """Decode an uplink payload against the current history."""

        def decode(payload: bytes) -> Tensor:
            flat = decode_update_flat(
                payload,
                layers_spec=self.model.layout,
                history=self.model.history,
                config=self.config,
            )
            return torch.from_numpy(np.array(flat, dtype=np.float32))

        return decode

    def commit(self, params: Tensor, round: int) -> Tensor:
        """Broadcast the step to ``params``; return the reconstructed weights, the new truth."""
        delta = params.detach().numpy() - self.model.weights
        self._base = self.model.digest()
        self._pending = self.model.broadcast(delta, run_seed=self.run_seed, round=round).payload
        return torch.from_numpy(np.array(self.model.weights))

    def state(self) -> dict[str, np.ndarray]:
        """Return the arrays a checkpoint needs to continue the broadcast chain exactly."""
        saved = self.model.state()
        saved["pending"] = np.frombuffer(self._pending, dtype=np.uint8).copy()
        saved["base"] = np.frombuffer(self._base.encode(), dtype=np.uint8).copy()
        return saved

    def restore(self, state: dict[str, np.ndarray], params: Tensor) -> None:
        """Reload what :meth:`state` saved."""
        self.model.restore({k: v for k, v in state.items() if k not in ("pending", "base")})
        self._pending = bytes(state["pending"])
        self._base = bytes(state["base"]).decode()


Channel = PlainChannel | CodecChannel


def make_channel(config: CodecConfig, layers: LayerSpec, params: Tensor, run_seed: int) -> Channel:
    """Build the channel a run config's codec section asks for.

    With the codec, the workers' uplink is coded at ``config.rd_lambda`` and
    the broadcast at :func:`downlink_lambda`.
    """
    if config.enabled:
        return CodecChannel(layers, params, config, run_seed)
    return PlainChannel(params)
