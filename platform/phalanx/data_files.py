"""Where datasets live, and reading their files into raw arrays (NumPy only, no torch).

The API checks a launched run's data with this module without importing torch;
:mod:`phalanx.data` builds model-ready tensors from the same reads.

Names
-----
``"fashion-mnist"``
    The four IDX files of Fashion-MNIST, gzipped or not, in the datasets
    directory: ``root``, else ``$PHALANX_DATASETS_DIR``, else
    ``/usr/share/datasets/fashion-mnist`` (where Debian's
    ``dataset-fashion-mnist`` puts them, gzipped).
``"digits"``
    scikit-learn's 1,797 8x8 digits, with a fixed 80/20 train/test split.
``"idx:DIR"``
    ``DIR`` holds ``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``,
    ``t10k-images-idx3-ubyte`` and ``t10k-labels-idx1-ubyte``, each optionally
    with a ``.gz`` suffix.
``"npz:PATH"``
    A NumPy ``.npz`` archive with ``x_train``, ``y_train``, ``x_test``,
    ``y_test``, read with ``allow_pickle=False``.

A relative ``DIR`` or ``PATH`` is relative to the datasets directory and must
resolve inside it. The arrays of the files read last are cached, keyed by path,
size and modification time, so checking a dataset and then loading it in one
process reads each file once.
"""

from __future__ import annotations

import gzip
import io
import lzma
import math
import os
import zipfile
import zlib
from functools import lru_cache
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt

from phalanx.data_checks import (
    DataError,
    DatasetFacts,
    RawSplit,
    check_splits,
    infer_num_classes,
    int_labels,
)

Split = Literal["train", "test"]

DATASETS_DIR_ENV = "PHALANX_DATASETS_DIR"
"""Environment variable naming the datasets directory (Fashion-MNIST's IDX files live there)."""

DEFAULT_FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")
"""Where Debian's ``dataset-fashion-mnist`` package installs the (gzipped) IDX files."""

DIGITS_SPLIT_SEED = 0
"""Seed of the fixed permutation that splits the digits 80/20 into train and test."""

IDX_FILE_STEMS: dict[Split, tuple[str, str]] = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
"""Canonical MNIST-family file names (images, labels) per split, without ``.gz``."""

OUTSIDE_DATASETS_DIR = (
    "idx:/npz: paths given through the API must name data inside the server's datasets "
    f"directory ({DATASETS_DIR_ENV}); give the path relative to it"
)
"""The one answer to a path outside the datasets directory, whether it exists or not."""

NPZ_NOT_THE_DIRECTORY = (
    "npz: must name a file inside the datasets directory, not the directory itself"
)
"""Refusal of ``npz:.`` (or any path that resolves to the datasets directory itself)."""

_IDX_DTYPES: dict[int, np.dtype[np.generic]] = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}

_FASHION_CLASSES = 10
_DIGITS_CLASSES = 10
NOT_A_REGULAR_FILE = "not a regular file (a directory, a FIFO or a device)"
"""Why a dataset path that exists is not read: a FIFO or a device would be read for ever."""

_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
_NPY_MAGIC = b"\x93NUMPY"
_READ_CHUNK = 1 << 20
_ZIP_METHODS = frozenset(
    {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA}
)

_INSTALL_HINT = (
    "install Debian's dataset-fashion-mnist (`sudo apt-get install dataset-fashion-mnist`, "
    f"files go to {DEFAULT_FASHION_MNIST_DIR}) or set {DATASETS_DIR_ENV} to a directory "
    "holding train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and "
    "t10k-labels-idx1-ubyte (gzipped or not)"
)


class DatasetNotFoundError(FileNotFoundError):
    """A dataset's files are not where the loader looked; the message says how to get them."""


class DatasetOutsideError(ValueError):
    """A dataset path from the API lies outside the datasets directory (or cannot be resolved)."""


# --------------------------------------------------------------------------- reading


