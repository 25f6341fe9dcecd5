"""Dataset files written to break the reader: refused in words, never read for ever or allocated."""

from __future__ import annotations

import io
import os
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest

from phalanx.data_checks import DataError
from phalanx.data_files import read_idx, read_split


def _npz_declaring(path: Path, shape: tuple[int, ...]) -> Path:
    """An .npz archive whose x_train header declares ``shape`` over 16 bytes of data."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f4", "fortran_order": False, "shape": shape}
    )
    labels = io.BytesIO()
    np.save(labels, np.zeros(2, dtype=np.int64))
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("x_train.npy", header.getvalue() + bytes(16))
        archive.writestr("y_train.npy", labels.getvalue())
    return path


def test_an_npz_header_declaring_a_terabyte_is_refused_before_anything_is_allocated(
    tmp_path: Path,
) -> None:
    path = _npz_declaring(tmp_path / "big.npz", (10**6, 10**6))
    with pytest.raises(DataError) as refused:
        read_split(f"npz:{path}", "train")
    assert str(refused.value) == (
        f"npz:{path}[x_train]: header declares shape (1000000, 1000000) "
        "(4,000,000,000,000 data bytes) but the archive holds 16"
    )


def test_an_npz_header_declaring_less_than_it_holds_is_refused_too(tmp_path: Path) -> None:
    path = _npz_declaring(tmp_path / "small.npz", (1,))
    with pytest.raises(DataError, match=r"declares shape \(1,\) \(4 data bytes\)"):
        read_split(f"npz:{path}", "train")


def test_idx_dimensions_whose_product_overflows_64_bits_are_refused_by_size(
    tmp_path: Path,
) -> None:
    path = tmp_path / "train-images-idx3-ubyte"
    # 2^16 x 2^16 x 2^16 x 2^16 bytes wrap to 0 in 64 bits: the size of no data at all.
    path.write_bytes(bytes([0, 0, 0x08, 4]) + struct.pack(">4I", *[2**16] * 4))
    with pytest.raises(DataError) as refused:
        read_idx(path)
    assert str(refused.value) == (
        f"{path}: header declares shape (65536, 65536, 65536, 65536) "
        f"({2**64} data bytes) but the file holds 0"
    )


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_a_dataset_path_that_is_no_regular_file_is_called_so_not_missing(
    tmp_path: Path, kind: str
) -> None:
    archive = tmp_path / "data.npz"
    images = tmp_path / "mnist" / "train-images-idx3-ubyte"
    images.parent.mkdir()
    labels = images.with_name("train-labels-idx1-ubyte")
    labels.write_bytes(bytes([0, 0, 0x08, 1]) + struct.pack(">I", 2) + bytes(2))
    for path in (archive, images):
        if kind == "directory":
            path.mkdir()
        else:
            os.mkfifo(path)  # read, it would block for ever

    with pytest.raises(DataError, match="not a regular file"):
        read_split(f"npz:{archive}", "train")
    with pytest.raises(DataError, match="not a regular file"):
        read_split(f"idx:{images.parent}", "train")
