"""The rules a dataset's raw arrays must meet, each refusal one line with its fix."""

from __future__ import annotations

import numpy as np
import pytest

from phalanx.data_checks import MAX_CLASSES, DataError, RawSplit, check_splits


def split(
    images: np.ndarray | None = None, labels: np.ndarray | None = None, *, key: str = "train"
) -> RawSplit:
    """A split of 8x8 uint8 images with labels 0..9, unless given."""
    if images is None:
        images = np.zeros((40, 8, 8), dtype=np.uint8)
    if labels is None:
        labels = np.arange(images.shape[0]) % 10
    return RawSplit(images, labels, f"npz:d.npz[x_{key}]", f"npz:d.npz[y_{key}]")


def refusal(
    train: RawSplit | None = None,
    test: RawSplit | None = None,
    *,
    num_classes: int | None = None,
    batch_size: int = 1,
) -> str:
    with pytest.raises(DataError) as info:
        check_splits(
            "npz:d.npz",
            train or split(),
            test or split(key="test"),
            num_classes=num_classes,
            batch_size=batch_size,
        )
    message = str(info.value)
    assert "\n" not in message
    return message


def test_clean_data_is_reported_with_its_inferred_classes() -> None:
    facts = check_splits("npz:d.npz", split(), split(key="test"), batch_size=40)
    assert (facts.num_classes, facts.inferred, facts.shape) == (10, True, (1, 8, 8))
    assert facts.describe() == (
        "npz:d.npz: 40 train / 40 test images of 1x8x8, 10 classes (inferred from labels 0..9)"
    )


def test_labels_starting_at_one_are_refused_with_the_fix() -> None:
    message = refusal(split(labels=np.arange(40) % 10 + 1))
    assert message == (
        "npz:d.npz[y_train]: labels run 1..10 with no 0; labels are 0..C-1: subtract 1, "
        "or state data.num_classes"
    )


def test_a_255_marker_among_ten_classes_is_refused_naming_the_holes() -> None:
    labels = np.arange(40) % 10
    labels[-1] = 255
    message = refusal(split(labels=labels))
    assert message.startswith("npz:d.npz[y_train]: labels reach 255, which would make 256")
    assert "245 of them never occur in the training split (e.g. 10, 11, 12)" in message
    assert "state data.num_classes" in message


def test_a_label_10_beyond_the_stated_classes_is_refused() -> None:
    labels = np.arange(40) % 10
    labels[3] = 10
    message = refusal(test=split(labels=labels, key="test"), num_classes=10)
    assert message == (
        "npz:d.npz[y_test]: label 10 is outside 0..9 (data.num_classes=10); "
        "fix the labels or raise data.num_classes"
    )


def test_a_label_10_only_in_the_test_split_is_refused_when_classes_are_inferred() -> None:
    labels = np.arange(40) % 10
    labels[3] = 10
    message = refusal(test=split(labels=labels, key="test"))
    assert message.startswith("npz:d.npz[y_test]: label 10 never occurs in the training split")


def test_stated_classes_allow_labels_that_do_not_all_occur() -> None:
    facts = check_splits("n", split(labels=np.zeros(40, dtype=int)), split(), num_classes=10)
    assert (facts.num_classes, facts.inferred) == (10, False)


def test_too_many_inferred_classes_are_refused_before_counting_them() -> None:
    labels = np.arange(40) % 10
    labels[0] = 10**12  # counting every class up to it would need terabytes
    assert f"more than the limit of {MAX_CLASSES}" in refusal(split(labels=labels))


def test_a_single_class_is_refused() -> None:
    zeros = np.zeros(40, dtype=np.int64)
    assert "at least 2 classes" in refusal(split(labels=zeros), split(labels=zeros, key="test"))


def test_float_pixels_up_to_255_are_refused_with_divide_by_255() -> None:
    images = np.full((40, 8, 8), 200.0, dtype=np.float32)
    message = refusal(split(images))
    assert message == (
        "npz:d.npz[x_train]: float pixels must be in [0, 1], these span 200..200: "
        "divide by 255 (or save them as uint8)"
    )


def test_negative_float_pixels_are_refused() -> None:
    images = np.full((40, 8, 8), -0.5, dtype=np.float32)
    assert "float pixels must be in [0, 1]" in refusal(split(images))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nan_or_inf_pixels_in_the_training_split_are_refused(bad: float) -> None:
    images = np.full((40, 8, 8), 0.5, dtype=np.float32)
    images[7, 3, 3] = bad
    assert refusal(split(images)) == (
        "npz:d.npz[x_train]: images contain NaN or Inf; drop or repair those samples"
    )


def test_integer_pixels_other_than_uint8_are_refused_with_the_cast() -> None:
    assert "save x.astype(numpy.uint8)" in refusal(split(np.zeros((40, 8, 8), dtype=np.int64)))


def test_train_and_test_images_of_different_sizes_are_refused() -> None:
    test = split(np.zeros((40, 1, 10, 10), dtype=np.uint8), key="test")
    assert refusal(test=test) == (
        "npz:d.npz[x_test]: test images are 1x10x10 but training images "
        "(npz:d.npz[x_train]) are 1x8x8; both splits need one shape"
    )


@pytest.mark.parametrize("channels", [1, 3])
def test_channels_last_images_are_refused_saying_how_to_transpose(channels: int) -> None:
    images = np.zeros((40, 28, 28, channels), dtype=np.uint8)
    message = refusal(split(images))
    assert "channels-last (N, H, W, C)" in message
    assert "x.transpose(0, 3, 1, 2)" in message and "square" not in message


def test_non_square_images_are_refused() -> None:
    assert "must be square (H == W), got H=8, W=6" in refusal(
        split(np.zeros((40, 8, 6), dtype=np.uint8))
    )


def test_a_training_split_smaller_than_one_batch_is_refused() -> None:
    message = refusal(batch_size=41)
    assert message.startswith(
        "npz:d.npz[x_train]: 40 training samples, fewer than one round's batch of 41"
    )
    assert "data.samples_per_file" in message


def test_labels_that_do_not_match_the_images_are_refused() -> None:
    assert "40 images but npz:d.npz[y_train] holds 39 labels" in refusal(
        split(labels=np.arange(39) % 10)
    )
    assert "labels must be integers" in refusal(split(labels=np.zeros(40)))
    assert "negative label -1" in refusal(split(labels=np.full(40, -1)))


def test_an_empty_split_is_refused() -> None:
    assert "has no images" in refusal(test=split(np.zeros((0, 8, 8), dtype=np.uint8), key="test"))
