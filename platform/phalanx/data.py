"""Datasets and the deterministic split of each round's batch into files.

Loaders return an :class:`ImageDataset`: images as float32 ``[N, C, H, W]``,
normalised, and int64 labels. Normalisation is fixed per dataset, never
computed from the split being loaded, so the train and test splits of a
dataset always share it: pixels are first scaled to ``[0, 1]`` (``uint8``
values by ``1 / 255``, scikit-learn digits by ``1 / 16``, floating-point input
must already be in ``[0, 1]``), then standardised as ``(v - mean) / std``.
Every array is checked first by the rules of :mod:`phalanx.data_checks`
(channels first, square, pixels ``uint8`` or floats in ``[0, 1]``, no NaN,
labels ``0 .. C - 1``), and a refusal names the file, the key and the fix.

Sources
-------
``"fashion-mnist"``
    The four IDX files of Fashion-MNIST, gzipped or not, in the datasets
    directory: ``root``, else ``$PHALANX_DATASETS_DIR``, else
    ``/usr/share/datasets/fashion-mnist`` (where Debian's
    ``dataset-fashion-mnist`` puts them, gzipped).
``"digits"``
    scikit-learn's 1,797 8x8 digits, with a fixed 80/20 train/test split.
``"idx:DIR"``
    Any MNIST-format dataset (MNIST, KMNIST, your own): ``DIR`` holds
    ``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``,
    ``t10k-images-idx3-ubyte`` and ``t10k-labels-idx1-ubyte``, each optionally
    with a ``.gz`` suffix.
``"npz:PATH"``
    A NumPy ``.npz`` archive with ``x_train``, ``y_train``, ``x_test``,
    ``y_test`` (see :func:`load_npz`), read with ``allow_pickle=False``.

A relative ``DIR`` or ``PATH`` is relative to the datasets directory and must
stay inside it (runs queued through the API name their data this way; ``phalanx
run`` makes the paths of a local config absolute first). A missing dataset
raises :class:`DatasetNotFoundError`; no loader ever falls back to another
dataset. Reading files, the datasets directory and the whole-dataset check
(:func:`check_dataset`) live in :mod:`phalanx.data_files`, which the API uses
without torch; the files read last are cached there, so checking a dataset and
then loading it reads it once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from phalanx.data_checks import DataError, RawSplit, check_label_range, checked_split
from phalanx.data_files import (
    DATASETS_DIR_ENV,
    DEFAULT_FASHION_MNIST_DIR,
    DIGITS_SPLIT_SEED,
    IDX_FILE_STEMS,
    DatasetNotFoundError,
    DatasetOutsideError,
    Split,
    check_dataset,
    confined_dataset,
    datasets_dir,
    fashion_mnist_dir,
    npz_array,
    npz_keys,
    num_classes_of,
    read_idx,
    read_npz,
    read_split,
    stable_permutation,
)

__all__ = [
    "DATASETS_DIR_ENV",
    "DEFAULT_FASHION_MNIST_DIR",
    "DIGITS_MEAN",
    "DIGITS_SPLIT_SEED",
    "DIGITS_STD",
    "FASHION_MNIST_MEAN",
    "FASHION_MNIST_STD",
    "IDX_FILE_STEMS",
    "DataError",
    "DatasetNotFoundError",
    "DatasetOutsideError",
    "ImageDataset",
    "Split",
    "build_dataset",
    "check_dataset",
    "confined_dataset",
    "datasets_dir",
    "fashion_mnist_dir",
    "load_dataset",
    "load_digits",
    "load_fashion_mnist",
    "load_idx",
    "load_npz",
    "normalisation",
    "read_idx",
    "read_split",
    "round_batch",
    "split_files",
    "split_size",
]

FASHION_MNIST_MEAN = 0.2860
"""Mean pixel value of the Fashion-MNIST training images, scaled to ``[0, 1]``."""

FASHION_MNIST_STD = 0.3530
"""Standard deviation of the Fashion-MNIST training pixels, scaled to ``[0, 1]``."""

DIGITS_MEAN = 0.3053
"""Mean of scikit-learn's digits, scaled to ``[0, 1]`` (divided by 16)."""

DIGITS_STD = 0.3760
"""Standard deviation of scikit-learn's digits, scaled to ``[0, 1]``."""


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


