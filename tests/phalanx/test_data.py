from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from phalanx import data_files
from phalanx.data import (
    DATASETS_DIR_ENV,
    DEFAULT_FASHION_MNIST_DIR,
    FASHION_MNIST_MEAN,
    FASHION_MNIST_STD,
    DataError,
    DatasetNotFoundError,
    DatasetOutsideError,
    ImageDataset,
    Split,
    check_dataset,
    confined_dataset,
    load_dataset,
    load_digits,
    load_fashion_mnist,
    load_idx,
    load_npz,
    read_idx,
    round_batch,
    split_files,
)


def write_idx(path: Path, array: np.ndarray, *, compress: bool = False) -> Path:
    """Write ``array`` (uint8) as an IDX file, big-endian header, optionally gzipped."""
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    data = header + array.astype(np.uint8).tobytes()
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def tiny_images(n: int = 6, side: int = 4) -> np.ndarray:
    return (np.arange(n * side * side) % 256).astype(np.uint8).reshape(n, side, side)


def write_mnist_dir(directory: Path, *, n_train: int = 6, n_test: int = 3, gz: bool) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    suffix = ".gz" if gz else ""
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        write_idx(directory / f"{prefix}-images-idx3-ubyte{suffix}", tiny_images(n), compress=gz)
        labels = (np.arange(n) % 10).astype(np.uint8)
        write_idx(directory / f"{prefix}-labels-idx1-ubyte{suffix}", labels, compress=gz)
    return directory


# --------------------------------------------------------------------------- IDX


@pytest.mark.parametrize("compress", [False, True])
def test_read_idx_returns_the_array_that_was_written(tmp_path: Path, compress: bool) -> None:
    images = tiny_images()
    path = write_idx(tmp_path / "images", images, compress=compress)
    np.testing.assert_array_equal(read_idx(path), images)


def test_read_idx_decodes_big_endian_int32_payloads(tmp_path: Path) -> None:
    values = np.array([1, -2, 70000], dtype=">i4")
    path = tmp_path / "ints"
    path.write_bytes(bytes([0, 0, 0x0C, 1]) + struct.pack(">I", 3) + values.tobytes())
    np.testing.assert_array_equal(read_idx(path), [1, -2, 70000])


def test_load_idx_scales_pixels_and_standardises(tmp_path: Path) -> None:
    images = np.array([[[0, 255], [51, 102]]], dtype=np.uint8)
    ds = load_idx(
        write_idx(tmp_path / "i", images),
        write_idx(tmp_path / "l", np.array([3], dtype=np.uint8)),
        name="tiny",
        mean=0.2,
        std=0.5,
    )
    assert ds.x.dtype == torch.float32 and ds.x.shape == (1, 1, 2, 2)
    expected = torch.tensor([[[[-0.4, 1.6], [0.0, 0.4]]]])
    torch.testing.assert_close(ds.x, expected)
    assert ds.y.dtype == torch.int64 and ds.y.tolist() == [3]
    assert ds.num_classes == 4 and ds.name == "tiny"


def test_load_idx_rejects_a_bad_magic_number_naming_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad-images"
    bad.write_bytes(b"\x01\x02\x08\x03" + bytes(12))
    labels = write_idx(tmp_path / "l", np.zeros(1, dtype=np.uint8))
    with pytest.raises(ValueError, match=r"bad-images.*not an IDX file"):
        load_idx(bad, labels, name="x")


def test_read_idx_rejects_an_unknown_type_code(tmp_path: Path) -> None:
    path = tmp_path / "odd"
    path.write_bytes(bytes([0, 0, 0x07, 1]) + struct.pack(">I", 1) + b"\x00")
    with pytest.raises(ValueError, match=r"odd.*type code 0x07"):
        read_idx(path)


def test_read_idx_rejects_a_truncated_payload(tmp_path: Path) -> None:
    path = write_idx(tmp_path / "cut", tiny_images())
    path.write_bytes(path.read_bytes()[:-5])
    with pytest.raises(ValueError, match=r"cut.*header declares shape"):
        read_idx(path)


def test_read_idx_rejects_a_corrupt_gzip_stream(tmp_path: Path) -> None:
    path = write_idx(tmp_path / "broken.gz", tiny_images(), compress=True)
    path.write_bytes(path.read_bytes()[:30])
    with pytest.raises(ValueError, match=r"broken.gz.*gzip"):
        read_idx(path)


