"""A deployed client's own data (``data.mode = "local"``): the ``data-path`` of its node config.

In a deployment every client trains on data only it holds. Its SuperNode names the
data in its node config (``data-path``, see
:mod:`phalanx.flower.deployment.node_config`), in any form :mod:`phalanx.data` reads:

``npz:PATH`` or a bare ``PATH`` ending in ``.npz``
    An archive with ``x_train`` and ``y_train`` (its ``x_test`` / ``y_test``, if
    any, are the node's own test split).
``idx:DIR`` or a bare directory ``DIR``
    The MNIST-format IDX files ``train-images-idx3-ubyte`` and
    ``train-labels-idx1-ubyte`` (optionally ``.gz``).
``digits`` or ``fashion-mnist``
    A whole built-in training split (for demonstrations: every such node holds
    the same data).

A relative path is relative to the node's datasets directory
(``PHALANX_DATASETS_DIR``) and must stay inside it, as everywhere in
:mod:`phalanx.data`. The coordinator never reads this data and nothing it sends
names a file: the task carries only the run's :class:`~phalanx.data_mode.ModelShape`,
which :func:`load_node_data` checks the data against.

Two ways to fail, told apart because they are different people's problems:

* :class:`NodeDataError`: the node names no data, or its data is missing,
  unreadable or malformed. The node's setup is at fault; its operator fixes it.
* :class:`~phalanx.local_training.ModelDataMismatchError`: the data is fine but does
  not fit this run's model (other image shape, a label beyond the model's classes).
  The coordinator records it as a ``data_mismatch`` fault, a run problem.

Neither is misbehaviour: a worker reports either as a fault, never as a lie.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt

from phalanx.data import ImageDataset, build_dataset, normalisation
from phalanx.data_checks import MAX_CLASSES, DataError, RawSplit, checked_split
from phalanx.data_files import KNOWN_NUM_CLASSES, DatasetNotFoundError, read_split
from phalanx.data_mode import ModelShape
from phalanx.local_training import ModelDataMismatchError

__all__ = [
    "NODE_DATA_NAME",
    "NodeDataError",
    "check_fits",
    "data_spec",
    "load_node_data",
]

NODE_DATA_NAME = "this node's data"
"""How messages name the node's data (its path stays in the node's own log)."""

_SET_IT = "set data-path in the SuperNode's --node-config (or $PHALANX_DATA_PATH)"


class NodeDataError(ValueError):
    """A node's own data is not there, or cannot be read: the node's setup is at fault.

    Reported to the coordinator as the worker's own fault (``worker_error``), with
    one line that says what to fix; never a flag.
    """


def data_spec(data_path: str | None) -> str:
    """Return the :func:`phalanx.data.load_dataset` name of a node's ``data-path``.

    ``npz:``, ``idx:`` and the built-in names are kept; a bare path ending in
    ``.npz`` becomes ``npz:PATH``, any other bare path ``idx:PATH``.

    Raises
    ------
    NodeDataError
        When ``data_path`` is missing or blank, names no file after ``npz:`` or
        ``idx:``, or holds a NUL character.
    """
    text = (data_path or "").strip()
    if not text:
        raise NodeDataError(
            f"this run trains on each client's own data (data.mode = 'local') but this "
            f"node names none: {_SET_IT}, e.g. data-path='npz:/data/mine.npz'"
        )
    if "\x00" in text:
        raise NodeDataError(f"data-path holds a NUL character: {_SET_IT}")
    if text.startswith(("npz:", "idx:")) and not text[4:].strip():
        raise NodeDataError(f"data-path {text!r} names no file: {_SET_IT}")
    if text in KNOWN_NUM_CLASSES or text.startswith(("npz:", "idx:")):
        return text
    return f"npz:{text}" if Path(text).suffix.lower() == ".npz" else f"idx:{text}"


def load_node_data(data_path: str | None, shape: ModelShape, *, like: str) -> ImageDataset:
    """Read the training split a node's ``data-path`` names, checked against the run's model.

    Parameters
    ----------
    data_path : str or None
        The node config's ``data-path`` (see :func:`data_spec`).
    shape : ModelShape
        The run's model, as the task names it: the data's images must be
        ``in_channels x image_size x image_size`` and its labels below ``num_classes``.
    like : str
        The run's dataset name (``data.dataset``), whose standardisation the pixels
        get (:func:`phalanx.data.normalisation`), so that the clients train on the
        scale the coordinator evaluates on. It chooses two constants, never a file.

    Returns
    -------
    ImageDataset
        Named :data:`NODE_DATA_NAME`, with the model's ``num_classes``.

    Raises
    ------
    NodeDataError
        When the node names no data, or it is missing, unreadable or malformed.
    phalanx.local_training.ModelDataMismatchError
        When the data does not fit the run's model.
    """
    spec = data_spec(data_path)
    try:
        raw = read_split(spec, "train")
        images, labels = checked_split(raw)
    except DatasetNotFoundError as err:
        raise NodeDataError(f"this node's data-path names no data: {err}; {_SET_IT}") from err
    except (DataError, OSError, ValueError) as err:
        raise NodeDataError(f"this node's data-path cannot be read: {err}") from err
    check_fits(images, labels, shape)
    mean, std = normalisation(like)
    checked = RawSplit(images, labels, raw.images_source, raw.labels_source)
    return build_dataset(
        checked, name=NODE_DATA_NAME, num_classes=shape.num_classes, mean=mean, std=std
    )


def check_fits(
    images: npt.NDArray[np.generic], labels: npt.NDArray[np.int64], shape: ModelShape
) -> None:
    """Raise :class:`ModelDataMismatchError` unless the data fits a model of ``shape``.

    Parameters
    ----------
    images : numpy.ndarray
        ``(N, C, H, H)``, channels first (as :func:`phalanx.data_checks.checked_split`
        returns them).
    labels : numpy.ndarray
        ``(N,)`` non-negative integers.
    shape : ModelShape
        The run's model.
    """
    channels, side = int(images.shape[1]), int(images.shape[2])
    if (channels, side) != (shape.in_channels, shape.image_size):
        raise ModelDataMismatchError(
            f"{NODE_DATA_NAME} holds {channels}x{side}x{side} images; the run's model takes "
            f"{shape.in_channels}x{shape.image_size}x{shape.image_size}"
        )
    if shape.num_classes > MAX_CLASSES:  # no run's model has as many; refused before it is built
        raise ModelDataMismatchError(
            f"the run's model has {shape.num_classes} classes, more than any run may "
            f"({MAX_CLASSES})"
        )
    top = int(labels.max()) if labels.size else 0
    if top >= shape.num_classes:
        raise ModelDataMismatchError(
            f"{NODE_DATA_NAME} has labels up to {top}; the run's model has "
            f"{shape.num_classes} classes (labels 0..{shape.num_classes - 1})"
        )
