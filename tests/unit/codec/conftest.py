"""Fixtures of the codec tests."""

from __future__ import annotations

import pytest

from phalanx.codec import LayerLayout, layer_layout
from tests.unit.codec.codec_builders import SPEC


@pytest.fixture
def layout() -> LayerLayout:
    return layer_layout(SPEC)
