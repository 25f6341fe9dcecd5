"""The data of a run launched through the API: confined to the datasets directory, checked.

An ``idx:``/``npz:`` path from a request must resolve, symlinks and ``..``
followed, inside the server's datasets directory (``PHALANX_DATASETS_DIR``);
otherwise the answer is one 422 whose message is the same whether the path
exists or not, so the API tells nobody which files the host holds. The run is
stored with the path relative to that directory, which the coordinator
resolves against its own.

When the data is present here, it is checked as ``phalanx run`` checks it
(:func:`phalanx.preflight.check_run_data`) and bad data is a 422 naming the file,
the key and the fix. When it is not (the API and the coordinator may run on
different hosts), the coordinator checks it before executing the run.
"""

from __future__ import annotations

from pathlib import Path

from phalanx.config import RunConfig
from phalanx.data_checks import DataError
from phalanx.data_files import DatasetOutsideError, confined_dataset
from phalanx.preflight import check_run_data
from phalanx.redaction import redact_host_paths
from phalanx_api.errors import InvalidInputError

DATASET_LOC = ("body", "data", "dataset")
"""Where data refusals point in a 422."""
TRACE_LOC = ("body", "systems", "trace")
TRACE_FROM_THE_HOST = (
    "systems.trace names a file on the coordinator's host, which runs launched through the "
    "API may not read; simulate the devices with the systems section's distributions, or "
    "start the run with `phalanx run` on that host"
)
"""The answer to a device trace in a run launched through the API."""


def screened_data(config: RunConfig, datasets_dir: Path) -> RunConfig:
    """Return ``config`` with its dataset confined to ``datasets_dir`` and checked.

    Parameters
    ----------
    config : RunConfig
        The launched config.
    datasets_dir : Path
        The server's datasets directory.

    Returns
    -------
    RunConfig
        ``config``, its ``idx:``/``npz:`` path made relative to ``datasets_dir``.

    Raises
    ------
    InvalidInputError
        When the path lies outside ``datasets_dir``, the data is present and
        breaks a rule of :mod:`phalanx.data_checks`, or the config names a device
        trace (a file of the host).
    """
    if config.systems.trace is not None:
        raise InvalidInputError(TRACE_FROM_THE_HOST, loc=TRACE_LOC)
    try:
        dataset = confined_dataset(config.data.dataset, datasets_dir)
    except DatasetOutsideError as exc:
        raise _refused(str(exc)) from exc
    if dataset != config.data.dataset:
        data = config.data.model_copy(update={"dataset": dataset})
        config = config.model_copy(update={"data": data})
    try:
        check_run_data(config, root=datasets_dir)
    except OSError:
        pass  # absent or unreadable here: the coordinator checks it where it runs
    except DataError as exc:
        raise _refused(str(exc)) from exc
    return config


def _refused(message: str) -> InvalidInputError:
    return InvalidInputError(redact_host_paths(message), loc=DATASET_LOC)
