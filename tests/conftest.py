"""Fixtures every part of the suite uses; the others live in ``tests/fixtures/<topic>.py``.

Those modules are loaded here as plugins, so a fixture has one definition and one
meaning wherever a test asks for it. Helpers that are not fixtures live in
``tests/support/``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from phalanx.config import RunConfig
from phalanx.settings import get_settings
from tests.support.configs import small_config
from tests.support.plugin_files import PluginFiles

pytest_plugins = [
    "tests.fixtures.database",
    "tests.fixtures.api",
    "tests.fixtures.browser",
    "tests.fixtures.codec",
    "tests.fixtures.deployment",
    "tests.fixtures.ray",
]

# Hypothesis's per-example deadline is a wall-clock assertion; these machines are shared.
settings.register_profile("phalanx", deadline=None)
settings.load_profile("phalanx")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the slow tests first (the real-process ones of ``tests/system`` before the
    others), the rest in collection order.

    With ``-n 2 --dist worksteal`` a test that takes minutes and starts last keeps one
    worker busy after the other has finished; started first, the other worker takes the
    short tests meanwhile and the suite ends with short ones.
    """
    items.sort(
        key=lambda item: (
            item.get_closest_marker("slow") is None,
            not item.nodeid.startswith("tests/system/"),
        )
    )


@pytest.fixture
def digits_config() -> RunConfig:
    return small_config()


@pytest.fixture
def allow_attack_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., None]]:
    """Set this host's ``PHALANX_ATTACK_PLUGINS`` for one test; none are allowed until called."""

    def allow(*references: str) -> None:
        monkeypatch.setenv("PHALANX_ATTACK_PLUGINS", ",".join(references))
        get_settings.cache_clear()

    monkeypatch.delenv("PHALANX_ATTACK_PLUGINS", raising=False)
    get_settings.cache_clear()
    yield allow
    get_settings.cache_clear()


@pytest.fixture
def plugin_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[PluginFiles]:
    """A folder on ``sys.path`` for plug-in modules and distributions (:class:`PluginFiles`)."""
    files = PluginFiles(tmp_path / "plugins", monkeypatch)
    yield files
    files.forget()
