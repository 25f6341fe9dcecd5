"""A worker's copy of the global model, kept in step with the coordinator's channel."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from phalanx.channel import Downlink, broadcast_config
from phalanx.codec import (
    CodecConfig,
    CodecError,
    ErrorFeedback,
    GlobalModel,
    LayerSpec,
    encode_update,
)
from phalanx.replies import float32_payload


class OutOfSyncError(Exception):
    """The broadcast does not apply to this worker's state: it needs the full state."""


class ModelReplica:
    """Applies downlinks and encodes uplink updates, plain or through the codec.

    Parameters
    ----------
    config : CodecConfig
        The run's codec section.
    layers : LayerSpec
        The model's layers, in parameter order.
    run_seed : int
        Seeds the quantizers' random streams.
    """

    def __init__(self, config: CodecConfig, layers: LayerSpec, run_seed: int) -> None:
        self.layers = layers
        self.run_seed = run_seed
        self.config = config
        # The global model mirrors the coordinator's, whose broadcast is coded at
        # codec.downlink_rd_lambda; decoding does not depend on lambda either way.
        self.downlink_config = broadcast_config(config)
        self.model: GlobalModel | None = None
        self.feedback: ErrorFeedback | None = None
        self._weights: np.ndarray | None = None

    def apply(self, downlink: Downlink) -> Tensor:
        """Bring this replica to the downlink's target state; return the global weights.

        Raises
        ------
        OutOfSyncError
            When a delta arrives for a state this replica does not hold.
        """
        if not self.config.enabled:
            if downlink.weights is None:
                raise OutOfSyncError("a plain channel always sends full weights")
            self._weights = downlink.weights
            return torch.from_numpy(np.array(downlink.weights, dtype=np.float32))
        if downlink.kind == "full":
            if downlink.weights is None:
                raise OutOfSyncError("a full downlink without weights")
            model = GlobalModel(self.layers, downlink.weights, config=self.downlink_config)
            if downlink.history:
                model.history.restore(downlink.history)
            self.model = model
        elif self.model is not None and self.model.digest() == downlink.target:
            # Already there: the round's earlier message (one message per file) brought it.
            pass
        else:
            if self.model is None or self.model.digest() != downlink.base:
                raise OutOfSyncError("the broadcast's base is not this replica's state")
            try:
                self.model.receive(downlink.delta)
            except CodecError as exc:
                self.model = None
                raise OutOfSyncError(f"the broadcast does not decode: {exc}") from exc
        if self.model.digest() != downlink.target:
            self.model = None
            raise OutOfSyncError("the state after the downlink does not match the coordinator's")
        return torch.from_numpy(np.array(self.model.weights))

    def encode(self, update: Tensor, *, round: int, file: int) -> bytes:
        """Encode one file's update for the uplink."""
        if not self.config.enabled:
            return float32_payload(update)
        if self.model is None:
            raise OutOfSyncError("no global model to predict from")
        seed_context = (self.run_seed, round, file)
        flat = update.detach().to(torch.float32).numpy()
        if self.config.error_feedback:
            if self.feedback is None:
                self.feedback = ErrorFeedback(self.model.layout)
            return self.feedback.encode(
                flat, history=self.model.history, config=self.config, seed_context=seed_context
            ).payload
        return encode_update(
            flat,
            layers_spec=self.model.layout,
            history=self.model.history,
            config=self.config,
            seed_context=seed_context,
        ).payload

    def state(self) -> dict[str, np.ndarray]:
        """Return arrays to keep between rounds (Flower's node state)."""
        if self.model is None:
            return {}
        saved = {f"model.{k}": v for k, v in self.model.state().items()}
        if self.feedback is not None:
            saved["feedback"] = np.array(self.feedback.memory)
        return saved

    def restore(self, state: dict[str, np.ndarray]) -> None:
        """Reload what :meth:`state` saved; an empty state leaves the replica unsynced."""
        model_state = {
            k.removeprefix("model."): v for k, v in state.items() if k.startswith("model.")
        }
        if not model_state or not self.config.enabled:
            return
        model = GlobalModel(self.layers, model_state["weights"], config=self.downlink_config)
        model.restore(model_state)
        self.model = model
        if "feedback" in state:
            self.feedback = ErrorFeedback(model.layout)
            self.feedback.restore(state["feedback"])
