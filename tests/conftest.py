"""Shared fixtures."""

from __future__ import annotations

import pytest
from hypothesis import settings

from phalanx.config import RunConfig
from tests.configs import small_config

# Hypothesis's per-example deadline is a wall-clock assertion; these machines are shared.
settings.register_profile("phalanx", deadline=None)
settings.load_profile("phalanx")


@pytest.fixture
def digits_config() -> RunConfig:
    return small_config()