def test_load_idx_rejects_label_count_mismatch(tmp_path: Path) -> None:
    images = write_idx(tmp_path / "imgs", tiny_images(6))
    labels = write_idx(tmp_path / "labs", np.zeros(5, dtype=np.uint8))
    with pytest.raises(ValueError, match=r"6 images.*5 labels"):
        load_idx(images, labels, name="x")


def test_load_idx_rejects_an_images_file_given_as_labels(tmp_path: Path) -> None:
    images = write_idx(tmp_path / "imgs", tiny_images(2))
    with pytest.raises(ValueError, match=r"labels must be 1-D"):
        load_idx(images, images, name="x")


# --------------------------------------------------------------------------- Fashion-MNIST


def test_missing_fashion_mnist_error_says_how_to_install_it(tmp_path: Path) -> None:
    with pytest.raises(DatasetNotFoundError) as info:
        load_fashion_mnist("train", root=tmp_path)
    message = str(info.value)
    assert "sudo apt-get install dataset-fashion-mnist" in message
    assert DATASETS_DIR_ENV in message and str(tmp_path) in message


def test_missing_fashion_mnist_is_one_line_naming_the_setting_and_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DATASETS_DIR_ENV, str(tmp_path))
    with pytest.raises(DatasetNotFoundError) as info:
        check_dataset("fashion-mnist")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"Fashion-MNIST is not in {tmp_path} ({DATASETS_DIR_ENV}): ")
    assert "dataset-fashion-mnist" in message


def test_missing_fashion_mnist_is_never_replaced_by_another_dataset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DATASETS_DIR_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(DatasetNotFoundError, match=r"nowhere"):
        load_dataset("fashion-mnist", "test")


@pytest.mark.parametrize("gz", [False, True])
def test_fashion_mnist_is_read_from_the_env_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gz: bool
) -> None:
    monkeypatch.setenv(DATASETS_DIR_ENV, str(write_mnist_dir(tmp_path / "fm", gz=gz)))
    ds = load_fashion_mnist("test")
    assert len(ds) == 3 and ds.name == "fashion-mnist/test"
    pixel = float(tiny_images(3)[0, 0, 1]) / 255
    assert ds.x[0, 0, 0, 1].item() == pytest.approx(
        (pixel - FASHION_MNIST_MEAN) / FASHION_MNIST_STD
    )


