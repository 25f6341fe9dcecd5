"""Datasets and the deterministic split of each round's batch into files.

Loaders return an :class:`ImageDataset`: images as float32 ``[N, C, H, W]``,
normalised, and int64 labels. Normalisation is fixed per dataset, never
computed from the split being loaded, so the train and test splits of a
dataset always share it: pixels are first scaled to ``[0, 1]`` (``uint8``
values by ``1 / 255``, scikit-learn digits by ``1 / 16``, floating-point input
is taken as already in ``[0, 1]``), then standardised as ``(v - mean) / std``.

Sources
-------
``"fashion-mnist"``
    The four IDX files of Fashion-MNIST, gzipped or not, from ``root``, else
    ``$PHALANX_DATASETS_DIR``, else ``/usr/share/datasets/fashion-mnist``
    (where Debian's ``dataset-fashion-mnist`` puts them, gzipped).
``"digits"``
    scikit-learn's 1,797 8x8 digits, with a fixed 80/20 train/test split.
``"idx:DIR"``
    Any MNIST-format dataset (MNIST, KMNIST, your own): ``DIR`` holds
    ``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``,
    ``t10k-images-idx3-ubyte`` and ``t10k-labels-idx1-ubyte``, each optionally
    with a ``.gz`` suffix.
``"npz:PATH"``
    A NumPy ``.npz`` archive with ``x_train``, ``y_train``, ``x_test``,
    ``y_test`` (see :func:`load_npz`).

A missing dataset raises :class:`DatasetNotFoundError`; no loader ever falls
back to another dataset.
"""

from __future__ import annotations

import gzip
import os
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

Split = Literal["train", "test"]

DATASETS_DIR_ENV = "PHALANX_DATASETS_DIR"
"""Environment variable naming the directory that holds Fashion-MNIST's IDX files."""

DEFAULT_FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")
"""Where Debian's ``dataset-fashion-mnist`` package installs the (gzipped) IDX files."""

FASHION_MNIST_MEAN = 0.2860
"""Mean pixel value of the Fashion-MNIST training images, scaled to ``[0, 1]``."""

FASHION_MNIST_STD = 0.3530
"""Standard deviation of the Fashion-MNIST training pixels, scaled to ``[0, 1]``."""

DIGITS_MEAN = 0.3053
"""Mean of scikit-learn's digits, scaled to ``[0, 1]`` (divided by 16)."""

DIGITS_STD = 0.3760
"""Standard deviation of scikit-learn's digits, scaled to ``[0, 1]``."""

DIGITS_SPLIT_SEED = 0
"""Seed of the fixed permutation that splits the digits 80/20 into train and test."""

IDX_FILE_STEMS: dict[Split, tuple[str, str]] = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
"""Canonical MNIST-family file names (images, labels) per split, without ``.gz``."""

_IDX_DTYPES: dict[int, np.dtype[np.generic]] = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}

_INSTALL_HINT = (
    "Install it with `sudo apt-get install dataset-fashion-mnist` "
    f"(files go to {DEFAULT_FASHION_MNIST_DIR}), or set {DATASETS_DIR_ENV} to a directory "
    "holding train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and "
    "t10k-labels-idx1-ubyte (gzipped or not)."
)


class DatasetNotFoundError(FileNotFoundError):
    """A dataset's files are not where the loader looked; the message says how to get them."""


