"""The rules a dataset must meet, checked on its raw arrays before any model sees them.

Pure functions over NumPy arrays: no file is read here (:mod:`phalanx.data`
reads them). Every refusal is a :class:`DataError` of one line that names the
file and key (``source``), what is wrong, and the fix.

Images
    ``(N, H, W)`` (one channel) or ``(N, C, H, W)``, channels first, square
    (``H == W``). Pixels are ``uint8`` (``0 .. 255``) or floating point in
    ``[0, 1]``; NaN, Inf and floats outside ``[0, 1]`` are refused (floats up to
    255 with the fix "divide by 255"). Train and test images share one shape.
Labels
    1-D integers, one per image, in ``0 .. C - 1``. ``C`` is stated
    (``data.num_classes``) or inferred as ``max + 1`` over both splits, and
    then every label ``0 .. max`` must occur in the training split: a label set
    without 0 (labels ``1 .. 10``), with holes (``0 .. 9`` and ``255``), or with
    a class only in the test split is refused, since the classes it implies
    could never be learned. ``C`` is at least 2 and at most :data:`MAX_CLASSES`.
Size
    The training split holds at least one round's batch
    (``samples_per_file x files per round``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

MAX_CLASSES = 1000
"""Most classes a run may have (stated or inferred)."""

_CHANNEL_COUNTS_LAST = (1, 3, 4)
"""Channel counts that, in the last axis of square images, mean channels-last data."""


class DataError(ValueError):
    """A dataset refused; the message names the file and key, what is wrong, and the fix."""


@dataclass(frozen=True, eq=False)
class RawSplit:
    """One split of a dataset as stored: images and labels, and where each came from.

    Parameters
    ----------
    images, labels : numpy.ndarray
        The arrays as read, before any check or conversion.
    images_source, labels_source : str
        How a message names them, e.g. ``"npz:mnist.npz[x_train]"``.
    """

    images: npt.NDArray[np.generic]
    labels: npt.NDArray[np.generic]
    images_source: str
    labels_source: str


@dataclass(frozen=True)
class DatasetFacts:
    """What a checked dataset holds, to report before a run starts.

    Attributes
    ----------
    name : str
        The dataset, as named in the config.
    num_classes : int
        Classes of the model.
    inferred : bool
        Whether ``num_classes`` was inferred from the labels (else stated).
    train_size, test_size : int
        Samples per split.
    shape : tuple of int
        ``(C, H, W)`` of every image.
    """

    name: str
    num_classes: int
    inferred: bool
    train_size: int
    test_size: int
    shape: tuple[int, int, int]

    def describe(self) -> str:
        """One line for the operator, e.g. ``digits: 1438 train / 359 test images ...``."""
        c, h, w = self.shape
        how = f"inferred from labels 0..{self.num_classes - 1}" if self.inferred else "stated"
        return (
            f"{self.name}: {self.train_size} train / {self.test_size} test images of "
            f"{c}x{h}x{w}, {self.num_classes} classes ({how})"
        )


def channels_first(images: npt.NDArray[np.generic], source: str) -> npt.NDArray[np.generic]:
    """Return ``images`` as ``(N, C, H, W)``, adding the channel axis of ``(N, H, W)`` input.

    Raises
    ------
    DataError
        On another number of axes, channels-last ``(N, H, W, C)`` input, or
        images that are not square.
    """
    if images.ndim == 3:
        images = images[:, None, :, :]
    if images.ndim != 4:
        raise DataError(
            f"{source}: images must be (N, H, W) or (N, C, H, W), got shape {images.shape}"
        )
    n, c, h, w = images.shape
    if h != w and c == h and w in _CHANNEL_COUNTS_LAST:
        raise DataError(
            f"{source}: images look channels-last (N, H, W, C) = {images.shape}; Phalanx reads "
            "channels first (N, C, H, W): save x.transpose(0, 3, 1, 2)"
        )
    if h != w:
        raise DataError(f"{source}: images must be square (H == W), got H={h}, W={w}")
    if n == 0:
        raise DataError(f"{source}: the split has no images")
    return images


def check_pixels(images: npt.NDArray[np.generic], source: str) -> None:
    """Refuse pixels outside the documented range: ``uint8``, or floats in ``[0, 1]``.

    Raises
    ------
    DataError
        On another dtype, NaN or Inf, or floats outside ``[0, 1]``.
    """
    if images.dtype == np.uint8:
        return
    if not np.issubdtype(images.dtype, np.floating):
        raise DataError(
            f"{source}: pixels must be uint8 (0..255) or floats in [0, 1], got {images.dtype}; "
            "if the values are 0..255, save x.astype(numpy.uint8)"
        )
    if not np.isfinite(images).all():
        raise DataError(f"{source}: images contain NaN or Inf; drop or repair those samples")
    low, high = float(images.min()), float(images.max())
    if low >= 0.0 and high <= 1.0:
        return
    if low >= 0.0 and high <= 255.0:
        raise DataError(
            f"{source}: float pixels must be in [0, 1], these span {low:g}..{high:g}: "
            "divide by 255 (or save them as uint8)"
        )
    raise DataError(
        f"{source}: float pixels must be in [0, 1], these span {low:g}..{high:g}; give raw "
        "pixels scaled to [0, 1] (Phalanx standardises them itself)"
    )


def int_labels(
    labels: npt.NDArray[np.generic], source: str, *, num_images: int, images_source: str
) -> npt.NDArray[np.int64]:
    """Return ``labels`` as int64 after checking their shape, type, count and sign.

    Raises
    ------
    DataError
        Unless labels are 1-D non-negative integers, one per image.
    """
    if labels.ndim != 1:
        raise DataError(f"{source}: labels must be 1-D, got shape {labels.shape}")
    if not np.issubdtype(labels.dtype, np.integer):
        raise DataError(
            f"{source}: labels must be integers, got {labels.dtype}; save y.astype(numpy.int64)"
        )
    if labels.shape[0] != num_images:
        raise DataError(
            f"{images_source} holds {num_images} images but {source} holds "
            f"{labels.shape[0]} labels; give one label per image"
        )
    as_int = labels.astype(np.int64)
    if as_int.size and int(as_int.min()) < 0:
        raise DataError(f"{source}: negative label {int(as_int.min())}; labels are 0..C-1")
    return as_int


def check_label_range(labels: npt.NDArray[np.int64], num_classes: int, source: str) -> None:
    """Refuse a label outside ``0 .. num_classes - 1`` (``num_classes`` stated).

    Raises
    ------
    DataError
        Naming the first offending label and both fixes.
    """
    if labels.size and int(labels.max()) >= num_classes:
        raise DataError(
            f"{source}: label {int(labels.max())} is outside 0..{num_classes - 1} "
            f"(data.num_classes={num_classes}); fix the labels or raise data.num_classes"
        )


def infer_num_classes(
    train: npt.NDArray[np.int64],
    test: npt.NDArray[np.int64],
    *,
    train_source: str,
    test_source: str,
) -> int:
    """Infer the number of classes as ``max + 1`` over both splits, when that is sound.

    Sound means every label ``0 .. max`` occurs in the training split, and the
    count is within ``2 .. MAX_CLASSES``.

    Raises
    ------
    DataError
        Otherwise, with the fix (remap the labels, or state ``data.num_classes``).
    """
    train_top, test_top = int(train.max()), int(test.max()) if test.size else 0
    state = "or state data.num_classes"
    low = int(train.min())
    if low > 0:
        raise DataError(
            f"{train_source}: labels run {low}..{train_top} with no 0; labels are 0..C-1: "
            f"subtract {low}, {state}"
        )
    if test_top > train_top:
        raise DataError(
            f"{test_source}: label {test_top} never occurs in the training split (labels "
            f"0..{train_top}), so that class could not be learned; drop those samples, {state}"
        )
    classes = train_top + 1
    if classes > MAX_CLASSES:
        raise DataError(
            f"{train_source}: labels reach {train_top}, which would make {classes} classes, "
            f"more than the limit of {MAX_CLASSES}; remap the labels to 0..C-1"
        )
    missing = np.flatnonzero(np.bincount(train, minlength=classes) == 0)
    if missing.size:
        examples = ", ".join(str(int(v)) for v in missing[:3])
        raise DataError(
            f"{train_source}: labels reach {train_top}, which would make {classes} classes, "
            f"but {missing.size} of them never occur in the training split (e.g. {examples}); "
            f"Phalanx infers C = max + 1 only when every label 0..max occurs: remap the labels "
            f"to 0..C-1, {state}"
        )
    if classes < 2:
        raise DataError(f"{train_source}: every label is 0; a classifier needs at least 2 classes")
    return classes


def checked_split(split: RawSplit) -> tuple[npt.NDArray[np.generic], npt.NDArray[np.int64]]:
    """Check one split on its own; return its images as ``(N, C, H, W)`` and int64 labels.

    Raises
    ------
    DataError
        On the first rule the split breaks (see the module docstring).
    """
    images = channels_first(split.images, split.images_source)
    check_pixels(images, split.images_source)
    labels = int_labels(
        split.labels,
        split.labels_source,
        num_images=images.shape[0],
        images_source=split.images_source,
    )
    return images, labels


def check_splits(
    name: str,
    train: RawSplit,
    test: RawSplit,
    *,
    num_classes: int | None = None,
    batch_size: int = 1,
) -> DatasetFacts:
    """Check a dataset's two splits against every rule of the module docstring.

    Parameters
    ----------
    name : str
        The dataset, as named in the config.
    train, test : RawSplit
        Both splits, as read.
    num_classes : int, optional
        The stated number of classes; inferred when ``None``.
    batch_size : int
        Samples one round draws from the training split.

    Returns
    -------
    DatasetFacts

    Raises
    ------
    DataError
        On the first rule broken, in one line naming the file, the key and the fix.
    """
    train_x, train_y = checked_split(train)
    test_x, test_y = checked_split(test)
    if train_x.shape[1:] != test_x.shape[1:]:
        raise DataError(
            f"{test.images_source}: test images are {_shape(test_x)} but training images "
            f"({train.images_source}) are {_shape(train_x)}; both splits need one shape"
        )
    inferred = num_classes is None
    if num_classes is None:
        num_classes = infer_num_classes(
            train_y, test_y, train_source=train.labels_source, test_source=test.labels_source
        )
    else:
        check_label_range(train_y, num_classes, train.labels_source)
        check_label_range(test_y, num_classes, test.labels_source)
    if train_x.shape[0] < batch_size:
        raise DataError(
            f"{train.images_source}: {train_x.shape[0]} training samples, fewer than one "
            f"round's batch of {batch_size} (data.samples_per_file x files per round); lower "
            "data.samples_per_file, use an assignment with fewer files, or give more data"
        )
    c, h, w = (int(v) for v in train_x.shape[1:])
    return DatasetFacts(
        name=name,
        num_classes=num_classes,
        inferred=inferred,
        train_size=int(train_x.shape[0]),
        test_size=int(test_x.shape[0]),
        shape=(c, h, w),
    )


def _shape(images: npt.NDArray[np.generic]) -> str:
    return "x".join(str(int(v)) for v in images.shape[1:])
