"""Fixtures every part of the suite uses; the others live in ``tests/fixtures/<topic>.py``.

Those modules are loaded here as plugins, so a fixture has one definition and one
meaning wherever a test asks for it. Helpers that are not fixtures live in
``tests/support/``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

# One thread for torch's and the BLAS's parallel regions, here and in every process a
# test starts: two test processes and their SuperLinks, ClientApps and Ray actors share
# two cores, and OpenMP threads spin while they wait for one. Beside two busy processes
# a module of in-process runs took 4.7x its time alone with the default thread count,
# 1.7x with one thread. Tests that compare float sums bit for bit fix the count anyway.
for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import settings  # noqa: E402

from phalanx.config import RunConfig  # noqa: E402
from phalanx.settings import get_settings  # noqa: E402
from tests.support.configs import small_config  # noqa: E402
from tests.support.plugin_files import PluginFiles  # noqa: E402

torch.set_num_threads(1)

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