def read_idx(path: Path, *, source: str | None = None) -> npt.NDArray[np.generic]:
    """Read one IDX file (gzipped or not) into an array in native byte order.

    Parameters
    ----------
    path : Path
        The file. Gzip is recognised by its magic bytes, not by the suffix.
    source : str, optional
        How messages name the file; defaults to ``path``.

    Returns
    -------
    numpy.ndarray
        Shape and dtype from the IDX header (``uint8`` for MNIST-family files).

    Raises
    ------
    DatasetNotFoundError
        If ``path`` does not exist.
    DataError
        If the file is not valid IDX: bad magic number, unknown type code, or a
        size that does not match its header. The message names the file.
    """
    path = Path(path)
    source = source or str(path)
    if not path.is_file():
        if path.exists():
            raise DataError(f"{source}: {NOT_A_REGULAR_FILE}")
        raise DatasetNotFoundError(f"IDX file not found: {source}")
    with path.open("rb") as handle:
        gzipped = handle.read(2) == b"\x1f\x8b"
        handle.seek(0)
        try:
            if gzipped:
                with gzip.GzipFile(fileobj=handle) as stream:
                    raw, shape = _read_idx_stream(stream, source)
            else:
                raw, shape = _read_idx_stream(handle, source)
        except (OSError, EOFError, zlib.error) as exc:
            what = "corrupt gzip stream" if gzipped else "unreadable"
            raise DataError(f"{source}: {what} ({exc})") from exc
    header = 4 + 4 * len(shape)
    data = np.frombuffer(raw, dtype=_IDX_DTYPES[raw[2]], offset=header).reshape(shape)
    return data.astype(data.dtype.newbyteorder("="), copy=False)