@pytest.mark.skipif(
    not (DEFAULT_FASHION_MNIST_DIR / "train-images-idx3-ubyte.gz").exists(),
    reason="needs `apt-get install dataset-fashion-mnist` (CI installs it)",
)
def test_real_fashion_mnist_has_60000_train_and_10000_test_images(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(DATASETS_DIR_ENV, raising=False)
    train, test = load_fashion_mnist("train"), load_fashion_mnist("test")
    assert train.x.shape == (60000, 1, 28, 28) and train.y.shape == (60000,)
    assert test.x.shape == (10000, 1, 28, 28) and test.y.shape == (10000,)
    assert train.num_classes == 10
    assert torch.equal(torch.bincount(test.y), torch.full((10,), 1000))
    assert abs(train.x.mean().item()) < 1e-3 and abs(train.x.std().item() - 1.0) < 1e-3


# --------------------------------------------------------------------------- npz, digits, registry


def test_load_npz_reads_x_and_y(tmp_path: Path) -> None:
    path = tmp_path / "one.npz"
    np.savez(path, x=tiny_images(4), y=np.array([0, 1, 2, 1]))
    ds = load_npz(path, name="one")
    assert ds.x.shape == (4, 1, 4, 4) and ds.y.tolist() == [0, 1, 2, 1] and ds.num_classes == 3


def test_load_npz_split_keys_share_one_class_count(tmp_path: Path) -> None:
    path = tmp_path / "keras.npz"
    x = tiny_images(2)
    np.savez(path, x_train=x, y_train=np.array([0, 1]), x_test=x, y_test=np.array([4, 0]))
    assert load_npz(path, name="k", split="train").num_classes == 5
    assert load_npz(path, name="k", split="test").y.tolist() == [4, 0]


def test_load_npz_takes_float_images_as_already_in_unit_range(tmp_path: Path) -> None:
    path = tmp_path / "float.npz"
    np.savez(path, x=np.full((1, 3, 2, 2), 0.5, dtype=np.float64), y=np.array([0]))
    ds = load_npz(path, name="f")
    assert ds.in_channels == 3 and torch.equal(ds.x, torch.zeros(1, 3, 2, 2))


def test_load_npz_names_the_expected_keys_when_they_are_missing(tmp_path: Path) -> None:
    path = tmp_path / "wrong.npz"
    np.savez(path, images=tiny_images(1), labels=np.array([0]))
    with pytest.raises(ValueError, match=r"'x_train' and 'y_train'.*found \['images', 'labels'\]"):
        load_npz(path, name="w", split="train")


def test_load_npz_rejects_a_file_that_is_not_an_archive(tmp_path: Path) -> None:
    path = tmp_path / "junk.npz"
    path.write_bytes(b"not a zip file at all")
    with pytest.raises(ValueError, match=r"junk.npz"):
        load_npz(path, name="j")


def write_npz(path: Path, **arrays: object) -> str:
    """Write a train/test archive: 12 training and 4 test 4x4 images, labels 0..3, or ``arrays``."""
    x = tiny_images(12)
    layout: dict[str, object] = {
        "x_train": x,
        "y_train": np.arange(12) % 4,
        "x_test": x[:4],
        "y_test": np.arange(4),
    }
    np.savez(path, **{**layout, **arrays})
    return f"npz:{path}"


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        (np.arange(12) % 4 + 1, r"labels run 1..4 with no 0; .*subtract 1"),
        (np.array([0, 1, 2, 3] * 2 + [255] * 4), r"labels reach 255, which would make 256"),
    ],
    ids=["one-based", "255-marker"],
)
@pytest.mark.parametrize("split", ["train", "test"])
def test_the_registry_refuses_labels_it_cannot_count_classes_from(
    tmp_path: Path, labels: np.ndarray, expected: str, split: Split
) -> None:
    name = write_npz(tmp_path / "d.npz", y_train=labels)
    with pytest.raises(DataError, match=expected):
        load_dataset(name, split)


def test_a_label_10_only_in_the_test_split_is_refused_by_both_splits(tmp_path: Path) -> None:
    name = write_npz(tmp_path / "d.npz", y_test=np.array([0, 1, 2, 10]))
    for split in ("train", "test"):
        with pytest.raises(DataError, match=r"\[y_test\]: label 10 never occurs"):
            load_dataset(name, split)  # type: ignore[arg-type]


def test_stated_classes_are_used_by_both_splits(tmp_path: Path) -> None:
    name = write_npz(tmp_path / "d.npz")
    assert load_dataset(name, "test", num_classes=7).num_classes == 7
    assert load_dataset(name, "train").num_classes == 4
    with pytest.raises(DataError, match=r"label 3 is outside 0..2 \(data.num_classes=3\)"):
        load_dataset(name, "train", num_classes=3)


def test_the_registry_refuses_float_pixels_in_0_to_255(tmp_path: Path) -> None:
    name = write_npz(tmp_path / "d.npz", x_train=tiny_images(12).astype(np.float32))
    with pytest.raises(DataError, match=r"\[x_train\]: float pixels must be in \[0, 1\].*255"):
        load_dataset(name, "train")


def test_the_registry_says_channels_last_images_are_channels_last(tmp_path: Path) -> None:
    name = write_npz(tmp_path / "d.npz", x_test=np.zeros((4, 28, 28, 1), dtype=np.uint8))
    with pytest.raises(DataError, match=r"channels-last .* x.transpose\(0, 3, 1, 2\)"):
        load_dataset(name, "test")


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"not a zip file at all", r"not an .npz archive \(NumPy's zip of named arrays\)"),
        (b"\x93NUMPY\x01\x00", r"a single .npy array, not an .npz archive"),
    ],
)
def test_a_file_that_is_not_an_npz_archive_gets_our_message(
    tmp_path: Path, content: bytes, expected: str
) -> None:
    path = tmp_path / "junk.npz"
    path.write_bytes(content)
    with pytest.raises(DataError, match=expected) as info:
        load_dataset(f"npz:{path}", "train")
    assert "pickle" not in str(info.value)


