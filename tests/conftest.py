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
    """Start every test process on its share of the slow tests, the rest after them.

    The slow tests are the real-process ones (``tests/system`` first, then the others
    marked ``slow``). ``--dist worksteal`` first cuts the collection into one
    contiguous range per test process, and a process that runs out steals from the
    end of another's range. With every slow test at the front, one process ran them
    all, one after the other (about 19 of the suite's 19 minutes), while the other
    took the short tests. So the slow tests are dealt out in turn, each range
    starting with its share and filled up with short tests, in collection order.
    Without xdist the order is the slow tests, then the rest.
    """
    slow = sorted(
        (item for item in items if item.get_closest_marker("slow") is not None),
        key=lambda item: not item.nodeid.startswith("tests/system/"),
    )
    chosen = {id(item) for item in slow}
    rest = iter([item for item in items if id(item) not in chosen])
    processes = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    ordered: list[pytest.Item] = []
    left = len(items)
    for process in range(processes):
        size = left // (processes - process)  # as worksteal cuts its first ranges
        share = slow[process::processes]
        ordered += share + [item for _, item in zip(range(size - len(share)), rest, strict=False)]
        left -= size
    ordered += list(rest)
    items[:] = ordered


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