@dataclass(frozen=True, eq=False)
class ImageDataset:
    """Labelled square images, ready for a model.

    Parameters
    ----------
    x : Tensor
        float32, shape ``(N, C, H, H)``, normalised.
    y : Tensor
        int64, shape ``(N,)``, labels in ``0 .. num_classes - 1``.
    num_classes : int
        Number of classes.
    name : str
        Where the data came from, e.g. ``"fashion-mnist/train"``.
    """

    x: Tensor
    y: Tensor
    num_classes: int
    name: str

    def __post_init__(self) -> None:
        if self.x.dtype != torch.float32 or self.x.dim() != 4:
            raise ValueError(
                f"{self.name}: x must be float32 [N, C, H, W], "
                f"got {self.x.dtype} {tuple(self.x.shape)}"
            )
        if self.x.shape[2] != self.x.shape[3]:
            raise ValueError(f"{self.name}: images must be square, got {tuple(self.x.shape[2:])}")
        if self.y.dtype != torch.int64 or self.y.dim() != 1:
            raise ValueError(
                f"{self.name}: y must be int64 [N], got {self.y.dtype} {tuple(self.y.shape)}"
            )
        if self.x.shape[0] != self.y.shape[0]:
            raise ValueError(f"{self.name}: {self.x.shape[0]} images but {self.y.shape[0]} labels")
        if self.x.shape[0] == 0:
            raise ValueError(f"{self.name}: the dataset has no samples")
        if self.num_classes < 1:
            raise ValueError(f"{self.name}: num_classes must be >= 1, got {self.num_classes}")
        low, high = int(self.y.min()), int(self.y.max())
        if low < 0 or high >= self.num_classes:
            raise ValueError(
                f"{self.name}: labels span {low}..{high}, outside 0..{self.num_classes - 1}"
            )

    def __len__(self) -> int:
        return int(self.y.shape[0])

    @property
    def in_channels(self) -> int:
        """Number of image channels ``C``."""
        return int(self.x.shape[1])

    @property
    def image_size(self) -> int:
        """Side length ``H`` of the square images."""
        return int(self.x.shape[2])

    def subset(self, indices: Tensor) -> ImageDataset:
        """Return the samples at ``indices`` (int64, 1-D), in that order."""
        return ImageDataset(
            x=self.x[indices], y=self.y[indices], num_classes=self.num_classes, name=self.name
        )


# --------------------------------------------------------------------------- IDX


def read_idx(path: Path) -> npt.NDArray[np.generic]:
    """Read one IDX file (gzipped or not) into an array in native byte order.

    Parameters
    ----------
    path : Path
        The file. Gzip is recognised by its magic bytes, not by the suffix.

    Returns
    -------
    numpy.ndarray
        Shape and dtype from the IDX header (``uint8`` for MNIST-family files).

    Raises
    ------
    DatasetNotFoundError
        If ``path`` does not exist.
    ValueError
        If the file is not valid IDX: bad magic number, unknown type code, or a
        size that does not match its header. The message names the file.
    """
    path = Path(path)
    if not path.is_file():
        raise DatasetNotFoundError(f"IDX file not found: {path}")
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise ValueError(f"{path}: corrupt gzip stream ({exc})") from exc
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise ValueError(f"{path}: not an IDX file (magic number {raw[:4].hex() or 'empty'})")
    type_code, ndim = raw[2], raw[3]
    if type_code not in _IDX_DTYPES:
        raise ValueError(f"{path}: unknown IDX type code 0x{type_code:02x}")
    if ndim == 0:
        raise ValueError(f"{path}: IDX header declares zero dimensions")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"{path}: truncated IDX header ({len(raw)} bytes, need {header})")
    shape = tuple(int(d) for d in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    dtype = _IDX_DTYPES[type_code]
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(raw) - header != expected:
        raise ValueError(
            f"{path}: header declares shape {shape} ({expected} data bytes) "
            f"but the file holds {len(raw) - header}"
        )
    data = np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape)
    return data.astype(dtype.newbyteorder("="), copy=False)


def load_idx(
    images_path: Path,
    labels_path: Path,
    *,
    name: str,
    num_classes: int | None = None,
    mean: float = 0.5,
    std: float = 0.5,
) -> ImageDataset:
    """Load an images file and a labels file in IDX format (gzipped or not).

    Parameters
    ----------
    images_path : Path
        IDX images, ``(N, H, H)`` (one channel) or ``(N, C, H, H)``.
    labels_path : Path
        IDX labels, ``(N,)``, integers.
    name : str
        Name given to the dataset.
    num_classes : int, optional
        Defaults to ``max(label) + 1``.
    mean, std : float
        Standardisation applied after scaling pixels to ``[0, 1]``; the default
        maps ``[0, 1]`` to ``[-1, 1]``.

    Returns
    -------
    ImageDataset
    """
    images = read_idx(Path(images_path))
    labels = read_idx(Path(labels_path))
    return _build(
        images,
        labels,
        name=name,
        num_classes=num_classes,
        mean=mean,
        std=std,
        images_source=str(images_path),
        labels_source=str(labels_path),
    )