def _read_idx_stream(stream: io.BufferedIOBase, source: str) -> tuple[bytes, tuple[int, ...]]:
    """Read an IDX file's header, then no more data than it declares (and one byte to tell).

    A gzipped file is inflated only as far as its header's size: a few megabytes may
    inflate to more than the host's memory. Returns the bytes read and the shape.
    """
    raw = stream.read(4)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise DataError(f"{source}: not an IDX file (magic number {raw[:4].hex() or 'empty'})")
    type_code, ndim = raw[2], raw[3]
    if type_code not in _IDX_DTYPES:
        raise DataError(f"{source}: unknown IDX type code 0x{type_code:02x}")
    if ndim == 0:
        raise DataError(f"{source}: IDX header declares zero dimensions")
    header = 4 + 4 * ndim
    raw += stream.read(header - 4)
    if len(raw) < header:
        raise DataError(f"{source}: truncated IDX header ({len(raw)} bytes, need {header})")
    shape = tuple(int(d) for d in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    expected = math.prod(shape) * _IDX_DTYPES[type_code].itemsize  # no overflow
    memory = _host_memory()
    if memory is not None and expected > memory:  # a true header can still ask too much
        raise DataError(
            f"{source}: shape {shape} is {expected:,} bytes, more than this host's memory "
            f"({memory:,} bytes)"
        )
    chunks, held = [raw], 0
    while held <= expected:
        chunk = stream.read(min(expected + 1 - held, _READ_CHUNK))
        if not chunk:
            break
        chunks.append(chunk)
        held += len(chunk)
    if held != expected:
        holds = f"{held}" if held < expected else "more"
        raise DataError(
            f"{source}: header declares shape {shape} ({expected} data bytes) "
            f"but the file holds {holds}"
        )
    return b"".join(chunks), shape


def datasets_dir(root: Path | None = None) -> Path:
    """Return the datasets directory: ``root``, else ``$PHALANX_DATASETS_DIR``, else Debian's."""
    if root is not None:
        return Path(root)
    env = os.environ.get(DATASETS_DIR_ENV)
    return Path(env) if env else DEFAULT_FASHION_MNIST_DIR


fashion_mnist_dir = datasets_dir
"""Directory holding Fashion-MNIST: the datasets directory."""


def dataset_path(name: str, root: Path | None = None) -> Path | None:
    """Return the file or directory an ``idx:``/``npz:`` name points to (else ``None``).

    A relative path is taken inside the datasets directory (see
    :func:`datasets_dir`) and must resolve (symlinks and ``..`` followed)
    inside it.

    Raises
    ------
    DataError
        When a relative path leaves the datasets directory.
    """
    spec = _path_spec(name)
    if spec is None:
        return None
    given = Path(spec[1])
    if given.is_absolute():
        return given
    base = datasets_dir(root)
    inside = _resolved_inside(base / given, base)
    if inside is None:
        raise DataError(
            f"{name}: a relative path is relative to the datasets directory "
            f"({DATASETS_DIR_ENV}) and must stay inside it"
        )
    return inside


def confined_dataset(name: str, directory: Path) -> str:
    """Return ``name`` with its ``idx:``/``npz:`` path made relative to ``directory``.

    For datasets named through the API: the path (relative ones taken inside
    ``directory``) must resolve, symlinks and ``..`` followed, inside
    ``directory``. ``fashion-mnist`` and ``digits`` come back unchanged.

    Raises
    ------
    DatasetOutsideError
        With :data:`OUTSIDE_DATASETS_DIR`, the same message whether the path
        exists or not.
    """
    spec = _path_spec(name)
    if spec is None:
        return name
    prefix, given = spec
    base = Path(directory)
    inside = _resolved_inside(base / given, base)
    if inside is None:
        raise DatasetOutsideError(OUTSIDE_DATASETS_DIR)
    relative = inside.relative_to(base.resolve())
    if prefix == "npz:" and relative == Path():
        raise DatasetOutsideError(NPZ_NOT_THE_DIRECTORY)
    return prefix + relative.as_posix()


def read_split(name: str, split: Split, root: Path | None = None) -> RawSplit:
    """Read one split of a dataset as stored, unchecked (see :func:`load_dataset` for names).

    Raises
    ------
    ValueError
        If the name is not in the registry.
    DatasetNotFoundError
        If the dataset's files are missing.
    DataError
        If a file cannot be read as its format.
    """
    split = _check_split(split)
    if name == "digits":
        images, labels = _digits_split(split)
        return RawSplit(images, labels, f"digits[{split}]", f"digits[{split}]")
    if name == "fashion-mnist":
        directory = datasets_dir(root)
        return _idx_split(
            directory,
            split,
            label="fashion-mnist",
            missing=f"Fashion-MNIST is not in {directory} ({DATASETS_DIR_ENV}): {_INSTALL_HINT}",
        )
    path = dataset_path(name, root)
    if path is None:
        raise ValueError(
            f"unknown dataset {name!r}; use 'fashion-mnist', 'digits', 'idx:DIR' or 'npz:PATH'"
        )
    if name.startswith("idx:"):
        return _idx_split(
            path,
            split,
            label=name,
            missing=f"{name}: {{file}} (or .gz) not found{_relative_note(name)}; put the four "
            "MNIST-format IDX files (optionally .gz) in that directory",
        )
    if not path.is_file():
        if path.exists():
            raise DataError(f"{name}: {NOT_A_REGULAR_FILE}; give an .npz archive")
        raise DatasetNotFoundError(f"{name}: .npz archive not found{_relative_note(name)}")
    return read_npz(path, f"x_{split}", f"y_{split}", source=name)


def check_dataset(
    name: str,
    *,
    num_classes: int | None = None,
    batch_size: int = 1,
    root: Path | None = None,
) -> DatasetFacts:
    """Read both splits of a dataset once and check them before a run uses them.

    The files read stay cached, so a :func:`load_dataset` that follows in this
    process does not read them again.

    Parameters
    ----------
    name : str
        The dataset (see :func:`load_dataset`).
    num_classes : int, optional
        The stated number of classes; inferred when ``None``.
    batch_size : int
        Samples one round draws from the training split.
    root : Path, optional
        The datasets directory.

    Returns
    -------
    DatasetFacts
        What the dataset holds, to report.

    Raises
    ------
    DatasetNotFoundError
        If the dataset's files are missing.
    DataError
        On the first rule of :mod:`phalanx.data_checks` the data breaks.
    """
    train, test = read_split(name, "train", root), read_split(name, "test", root)
    stated = num_classes if num_classes is not None else KNOWN_NUM_CLASSES.get(name)
    return check_splits(name, train, test, num_classes=stated, batch_size=batch_size)


KNOWN_NUM_CLASSES = {"fashion-mnist": _FASHION_CLASSES, "digits": _DIGITS_CLASSES}
"""Classes of the built-in datasets."""


def num_classes_of(name: str, root: Path | None = None) -> int:
    """Return a dataset's classes when none are stated: known, or inferred over both splits.

    Raises
    ------
    DatasetNotFoundError
        If a split is missing.
    DataError
        If the labels do not allow inference
        (see :func:`phalanx.data_checks.infer_num_classes`).
    """
    known = KNOWN_NUM_CLASSES.get(name)
    if known is not None:
        return known
    train, test = read_split(name, "train", root), read_split(name, "test", root)
    return infer_num_classes(
        _labels_alone(train),
        _labels_alone(test),
        train_source=train.labels_source,
        test_source=test.labels_source,
    )


def read_npz(path: Path, x_key: str, y_key: str, *, source: str) -> RawSplit:
    """Read the images ``x_key`` and labels ``y_key`` of an ``.npz`` archive, unchecked.

    Raises
    ------
    DataError
        If the file is not an ``.npz`` archive, lacks a key, or holds a
        non-numeric (pickled) array.
    """
    keys = npz_keys(path, source=source)
    if x_key not in keys or y_key not in keys:
        raise DataError(
            f"{source}: expected arrays {x_key!r} and {y_key!r}, found {sorted(keys)}; "
            "use keys x/y (split=None) or x_train/y_train/x_test/y_test (split given)"
        )
    return RawSplit(
        images=npz_array(path, x_key, source=source),
        labels=npz_array(path, y_key, source=source),
        images_source=f"{source}[{x_key}]",
        labels_source=f"{source}[{y_key}]",
    )


def npz_keys(path: Path, *, source: str) -> frozenset[str]:
    """Return the names of the arrays in an ``.npz`` archive (cached)."""
    stat = path.stat()
    return _cached_npz_keys(str(path), stat.st_size, stat.st_mtime_ns, source)


def npz_array(path: Path, key: str, *, source: str) -> npt.NDArray[np.generic]:
    """Return one array of an ``.npz`` archive, read-only (cached)."""
    stat = path.stat()
    return _cached_npz_array(str(path), stat.st_size, stat.st_mtime_ns, key, source)


def stable_permutation(n: int, seed: np.random.SeedSequence) -> npt.NDArray[np.int64]:
    """Return a permutation of ``0 .. n - 1`` that depends only on PCG64's bit stream."""
    draws = np.random.PCG64(seed).random_raw(n)
    return np.argsort(draws, kind="stable").astype(np.int64)


def _check_split(split: str) -> Split:
    if split == "train":
        return "train"
    if split == "test":
        return "test"
    raise ValueError(f"split must be 'train' or 'test', got {split!r}")


def _labels_alone(split: RawSplit) -> npt.NDArray[np.int64]:
    """Return the split's labels, checked without its images (but against their count)."""
    count = split.images.shape[0] if split.images.ndim else 0
    return int_labels(
        split.labels, split.labels_source, num_images=count, images_source=split.images_source
    )


def _path_spec(name: str) -> tuple[str, str] | None:
    for prefix in ("idx:", "npz:"):
        if name.startswith(prefix) and len(name) > len(prefix):
            return prefix, name[len(prefix) :]
    return None


def _resolved_inside(path: Path, base: Path) -> Path | None:
    try:
        root = base.resolve()
        target = path.resolve()
    except (OSError, RuntimeError, ValueError):  # a symlink loop, a NUL character
        return None
    return target if target.is_relative_to(root) else None


def _relative_note(name: str) -> str:
    spec = _path_spec(name)
    if spec is None or Path(spec[1]).is_absolute():
        return ""
    return f" in the datasets directory ({DATASETS_DIR_ENV})"


def _idx_split(directory: Path, split: Split, *, label: str, missing: str) -> RawSplit:
    images_stem, labels_stem = IDX_FILE_STEMS[split]
    images, labels = _find_idx(directory, images_stem), _find_idx(directory, labels_stem)
    if images is None or labels is None:
        absent = ", ".join(s for s, p in ((images_stem, images), (labels_stem, labels)) if not p)
        raise DatasetNotFoundError(missing.replace("{file}", absent))
    images_source, labels_source = f"{label}/{images.name}", f"{label}/{labels.name}"
    return RawSplit(
        images=_idx_array(images, images_source),
        labels=_idx_array(labels, labels_source),
        images_source=images_source,
        labels_source=labels_source,
    )


def _find_idx(directory: Path, stem: str) -> Path | None:
    for candidate in (directory / stem, directory / f"{stem}.gz"):
        if candidate.exists():  # a directory or a FIFO is refused by its reader, not missed
            return candidate
    return None


def _idx_array(path: Path, source: str) -> npt.NDArray[np.generic]:
    stat = path.stat()
    return _cached_idx(str(path), stat.st_size, stat.st_mtime_ns, source)


@lru_cache(maxsize=8)
def _cached_idx(path: str, size: int, mtime_ns: int, source: str) -> npt.NDArray[np.generic]:
    array = read_idx(Path(path), source=source)
    array.flags.writeable = False
    return array


@lru_cache(maxsize=8)
def _cached_npz_keys(path: str, size: int, mtime_ns: int, source: str) -> frozenset[str]:
    with Path(path).open("rb") as handle:
        magic = handle.read(6)
    fix = "save one with numpy.savez(PATH, x_train=..., y_train=..., x_test=..., y_test=...)"
    if magic == _NPY_MAGIC:
        raise DataError(
            f"{source}: a single .npy array, not an .npz archive of named arrays; {fix}"
        )
    if magic[:4] not in _ZIP_MAGIC:
        raise DataError(f"{source}: not an .npz archive (NumPy's zip of named arrays); {fix}")
    try:
        with np.load(path, allow_pickle=False) as archive:
            return frozenset(archive.files)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise DataError(f"{source}: not a readable .npz archive ({exc}); {fix}") from exc


@lru_cache(maxsize=8)
def _cached_npz_array(
    path: str, size: int, mtime_ns: int, key: str, source: str
) -> npt.NDArray[np.generic]:
    where = f"{source}[{key}]"
    try:
        array = _read_npz_member(path, key, where)
    except DataError:
        raise
    except MemoryError as exc:
        raise DataError(f"{where}: too large for this host's memory") from exc
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error, lzma.LZMAError) as exc:
        raise DataError(
            f"{where}: not a readable NumPy array ({exc}); object (pickled) arrays are "
            "refused, save numeric arrays"
        ) from exc
    array.flags.writeable = False
    return array


