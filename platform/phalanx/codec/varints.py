"""Varints (unsigned LEB128, zigzag for signed values) and the bounds-checked payload reader.

See :mod:`phalanx.codec.bitstream` for where the format uses them.
"""

from __future__ import annotations

import struct

import numpy as np

from .entropy import IntArray
from .errors import CodecError

MAX_VARINT_BYTES = 5
_FEW = 64
"""Up to this many varints, a Python loop beats the vectorised code's fixed cost."""
_SCAN = 1 << 14
"""Bytes scanned at a time for the end of a run of varints."""


def encode_varint(value: int) -> bytes:
    """Unsigned LEB128 encoding of ``0 <= value < 2**35``."""
    if not 0 <= value < 1 << (7 * MAX_VARINT_BYTES):
        raise ValueError(f"varint out of range: {value}")
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def zigzag(value: int) -> int:
    """Map a signed integer to an unsigned one: ``0, -1, 1, -2, 2 -> 0, 1, 2, 3, 4``."""
    return 2 * value if value >= 0 else -2 * value - 1


def unzigzag(value: int) -> int:
    """Inverse of :func:`zigzag`."""
    return value >> 1 if value % 2 == 0 else -((value + 1) >> 1)


def encode_varints(values: IntArray) -> bytes:
    """Unsigned LEB128 of every entry of ``values`` (each ``< 2**35``); vectorised unless few."""
    v = np.asarray(values, dtype=np.uint64)
    if v.size == 0:
        return b""
    if int(v.max()) >= 1 << (7 * MAX_VARINT_BYTES):
        raise ValueError("varint out of range")
    if v.size <= _FEW:
        return b"".join(encode_varint(int(x)) for x in v.tolist())
    lengths = np.ones(v.size, dtype=np.int64)
    for k in range(1, MAX_VARINT_BYTES):
        lengths += (v >> np.uint64(7 * k)) > 0
    owner = np.repeat(np.arange(v.size), lengths)
    starts = np.cumsum(lengths) - lengths
    position = np.arange(int(lengths.sum())) - np.repeat(starts, lengths)
    payload = (v[owner] >> (np.uint64(7) * position.astype(np.uint64))) & np.uint64(0x7F)
    more = (position < lengths[owner] - 1).astype(np.uint64) << np.uint64(7)
    return (payload | more).astype(np.uint8).tobytes()


class Reader:
    """Bounds-checked cursor over a payload; every read raises :class:`CodecError` past the end."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.view = np.frombuffer(data, dtype=np.uint8)
        self.pos = 0

    @property
    def remaining(self) -> int:
        """Bytes not read yet."""
        return len(self.data) - self.pos

    def take(self, size: int, what: str) -> bytes:
        """Read the next ``size`` bytes."""
        if size < 0 or size > self.remaining:
            raise CodecError(f"truncated: {what} needs {size} bytes, {self.remaining} left")
        out = self.data[self.pos : self.pos + size]
        self.pos += size
        return out

    def u8(self, what: str) -> int:
        """One unsigned byte."""
        return self.take(1, what)[0]

    def f32(self, what: str) -> float:
        """One little-endian ``float32``."""
        value: float = struct.unpack("<f", self.take(4, what))[0]
        return value

    def varint(self, what: str) -> int:
        """One unsigned LEB128 integer of at most :data:`MAX_VARINT_BYTES` bytes."""
        value = 0
        for k in range(MAX_VARINT_BYTES):
            byte = self.u8(what)
            value |= (byte & 0x7F) << (7 * k)
            if byte < 0x80:
                if k > 0 and byte == 0:
                    raise CodecError(f"{what}: varint is not in its shortest form")
                return value
        raise CodecError(f"{what}: varint longer than {MAX_VARINT_BYTES} bytes")

    def varints(self, count: int, what: str) -> IntArray:
        """``count`` unsigned LEB128 integers; vectorised unless there are only a few."""
        if count > self.remaining:
            raise CodecError(f"truncated: {count} {what} need at least {count} bytes")
        if count <= _FEW:
            return np.array([self.varint(what) for _ in range(count)], dtype=np.int64)
        window = self.view[self.pos : self.pos + count * MAX_VARINT_BYTES]
        ends = np.flatnonzero(window < 0x80)[:count]
        if ends.size < count:
            raise CodecError(f"truncated: fewer than {count} {what}")
        lengths = np.diff(ends, prepend=-1)
        if int(lengths.max(initial=1)) > MAX_VARINT_BYTES:
            raise CodecError(f"{what}: varint longer than {MAX_VARINT_BYTES} bytes")
        last = window[ends]
        if bool(((lengths > 1) & (last == 0)).any()):
            raise CodecError(f"{what}: varint is not in its shortest form")
        used = int(ends[-1]) + 1 if count else 0
        chunk = window[:used].astype(np.int64)
        owner = np.repeat(np.arange(count), lengths)
        starts = ends - lengths + 1
        position = np.arange(used) - np.repeat(starts, lengths)
        values = np.zeros(count, dtype=np.int64)
        np.add.at(values, owner, (chunk & 0x7F) << (7 * position))
        self.pos += used
        return values

    def skip_varints(self, count: int, what: str) -> None:
        """Move past ``count`` varints without reading them, a bounded window at a time.

        Only their last bytes are counted (:meth:`varints` checks their form
        when they are read), in at most ``MAX_VARINT_BYTES * count`` bytes.
        """
        if count > self.remaining:
            raise CodecError(f"truncated: {count} {what} need at least {count} bytes")
        left = count
        while left:
            # `left` varints of at most MAX_VARINT_BYTES bytes end within this many bytes.
            span = MAX_VARINT_BYTES * left
            window = self.view[self.pos : self.pos + min(span, _SCAN)]
            last = window < 0x80
            found = int(np.count_nonzero(last))
            if found >= left:
                self.pos += int(np.flatnonzero(last)[left - 1]) + 1
                return
            if window.size < min(span, _SCAN):
                raise CodecError(f"truncated: fewer than {count} {what}")
            if window.size == span:
                raise CodecError(f"{what}: varint longer than {MAX_VARINT_BYTES} bytes")
            left -= found
            self.pos += window.size
