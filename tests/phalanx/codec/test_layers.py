from __future__ import annotations

import numpy as np
import pytest

from phalanx.codec import flatten_update, layer_layout, split_flat
from tests.support.codec_builders import SPEC


def test_flatten_then_split_returns_each_layer_in_its_shape(layout):
    rng = np.random.default_rng(0)
    layers = [rng.standard_normal(shape).astype(np.float32) for shape in layout.shapes]
    flat = flatten_update(layers, layout)
    assert flat.shape == (layout.total,)
    for original, view in zip(layers, split_flat(flat, layout), strict=True):
        assert view.shape == original.shape
        np.testing.assert_array_equal(view, original)


def test_flat_float32_input_is_not_copied(layout):
    flat = np.zeros(layout.total, dtype=np.float32)
    assert flatten_update(flat, layout) is flat


def test_float64_layers_are_converted_to_float32(layout):
    layers = [np.full(shape, 0.1, dtype=np.float64) for shape in layout.shapes]
    flat = flatten_update(layers, layout)
    assert flat.dtype == np.float32
    assert flat[0] == np.float32(0.1)


def test_a_layer_of_the_wrong_shape_is_refused_by_name(layout):
    layers = [np.zeros(shape, dtype=np.float32) for shape in layout.shapes]
    layers[2] = np.zeros((200, 10), dtype=np.float32)
    with pytest.raises(ValueError, match=r"fc\.weight"):
        flatten_update(layers, layout)


def test_a_flat_update_of_the_wrong_size_is_refused(layout):
    with pytest.raises(ValueError, match="flat update"):
        flatten_update(np.zeros(layout.total + 1, dtype=np.float32), layout)


def test_layout_offsets_and_total_follow_the_spec(layout):
    assert layout.sizes == (72, 8, 2000, 10)
    assert layout.offsets == (0, 72, 80, 2080, 2090)
    assert layout.total == 2090


def test_the_same_spec_gives_the_same_fingerprint_and_a_renamed_layer_another():
    renamed = [("conv.w", (8, 1, 3, 3)), *SPEC[1:]]
    assert layer_layout(SPEC).fingerprint == layer_layout(list(SPEC)).fingerprint
    assert layer_layout(SPEC).fingerprint != layer_layout(renamed).fingerprint


def test_duplicate_layer_names_are_refused():
    with pytest.raises(ValueError, match="unique"):
        layer_layout([("a", (2,)), ("a", (3,))])