def test_pickled_arrays_are_never_unpickled(tmp_path: Path) -> None:
    name = write_npz(tmp_path / "d.npz", y_train=np.array([{"a": 1}] * 12, dtype=object))
    with pytest.raises(DataError, match=r"\[y_train\]: not a readable NumPy array"):
        load_dataset(name, "train")


def test_check_dataset_refuses_train_and_test_images_of_different_sizes(tmp_path: Path) -> None:
    name = write_npz(tmp_path / "d.npz", x_test=np.zeros((4, 5, 5), dtype=np.uint8))
    with pytest.raises(DataError, match=r"test images are 1x5x5 but training images"):
        check_dataset(name)


def test_check_dataset_refuses_nan_in_the_training_split(tmp_path: Path) -> None:
    images = np.full((12, 4, 4), 0.5, dtype=np.float32)
    images[5, 0, 0] = np.nan
    name = write_npz(tmp_path / "d.npz", x_train=images)
    with pytest.raises(DataError, match=r"\[x_train\]: images contain NaN or Inf"):
        check_dataset(name)


def test_check_dataset_reports_and_a_load_after_it_reads_nothing_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = write_npz(tmp_path / "d.npz")
    facts = check_dataset(name, batch_size=12)
    assert (facts.num_classes, facts.train_size, facts.test_size) == (4, 12, 4)
    loads: list[object] = []
    real_load = np.load
    monkeypatch.setattr(np, "load", lambda *a, **k: loads.append(a) or real_load(*a, **k))
    assert len(load_dataset(name, "train")) == 12 and len(load_dataset(name, "test")) == 4
    assert loads == []


def test_a_rewritten_file_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "d.npz"
    check_dataset(write_npz(path))
    write_npz(path, y_train=np.arange(12) % 4 + 1)
    with pytest.raises(DataError, match=r"labels run 1..4"):
        check_dataset(f"npz:{path}")


def test_relative_paths_are_relative_to_the_datasets_dir_and_stay_inside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    datasets = tmp_path / "datasets"
    datasets.mkdir()
    write_npz(datasets / "mine.npz")
    write_npz(tmp_path / "outside.npz")
    monkeypatch.setenv(DATASETS_DIR_ENV, str(datasets))
    monkeypatch.chdir(tmp_path)
    assert len(load_dataset("npz:mine.npz", "test")) == 4
    with pytest.raises(DataError, match=r"must stay inside it"):
        load_dataset("npz:../outside.npz", "test")
    with pytest.raises(DatasetNotFoundError, match=r"npz:absent.npz: .* datasets directory"):
        load_dataset("npz:absent.npz", "test")


def test_confined_dataset_makes_paths_relative_and_refuses_the_outside_alike(
    tmp_path: Path,
) -> None:
    datasets = tmp_path / "datasets"
    (datasets / "kmnist").mkdir(parents=True)
    (tmp_path / "private.npz").write_bytes(b"x")
    (datasets / "link.npz").symlink_to(tmp_path / "private.npz")
    assert confined_dataset(f"idx:{datasets / 'kmnist'}", datasets) == "idx:kmnist"
    assert confined_dataset("npz:kmnist/../a.npz", datasets) == "npz:a.npz"
    assert confined_dataset("digits", datasets) == "digits"
    messages = set()
    for outside in ("private.npz", "absent.npz"):
        for name in (f"npz:{tmp_path / outside}", f"npz:../{outside}"):
            with pytest.raises(DatasetOutsideError) as info:
                confined_dataset(name, datasets)
            messages.add(str(info.value))
    with pytest.raises(DatasetOutsideError) as info:
        confined_dataset("npz:link.npz", datasets)
    messages.add(str(info.value))
    assert messages == {data_files.OUTSIDE_DATASETS_DIR}


def test_digits_split_is_a_fixed_disjoint_80_20_partition() -> None:
    train, test = load_digits("train"), load_digits("test")
    assert (len(train), len(test)) == (1438, 359)
    assert train.x.shape[1:] == (1, 8, 8) and train.num_classes == 10
    train_rows = {tuple(r) for r in train.x.reshape(len(train), -1).tolist()}
    test_rows = [tuple(r) for r in test.x.reshape(len(test), -1).tolist()]
    # sklearn's digits contain a few duplicated images; a leak would be hundreds.
    assert sum(r in train_rows for r in test_rows) < 5
    assert torch.equal(load_digits("test").y, test.y)


