"""Baseline uplink compressors for ``eval_compression.py``, and the seams that put them in a run.

Each compressor turns one file's flat ``float32`` update into the bytes a worker
sends and back; every byte the decoder needs is in the payload (headers, scales,
frequency tables, index codes), so ``len(payload)`` is the honest rate.

- :class:`Zstd`: zstd on the raw ``float32`` bytes (lossless).
- :class:`QSGD`: stochastic quantization to ``s`` levels per bucket of 512
  coordinates (Alistarh et al., 2017), the signed levels ANS-coded with
  ``constriction`` under their empirical frequencies (the table travels along).
- :class:`TopK`: the ``k`` largest magnitudes, ``float32`` values and
  Elias-gamma-coded index gaps; meant to run with error feedback (``r = 1``).
- :class:`ScaledSign`: signSGD's 1 bit per coordinate, plus one ``float32``
  scale per layer (the layer's mean magnitude).

Randomness (QSGD's stochastic rounding) comes in as a seed that the worker
derives from ``(run seed, round, file)``: honest replicas of a file send the
same bytes, so detection under ``r = 3`` still compares digests.

:class:`BaselineReplica` (the worker side) and :class:`BaselineChannel` (the
coordinator's decoder) plug a compressor into the same coordinator and workers
that the platform runs; the downlink stays the plain channel's full weights.
"""

from __future__ import annotations

import hashlib
import itertools
import struct
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

import constriction
import numpy as np
import numpy.typing as npt
import torch
import zstandard
from torch import Tensor

from phalanx.channel import PlainChannel
from phalanx.codec import CodecConfig, LayerSpec
from phalanx.replies import Decoder, ReplyRejectedError
from phalanx_clients.replica import ModelReplica

FloatArray: TypeAlias = npt.NDArray[np.float32]
IntArray: TypeAlias = npt.NDArray[np.int64]

_SEED_DOMAIN = b"phalanx.benchmarks.compression_baselines.v1"


def stream_seed(run_seed: int, round: int, file: int) -> int:
    """Seed of a compressor's random stream for one file in one round.

    A hash of the triple in its own domain, so it is independent of the
    training seed that :func:`phalanx.training.derive_seed` gives the same triple.
    """
    message = _SEED_DOMAIN + f":{run_seed}:{round}:{file}".encode("ascii")
    return int.from_bytes(hashlib.sha256(message).digest()[:8], "big") >> 1


class Compressor(Protocol):
    """Flat ``float32`` update of ``dim`` values <-> payload bytes."""

    @property
    def name(self) -> str:
        """Short name of the method."""
        ...

    @property
    def dim(self) -> int:
        """Values in an update."""
        ...

    def encode(self, update: FloatArray, *, seed: int) -> bytes:
        """Compress ``update``; ``seed`` feeds any random choice."""
        ...

    def decode(self, payload: bytes) -> FloatArray:
        """Rebuild the update; raise ``ValueError`` for a payload that is not one."""
        ...


def _check_update(update: FloatArray, dim: int) -> FloatArray:
    flat = np.ascontiguousarray(update, dtype=np.float32)
    if flat.shape != (dim,):
        raise ValueError(f"update must be a flat vector of {dim} values, got shape {flat.shape}")
    return flat


class _Reader:
    """Reads the fields of a payload in order, refusing to run past its end."""

    def __init__(self, payload: bytes, magic: bytes) -> None:
        if payload[: len(magic)] != magic:
            raise ValueError(f"payload does not start with {magic!r}")
        self.payload = payload
        self.offset = len(magic)

    def unpack(self, fmt: str) -> tuple[int, ...]:
        size = struct.calcsize(fmt)
        self._need(size)
        values = struct.unpack_from(fmt, self.payload, self.offset)
        self.offset += size
        return values

    def array(self, dtype: type[np.generic], count: int) -> npt.NDArray[Any]:
        size = np.dtype(dtype).itemsize * count
        self._need(size)
        values = np.frombuffer(self.payload, dtype=dtype, count=count, offset=self.offset)
        self.offset += size
        return values

    def rest(self) -> bytes:
        return self.payload[self.offset :]

    def finish(self) -> None:
        if self.offset != len(self.payload):
            raise ValueError(f"{len(self.payload) - self.offset} stray bytes after the payload")

    def _need(self, size: int) -> None:
        if self.offset + size > len(self.payload):
            raise ValueError("payload is truncated")


def _check_dim(found: int, dim: int) -> None:
    if found != dim:
        raise ValueError(f"payload holds {found} values, expected {dim}")


# --------------------------------------------------------------------------- zstd


