"""A simulation prints only what a run has to say, and leaves no Ray session folder behind.

Fast: Flower's and Ray's notices are emitted here as they word them, and
``run_simulation`` is replaced by a double; ``tests/phalanx_cli/test_runs.py``
checks a real run's output end to end.
"""

from __future__ import annotations

import io
import logging
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flwr.common.logger import FLOWER_LOGGER, ConsoleHandler, warn_deprecated_feature

from phalanx.flower import simulation
from phalanx.flower.simulation import (
    SimulationEngine,
    hide_deprecation_warnings,
    quiet_flower,
    ray_temp_dir,
)
from phalanx.roster import SimulatedRoster
from tests.support.configs import small_config

RUN_SIMULATION_NOTICE = (
    "The `run_simulation` function is deprecated and will be removed in a future version of "
    "Flower. Please use `flwr run` in the CLI instead to run your simulation."
)
RAY_TIP = (
    "Tip: In future versions of Ray, Ray will no longer override accelerator visible devices "
    "env var if num_gpus=0 or num_gpus=None (default). To enable this behavior and turn off "
    "this error message, set RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO=0"
)


class FakeTerminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def flower_log() -> Iterator[list[logging.LogRecord]]:
    """The records Flower's logger lets through, while the test runs."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep(logging.DEBUG)
    FLOWER_LOGGER.addHandler(handler)
    yield records
    FLOWER_LOGGER.removeHandler(handler)


def test_flowers_run_simulation_notice_is_dropped_and_nothing_else(
    flower_log: list[logging.LogRecord],
) -> None:
    with quiet_flower():
        warn_deprecated_feature(RUN_SIMULATION_NOTICE)
        warn_deprecated_feature("Another feature is deprecated.")
        FLOWER_LOGGER.warning("a round was slow")
    shown = [record.getMessage() for record in flower_log]
    assert len(shown) == 2
    assert "Another feature" in shown[0] and shown[1] == "a round was slow"
    warn_deprecated_feature(RUN_SIMULATION_NOTICE)  # outside a simulation, Flower's as ever
    assert "run_simulation" in flower_log[-1].getMessage()


@pytest.mark.parametrize(("stream", "coloured"), [(io.StringIO(), False), (FakeTerminal(), True)])
def test_flowers_log_is_coloured_only_on_a_terminal(stream: io.StringIO, coloured: bool) -> None:
    handler = ConsoleHandler(colored=True, stream=stream)
    FLOWER_LOGGER.addHandler(handler)
    try:
        with quiet_flower():
            FLOWER_LOGGER.warning("a round was slow")
        assert handler.colored  # as Flower had it, once the simulation is over
    finally:
        FLOWER_LOGGER.removeHandler(handler)
    assert ("\x1b[" in stream.getvalue()) is coloured
    assert "a round was slow" in stream.getvalue()


def test_rays_accelerator_tip_is_ignored_and_other_warnings_are_not() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with quiet_flower():
            warnings.warn_explicit(RAY_TIP, FutureWarning, "worker.py", 1, "ray._private.worker")
            warnings.warn_explicit(RAY_TIP, FutureWarning, "lab.py", 1, "lab")
            warnings.warn_explicit("other", FutureWarning, "worker.py", 2, "ray._private.worker")
    assert [(str(w.message)[:3], Path(w.filename).name) for w in caught] == [
        ("Tip", "lab.py"),
        ("oth", "worker.py"),
    ]


@pytest.mark.parametrize(("options", "shown"), [([], ["mine"]), (["default"], ["theirs", "mine"])])
def test_other_libraries_deprecation_warnings_are_hidden_again_unless_asked_for(
    options: list[str], shown: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "warnoptions", options)  # -W or PYTHONWARNINGS
    with warnings.catch_warnings(record=True) as caught:
        warnings.resetwarnings()
        warnings.filterwarnings("once", category=DeprecationWarning)  # what Flower adds
        hide_deprecation_warnings()
        warnings.warn_explicit("theirs", DeprecationWarning, "lib.py", 1, "websockets.legacy")
        warnings.warn_explicit("mine", DeprecationWarning, "script.py", 1, "__main__")
    assert [str(w.message) for w in caught] == shown


def test_rays_folder_is_removed_with_its_contents_even_when_the_run_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    with pytest.raises(RuntimeError), ray_temp_dir() as folder:
        assert folder.parent == tmp_path
        (folder / "session_1" / "logs").mkdir(parents=True)
        (folder / "session_1" / "logs" / "raylet.out").write_text("...")
        raise RuntimeError("the run failed")
    assert list(tmp_path.iterdir()) == []


class FakeRunSimulation:
    """Stands in for Flower's ``run_simulation``: keeps what Ray would be started with."""

    def __init__(self) -> None:
        self.init_args: dict[str, Any] = {}
        self.existed = False

    def __call__(self, **kwargs: Any) -> None:
        self.init_args = kwargs["backend_config"]["init_args"]
        temp_dir = self.init_args.get("_temp_dir")
        self.existed = temp_dir is not None and Path(temp_dir).is_dir()


def _connect(engine: SimulationEngine, monkeypatch: pytest.MonkeyPatch) -> FakeRunSimulation:
    fake = FakeRunSimulation()
    monkeypatch.setattr(simulation, "run_simulation", fake)
    monkeypatch.setattr(simulation, "reach_ray", lambda address: None)  # no cluster is run
    engine.connect(small_config(), SimulatedRoster("run"), lambda roster, transport: None)
    return fake


def test_a_local_ray_keeps_its_session_in_a_folder_of_the_run_removed_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    fake = _connect(SimulationEngine(), monkeypatch)
    assert fake.init_args["address"] == "local" and fake.existed
    assert Path(fake.init_args["_temp_dir"]).parent == tmp_path
    assert list(tmp_path.iterdir()) == []


def test_a_ray_cluster_keeps_its_own_folders(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _connect(SimulationEngine(ray_address="127.0.0.1:6379"), monkeypatch)
    assert fake.init_args["address"] == "127.0.0.1:6379"
    assert "_temp_dir" not in fake.init_args