def _read_npz_member(path: str, key: str, where: str) -> npt.NDArray[np.generic]:
    """Read array ``key`` of an ``.npz`` archive from the member whose header was checked.

    The member is the one :func:`numpy.load` reads for ``key`` (``key`` itself, else
    ``key.npy``), opened once: the header is checked against the zip's size of the
    member and the host's memory before NumPy allocates what it declares, since a
    few bytes may declare terabytes (the zip's directory may claim them too).
    """
    with zipfile.ZipFile(path) as archive:
        names = set(archive.namelist())
        name = key if key in names else f"{key}.npy"
        info = archive.getinfo(name)  # KeyError: read_npz checked the keys
        if info.flag_bits & 0x1:
            raise DataError(f"{where}: the archive member is encrypted; save it unencrypted")
        if info.compress_type not in _ZIP_METHODS:
            raise DataError(
                f"{where}: the archive member is compressed with zip method "
                f"{info.compress_type}, which cannot be read; save with numpy.savez"
            )
        with archive.open(info) as member:
            version = np.lib.format.read_magic(member)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(member)
            elif version in ((2, 0), (3, 0)):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(member)
            else:
                raise DataError(f"{where}: unknown .npy format version {version}")
            if dtype.hasobject:
                raise DataError(
                    f"{where}: not a readable NumPy array (its dtype holds Python objects); "
                    "object (pickled) arrays are refused, save numeric arrays"
                )
            held = info.file_size - member.tell()
            declared = math.prod(shape) * dtype.itemsize
            if declared != held:
                raise DataError(
                    f"{where}: header declares shape {shape} ({declared:,} data bytes) but "
                    f"the archive holds {held:,}"
                )
            memory = _host_memory()
            if memory is not None and declared > memory:
                raise DataError(
                    f"{where}: shape {shape} is {declared:,} bytes, more than this "
                    f"host's memory ({memory:,} bytes)"
                )
            count = math.prod(shape)
            if count == 0 or dtype.itemsize == 0:
                empty: npt.NDArray[np.generic] = np.empty(
                    shape, dtype=dtype, order="F" if fortran else "C"
                )
                return empty
            data = member.read(declared)
            if len(data) != declared:
                raise DataError(
                    f"{where}: the archive member ends after {len(data):,} of its "
                    f"{declared:,} data bytes"
                )
    flat = np.frombuffer(data, dtype=dtype, count=count)
    return flat.reshape(shape[::-1]).transpose() if fortran else flat.reshape(shape)


def _host_memory() -> int | None:
    """Return this host's physical memory in bytes, or ``None`` where it is not known."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


@lru_cache(maxsize=1)
def _digits_arrays() -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    from sklearn.datasets import load_digits as sklearn_digits

    bunch = sklearn_digits()
    images = np.asarray(bunch.images, dtype=np.float64) / 16.0
    labels = np.asarray(bunch.target, dtype=np.int64)
    images.flags.writeable = False
    labels.flags.writeable = False
    return images, labels


def _digits_split(split: Split) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    images, labels = _digits_arrays()
    order = stable_permutation(labels.shape[0], np.random.SeedSequence(DIGITS_SPLIT_SEED))
    n_train = labels.shape[0] - labels.shape[0] // 5
    chosen = order[:n_train] if split == "train" else order[n_train:]
    return images[chosen], labels[chosen]
