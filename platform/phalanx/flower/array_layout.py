"""An ``ArrayRecord`` as one float32 vector, and back, refusing what does not fit."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from flwr.app import Array, ArrayRecord
from torch import Tensor

from phalanx.flower.flags import MalformedReplyError


@dataclass(frozen=True)
class ArrayLayout:
    """Keys, shapes and dtypes of an ``ArrayRecord``, in order: how it maps to one vector.

    Attributes
    ----------
    keys : tuple of str
        Array keys, in the record's order (the order of the flat vector).
    shapes : tuple of tuple of int
        Shape of each array.
    dtypes : tuple of str
        NumPy dtype of each array, restored by `rebuild`.
    """

    keys: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]

    @classmethod
    def of(cls, record: ArrayRecord) -> ArrayLayout:
        """Read the layout of ``record``.

        Raises
        ------
        MalformedReplyError
            When an array cannot be decoded or is not numeric.
        """
        arrays = _decode(record)
        return cls(
            keys=tuple(arrays),
            shapes=tuple(a.shape for a in arrays.values()),
            dtypes=tuple(a.dtype.str for a in arrays.values()),
        )

    @property
    def signature(self) -> frozenset[tuple[str, tuple[int, ...]]]:
        """What two records must share to be aggregated together: keys and shapes."""
        return frozenset(zip(self.keys, self.shapes, strict=True))

    @property
    def size(self) -> int:
        """Number of values in the flat vector."""
        return sum(math.prod(s) for s in self.shapes)

    def flatten(self, record: ArrayRecord) -> Tensor:
        """Concatenate the arrays of ``record``, in this layout's order, as float32.

        Raises
        ------
        MalformedReplyError
            ``"layout"`` when keys or shapes differ, ``"nonfinite"`` on NaN or Inf
            (including float64 values beyond float32's range), ``"malformed"`` when an
            array cannot be decoded.
        """
        arrays = _decode(record)
        shapes = dict(zip(self.keys, self.shapes, strict=True))
        if set(arrays) != set(shapes):
            missing, extra = sorted(set(shapes) - set(arrays)), sorted(set(arrays) - set(shapes))
            raise MalformedReplyError(
                "layout", f"array keys differ from the model's (missing {missing}, extra {extra})"
            )
        for key, shape in shapes.items():
            if arrays[key].shape != shape:
                raise MalformedReplyError(
                    "layout",
                    f"array {key!r} has shape {arrays[key].shape}, the model's is {shape}",
                )
        with np.errstate(over="ignore", invalid="ignore"):
            parts = [arrays[key].astype(np.float32, copy=False).ravel() for key in self.keys]
        flat = np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
        if not bool(np.isfinite(flat).all()):
            raise MalformedReplyError("nonfinite", "its arrays hold NaN or Inf")
        return torch.from_numpy(np.ascontiguousarray(flat))

    def rebuild(self, vector: Tensor) -> ArrayRecord:
        """Inverse of `flatten`: arrays with this layout's keys, shapes and dtypes.

        Integer arrays are rounded to the nearest integer, boolean ones thresholded at 1/2.
        """
        if tuple(vector.shape) != (self.size,):
            raise ValueError(
                f"vector has shape {tuple(vector.shape)}, the layout needs ({self.size},)"
            )
        flat = vector.detach().cpu().numpy()
        arrays: dict[str, Array] = {}
        start = 0
        for key, shape, dtype in zip(self.keys, self.shapes, self.dtypes, strict=True):
            stop = start + math.prod(shape)
            arrays[key] = Array(_cast(flat[start:stop].reshape(shape), np.dtype(dtype)))
            start = stop
        return ArrayRecord(arrays)


def _decode(record: ArrayRecord) -> dict[str, npt.NDArray[Any]]:
    arrays: dict[str, npt.NDArray[Any]] = {}
    for key, array in record.items():
        try:
            value = array.numpy()
        except Exception as exc:  # adversarial bytes: any failure to decode is a rejection
            raise MalformedReplyError(
                "malformed", f"array {key!r} cannot be decoded ({exc})"
            ) from exc
        if value.dtype.kind not in "biuf":
            raise MalformedReplyError(
                "malformed", f"array {key!r} has non-numeric dtype {value.dtype}"
            )
        arrays[key] = value
    return arrays


def _cast(values: npt.NDArray[np.float32], dtype: np.dtype[Any]) -> npt.NDArray[Any]:
    if dtype.kind == "b":
        return values >= 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.clip(np.rint(values), info.min, info.max).astype(dtype)
    return values.astype(dtype)
