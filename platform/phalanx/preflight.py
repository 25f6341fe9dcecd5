"""A run's data checked against its config before the run is recorded or started.

``phalanx run``, ``phalanx demo``, the API's launch and ``phalanx coordinator``
all call :func:`check_run_data` first, so bad data is refused in one line
before a database row, a checkpoint or a Ray worker exists.
"""

from __future__ import annotations

from pathlib import Path

from phalanx.assignment import count_files
from phalanx.config import RunConfig
from phalanx.data_checks import DataError, DatasetFacts
from phalanx.data_files import check_dataset

CNN_MIN_IMAGE_SIZE = 4
"""Smallest image side the ``cnn`` model takes (it pools twice by 2)."""


def round_batch_size(config: RunConfig) -> int:
    """Return the samples one round draws from the training split (per file x files)."""
    a = config.assignment
    files = count_files(a.scheme, a.num_workers, a.r, num_files=a.num_files)
    return config.data.samples_per_file * files


def check_run_data(config: RunConfig, root: Path | None = None) -> DatasetFacts:
    """Read the run's dataset once and check it against the run's config.

    Parameters
    ----------
    config : RunConfig
        The run; ``data.dataset``, ``data.num_classes``, ``data.model``, the
        batch size and the assignment's files per round are checked (with local
        data in simulation: a sample at least for every client's part of the
        partition).
    root : Path, optional
        The datasets directory (see :func:`phalanx.data.datasets_dir`).

    Returns
    -------
    DatasetFacts
        What the data holds, to report.

    Raises
    ------
    phalanx.data.DatasetNotFoundError
        When the data is missing.
    DataError
        When the data breaks a rule of :mod:`phalanx.data_checks` or does not
        fit the model.
    """
    local = config.data.mode == "local"
    facts = check_dataset(
        config.data.dataset,
        num_classes=config.data.num_classes,
        batch_size=1 if local else round_batch_size(config),
        root=root,
    )
    clients = config.assignment.num_workers
    # A deployed client trains on its own data: the run's dataset gives the model and the
    # evaluation only, so the parts are counted in simulation alone.
    if local and config.deployment.backend == "simulation" and facts.train_size < clients:
        raise DataError(
            f"{config.data.dataset}: {facts.train_size} training samples for {clients} clients; "
            "data.mode = 'local' gives each client a part of at least one sample: lower "
            "assignment.num_workers or give more data"
        )
    side = facts.shape[1]
    if config.data.model == "cnn" and side < CNN_MIN_IMAGE_SIZE:
        raise DataError(
            f"{config.data.dataset}: {side}x{side} images are too small for data.model='cnn' "
            f"(it pools twice by 2, so it needs {CNN_MIN_IMAGE_SIZE}x{CNN_MIN_IMAGE_SIZE} or "
            "more); use data.model='mlp'"
        )
    return facts
