"""Predictive-coding compression of uplink updates and downlink broadcasts.

Workers send a quantized, entropy-coded residual against a prediction that
every party computes identically from the shared history of decoded global
deltas. Typical use, on every party::

    history = DeltaHistory.from_config(layers_spec, config)
    encoded = encode_update(update, layers_spec=layers_spec, history=history,
                            config=config, seed_context=(run_seed, round, file))
    decoded = decode_update(encoded.payload, layers_spec=layers_spec,
                            history=history, config=config)   # == encoded.reconstruction
    ...
    history.push(global_delta_reconstruction)                    # after each broadcast

The downlink goes through the same codec: :class:`GlobalModel` holds the
weights and the history on the coordinator (``broadcast``) and on each worker
(``receive``), and keeps them identical. :class:`ErrorFeedback` carries a
worker's quantization error into its next update, for runs with replication 1
only (:func:`check_codec_compatible`). ``CodecConfig(unbiased=True)`` rounds
stochastically, from the same seeded stream, so that a decoded update is an
unbiased estimate of the update (for the uplink, whose errors average out in
the aggregate). Malformed payloads raise
:class:`CodecError`; the bitstream format is documented in
:mod:`phalanx.codec.bitstream`.
"""

from .bitstream import MAGIC, VERSION
from .config import CodecConfig, check_codec_compatible
from .decoder import decode_update, decode_update_flat
from .downlink import GlobalModel
from .encoder import BROADCAST_FILE, EncodedUpdate, SeedContext, encode_update
from .errors import CodecError
from .feedback import ErrorFeedback
from .layers import LayerLayout, LayerSpec, flatten_update, layer_layout, split_flat
from .predictors import DeltaHistory, Predictor
from .quantizers import Quantizer
from .stats import CodecStats, LayerStats

__all__ = [
    "BROADCAST_FILE",
    "MAGIC",
    "VERSION",
    "CodecConfig",
    "CodecError",
    "CodecStats",
    "DeltaHistory",
    "EncodedUpdate",
    "ErrorFeedback",
    "GlobalModel",
    "LayerLayout",
    "LayerSpec",
    "LayerStats",
    "Predictor",
    "Quantizer",
    "SeedContext",
    "check_codec_compatible",
    "decode_update",
    "decode_update_flat",
    "encode_update",
    "flatten_update",
    "layer_layout",
    "split_flat",
]