def test_registry_loads_idx_directories_and_npz_archives(tmp_path: Path) -> None:
    directory = write_mnist_dir(tmp_path / "kmnist", n_train=5, n_test=2, gz=True)
    assert len(load_dataset(f"idx:{directory}", "train")) == 5
    path = tmp_path / "d.npz"
    np.savez(path, x_train=tiny_images(2), y_train=[0, 1], x_test=tiny_images(1), y_test=[1])
    assert len(load_dataset(f"npz:{path}", "test")) == 1
    assert len(load_dataset("digits", "test")) == 359


def test_registry_reports_a_missing_idx_file(tmp_path: Path) -> None:
    with pytest.raises(DatasetNotFoundError, match=r"t10k-images-idx3-ubyte"):
        load_dataset(f"idx:{tmp_path}", "test")


def test_registry_rejects_unknown_names_and_splits() -> None:
    with pytest.raises(ValueError, match=r"unknown dataset 'cifar10'"):
        load_dataset("cifar10", "train")
    with pytest.raises(ValueError, match=r"split must be"):
        load_dataset("digits", "valid")  # type: ignore[arg-type]


def test_image_dataset_rejects_labels_outside_its_classes() -> None:
    with pytest.raises(ValueError, match=r"labels span 0..3"):
        ImageDataset(torch.zeros(2, 1, 4, 4), torch.tensor([0, 3]), num_classes=3, name="t")


def test_subset_keeps_the_requested_samples_in_order() -> None:
    ds = ImageDataset(torch.arange(3.0).reshape(3, 1, 1, 1), torch.tensor([0, 1, 2]), 3, "t")
    sub = ds.subset(torch.tensor([2, 0]))
    assert sub.y.tolist() == [2, 0] and sub.x.flatten().tolist() == [2.0, 0.0]


# --------------------------------------------------------------------------- batching


def test_round_batch_is_pinned_across_versions() -> None:
    # Every party must draw the same batch; this pins the algorithm's output.
    assert round_batch(10, 5, seed=0, round=0).tolist() == [3, 2, 1, 8, 6]
    assert round_batch(10, 5, seed=0, round=1).tolist() == [7, 4, 5, 1, 9]


def test_round_batch_is_deterministic_and_changes_with_seed_and_round() -> None:
    a = round_batch(1000, 64, seed=7, round=3)
    assert a.dtype == torch.int64 and torch.equal(a, round_batch(1000, 64, seed=7, round=3))
    assert not torch.equal(a, round_batch(1000, 64, seed=7, round=4))
    assert not torch.equal(a, round_batch(1000, 64, seed=8, round=3))


@given(num_samples=st.integers(1, 500), fraction=st.floats(0.0, 1.0), seed=st.integers(0, 2**32))
def test_round_batch_draws_distinct_indices_in_range(
    num_samples: int, fraction: float, seed: int
) -> None:
    batch_size = max(1, int(fraction * num_samples))
    batch = round_batch(num_samples, batch_size, seed=seed, round=0)
    assert batch.shape == (batch_size,)
    assert len(set(batch.tolist())) == batch_size
    assert int(batch.min()) >= 0 and int(batch.max()) < num_samples


def test_round_batch_rejects_a_batch_larger_than_the_dataset() -> None:
    with pytest.raises(ValueError, match=r"batch_size must be in 1..num_samples=10"):
        round_batch(10, 11, seed=0, round=0)


@given(n=st.integers(1, 300), data=st.data())
def test_split_files_is_contiguous_with_sizes_within_one(n: int, data: st.DataObject) -> None:
    num_files = data.draw(st.integers(1, n))
    indices = torch.randperm(n)
    files = split_files(indices, num_files)
    sizes = [len(f) for f in files]
    assert len(files) == num_files and max(sizes) - min(sizes) <= 1
    assert sizes == sorted(sizes, reverse=True)
    assert torch.equal(torch.cat(files), indices)


def test_split_files_rejects_more_files_than_samples() -> None:
    with pytest.raises(ValueError, match=r"num_files must be in 1..3"):
        split_files(torch.arange(3), 4)


def test_split_files_returns_copies_not_views() -> None:
    indices = torch.arange(4)
    split_files(indices, 2)[0][0] = 99
    assert indices[0].item() == 0
