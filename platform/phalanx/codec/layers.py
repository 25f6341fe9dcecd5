"""The model's layer layout, and moving updates between flat and per-layer form.

A model is described by its named layers and their shapes, in a fixed order::

    [("conv1.weight", (32, 1, 3, 3)), ("conv1.bias", (32,)), ...]

An update is either one flat ``float32`` vector with the layers laid end to end
in that order, or a sequence with one array (or CPU tensor) per layer.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

LayerSpec: TypeAlias = Sequence[tuple[str, Sequence[int]]]
"""``[(name, shape), ...]`` in the model's parameter order."""

FloatArray: TypeAlias = npt.NDArray[np.float32]

MAX_NDIM = 32
"""Most dimensions a layer may have (the bitstream stores ``ndim`` in one byte)."""

MAX_PARAMETERS = 1 << 34
"""Largest model the codec accepts, in parameters."""


@dataclass(frozen=True)
class LayerLayout:
    """Names, shapes and flat offsets of a model's layers.

    Build one with :func:`layer_layout`; it is immutable and hashable, so the
    same spec always gives an equal layout with the same :attr:`fingerprint`.

    Parameters
    ----------
    names : tuple of str
        Layer names, unique, in parameter order.
    shapes : tuple of tuple of int
        Shape of each layer.
    """

    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    sizes: tuple[int, ...] = field(init=False)
    offsets: tuple[int, ...] = field(init=False)
    fingerprint: bytes = field(init=False)

    def __post_init__(self) -> None:
        if len(self.names) != len(self.shapes):
            raise ValueError(f"{len(self.names)} names for {len(self.shapes)} shapes")
        if not self.names:
            raise ValueError("a layer layout needs at least one layer")
        if len(set(self.names)) != len(self.names):
            raise ValueError("layer names must be unique")
        sizes = []
        for name, shape in zip(self.names, self.shapes, strict=True):
            if len(shape) > MAX_NDIM:
                raise ValueError(f"layer {name!r} has {len(shape)} dimensions, at most {MAX_NDIM}")
            if any(d < 0 for d in shape):
                raise ValueError(f"layer {name!r} has a negative dimension: {shape}")
            sizes.append(int(np.prod(shape, dtype=np.int64)))
        offsets = [0]
        for size in sizes:
            offsets.append(offsets[-1] + size)
        if offsets[-1] > MAX_PARAMETERS:
            raise ValueError(f"model has {offsets[-1]} parameters, at most {MAX_PARAMETERS}")
        digest = hashlib.sha256()
        for name, shape in zip(self.names, self.shapes, strict=True):
            encoded = name.encode("utf-8")
            digest.update(struct.pack("<I", len(encoded)) + encoded)
            digest.update(struct.pack(f"<B{len(shape)}Q", len(shape), *shape))
        object.__setattr__(self, "sizes", tuple(sizes))
        object.__setattr__(self, "offsets", tuple(offsets))
        object.__setattr__(self, "fingerprint", digest.digest()[:4])

    @property
    def total(self) -> int:
        """Number of parameters in the model."""
        return self.offsets[-1]

    def __len__(self) -> int:
        return len(self.names)

    def slice(self, layer: int) -> slice:
        """Position of ``layer`` inside the flat vector."""
        return slice(self.offsets[layer], self.offsets[layer + 1])


def layer_layout(layers_spec: LayerSpec | LayerLayout) -> LayerLayout:
    """Layout of a model given as ``[(name, shape), ...]``.

    Parameters
    ----------
    layers_spec : sequence of (str, sequence of int), or LayerLayout
        The model's layers in parameter order; a :class:`LayerLayout` is
        returned as it is.

    Returns
    -------
    LayerLayout
        Cached per distinct spec, so repeated calls cost a dictionary lookup.
    """
    if isinstance(layers_spec, LayerLayout):
        return layers_spec
    try:
        key = tuple((str(name), tuple(int(d) for d in shape)) for name, shape in layers_spec)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            "layers_spec must be a sequence of (name, shape) pairs, "
            'e.g. [("fc.weight", (10, 784)), ("fc.bias", (10,))]'
        ) from exc
    return _cached_layout(key)


@lru_cache(maxsize=64)
def _cached_layout(key: tuple[tuple[str, tuple[int, ...]], ...]) -> LayerLayout:
    return LayerLayout(tuple(n for n, _ in key), tuple(s for _, s in key))


def _as_float32(values: Any, what: str) -> FloatArray:
    try:
        return np.ascontiguousarray(values, dtype=np.float32)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise TypeError(
            f"{what} is not convertible to a float32 array "
            "(pass numpy arrays or detached CPU tensors)"
        ) from exc


def flatten_update(update: Any, layers_spec: LayerSpec | LayerLayout) -> FloatArray:
    """One contiguous ``float32`` vector holding every layer of ``update``.

    Parameters
    ----------
    update : array_like or sequence of array_like
        Either a flat vector of the model's size, or a list or tuple with one
        array per layer whose shapes match ``layers_spec``. CPU torch tensors
        work wherever arrays do.
    layers_spec : sequence of (str, sequence of int), or LayerLayout
        The model's layers.

    Returns
    -------
    numpy.ndarray
        Shape ``(total,)``, ``float32``. A contiguous ``float32`` flat input is
        returned without a copy.
    """
    layout = layer_layout(layers_spec)
    if isinstance(update, (list, tuple)):
        if len(update) != len(layout):
            raise ValueError(f"update has {len(update)} layers, the model has {len(layout)}")
        flat = np.empty(layout.total, dtype=np.float32)
        for i, (name, shape, layer) in enumerate(
            zip(layout.names, layout.shapes, update, strict=True)
        ):
            array = _as_float32(layer, f"layer {name!r}")
            if array.shape != shape:
                raise ValueError(f"layer {name!r} has shape {array.shape}, expected {shape}")
            flat[layout.slice(i)] = array.reshape(-1)
        return flat
    flat = _as_float32(update, "update")
    if flat.shape != (layout.total,):
        raise ValueError(
            f"a flat update must have shape ({layout.total},), got {flat.shape}; "
            "pass a list of per-layer arrays instead"
        )
    return flat


def split_flat(flat: FloatArray, layers_spec: LayerSpec | LayerLayout) -> list[FloatArray]:
    """Per-layer views of a flat vector, each reshaped to its layer's shape.

    Parameters
    ----------
    flat : numpy.ndarray
        Shape ``(total,)``.
    layers_spec : sequence of (str, sequence of int), or LayerLayout
        The model's layers.

    Returns
    -------
    list of numpy.ndarray
        Views sharing ``flat``'s memory, no copies.
    """
    layout = layer_layout(layers_spec)
    if flat.shape != (layout.total,):
        raise ValueError(f"flat vector has shape {flat.shape}, expected ({layout.total},)")
    return [flat[layout.slice(i)].reshape(shape) for i, shape in enumerate(layout.shapes)]
