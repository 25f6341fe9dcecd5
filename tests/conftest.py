"""Shared fixtures."""

from __future__ import annotations

import pytest

from phalanx.config import RunConfig
from tests.configs import small_config


@pytest.fixture
def digits_config() -> RunConfig:
    return small_config()
