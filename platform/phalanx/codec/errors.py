"""The one error the decoder raises."""

from __future__ import annotations


class CodecError(ValueError):
    """A bitstream that does not decode against the expected model and history.

    Raised for every malformed, truncated, mutated or mismatched payload: wrong
    magic or version, a layer table that disagrees with the expected model
    shapes, a history fingerprint from another round, declared sizes that
    exceed the bytes present, symbol ranges out of bounds, or a payload the
    entropy coder cannot consume exactly. Subclasses :class:`ValueError`, so a
    caller that already rejects bad input with ``ValueError`` catches it too.
    """
