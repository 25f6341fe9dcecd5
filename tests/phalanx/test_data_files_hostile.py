"""Dataset files written to break the reader: refused in words, never read for ever or allocated."""

from __future__ import annotations

import gzip
import io
import os
import struct
import tracemalloc
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest

from phalanx.data_checks import DataError
from phalanx.data_files import read_idx, read_split


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def _header(shape: tuple[int, ...]) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": "<f4", "fortran_order": False, "shape": shape}
    )
    return buffer.getvalue()


def _npz_declaring(path: Path, shape: tuple[int, ...]) -> Path:
    """An .npz archive whose x_train header declares ``shape`` over 16 bytes of data."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("x_train.npy", _header(shape) + bytes(16))
        archive.writestr("y_train.npy", _npy(np.zeros(2, dtype=np.int64)))
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
    assert str(refused.value).startswith(
        f"{path}: shape (65536, 65536, 65536, 65536) is {2**64:,} bytes, more than this "
        "host's memory"
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


def test_a_member_named_without_npy_beside_one_with_is_the_one_checked(tmp_path: Path) -> None:
    # NumPy reads member 'x_train' for key x_train when both it and 'x_train.npy' are there:
    # checking 'x_train.npy' alone let 'x_train' declare a terabyte.
    path = tmp_path / "twins.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("x_train.npy", _npy(np.zeros((2, 2), dtype=np.float32)))
        archive.writestr("x_train", _header((10**6, 10**6)) + bytes(16))
        archive.writestr("y_train.npy", _npy(np.zeros(2, dtype=np.int64)))
    with pytest.raises(DataError, match=r"\[x_train\]: header declares shape \(1000000, 1000000\)"):
        read_split(f"npz:{path}", "train")


def test_an_npz_whose_zip_directory_claims_terabytes_is_refused_before_allocating(
    tmp_path: Path,
) -> None:
    # The zip's central directory (zip64) claims the 8 TB the header declares; the
    # member holds 16 bytes. NumPy would allocate the 8 TB before reading a byte.
    path = tmp_path / "lying.npz"
    header = _header((2 * 10**12,))
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("x_train.npy", header + bytes(16))
        archive.writestr("y_train.npy", _npy(np.zeros(2, dtype=np.int64)))
        archive.filelist[0].file_size = len(header) + 8 * 10**12
    with pytest.raises(
        DataError,
        match=r"shape \(2000000000000,\) is 8,000,000,000,000 bytes, more than this host.s memory",
    ):
        read_split(f"npz:{path}", "train")


def _patched(path: Path, local: int, central: int, value: bytes) -> None:
    """Overwrite ``value`` at offset ``local`` of each local header, ``central`` of each entry."""
    data = bytearray(path.read_bytes())
    for signature, offset in ((b"PK\x03\x04", local), (b"PK\x01\x02", central)):
        at = data.find(signature)
        while at >= 0:
            data[at + offset : at + offset + len(value)] = value
            at = data.find(signature, at + 4)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["encrypted", "unknown compression", "corrupt lzma"])
def test_an_npz_member_zipfile_cannot_open_is_refused_in_words(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "damaged.npz"
    lzma = damage == "corrupt lzma"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_LZMA if lzma else 0) as archive:
        archive.writestr("x_train.npy", _npy(np.zeros((64, 8, 8), dtype=np.float32)))
        archive.writestr("y_train.npy", _npy(np.zeros(64, dtype=np.int64)))
    if damage == "encrypted":  # the general-purpose flag's bit 0
        _patched(path, 6, 8, b"\x01")
    elif damage == "unknown compression":
        _patched(path, 8, 10, struct.pack("<H", 99))
    else:
        data = bytearray(path.read_bytes())
        start = data.find(b"PK\x03\x04") + 30 + len("x_train.npy") + 24
        data[start : start + 64] = bytes(b ^ 0x5A for b in data[start : start + 64])
        path.write_bytes(bytes(data))
    with pytest.raises(DataError, match=r"npz:.*\[x_train\]: "):
        read_split(f"npz:{path}", "train")


def test_a_gzipped_idx_file_is_not_inflated_past_what_its_header_declares(
    tmp_path: Path,
) -> None:
    # 256 MiB of zeros gzip to 250 KiB; the header declares 16 bytes. Inflated whole,
    # a few megabytes of such a file take a host's memory before the size is checked.
    path = tmp_path / "train-images-idx3-ubyte.gz"
    header = bytes([0, 0, 0x08, 1]) + struct.pack(">I", 16)
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = bytes(1 << 20)
    body = [compressor.compress(header)]
    body += [compressor.compress(chunk) for _ in range(256)]
    path.write_bytes(b"".join([*body, compressor.flush()]))
    tracemalloc.start()
    try:
        with pytest.raises(DataError, match=r"header declares shape \(16,\) \(16 data bytes\)"):
            read_idx(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20


def test_an_idx_header_declaring_more_than_the_hosts_memory_is_refused_unread(
    tmp_path: Path,
) -> None:
    # A true header over a 30 MB gzip can declare 30 GB; its size alone refuses it.
    path = tmp_path / "train-images-idx3-ubyte.gz"
    dims = struct.pack(">3I", 2**31, 2**15, 2**4)  # 2^50 bytes: a petabyte
    with gzip.open(path, "wb") as stream:
        stream.write(bytes([0, 0, 0x08, 3]) + dims + bytes(1024))
    with pytest.raises(DataError, match=r"more than this host's memory"):
        read_idx(path)