def _find_idx(directory: Path, stem: str) -> Path | None:
    for candidate in (directory / stem, directory / f"{stem}.gz"):
        if candidate.is_file():
            return candidate
    return None


def _load_idx_dir(
    directory: Path, split: Split, *, name: str, mean: float, std: float, hint: str
) -> ImageDataset:
    images_stem, labels_stem = IDX_FILE_STEMS[split]
    images, labels = _find_idx(directory, images_stem), _find_idx(directory, labels_stem)
    if images is None or labels is None:
        missing = [s for s, p in ((images_stem, images), (labels_stem, labels)) if p is None]
        raise DatasetNotFoundError(
            f"{name}: {', '.join(missing)} (or .gz) not found in {directory}. {hint}"
        )
    return load_idx(images, labels, name=name, mean=mean, std=std)


def fashion_mnist_dir(root: Path | None = None) -> Path:
    """Directory holding Fashion-MNIST: ``root``, else ``$PHALANX_DATASETS_DIR``, else Debian's."""
    if root is not None:
        return Path(root)
    env = os.environ.get(DATASETS_DIR_ENV)
    return Path(env) if env else DEFAULT_FASHION_MNIST_DIR


def load_fashion_mnist(split: Split, root: Path | None = None) -> ImageDataset:
    """Load Fashion-MNIST (60,000 train or 10,000 test images, 1x28x28, 10 classes).

    Parameters
    ----------
    split : {"train", "test"}
        Which split.
    root : Path, optional
        Directory of the four IDX files; see :func:`fashion_mnist_dir`.

    Raises
    ------
    DatasetNotFoundError
        If the files are missing; the message says how to install them.
    """
    directory = fashion_mnist_dir(root)
    return _load_idx_dir(
        directory,
        _check_split(split),
        name=f"fashion-mnist/{split}",
        mean=FASHION_MNIST_MEAN,
        std=FASHION_MNIST_STD,
        hint=f"Fashion-MNIST is missing. {_INSTALL_HINT}",
    )


# --------------------------------------------------------------------------- npz and digits


def load_npz(
    path: Path,
    *,
    name: str,
    split: Split | None = None,
    num_classes: int | None = None,
    mean: float = 0.5,
    std: float = 0.5,
) -> ImageDataset:
    """Load images and labels from a NumPy ``.npz`` archive.

    Parameters
    ----------
    path : Path
        The archive. With ``split=None`` it must hold ``x`` and ``y`` (one
        split per file); with ``split="train"`` / ``"test"`` it must hold
        ``x_train`` and ``y_train`` / ``x_test`` and ``y_test`` (the layout of
        ``keras.datasets`` archives such as ``mnist.npz``).
        ``x`` is ``(N, H, H)`` (one channel) or ``(N, C, H, H)`` -- channels
        first, never guessed -- as ``uint8`` pixels (scaled by ``1 / 255``) or
        floats already in ``[0, 1]``. ``y`` is ``(N,)`` integer labels.
    name : str
        Name given to the dataset.
    split : {"train", "test"}, optional
        Which pair of keys to read; see ``path``.
    num_classes : int, optional
        Defaults to ``max(label) + 1`` over every label array in the archive,
        so both splits of one archive agree.
    mean, std : float
        Standardisation applied after scaling to ``[0, 1]``.

    Raises
    ------
    DatasetNotFoundError
        If the archive does not exist.
    ValueError
        If the expected keys are absent or the arrays are malformed.
    """
    path = Path(path)
    if not path.is_file():
        raise DatasetNotFoundError(f"{name}: .npz archive not found: {path}")
    x_key, y_key = ("x", "y") if split is None else (f"x_{_check_split(split)}", f"y_{split}")
    try:
        loaded = np.load(path, allow_pickle=False)
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise ValueError(f"{path}: not a readable .npz archive ({exc})") from exc
    if not isinstance(loaded, np.lib.npyio.NpzFile):
        raise ValueError(f"{path}: a single .npy array, not an .npz archive of named arrays")
    with loaded as archive:
        keys = set(archive.files)
        if x_key not in keys or y_key not in keys:
            raise ValueError(
                f"{path}: expected arrays {x_key!r} and {y_key!r}, found {sorted(keys)}; "
                "use keys x/y (split=None) or x_train/y_train/x_test/y_test (split given)"
            )
        images, labels = archive[x_key], archive[y_key]
        if num_classes is None:
            label_keys = [k for k in ("y", "y_train", "y_test") if k in keys]
            all_labels = [_labels_to_numpy(archive[k], f"{path}[{k}]") for k in label_keys]
            num_classes = max(int(a.max()) for a in all_labels if a.size) + 1
    return _build(
        images,
        labels,
        name=name,
        num_classes=num_classes,
        mean=mean,
        std=std,
        images_source=f"{path}[{x_key}]",
        labels_source=f"{path}[{y_key}]",
    )


