"""What the encoder chose for each layer, and every byte of a payload accounted for."""

from __future__ import annotations

from dataclasses import dataclass

from .predictors import Predictor
from .quantizers import Quantizer


@dataclass(frozen=True)
class LayerStats:
    """What the encoder chose for one layer and what it cost.

    Parameters
    ----------
    name : str
    size : int
        Parameters in the layer.
    predictor : Predictor
    quantizer : Quantizer
    gain : float
        Prediction gain.
    step : float
        Uniform step or ternary scale (0 when censored).
    multiplier : float
        ``step`` in multiples of the sampled residual's RMS.
    alphabet : int
        Symbols in the layer's table (0 when censored; a low-rank layer's two
        factor tables together).
    estimated_rate : float
        Bits per parameter the search expected, side information included.
    estimated_distortion : float
        Relative distortion the search expected.
    entropy_bits : float
        Empirical entropy of the layer's actual symbols, times their count.
    coded_bits : int
        Bits the ANS coder spent on the layer's symbols.
    rank : int
        Components of a low-rank layer (0 for the other quantizers).
    """

    name: str
    size: int
    predictor: Predictor
    quantizer: Quantizer
    gain: float
    step: float
    multiplier: float
    alphabet: int
    estimated_rate: float
    estimated_distortion: float
    entropy_bits: float
    coded_bits: int
    rank: int = 0


@dataclass(frozen=True)
class CodecStats:
    """Every byte of one payload, accounted for.

    Parameters
    ----------
    layers : tuple of LayerStats
    parameters : int
        Parameters in the model.
    total_bytes : int
        ``len(payload)``: header, layer table and coded symbols.
    side_bytes : int
        Header and layer table (shapes, choices, frequency tables, word count).
    coded_bytes : int
        The ANS words.
    entropy_bits : float
        Sum over layers of the symbols' empirical entropy.
    coded_bits : int
        Bits the ANS coder used (before padding to whole words).
    """

    layers: tuple[LayerStats, ...]
    parameters: int
    total_bytes: int
    side_bytes: int
    coded_bytes: int
    entropy_bits: float
    coded_bits: int

    @property
    def input_bytes(self) -> int:
        """Size of the update as raw ``float32``."""
        return 4 * self.parameters

    @property
    def compression_ratio(self) -> float:
        """``input_bytes / total_bytes``."""
        return self.input_bytes / self.total_bytes

    @property
    def bits_per_parameter(self) -> float:
        """``8 * total_bytes / parameters``."""
        return 8.0 * self.total_bytes / max(self.parameters, 1)

    @property
    def coder_overhead(self) -> float:
        """``coded_bits / entropy_bits - 1``: the coder's excess over the empirical entropy."""
        return self.coded_bits / self.entropy_bits - 1.0 if self.entropy_bits > 0 else 0.0

    @property
    def total_overhead(self) -> float:
        """``8 * total_bytes / entropy_bits - 1``: excess with every header byte counted."""
        return 8.0 * self.total_bytes / self.entropy_bits - 1.0 if self.entropy_bits > 0 else 0.0