@dataclass(frozen=True)
class Zstd:
    """zstd at ``level`` on the raw little-endian ``float32`` bytes (lossless)."""

    dim: int
    level: int = 3
    name: str = "zstd"

    def encode(self, update: FloatArray, *, seed: int) -> bytes:
        raw = _check_update(update, self.dim).astype("<f4").tobytes()
        return bytes(zstandard.ZstdCompressor(level=self.level).compress(raw))

    def decode(self, payload: bytes) -> FloatArray:
        try:
            raw = zstandard.ZstdDecompressor().decompress(payload, max_output_size=4 * self.dim)
        except zstandard.ZstdError as exc:
            raise ValueError(f"not a zstd frame: {exc}") from exc
        _check_dim(len(raw) // 4 if len(raw) % 4 == 0 else -1, self.dim)
        return np.frombuffer(raw, dtype="<f4").astype(np.float32)


# --------------------------------------------------------------------------- QSGD


def qsgd_quantize(
    update: FloatArray, *, levels: int, bucket: int, rng: np.random.Generator
) -> tuple[FloatArray, npt.NDArray[np.int32]]:
    """Stochastically quantize each bucket to ``levels`` levels of its L2 norm.

    Coordinate ``v`` of a bucket with norm ``n`` becomes ``sign(v) * l`` with
    ``l = floor(s |v| / n)`` or that plus one, the latter with probability
    ``s |v| / n - floor(s |v| / n)``: unbiased, ``E[l n / s] = |v|``.

    Returns
    -------
    norms : numpy.ndarray
        ``float32``, one per bucket (the last bucket may be shorter).
    symbols : numpy.ndarray
        ``int32`` signed levels in ``-levels .. levels``, one per coordinate.
    """
    if levels < 1 or bucket < 1:
        raise ValueError(f"levels and bucket must be >= 1, got {levels} and {bucket}")
    n = update.size
    padded = np.zeros(-(-n // bucket) * bucket, dtype=np.float32)
    padded[:n] = update
    blocks = padded.reshape(-1, bucket)
    norms = np.sqrt(np.einsum("ij,ij->i", blocks, blocks, dtype=np.float64)).astype(np.float32)
    safe = np.where(norms > 0, norms, np.float32(1.0))
    scaled = np.abs(blocks) / safe[:, None] * np.float32(levels)
    floor = np.floor(scaled)
    up = rng.random(scaled.shape, dtype=np.float32) < scaled - floor
    magnitude = np.minimum(floor + up, levels).astype(np.int32)
    symbols = np.where(blocks < 0, -magnitude, magnitude).reshape(-1)[:n]
    return norms, symbols


def qsgd_dequantize(
    norms: FloatArray, symbols: npt.NDArray[np.int32], *, levels: int, bucket: int
) -> FloatArray:
    """Rebuild ``symbols * norm / levels`` per bucket, as ``float32``."""
    step = np.repeat(norms / np.float32(levels), bucket)[: symbols.size]
    return (symbols.astype(np.float32) * step).astype(np.float32)


def _categorical(counts: npt.NDArray[np.uint32]) -> Any:
    probabilities = counts.astype(np.float64) / float(counts.sum())
    return constriction.stream.model.Categorical(probabilities, perfect=False)


@dataclass(frozen=True)
class QSGD:
    """QSGD with ``levels`` levels per bucket, its symbols ANS-coded.

    Payload: ``b"QSG1"``, dim, bucket, levels, word count; the bucket norms
    (``float32``); the ``2 levels + 1`` symbol counts (``uint32``: the decoder
    rebuilds the same model from them); the ANS words.
    """

    dim: int
    levels: int = 4
    bucket: int = 512
    name: str = "qsgd"

    _MAGIC = b"QSG1"
    _HEADER = "<IIHI"

    def encode(self, update: FloatArray, *, seed: int) -> bytes:
        flat = _check_update(update, self.dim)
        rng = np.random.default_rng(seed)
        norms, symbols = qsgd_quantize(flat, levels=self.levels, bucket=self.bucket, rng=rng)
        shifted = symbols + np.int32(self.levels)
        counts = np.bincount(shifted, minlength=2 * self.levels + 1).astype(np.uint32)
        coder = constriction.stream.stack.AnsCoder()
        coder.encode_reverse(shifted, _categorical(counts))
        words = np.asarray(coder.get_compressed(), dtype=np.uint32)
        header = struct.pack(self._HEADER, self.dim, self.bucket, self.levels, words.size)
        parts = (self._MAGIC, header, norms.astype("<f4"), counts.astype("<u4"), words)
        return b"".join(p if isinstance(p, bytes) else p.tobytes() for p in parts)

    def decode(self, payload: bytes) -> FloatArray:
        reader = _Reader(payload, self._MAGIC)
        dim, bucket, levels, num_words = reader.unpack(self._HEADER)
        _check_dim(dim, self.dim)
        if (bucket, levels) != (self.bucket, self.levels):
            raise ValueError(f"payload uses bucket {bucket} and {levels} levels")
        norms = reader.array(np.float32, -(-dim // bucket)).astype(np.float32)
        counts = reader.array(np.uint32, 2 * levels + 1).astype(np.uint32)
        words = reader.array(np.uint32, num_words).astype(np.uint32)
        reader.finish()
        if counts.sum() != dim:
            raise ValueError("symbol counts do not add up to the dimension")
        try:
            shifted = constriction.stream.stack.AnsCoder(words).decode(_categorical(counts), dim)
        except (KeyboardInterrupt, SystemExit, GeneratorExit, MemoryError):
            raise
        except BaseException as exc:  # ValueError, or a Rust panic (a BaseException)
            raise ValueError(f"ANS decoder rejected the payload: {exc}") from exc
        symbols = np.asarray(shifted, dtype=np.int32) - np.int32(levels)
        if not np.isfinite(norms).all() or (norms < 0).any():
            raise ValueError("bucket norms must be finite and non-negative")
        return qsgd_dequantize(norms, symbols, levels=levels, bucket=bucket)


# --------------------------------------------------------------------------- top-k


def elias_gamma_encode(values: IntArray) -> tuple[bytes, int]:
    """Elias-gamma code of positive integers, packed MSB first.

    ``v`` with ``L`` significant bits is written as ``L - 1`` zeros, then its
    ``L`` bits: ``2 L - 1`` bits in all.

    Returns
    -------
    tuple of (bytes, int)
        The packed bits (the last byte zero-padded) and the number of bits.
    """
    v = np.asarray(values, dtype=np.int64)
    if v.size == 0:
        return b"", 0
    if v.min() < 1 or v.max() >= 2**52:
        raise ValueError("Elias gamma codes integers in 1 .. 2**52 - 1")
    _, exponent = np.frexp(v.astype(np.float64))  # v = m 2**e with m in [0.5, 1): e bits
    length = exponent.astype(np.int64)
    ends = np.cumsum(2 * length - 1)
    bits = np.zeros(int(ends[-1]), dtype=np.uint8)
    for j in range(int(length.max())):  # bit j (from the least significant) of every value
        has = length > j
        bits[ends[has] - 1 - j] = (v[has] >> j) & 1
    return np.packbits(bits).tobytes(), int(ends[-1])


def elias_gamma_decode(data: bytes, count: int, num_bits: int) -> IntArray:
    """Decode ``count`` integers from what :func:`elias_gamma_encode` wrote."""
    if num_bits > 8 * len(data):
        raise ValueError("Elias-gamma bit count exceeds the data")
    bits = np.unpackbits(np.frombuffer(data, dtype=np.uint8))[:num_bits]
    ones = np.flatnonzero(bits)
    out = np.empty(count, dtype=np.int64)
    position = 0
    for i in range(count):
        next_one = int(np.searchsorted(ones, position, side="left"))
        if next_one >= ones.size:
            raise ValueError("Elias-gamma stream ends early")
        first = int(ones[next_one])
        zeros = first - position
        end = first + zeros + 1
        if end > num_bits or zeros > 52:
            raise ValueError("Elias-gamma code runs past the stream")
        out[i] = int(bits[first:end] @ (1 << np.arange(zeros, -1, -1, dtype=np.int64)))
        position = end
    if position != num_bits:
        raise ValueError("stray bits after the last Elias-gamma code")
    return out


@dataclass(frozen=True)
class TopK:
    """The ``ceil(fraction * dim)`` largest magnitudes; the rest are zero.

    Payload: ``b"TOPK"``, dim, k, bit count; ``k`` values (``float32``) in index
    order; the index gaps (first index + 1, then differences), Elias-gamma coded.
    """

    dim: int
    fraction: float = 0.005
    name: str = "top-k"

    _MAGIC = b"TOPK"
    _HEADER = "<III"

    @property
    def k(self) -> int:
        """Coordinates kept."""
        return max(1, min(self.dim, int(np.ceil(self.fraction * self.dim))))

    def encode(self, update: FloatArray, *, seed: int) -> bytes:
        flat = _check_update(update, self.dim)
        index = np.sort(np.argpartition(np.abs(flat), self.dim - self.k)[self.dim - self.k :])
        gaps = np.diff(index.astype(np.int64), prepend=-1).astype(np.int64)
        code, num_bits = elias_gamma_encode(gaps)
        header = struct.pack(self._HEADER, self.dim, self.k, num_bits)
        return self._MAGIC + header + flat[index].astype("<f4").tobytes() + code

    def decode(self, payload: bytes) -> FloatArray:
        reader = _Reader(payload, self._MAGIC)
        dim, k, num_bits = reader.unpack(self._HEADER)
        _check_dim(dim, self.dim)
        if not 1 <= k <= dim:
            raise ValueError(f"k must be in 1..{dim}, got {k}")
        values = reader.array(np.float32, k)
        code = reader.rest()
        if len(code) != -(-num_bits // 8):
            raise ValueError("index code length does not match its bit count")
        index = np.cumsum(elias_gamma_decode(code, k, num_bits)) - 1
        if index[-1] >= dim:
            raise ValueError(f"index {index[-1]} out of range for {dim} values")
        out = np.zeros(dim, dtype=np.float32)
        out[index] = values
        return out


# --------------------------------------------------------------------------- signSGD


@dataclass(frozen=True)
class ScaledSign:
    """signSGD: one bit per coordinate (``v >= 0``), one ``float32`` scale per layer.

    A layer decodes to ``+-mean(|v|)`` over the layer, so the aggregate keeps the
    update's scale. Payload: ``b"SGN1"``, dim, layer count; the scales; the bits.
    """

    layer_sizes: tuple[int, ...]
    name: str = "signsgd"

    _MAGIC = b"SGN1"
    _HEADER = "<IH"

    @property
    def dim(self) -> int:
        """Parameters in the model."""
        return sum(self.layer_sizes)

    def encode(self, update: FloatArray, *, seed: int) -> bytes:
        flat = _check_update(update, self.dim)
        bounds = np.cumsum((0, *self.layer_sizes))
        scales = np.array(
            [np.abs(flat[a:b]).mean(dtype=np.float64) for a, b in itertools.pairwise(bounds)],
            dtype="<f4",
        )
        header = struct.pack(self._HEADER, self.dim, len(self.layer_sizes))
        return self._MAGIC + header + scales.tobytes() + np.packbits(flat >= 0).tobytes()

    def decode(self, payload: bytes) -> FloatArray:
        reader = _Reader(payload, self._MAGIC)
        dim, layers = reader.unpack(self._HEADER)
        _check_dim(dim, self.dim)
        if layers != len(self.layer_sizes):
            raise ValueError(f"payload has {layers} layers, expected {len(self.layer_sizes)}")
        scales = reader.array(np.float32, layers).astype(np.float32)
        packed = reader.array(np.uint8, -(-dim // 8))
        reader.finish()
        signs = np.unpackbits(packed)[:dim].astype(np.float32) * 2 - 1
        return (signs * np.repeat(scales, self.layer_sizes)).astype(np.float32)


# --------------------------------------------------------------------------- seams


def layer_sizes(layers: LayerSpec) -> tuple[int, ...]:
    """Parameters per layer, in the order of the flat vector."""
    return tuple(int(np.prod(shape, dtype=np.int64)) for _, shape in layers)


class BaselineReplica(ModelReplica):
    """A worker's replica that encodes its uplink with a baseline compressor.

    The downlink is the plain channel's (full ``float32`` weights). With
    ``error_feedback`` the worker adds the error it left out last time to the
    next update and keeps ``compensated - decoded`` (``r = 1`` only: the memory
    is the worker's own, so honest replicas of a file would send different bytes).
    """

    def __init__(
        self,
        compressor: Compressor,
        layers: LayerSpec,
        run_seed: int,
        *,
        error_feedback: bool = False,
    ) -> None:
        super().__init__(CodecConfig(enabled=False), layers, run_seed)
        self.compressor = compressor
        self.error_feedback = error_feedback
        self.memory = np.zeros(compressor.dim, dtype=np.float32)

    def encode(self, update: Tensor, *, round: int, file: int) -> bytes:
        """Compress one file's update (plus the carried error, with error feedback)."""
        flat = update.detach().to(torch.float32).numpy()
        seed = stream_seed(self.run_seed, round, file)
        if not self.error_feedback:
            return self.compressor.encode(flat, seed=seed)
        compensated = np.add(flat, self.memory, dtype=np.float32)
        payload = self.compressor.encode(compensated, seed=seed)
        self.memory = np.subtract(compensated, self.compressor.decode(payload), dtype=np.float32)
        return payload


class BaselineChannel(PlainChannel):
    """The plain channel (full weights down) whose decoder reads a baseline's payloads."""

    def __init__(self, params: Tensor, compressor: Compressor) -> None:
        super().__init__(params)
        if compressor.dim != self.dim:
            raise ValueError(f"compressor is for {compressor.dim} values, the model has {self.dim}")
        self.compressor = compressor

    @property
    def decoder(self) -> Decoder:
        """Decode a payload; a payload the compressor refuses rejects the reply."""

        def decode(payload: bytes) -> Tensor:
            try:
                return torch.from_numpy(self.compressor.decode(payload))
            except ValueError as exc:
                raise ReplyRejectedError("malformed_reply", str(exc)) from exc

        return decode