def load_digits(split: Split) -> ImageDataset:
    """Load scikit-learn's 8x8 digits with a fixed 80/20 split (1,438 train, 359 test).

    The split is a permutation drawn from NumPy's PCG64 seeded with
    :data:`DIGITS_SPLIT_SEED`, whose stream NumPy keeps stable across versions;
    the last fifth of the permutation is the test split.
    """
    from sklearn.datasets import load_digits as sklearn_digits

    bunch = sklearn_digits()
    images = np.asarray(bunch.images, dtype=np.float64) / 16.0
    labels = np.asarray(bunch.target, dtype=np.int64)
    order = _stable_permutation(labels.shape[0], np.random.SeedSequence(DIGITS_SPLIT_SEED))
    n_train = labels.shape[0] - labels.shape[0] // 5
    chosen = order[:n_train] if _check_split(split) == "train" else order[n_train:]
    return _build(
        images[chosen],
        labels[chosen],
        name=f"digits/{split}",
        num_classes=10,
        mean=DIGITS_MEAN,
        std=DIGITS_STD,
        images_source="sklearn digits",
        labels_source="sklearn digits",
    )


# --------------------------------------------------------------------------- registry


def load_dataset(name: str, split: Split, root: Path | None = None) -> ImageDataset:
    """Load a dataset by its registry name.

    Parameters
    ----------
    name : str
        ``"fashion-mnist"``, ``"digits"``, ``"idx:DIR"`` or ``"npz:PATH"``
        (see the module docstring). Relative ``DIR`` / ``PATH`` are relative
        to the working directory.
    split : {"train", "test"}
        Which split.
    root : Path, optional
        The Fashion-MNIST directory (see :func:`fashion_mnist_dir`); ignored
        by the other sources, whose location is in the name.

    Raises
    ------
    ValueError
        If the name is not in the registry.
    DatasetNotFoundError
        If the dataset's files are missing.
    """
    _check_split(split)
    if name == "fashion-mnist":
        return load_fashion_mnist(split, root)
    if name == "digits":
        return load_digits(split)
    if name.startswith("idx:") and len(name) > 4:
        directory = Path(name[4:])
        return _load_idx_dir(
            directory,
            split,
            name=f"{name}/{split}",
            mean=0.5,
            std=0.5,
            hint="Put the four MNIST-format IDX files (optionally .gz) in that directory.",
        )
    if name.startswith("npz:") and len(name) > 4:
        return load_npz(Path(name[4:]), name=f"{name}/{split}", split=split)
    raise ValueError(
        f"unknown dataset {name!r}; use 'fashion-mnist', 'digits', 'idx:DIR' or 'npz:PATH'"
    )


# --------------------------------------------------------------------------- batching