# --------------------------------------------------------------------------- loaders


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
        Defaults to ``max(label) + 1`` of these labels alone (a run's data is
        loaded by :func:`load_dataset`, which infers it over both splits).
    mean, std : float
        Standardisation applied after scaling pixels to ``[0, 1]``; the default
        maps ``[0, 1]`` to ``[-1, 1]``.

    Returns
    -------
    ImageDataset
    """
    split = RawSplit(
        images=read_idx(Path(images_path)),
        labels=read_idx(Path(labels_path)),
        images_source=str(images_path),
        labels_source=str(labels_path),
    )
    return build_dataset(split, name=name, num_classes=num_classes, mean=mean, std=std)


def load_fashion_mnist(split: Split, root: Path | None = None) -> ImageDataset:
    """Load Fashion-MNIST (60,000 train or 10,000 test images, 1x28x28, 10 classes).

    Parameters
    ----------
    split : {"train", "test"}
        Which split.
    root : Path, optional
        Directory of the four IDX files; see :func:`datasets_dir`.

    Raises
    ------
    DatasetNotFoundError
        If the files are missing; the message says how to install them.
    """
    return load_dataset("fashion-mnist", split, root)


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
        so both splits of one archive agree (a run's data is loaded by
        :func:`load_dataset`, which also checks that inference).
    mean, std : float
        Standardisation applied after scaling to ``[0, 1]``.

    Raises
    ------
    DatasetNotFoundError
        If the archive does not exist.
    DataError
        If the file is not an ``.npz`` archive, the expected keys are absent
        or the arrays are malformed.
    """
    path = Path(path)
    source = str(path)
    if not path.is_file():
        raise DatasetNotFoundError(f"{name}: .npz archive not found: {path}")
    if split not in (None, "train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    x_key, y_key = ("x", "y") if split is None else (f"x_{split}", f"y_{split}")
    raw = read_npz(path, x_key, y_key, source=source)
    if num_classes is None:
        label_keys = [k for k in ("y", "y_train", "y_test") if k in npz_keys(path, source=source)]
        arrays = [npz_array(path, k, source=source) for k in label_keys]
        tops = [int(a.max()) for a in arrays if a.size and np.issubdtype(a.dtype, np.integer)]
        num_classes = max(tops) + 1 if tops else None
    return build_dataset(raw, name=name, num_classes=num_classes, mean=mean, std=std)


def load_digits(split: Split) -> ImageDataset:
    """Load scikit-learn's 8x8 digits with a fixed 80/20 split (1,438 train, 359 test).

    The split is a permutation drawn from NumPy's PCG64 seeded with
    :data:`DIGITS_SPLIT_SEED`, whose stream NumPy keeps stable across versions;
    the last fifth of the permutation is the test split.
    """
    return load_dataset("digits", split)


def load_dataset(
    name: str, split: Split, root: Path | None = None, *, num_classes: int | None = None
) -> ImageDataset:
    """Load a dataset by its registry name.

    Parameters
    ----------
    name : str
        ``"fashion-mnist"``, ``"digits"``, ``"idx:DIR"`` or ``"npz:PATH"``
        (see the module docstring).
    split : {"train", "test"}
        Which split.
    root : Path, optional
        The datasets directory (see :func:`datasets_dir`): Fashion-MNIST's
        files, and the base of relative ``DIR`` / ``PATH``.
    num_classes : int, optional
        The number of classes (``data.num_classes``); by default 10 for
        Fashion-MNIST and digits, inferred over both splits' labels otherwise
        (see :func:`phalanx.data_checks.infer_num_classes`), so the train and
        test splits always agree.

    Raises
    ------
    ValueError
        If the name is not in the registry.
    DatasetNotFoundError
        If the dataset's files are missing.
    DataError
        If the data breaks a rule of :mod:`phalanx.data_checks`.
    """
    raw = read_split(name, split, root)
    mean, std = normalisation(name)
    if num_classes is None:
        num_classes = num_classes_of(name, root)
    return build_dataset(raw, name=f"{name}/{split}", num_classes=num_classes, mean=mean, std=std)


_NORMALISATION = {
    "fashion-mnist": (FASHION_MNIST_MEAN, FASHION_MNIST_STD),
    "digits": (DIGITS_MEAN, DIGITS_STD),
}


def normalisation(name: str) -> tuple[float, float]:
    """Return the ``(mean, std)`` a dataset's pixels are standardised by, once in ``[0, 1]``.

    Fashion-MNIST's and digits' own; ``(0.5, 0.5)`` for every other name.
    """
    return _NORMALISATION.get(name, (0.5, 0.5))


def build_dataset(
    split: RawSplit, *, name: str, num_classes: int | None, mean: float, std: float
) -> ImageDataset:
    """Check one split as stored and return it scaled, standardised and ready for a model.

    ``num_classes``: ``None`` infers ``max(label) + 1`` of this split alone; a stated
    one refuses labels outside ``0 .. num_classes - 1``.

    Raises
    ------
    DataError
        On the first rule of :mod:`phalanx.data_checks` the split breaks.
    """
    images, labels = checked_split(split)
    if num_classes is None:
        num_classes = int(labels.max()) + 1
    else:
        check_label_range(labels, num_classes, split.labels_source)
    if not std > 0:
        raise ValueError(f"{name}: std must be > 0, got {std}")
    if images.dtype == np.uint8:
        scaled = images.astype(np.float32) / np.float32(255.0)
    else:
        scaled = images.astype(np.float32)
    scaled -= np.float32(mean)
    scaled /= np.float32(std)
    return ImageDataset(
        x=torch.from_numpy(np.ascontiguousarray(scaled)),
        y=torch.from_numpy(labels),
        num_classes=num_classes,
        name=name,
    )


def split_size(name: str, split: Split, root: Path | None = None) -> int:
    """Return how many samples a split of a dataset holds, without building its tensors.

    Raises
    ------
    DatasetNotFoundError
        If the dataset's files are missing.
    """
    return len(read_split(name, split, root).labels)


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
    order = stable_permutation(num_samples, np.random.SeedSequence([seed, round]))
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
