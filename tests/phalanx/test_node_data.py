"""A deployed client's own data: its data-path read, checked against the run's model, in words.

What is missing or unreadable is the node's setup (``NodeDataError``, a ``worker_error``
fault); what does not fit the model is ``data_mismatch``; neither is ever a flag.
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

from phalanx.data import DIGITS_MEAN, DIGITS_STD
from phalanx.data_mode import ModelShape
from phalanx.faults import fault_kind
from phalanx.local_training import ModelDataMismatchError
from phalanx.node_data import NODE_DATA_NAME, NodeDataError, data_spec, load_node_data

SHAPE = ModelShape(in_channels=1, image_size=8, num_classes=10)


def _npz(path: Path, images: np.ndarray, labels: np.ndarray) -> Path:
    np.savez(path, x_train=images, y_train=labels)
    return path


def _idx(directory: Path, images: np.ndarray, labels: np.ndarray) -> Path:
    directory.mkdir()
    n, side = images.shape[0], images.shape[1]
    header = struct.pack(">HBBIII", 0, 0x08, 3, n, side, side)
    (directory / "train-images-idx3-ubyte.gz").write_bytes(
        gzip.compress(header + images.astype(np.uint8).tobytes())
    )
    labels_header = struct.pack(">HBBI", 0, 0x08, 1, n)
    (directory / "train-labels-idx1-ubyte").write_bytes(
        labels_header + labels.astype(np.uint8).tobytes()
    )
    return directory


@pytest.mark.parametrize(
    ("given", "spec"),
    [
        ("npz:/d/own.npz", "npz:/d/own.npz"),
        ("idx:/d/mnist", "idx:/d/mnist"),
        ("/d/own.NPZ", "npz:/d/own.NPZ"),
        ("  /d/mnist  ", "idx:/d/mnist"),
        ("digits", "digits"),
        ("fashion-mnist", "fashion-mnist"),
    ],
)
def test_a_data_path_names_a_dataset_the_loaders_read(given: str, spec: str) -> None:
    assert data_spec(given) == spec


@pytest.mark.parametrize("given", [None, "", "   ", "npz:", "idx:  "])
def test_a_node_naming_no_data_is_told_where_to_name_it(given: str | None) -> None:
    with pytest.raises(NodeDataError, match=r"set data-path in the SuperNode's --node-config"):
        data_spec(given)


def test_an_npz_file_is_read_with_the_models_classes_and_the_runs_scale(tmp_path: Path) -> None:
    labels = np.array([0, 3, 3, 1], dtype=np.int64)
    path = _npz(tmp_path / "own.npz", np.full((4, 8, 8), 0.5, dtype=np.float32), labels)

    data = load_node_data(str(path), SHAPE, like="digits")

    assert (data.name, len(data), data.num_classes) == (NODE_DATA_NAME, 4, 10)
    assert torch.equal(data.y, torch.from_numpy(labels))
    expected = (0.5 - DIGITS_MEAN) / DIGITS_STD
    assert torch.allclose(data.x, torch.full((4, 1, 8, 8), expected))


def test_an_idx_directory_is_read(tmp_path: Path) -> None:
    images = np.arange(3 * 64).reshape(3, 8, 8) % 256
    directory = _idx(tmp_path / "mnist", images, np.array([2, 0, 9]))

    data = load_node_data(f"idx:{directory}", SHAPE, like="idx:elsewhere")

    assert (len(data), data.image_size, data.in_channels) == (3, 8, 1)
    assert data.y.tolist() == [2, 0, 9]


@pytest.mark.parametrize(
    ("images", "labels", "expected"),
    [
        (np.zeros((5, 28, 28), np.float32), np.zeros(5, np.int64), "holds 1x28x28 images"),
        (np.zeros((5, 3, 8, 8), np.float32), np.zeros(5, np.int64), "holds 3x8x8 images"),
        (np.zeros((5, 8, 8), np.float32), np.array([0, 1, 2, 10, 4]), "labels up to 10"),
    ],
)
def test_data_the_model_does_not_take_is_a_mismatch_not_a_setup_fault(
    tmp_path: Path, images: np.ndarray, labels: np.ndarray, expected: str
) -> None:
    path = _npz(tmp_path / "own.npz", images, labels)

    with pytest.raises(ModelDataMismatchError, match=expected) as raised:
        load_node_data(f"npz:{path}", SHAPE, like="digits")

    assert fault_kind(raised.value) == "data_mismatch"


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda d: f"npz:{d}/gone.npz", "names no data"),
        (lambda d: f"{d}/no-such-dir", "names no data"),
        (lambda d: f"npz:{d}/text.npz", "cannot be read"),
        (lambda d: f"npz:{d}/keys.npz", "cannot be read: .*expected arrays 'x_train'"),
        (lambda d: f"npz:{d}/nan.npz", "cannot be read"),
        (lambda d: f"npz:{d}/empty.npz", "cannot be read: .*the split has no images"),
        (lambda d: "npz:../../../etc/passwd.npz", "cannot be read"),
        (lambda d: "npz:/tmp/\x00.npz", "NUL character"),
    ],
)
def test_missing_unreadable_or_malformed_data_is_the_nodes_setup_fault(
    tmp_path: Path, make: object, expected: str
) -> None:
    (tmp_path / "text.npz").write_text("not an archive")
    np.savez(tmp_path / "keys.npz", x=np.zeros((2, 8, 8)), y=np.zeros(2, np.int64))
    nan = np.full((2, 8, 8), np.nan, dtype=np.float32)
    _npz(tmp_path / "nan.npz", nan, np.zeros(2, np.int64))
    _npz(tmp_path / "empty.npz", np.zeros((0, 8, 8), np.float32), np.zeros(0, np.int64))
    assert callable(make)

    with pytest.raises(NodeDataError, match=expected) as raised:
        load_node_data(make(tmp_path), SHAPE, like="digits")

    assert fault_kind(raised.value) == "worker_error"


def test_a_task_naming_a_model_too_large_for_any_run_is_refused_before_it_is_built(
    tmp_path: Path,
) -> None:
    # A task's model shape comes from the coordinator; the client builds the model after
    # its data passed this check, so a shape no run can have stops here, not in an allocation.
    path = _npz(tmp_path / "own.npz", np.zeros((2, 8, 8), np.float32), np.zeros(2, np.int64))
    huge = ModelShape(in_channels=1, image_size=8, num_classes=2**31 - 1)

    with pytest.raises(ModelDataMismatchError, match="more than any run may"):
        load_node_data(str(path), huge, like="digits")