def round_batch(num_samples: int, batch_size: int, *, seed: int, round: int) -> Tensor:
    """Draw the indices of the samples that make up one round's batch.

    ``batch_size`` distinct indices in ``0 .. num_samples - 1``, in random
    order, drawn from NumPy's PCG64 seeded by ``SeedSequence([seed, round])``.
    The permutation is the argsort of raw 64-bit draws, so it depends only on
    the bit stream, which NumPy keeps stable across versions and platforms:
    every party computes the same batch.

    Parameters
    ----------
    num_samples : int
        Size of the training set.
    batch_size : int
        Samples per round, ``1 <= batch_size <= num_samples``.
    seed : int
        The run's seed, ``>= 0``.
    round : int
        The round number, ``>= 0``.

    Returns
    -------
    Tensor
        int64, shape ``(batch_size,)``.
    """
    if not 1 <= batch_size <= num_samples:
        raise ValueError(f"batch_size must be in 1..num_samples={num_samples}, got {batch_size}")
    if seed < 0 or round < 0:
        raise ValueError(f"seed and round must be >= 0, got seed={seed}, round={round}")
    order = _stable_permutation(num_samples, np.random.SeedSequence([seed, round]))
    return torch.from_numpy(order[:batch_size].copy())


def split_files(indices: Tensor, num_files: int) -> list[Tensor]:
    """Split a round's batch into ``num_files`` contiguous files.

    Sizes differ by at most one; the first ``len(indices) % num_files`` files
    hold the extra sample.

    Parameters
    ----------
    indices : Tensor
        1-D sample indices, e.g. from :func:`round_batch`.
    num_files : int
        ``1 <= num_files <= len(indices)``, so no file is empty.

    Returns
    -------
    list of Tensor
        ``num_files`` independent 1-D tensors (copies, not views).
    """
    if indices.dim() != 1:
        raise ValueError(f"indices must be 1-D, got shape {tuple(indices.shape)}")
    if not 1 <= num_files <= indices.shape[0]:
        raise ValueError(
            f"num_files must be in 1..{indices.shape[0]} (one sample per file at least), "
            f"got {num_files}"
        )
    return [chunk.clone() for chunk in torch.tensor_split(indices, num_files)]


# --------------------------------------------------------------------------- internals


def _check_split(split: str) -> Split:
    if split == "train":
        return "train"
    if split == "test":
        return "test"
    raise ValueError(f"split must be 'train' or 'test', got {split!r}")


def _stable_permutation(n: int, seed: np.random.SeedSequence) -> npt.NDArray[np.int64]:
    draws = np.random.PCG64(seed).random_raw(n)
    return np.argsort(draws, kind="stable").astype(np.int64)


def _labels_to_numpy(labels: npt.NDArray[np.generic], source: str) -> npt.NDArray[np.int64]:
    if labels.ndim != 1:
        raise ValueError(f"{source}: labels must be 1-D, got shape {labels.shape}")
    if not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"{source}: labels must be integers, got {labels.dtype}")
    return labels.astype(np.int64)


def _build(
    images: npt.NDArray[np.generic],
    labels: npt.NDArray[np.generic],
    *,
    name: str,
    num_classes: int | None,
    mean: float,
    std: float,
    images_source: str,
    labels_source: str,
) -> ImageDataset:
    if images.ndim == 3:
        images = images[:, None, :, :]
    if images.ndim != 4:
        raise ValueError(
            f"{images_source}: images must be (N, H, W) or (N, C, H, W), got shape {images.shape}"
        )
    if images.dtype == np.uint8:
        scaled = images.astype(np.float32) / np.float32(255.0)
    elif np.issubdtype(images.dtype, np.floating):
        scaled = images.astype(np.float32)
        if not np.isfinite(scaled).all():
            raise ValueError(f"{images_source}: images contain NaN or Inf")
    else:
        raise ValueError(
            f"{images_source}: images must be uint8 pixels or floats in [0, 1], got {images.dtype}"
        )
    if not std > 0:
        raise ValueError(f"{name}: std must be > 0, got {std}")
    scaled -= np.float32(mean)
    scaled /= np.float32(std)
    y = _labels_to_numpy(labels, labels_source)
    if y.shape[0] != images.shape[0]:
        raise ValueError(
            f"{images_source} holds {images.shape[0]} images but "
            f"{labels_source} holds {y.shape[0]} labels"
        )
    if y.size and int(y.min()) < 0:
        raise ValueError(f"{labels_source}: negative label {int(y.min())}")
    classes = num_classes if num_classes is not None else (int(y.max()) + 1 if y.size else 0)
    return ImageDataset(
        x=torch.from_numpy(np.ascontiguousarray(scaled)),
        y=torch.from_numpy(y),
        num_classes=classes,
        name=name,
    )
